import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import { runProbe } from '../shared/probe';
import { type HttpEndpoint, handle, json, registerHttp } from './http/endpoint';
import { HttpProblem } from './http/problem';
import {
  actorName,
  approveBody,
  forceReleaseBody,
  parse,
  readJson,
  readOptionalJson,
  resourceId,
  routeId,
} from './http/validation';
import type { Services } from './services';

/**
 * Operator endpoints (auth level `admin`). They live under `/api/ops/…`: the Functions host reserves
 * every route that starts with `admin`, `/api/admin/…` included (azure-functions-host#1781).
 *
 * Identity comes from `x-ms-client-principal-name`, which App Service authentication sets (and strips
 * from incoming requests) — enable it on the app. On the embedded host, a body field `actor` may stand
 * in for it.
 */
function actorOf(request: HttpRequest, body: { actor?: string | undefined }, services: Services): string {
  const principal = request.headers.get('x-ms-client-principal-name');
  if (principal) return parse(actorName, principal, 'x-ms-client-principal-name header');
  if (services.bodyActorAllowed && body.actor) return body.actor;
  throw new HttpProblem(
    'Forbidden',
    services.bodyActorAllowed
      ? 'An operator identity is required: send "actor" in the body (embedded host) or x-ms-client-principal-name.'
      : 'An operator identity is required: enable App Service authentication so requests carry x-ms-client-principal-name.',
  );
}

export async function openForceRelease(
  request: HttpRequest,
  _context: InvocationContext,
  services: Services,
): Promise<HttpResponseInit> {
  const id = routeId(request);
  const body = parse(forceReleaseBody, await readJson(request), 'body');
  const actor = actorOf(request, body, services);
  const opened = await services.forceRelease.open(id, actor, body.reason);
  return json(201, opened, { Location: `/api/ops/force-release/${encodeURIComponent(opened.id)}` });
}

export async function approveForceRelease(
  request: HttpRequest,
  _context: InvocationContext,
  services: Services,
): Promise<HttpResponseInit> {
  const requestId = parse(resourceId, request.params.requestId ?? '', 'request id');
  const body = parse(approveBody, await readOptionalJson(request), 'body');
  const actor = actorOf(request, body, services);
  return json(200, await services.forceRelease.approve(requestId, actor));
}

export async function getForceRelease(
  request: HttpRequest,
  _context: InvocationContext,
  services: Services,
): Promise<HttpResponseInit> {
  const requestId = parse(resourceId, request.params.requestId ?? '', 'request id');
  return json(200, await services.forceRelease.get(requestId));
}

export async function runProbeNow(
  _request: HttpRequest,
  _context: InvocationContext,
  services: Services,
): Promise<HttpResponseInit> {
  const result = await runProbe({
    store: services.store,
    region: services.config.operations.probeRegion,
    clock: services.clock,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    sink: services.sink,
  });
  return json(200, result);
}

export const operationsEndpoints: HttpEndpoint[] = [
  {
    name: 'openForceRelease',
    methods: ['POST'],
    route: 'ops/routes/{id}/force-release',
    authLevel: 'admin',
    handler: handle(openForceRelease),
  },
  {
    name: 'approveForceRelease',
    methods: ['POST'],
    route: 'ops/force-release/{requestId}/approve',
    authLevel: 'admin',
    handler: handle(approveForceRelease),
  },
  {
    name: 'getForceRelease',
    methods: ['GET'],
    route: 'ops/force-release/{requestId}',
    authLevel: 'admin',
    handler: handle(getForceRelease),
  },
  {
    name: 'runProbe',
    methods: ['POST'],
    route: 'ops/probe',
    authLevel: 'admin',
    handler: handle(runProbeNow),
  },
];

registerHttp(operationsEndpoints);
