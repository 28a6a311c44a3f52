import { type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { API_VERSION, API_VERSION_HEADER } from '../shared/core/apiVersion';
import { TIMING_HEADER, timingHeader } from '../shared/core/serverTiming';
import { type EndpointDeclaration, json, registerHttp } from './http/endpoint';
import type { Services } from './services';

/**
 * GET /api/health — anonymous (the only endpoint without an app role); answers once the store is open.
 * The API version rides in a header so a client's `ready()` can check it without a role, and the body
 * stays what load balancers and deployment checks already read. So does the timing a RoutingClient
 * needs (TIMING_HEADER: the in-flight grace, the join bound, the skew margin, the local tier's TTL), so
 * that no service copies the server's settings by hand: `ready()` learns them (shared/core/serverTiming.ts).
 */
export async function health(
  _request: HttpRequest,
  _context: InvocationContext,
  { store, config }: Pick<Services, 'store' | 'config'>,
): Promise<HttpResponseInit> {
  const timing = timingHeader({
    inFlightGraceSeconds: config.migration.inFlightGraceSeconds,
    coalesceJoinMs: config.timing.coalesceJoinMs,
    clockSkewSeconds: config.timing.clockSkewSeconds,
    cacheTtlSeconds: config.timing.localCacheTtlSeconds,
  });
  return json(
    200,
    { status: 'ok', store: store.kind },
    { [API_VERSION_HEADER]: String(API_VERSION), [TIMING_HEADER]: timing },
  );
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
