import { RoutingClient } from '../../shared/core/client';
import { type HostOnClock, SOURCE, T, TARGET, hostOnManualClock } from './harness';
import { type RunningApp, call, startApp } from './middlewareApps';

/**
 * The guard against a real routelock: the embedded host (dev profile, manual clock), a `RoutingClient`
 * over HTTP, and a node:http service serving both locations (`/eastus/...` at the target, anything else
 * at the source). A route is taken through a migration's steps by the API, and the service's answers
 * follow: allowed, tombstoned, 423, then 307 to the new location and allowed there; a missing route 404;
 * an id routelock refuses (a probe's) a 400 problem.
 */

let h: HostOnClock;
let app: RunningApp;
let routing: RoutingClient;
const id = 'conv-host';

beforeAll(async () => {
  h = await hostOnManualClock('dev');
  routing = new RoutingClient({ baseUrl: h.api, clock: h.clock.now, clockSkewSeconds: 0 });
  app = await startApp('node', {
    routing,
    clock: h.clock.now,
    serving: (path) => (path.startsWith('/eastus/') ? TARGET : SOURCE),
    urlFor: (location, path) =>
      location.region === TARGET.region ? `http://eastus.test/eastus${path}` : undefined,
  });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await h?.host.close();
});

test('a migration through the API, and what the guarded service answers at each step', async () => {
  const api = new RoutingClient({ baseUrl: h.api, clock: h.clock.now, clockSkewSeconds: 0 });
  const at = (path: string) => `${app.url}${path}`;
  h.clock.set(T);
  await api.putRoute(id, SOURCE);
  expect((await call(at(`/items/${id}`), 'POST')).status).toBe(201);
  expect((await call(at(`/eastus/items/${id}`), 'POST')).status).toBe(421);

  const grant = await api.prelock(id, { migrationId: `m-${id}`, owner: 'guard', target: TARGET });
  h.clock.set(Date.parse(grant.startsAt));
  await api.escalate(id, grant.token!, 'hardDelete');
  const tombstoned = await call(at(`/items/${id}`), 'DELETE');
  expect(tombstoned.status).toBe(204);
  expect(app.items.get(id)).toBe('tombstone');

  const write = await api.escalate(id, grant.token!, 'write');
  const locked = await call(at(`/items/${id}`), 'POST');
  expect(locked.status).toBe(423);
  expect(Number(locked.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  expect(locked.body).toMatchObject({ code: 'Locked', resourceId: id, operation: 'write' });

  await api.swap(id, grant.token!, write.writeAt!);
  const moved = await call(at(`/items/${id}`), 'POST');
  expect(moved.status).toBe(307);
  expect(moved.headers.location).toBe(`http://eastus.test/eastus/items/${id}`);
  expect((await call(at(`/eastus/items/${id}`), 'POST')).status).toBe(201);
});

test('no route is a 404 problem; an id routelock refuses is a 400 problem, not a 500', async () => {
  const missing = await call(`${app.url}/items/conv-never`, 'GET');
  expect(missing.status).toBe(404);
  expect(missing.body).toMatchObject({ code: 'NotFound' });
  const reserved = await call(`${app.url}/items/probe-1`, 'GET');
  expect(reserved.status).toBe(400);
  expect(reserved.body).toMatchObject({ code: 'UnroutableRequest' });
});

test('with the dev timing learnt by ready() (grace 1 s), a write past the grace that the cache would still serve commits; past the view too, 503', async () => {
  const learnt = new RoutingClient({ baseUrl: h.api, clock: h.clock.now, clockSkewSeconds: 0 });
  await learnt.ready();
  expect(learnt.inFlightGraceSeconds).toBe(1);
  const slowBy = { ms: 0 };
  const dev = await startApp('node', {
    routing: learnt,
    serving: SOURCE,
    clock: h.clock.now,
    gate: async () => h.clock.set(h.clock.now() + slowBy.ms),
  });
  try {
    h.clock.set(T + 3_600_000);
    await learnt.putRoute('conv-learnt', SOURCE);
    await learnt.resolve('conv-learnt'); // cached: the write below decides on a view the cache serves
    slowBy.ms = 1_500; // past the 1 s grace, within the 2 s the dev cache serves a view
    expect((await call(`${dev.url}/items/conv-learnt`, 'POST')).status).toBe(201);
    // control: preparation outlasting both the grace and the cached view's life is refused
    slowBy.ms = 60_000;
    const late = await call(`${dev.url}/items/conv-learnt`, 'POST');
    expect(late.status).toBe(503);
    expect(late.body).toMatchObject({ code: 'GraceExpired' });
  } finally {
    await dev.close();
  }
});
