import { type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { type HttpEndpoint, endpoint, json, registerHttp } from './http/endpoint';
import type { Services } from './services';

/** GET /api/health — anonymous (the only endpoint without an app role); answers once the store is open. */
export async function health(
  _request: HttpRequest,
  _context: InvocationContext,
  services: Services,
): Promise<HttpResponseInit> {
  return json(200, { status: 'ok', store: services.store.kind });
}

export const healthEndpoints: HttpEndpoint[] = [
  endpoint({
    name: 'health',
    methods: ['GET'],
    route: 'health',
    authLevel: 'anonymous',
    role: 'anonymous',
    handler: health,
  }),
];

registerHttp(healthEndpoints);
