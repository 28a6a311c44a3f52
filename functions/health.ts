import { type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { API_VERSION, API_VERSION_HEADER } from '../shared/core/apiVersion';
import { type EndpointDeclaration, json, registerHttp } from './http/endpoint';
import type { Services } from './services';

/**
 * GET /api/health — anonymous (the only endpoint without an app role); answers once the store is open.
 * The API version rides in a header so a client's `ready()` can check it without a role, and the body
 * stays what load balancers and deployment checks already read.
 */
export async function health(
  _request: HttpRequest,
  _context: InvocationContext,
  { store }: Pick<Services, 'store'>,
): Promise<HttpResponseInit> {
  return json(200, { status: 'ok', store: store.kind }, { [API_VERSION_HEADER]: String(API_VERSION) });
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
