import { type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { type HttpEndpoint, handle, json, registerHttp } from './http/endpoint';
import type { Services } from './services';

/** GET /api/health — anonymous; answers once the store is open. */
export async function health(
  _request: HttpRequest,
  _context: InvocationContext,
  services: Services,
): Promise<HttpResponseInit> {
  return json(200, { status: 'ok', store: services.store.kind });
}

export const healthEndpoints: HttpEndpoint[] = [
  { name: 'health', methods: ['GET'], route: 'health', authLevel: 'anonymous', handler: handle(health) },
];

registerHttp(healthEndpoints);
