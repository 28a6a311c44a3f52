import { campaignEndpoints } from './campaigns';
import { healthEndpoints } from './health';
import type { EndpointDeclaration } from './http/endpoint';
import { lockEndpoints } from './locks';
import { migrationEndpoints } from './migrations';
import { operationsEndpoints } from './operations';
import { routeEndpoints } from './routes';
import { statusPageEndpoints } from './statusPage';

/**
 * Every HTTP endpoint the Functions app declares: each `functions/*.ts` file declares (and registers) its
 * own beside its handlers; this is the one list the embedded host serves. A new endpoint file is added
 * here (test/functions/endpoints.test.ts fails until it is).
 */
export const functionEndpoints: readonly EndpointDeclaration[] = [
  ...healthEndpoints,
  ...routeEndpoints,
  ...lockEndpoints,
  ...migrationEndpoints,
  ...campaignEndpoints,
  ...operationsEndpoints,
  ...statusPageEndpoints,
];
