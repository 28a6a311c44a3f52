import { type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { type EndpointDeclaration, json, registerHttp } from './http/endpoint';
import type { Services } from './services';

/** GET /api/health — anonymous (the only endpoint without an app role); answers once the store is open. */
export async function health(
  _request: HttpRequest,
  _context: InvocationContext,
  { store }: Pick<Services, 'store'>,
): Promise<HttpResponseInit> {
  return json(200, { status: 'ok', store: store.kind });
}

export const healthEndpoints: EndpointDeclaration[] = [
  {
    name: 'health',
    methods: ['GET'],
    route: 'health',
    authLevel: 'anonymous',
    role: 'anonymous',
    handler: health,
  },
];

registerHttp(healthEndpoints);
