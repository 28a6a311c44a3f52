import { type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import type { z } from 'zod';
import type { MutationOptions, Router } from '../shared/core/router';
import { entityTag } from '../shared/core/lock/document';
import type { Caller } from './http/auth';
import { type EndpointDeclaration, type ServiceHandler, json, registerHttp } from './http/endpoint';
import { HttpProblem } from './http/problem';
import {
  announceBody,
  escalateBody,
  idempotencyKey,
  ifMatch,
  parse,
  prelockBody,
  readJson,
  releaseBody,
  renewBody,
  routeId,
  swapBody,
} from './http/validation';
import type { Services } from './services';

/**
 * The lock API (docs/design.md §4; announced locks §3.7). Every call is one conditional write through the router. The token travels
 * in request bodies and only in the pre-lock grant's response body: never in a header, a view or a log.
 */

/**
 * POST /routes/{id}/prelock. When callers are authenticated (ROUTELOCK_AUTH is not `none`), the lock
 * records the caller's object id: a replay with the Idempotency-Key is honoured for that principal only.
 */
export async function prelock(
  request: HttpRequest,
  _context: InvocationContext,
  { router, config }: Pick<Services, 'router' | 'config'>,
  caller?: Caller,
): Promise<HttpResponseInit> {
  const id = routeId(request);
  const { announced, ...body } = parse(prelockBody, await readJson(request), 'body');
  if (announced === true && !config.timing.announcedLocks) throw announcedLocksOff();
  const keyHeader = request.headers.get('idempotency-key');
  const key = keyHeader === null ? undefined : parse(idempotencyKey, keyHeader, 'Idempotency-Key header');
  const principal = config.auth.mode !== 'none' && caller ? caller.objectId : undefined;
  const grant = await router.prelock(
    id,
    {
      ...body,
      ...(announced === true ? { announced: true as const } : {}),
      ...(key === undefined ? {} : { idempotencyKey: key }),
      ...(principal === undefined ? {} : { principal }),
    },
    { ifMatch: ifMatch(request) },
  );
  return json(200, grant, { ETag: entityTag(grant.etag) });
}

/**
 * An announced lock asked of a host that does not take them (rollout, design §2.8): a version-2 document
 * would lock out every library that cannot write one, so the operator turns the flag on, not the caller.
 */
function announcedLocksOff(): HttpProblem {
  const why =
    'announced: this host takes no announced locks (ROUTELOCK_ANNOUNCED_LOCKS is off); send no `announced`, or `false`, for a pre-lock';
  return new HttpProblem('BadRequest', `Invalid body: ${why}`, { errors: [why] });
}

/** A token-bearing mutation: parse the body, run it through the router with the caller's If-Match. */
function tokenMutation<S extends z.ZodType, R extends { etag: string }>(
  schema: S,
  run: (router: Router, id: string, body: z.output<S>, options: MutationOptions) => Promise<R>,
) {
  return async (
    request: HttpRequest,
    _context: InvocationContext,
    { router }: Pick<Services, 'router'>,
  ): Promise<HttpResponseInit> => {
    const id = routeId(request);
    const body = parse(schema, await readJson(request), 'body');
    const result = await run(router, id, body, { ifMatch: ifMatch(request) });
    return json(200, result, { ETag: entityTag(result.etag) });
  };
}

export const escalate = tokenMutation(escalateBody, (router, id, body, options) =>
  router.escalate(id, body, options),
);
/** Allowed whatever the host's flag: a lock taken announced (by a library caller, or before the flag went off) must still reach its write lock. */
export const announce = tokenMutation(announceBody, (router, id, body, options) =>
  router.announce(id, body, options),
);
export const renew = tokenMutation(renewBody, (router, id, body, options) => router.renew(id, body, options));
export const swap = tokenMutation(swapBody, (router, id, body, options) => router.swap(id, body, options));
export const release = tokenMutation(releaseBody, (router, id, body, options) =>
  router.release(id, body, options),
);

const lock = (name: string, handler: ServiceHandler): EndpointDeclaration => ({
  name,
  methods: ['POST'],
  route: `routes/{id}/${name}`,
  authLevel: 'function',
  role: 'Locks.Write',
  handler,
});

export const lockEndpoints: EndpointDeclaration[] = [
  lock('prelock', prelock),
  lock('escalate', escalate),
  lock('announce', announce),
  lock('renew', renew),
  lock('swap', swap),
  lock('release', release),
];

registerHttp(lockEndpoints);
