import { type RouteState, TestRoutingClient, states } from '../../shared/core/clientTesting';
import { type Framework, type RunningApp, call, frameworks, startApp } from './middlewareApps';

/**
 * The request guard (`@routelock/client/middleware`) answers every decision as `decisionStatus` says, the
 * same through each of the three adapters (node:http, Express 5, Fastify 5): the route states come from
 * the test double. A refusal is an RFC 9457 problem with the decision's code; the handler never runs for
 * it; a tombstoned delete runs the team's tombstone function instead of the handler and answers 204; a
 * request the mapping cannot map is a 400 problem, never a 500.
 */

const [from, to] = ['westeurope', 'eastus'];
const problemType = 'application/problem+json';

interface Row {
  name: string;
  state: RouteState;
  method: 'GET' | 'POST' | 'DELETE';
  path?: string;
  status: number;
  code?: string;
  retryAfter?: string;
  location?: string;
  /** What the request did to the service: a handler ran, a tombstone, or nothing. */
  effect: 'handler' | 'tombstone' | 'none';
}

const rows: Row[] = [
  {
    name: 'unlocked read',
    state: states.unlocked({ at: from }),
    method: 'GET',
    status: 200,
    effect: 'handler',
  },
  {
    name: 'unlocked write',
    state: states.unlocked({ at: from }),
    method: 'POST',
    status: 201,
    effect: 'handler',
  },
  {
    name: 'unlocked delete',
    state: states.unlocked({ at: from }),
    method: 'DELETE',
    status: 204,
    effect: 'handler',
  },
  {
    name: 'pre-lock write',
    state: states.preLock({ from, to }),
    method: 'POST',
    status: 201,
    effect: 'handler',
  },
  {
    name: 'hard-delete write',
    state: states.hardDelete({ from, to }),
    method: 'POST',
    status: 201,
    effect: 'handler',
  },
  {
    name: 'hard-delete delete: a tombstone',
    state: states.hardDelete({ from, to }),
    method: 'DELETE',
    status: 204,
    effect: 'tombstone',
  },
  {
    name: 'write-lock read',
    state: states.writeLock({ from, to }),
    method: 'GET',
    status: 200,
    effect: 'handler',
  },
  {
    name: 'write-lock write: 423',
    state: states.writeLock({ from, to, forSeconds: 3 }),
    method: 'POST',
    status: 423,
    code: 'Locked',
    retryAfter: '3',
    effect: 'none',
  },
  {
    name: 'write-lock delete: 423',
    state: states.writeLock({ from, to, forSeconds: 3 }),
    method: 'DELETE',
    status: 423,
    code: 'Locked',
    retryAfter: '3',
    effect: 'none',
  },
  {
    name: 'retired source, no URL there: 421',
    state: states.retiredSource({ from, to }),
    method: 'POST',
    status: 421,
    code: 'MisdirectedRequest',
    effect: 'none',
  },
  {
    name: 'retired source, a URL there: 307',
    state: states.retiredSource({ from, to }),
    method: 'POST',
    path: '/items/conv-1?follow=1',
    status: 307,
    location: 'https://eastus.example/items/conv-1?follow=1',
    effect: 'none',
  },
  {
    name: 'pending target, served at the target: 421',
    state: states.pendingTarget({ from: to, to: from }),
    method: 'POST',
    status: 421,
    code: 'MisdirectedRequest',
    effect: 'none',
  },
  {
    name: 'no route: 404',
    state: states.notFound(),
    method: 'GET',
    status: 404,
    code: 'NotFound',
    effect: 'none',
  },
  {
    name: 'routelock unreachable: 503',
    state: states.unreachable(),
    method: 'POST',
    status: 503,
    code: 'Unreachable',
    retryAfter: '1',
    effect: 'none',
  },
  {
    name: 'routelock throttling: 503 with its wait',
    state: states.unreachable({ status: 429, retryAfterSeconds: 7 }),
    method: 'DELETE',
    status: 503,
    code: 'Unreachable',
    retryAfter: '7',
    effect: 'none',
  },
  {
    name: 'an id routelock would refuse: 400',
    state: states.unlocked({ at: from }),
    method: 'POST',
    path: '/items/bad%20id',
    status: 400,
    code: 'UnroutableRequest',
    effect: 'none',
  },
  {
    name: 'a mapping that throws: 400',
    state: states.unlocked({ at: from }),
    method: 'GET',
    path: '/items/throw',
    status: 400,
    code: 'UnroutableRequest',
    effect: 'none',
  },
];

describe.each(frameworks)('through %s', (framework: Framework) => {
  const routing = new TestRoutingClient();
  let app: RunningApp;
  beforeAll(async () => {
    app = await startApp(framework, {
      routing,
      urlFor: (location, path) =>
        path.includes('follow=1') ? `https://${location.region}.example${path}` : undefined,
    });
  });
  afterAll(() => app.close());

  test.each(rows)('$name', async (row) => {
    const path = row.path ?? '/items/conv-1';
    const id = decodeURIComponent(/^\/items\/([^?]+)/.exec(path)?.[1] ?? '');
    routing.set(id, row.state);
    app.items.set(id, 'before');
    const [handled, tombstones] = [app.handled.length, app.tombstones.length];
    const answer = await call(`${app.url}${path}`, row.method);
    expect({ status: answer.status, retryAfter: answer.headers['retry-after'] ?? undefined }).toEqual({
      status: row.status,
      retryAfter: row.retryAfter,
    });
    const effect =
      app.handled.length > handled ? 'handler' : app.tombstones.length > tombstones ? 'tombstone' : 'none';
    expect(effect).toBe(row.effect);
    if (row.effect === 'tombstone') expect(app.items.get(id)).toBe('tombstone');
    if (row.effect === 'none') expect(app.items.get(id)).toBe('before');
    if (row.location !== undefined) expect(answer.headers.location).toBe(row.location);
    if (row.code === undefined) return;
    expect(answer.headers['content-type']).toContain(problemType);
    expect(answer.body).toMatchObject({
      type: `urn:routelock:problem:${row.code}`,
      status: row.status,
      code: row.code,
      instance: path,
    });
    expect(typeof answer.body?.title).toBe('string');
    expect(typeof answer.body?.detail).toBe('string');
  });

  test('a 421 names where the data lives', async () => {
    routing.set('conv-2', states.retiredSource({ from, to }));
    const answer = await call(`${app.url}/items/conv-2`, 'GET');
    expect(answer.body).toMatchObject({ location: { region: to }, resourceId: 'conv-2', operation: 'read' });
  });

  test('a request the mapping leaves unguarded reaches its handler without a resolve', async () => {
    routing.set('public', states.notFound()); // resolved, it would be a 404
    const answer = await call(`${app.url}/items/public`, 'GET');
    expect(answer.status).toBe(200);
    expect(app.handled).toContain('GET public');
  });
});
