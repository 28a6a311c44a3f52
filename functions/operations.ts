import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import type { Actor } from '../shared/core/audit';
import { runProbe } from '../shared/migration/probe';
import type { Caller } from './http/auth';
import { type EndpointDeclaration, json, registerHttp } from './http/endpoint';
import { HttpProblem } from './http/problem';
import {
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
 * Operator endpoints (auth level `admin`, app roles Ops.*). They live under `/api/ops/…`: the Functions
 * host reserves every route that starts with `admin`, `/api/admin/…` included (azure-functions-host#1781).
 *
 * The operator is the authenticated caller (functions/http/auth.ts): its object id is the identity that
 * approvals compare and the audit records; its display name is kept beside it for humans only.
 * `x-ms-client-principal-name` is never read. Under ROUTELOCK_AUTH=none on the embedded host only, a
 * body field `actor` may name the operator (every caller is trusted there anyway).
 */
function actorOf(
  caller: Caller | undefined,
  body: { actor?: string | undefined },
  { bodyActorAllowed }: Pick<Services, 'bodyActorAllowed'>,
): Actor {
  if (body.actor !== undefined) {
    if (bodyActorAllowed) return { id: body.actor, name: body.actor };
    throw new HttpProblem(
      'BadRequest',
      'The body field "actor" is accepted only on the embedded host with ROUTELOCK_AUTH=none; the operator is the authenticated caller.',
    );
  }
  if (!caller) throw new HttpProblem('Unauthenticated', 'An operator identity is required.');
  return { id: caller.objectId, name: caller.name };
}

/** What the force-release endpoints use. */
type ForceReleaseDeps = Pick<Services, 'forceRelease' | 'bodyActorAllowed'>;

export async function openForceRelease(
  request: HttpRequest,
  _context: InvocationContext,
  services: ForceReleaseDeps,
  caller?: Caller,
): Promise<HttpResponseInit> {
  const id = routeId(request);
  const body = parse(forceReleaseBody, await readJson(request), 'body');
  const actor = actorOf(caller, body, services);
  const opened = await services.forceRelease.open(id, actor, body.reason);
  return json(201, opened, { Location: `/api/ops/force-release/${encodeURIComponent(opened.id)}` });
}

export async function approveForceRelease(
  request: HttpRequest,
  _context: InvocationContext,
  services: ForceReleaseDeps,
  caller?: Caller,
): Promise<HttpResponseInit> {
  const requestId = parse(resourceId, request.params.requestId ?? '', 'request id');
  const body = parse(approveBody, await readOptionalJson(request), 'body');
  const actor = actorOf(caller, body, services);
  return json(200, await services.forceRelease.approve(requestId, actor));
}

export async function getForceRelease(
  request: HttpRequest,
  _context: InvocationContext,
  { forceRelease }: Pick<Services, 'forceRelease'>,
): Promise<HttpResponseInit> {
  const requestId = parse(resourceId, request.params.requestId ?? '', 'request id');
  return json(200, await forceRelease.get(requestId));
}

/** One probe run with the app's store, clock, telemetry and guards (the timer trigger runs the same). */
/** What a probe run uses. */
export type ProbeDeps = Pick<Services, 'store' | 'config' | 'clock' | 'sink' | 'router'>;

export function probeNow({ store, config, clock, sink, router }: ProbeDeps) {
  return runProbe({
    store,
    region: config.operations.probeRegion,
    clock,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    sink,
    policy: router.policy,
    // The probe writes through its own routers (its own timings): the serving router drops its copy.
    onWrite: (resourceId) => router.forget(resourceId),
  });
}

export async function runProbeNow(
  _request: HttpRequest,
  _context: InvocationContext,
  services: ProbeDeps,
): Promise<HttpResponseInit> {
  return json(200, await probeNow(services));
}

export const operationsEndpoints: EndpointDeclaration[] = [
  {
    name: 'openForceRelease',
    methods: ['POST'],
    route: 'ops/routes/{id}/force-release',
    authLevel: 'function',
    role: 'Ops.Operator',
    handler: openForceRelease,
  },
  {
    name: 'approveForceRelease',
    methods: ['POST'],
    route: 'ops/force-release/{requestId}/approve',
    authLevel: 'function',
    role: 'Ops.Approver',
    handler: approveForceRelease,
  },
  {
    name: 'getForceRelease',
    methods: ['GET'],
    route: 'ops/force-release/{requestId}',
    authLevel: 'function',
    role: 'Ops.Read',
    handler: getForceRelease,
  },
  {
    name: 'runProbe',
    methods: ['POST'],
    route: 'ops/probe',
    authLevel: 'function',
    role: 'Ops.Operator',
    handler: runProbeNow,
  },
];

registerHttp(operationsEndpoints);
