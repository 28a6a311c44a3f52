import { type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { READ_LEAD_HEADER } from '../shared/core/inflight';
import { entityTag } from '../shared/core/lock/document';
import { isLive } from '../shared/core/lock/state';
import { routeView } from '../shared/core/lock/view';
import { type EndpointDeclaration, json, registerHttp } from './http/endpoint';
import {
  auditQuery,
  ifMatch,
  listQuery,
  parse,
  putRouteBody,
  queryObject,
  readJson,
  routeId,
} from './http/validation';
import type { Services } from './services';

/** Route documents: create, resolve (the read path every service takes), delete, list. */

export async function putRoute(
  request: HttpRequest,
  _context: InvocationContext,
  { router, clock, config }: Pick<Services, 'router' | 'clock' | 'config'>,
): Promise<HttpResponseInit> {
  const id = routeId(request);
  const body = parse(putRouteBody, await readJson(request), 'body');
  const { stored, created } = await router.createRoute(id, body.location);
  const view = routeView(stored, clock(), config.timing);
  return json(created ? 201 : 200, view, {
    ETag: entityTag(view.etag),
    ...(created ? { Location: `/api/routes/${encodeURIComponent(id)}` } : {}),
  });
}

export async function getRoute(
  request: HttpRequest,
  _context: InvocationContext,
  { router, clock }: Pick<Services, 'router' | 'clock'>,
): Promise<HttpResponseInit> {
  const arrivedAt = clock();
  // Age: how long the server's cache had held this copy; max-age already counts it off the TTL.
  // `no-cache` (a client refreshing ahead): a copy confirmed by the store, not the cached one as it is.
  const revalidate = /(?:^|,)\s*no-cache\s*(?:,|$)/i.test(request.headers.get('cache-control') ?? '');
  const { view, cacheControl, ageSeconds, resolvedAt } = await router.view(routeId(request), { revalidate });
  return json(200, view, {
    ETag: entityTag(view.etag),
    'Cache-Control': cacheControl,
    Age: String(ageSeconds),
    [READ_LEAD_HEADER]: String(readLeadMs(arrivedAt, resolvedAt)),
  });
}

/**
 * Counted from when the handler began, which is no earlier than when the request arrived, so the lead is
 * never understated; whole milliseconds, rounded up.
 */
function readLeadMs(arrivedAt: number, resolvedAt: number): number {
  return Math.max(0, Math.ceil(arrivedAt - resolvedAt));
}

export async function deleteRoute(
  request: HttpRequest,
  _context: InvocationContext,
  { router }: Pick<Services, 'router'>,
): Promise<HttpResponseInit> {
  await router.deleteRoute(routeId(request), { ifMatch: ifMatch(request) });
  return { status: 204, headers: { 'Cache-Control': 'no-store' } };
}

/** GET /api/routes?locked=true — for dashboards and operators; `locked=true` keeps live locks only. */
export async function listRoutes(
  request: HttpRequest,
  _context: InvocationContext,
  { router, clock, config }: Pick<Services, 'router' | 'clock' | 'config'>,
): Promise<HttpResponseInit> {
  const query = parse(listQuery, queryObject(request), 'query');
  const lockedOnly = query.locked === 'true';
  const page = await router.listRoutes({
    lockedOnly,
    limit: query.limit ?? 100,
    continuation: query.continuation,
  });
  const now = clock();
  const items = page.items
    .filter((stored) => !lockedOnly || isLive(stored.doc.lock, now))
    .map((stored) => routeView(stored, now, config.timing));
  return json(200, { items, continuation: page.continuation });
}

/** GET /api/routes/{id}/audit — the residency evidence: every swap, release, force-release, reclaim. */
export async function getAudit(
  request: HttpRequest,
  _context: InvocationContext,
  { audit }: Pick<Services, 'audit'>,
): Promise<HttpResponseInit> {
  const id = routeId(request);
  const query = parse(auditQuery, queryObject(request), 'query');
  return json(200, { resourceId: id, items: await audit.list(id, query.limit ?? 100) });
}

export const routeEndpoints: EndpointDeclaration[] = [
  {
    name: 'putRoute',
    methods: ['PUT'],
    route: 'routes/{id}',
    authLevel: 'function',
    role: 'Routes.Write',
    handler: putRoute,
  },
  {
    name: 'getRoute',
    methods: ['GET'],
    route: 'routes/{id}',
    authLevel: 'function',
    role: 'Routes.Read',
    handler: getRoute,
  },
  {
    name: 'deleteRoute',
    methods: ['DELETE'],
    route: 'routes/{id}',
    authLevel: 'function',
    role: 'Routes.Write',
    handler: deleteRoute,
  },
  {
    name: 'listRoutes',
    methods: ['GET'],
    route: 'routes',
    authLevel: 'function',
    role: 'Ops.Read',
    handler: listRoutes,
  },
  {
    name: 'getAudit',
    methods: ['GET'],
    route: 'routes/{id}/audit',
    authLevel: 'function',
    role: 'Ops.Read',
    handler: getAudit,
  },
];

registerHttp(routeEndpoints);
