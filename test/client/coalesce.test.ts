import {
  DEFAULT_INFLIGHT_GRACE_SECONDS,
  DEFAULT_SERVER_COALESCE_JOIN_MS,
  RoutingClient,
  decide,
  withinGrace,
} from '../../shared/core/client';
import { parseConfig } from '../../shared/config';
import type { RouteView } from '../../shared/core/lock/view';
import { startLocalHost } from '../support/localHost';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { ManualClock } from '../../testkit/clock';
import { HeldReadStore } from '../../testkit/heldReadStore';
import { READ_LEAD_HEADER } from '../../shared/core/inflight';
import { Front, type HostOnClock, SOURCE, T, TARGET, hostOnManualClock, scriptedServer } from './harness';

/**
 * Concurrent resolves of one id share one request (shared/core/inflight.ts), and a joined view
 * is as old as the request it joined: its `resolvedAt` is that request's, so the join bound is spent
 * from the in-flight grace like the request's own time.
 */

let h: HostOnClock | undefined;
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await h?.host.close();
  h = undefined;
  for (const close of closers.splice(0)) await close();
});

/** A route whose pre-lock has started on the host's clock. */
async function startedLockedRoute(client: RoutingClient, id: string): Promise<void> {
  await client.putRoute(id, SOURCE);
  const grant = await client.prelock(id, { migrationId: 'm-hot', owner: 'o', target: TARGET });
  h!.clock.set(Date.parse(grant.startsAt));
}

test('2,000 concurrent resolves of a started-locked id cost one request; the next burst one more', async () => {
  h = await hostOnManualClock('dev');
  const client = new RoutingClient({ baseUrl: h.api, clock: h.clock.now, clockSkewSeconds: 0 });
  await startedLockedRoute(client, 'conv-hot');

  const before = client.requests;
  const views = await Promise.all(Array.from({ length: 2000 }, () => client.resolve('conv-hot')));
  expect(client.requests - before).toBe(1);
  expect(client.joined).toBe(1999);
  expect(views.every((v) => v.lock?.migrationId === 'm-hot')).toBe(true);

  // A started lock is never served from the cache: a later burst sends its own request.
  await Promise.all(Array.from({ length: 2000 }, () => client.resolve('conv-hot')));
  expect(client.requests - before).toBe(2);
  // and one at a time, each resolve is a request
  for (let i = 0; i < 5; i += 1) await client.resolve('conv-hot');
  expect(client.requests - before).toBe(7);
});

test('on the system clock: 2,000 concurrent resolves of a started-locked id cost one request per join bound it took to issue them', async () => {
  h = await hostOnManualClock('dev');
  h.clock.set(Date.now() - 10_000);
  const setup = new RoutingClient({ baseUrl: h.api, clock: h.clock.now, clockSkewSeconds: 0 });
  await setup.putRoute('conv-hot', SOURCE);
  await setup.prelock('conv-hot', { migrationId: 'm-hot', owner: 'o', target: TARGET });
  h.clock.set(Date.now()); // the lock (startsAt = 3 s after the pre-lock) has started on every clock
  const client = new RoutingClient({ baseUrl: h.api, clockSkewSeconds: 0 });
  const issuedFrom = Date.now();
  const pending = Array.from({ length: 2000 }, () => client.resolve('conv-hot'));
  const issuingMs = Date.now() - issuedFrom;
  const views = await Promise.all(pending);
  // 1–2 on a quiet machine; a loaded one may take longer than the 50 ms bound to issue them, and a
  // resolve past it starts a request of its own, as the rule says (the exact count: the manual clock above)
  expect(client.requests).toBeGreaterThanOrEqual(1);
  expect(client.requests).toBeLessThanOrEqual(2 + Math.floor(issuingMs / client.coalesceJoinMs));
  expect(views.every((v) => v.lock !== null)).toBe(true);
});

describe('the join bound', () => {
  /** A server whose answers wait until released: a read stays in flight while the clock moves. */
  async function slowServer() {
    const view: RouteView = {
      resourceId: 'conv-j',
      location: SOURCE,
      secondary: null,
      lock: null,
      enforcement: { read: 'allow', write: 'allow', delete: 'allow' },
      etag: 'e1',
    };
    const waiting: (() => void)[] = [];
    const server = await scriptedServer(
      () => ({ status: 200, headers: { 'cache-control': 'no-store' }, body: view }),
      () => new Promise<void>((resolve) => waiting.push(resolve)),
    );
    closers.push(server.close);
    const release = async (count: number) => {
      while (waiting.length < count) await new Promise((r) => setTimeout(r, 5));
      for (const go of waiting.splice(0)) go();
    };
    return { ...server, release };
  }

  test('a resolve joins a request that left at most coalesceJoinMs ago, and gets its resolvedAt', async () => {
    const server = await slowServer();
    const clock = new ManualClock(T);
    // This server answers each request with its own read: it declares no join of its own.
    const client = new RoutingClient({
      baseUrl: server.api,
      clock: clock.now,
      coalesceJoinMs: 50,
      serverCoalesceJoinMs: 0,
    });
    const first = client.resolveForWrite('conv-j');
    clock.set(T + 50);
    const joined = client.resolveForWrite('conv-j'); // at the bound: joins
    clock.set(T + 51);
    const own = client.resolveForWrite('conv-j'); // past it: its own request
    await server.release(2);
    const [a, b, c] = await Promise.all([first, joined, own]);
    expect(server.requests()).toBe(2);
    expect(client.requests).toBe(2);
    expect([a.resolvedAt, b.resolvedAt, c.resolvedAt]).toEqual([T, T, T + 51]);

    // The joiner's grace counts from the request it joined: at T + 5 s + 1 ms its write is refused,
    // although it asked only 4,951 ms earlier.
    const grace = client.inFlightGraceSeconds;
    expect(grace).toBe(5);
    expect(withinGrace(b.resolvedAt, grace, T + 5000)).toBe(true);
    expect(withinGrace(b.resolvedAt, grace, T + 5001)).toBe(false);
    // Negative control: a joiner that counted from its own call would commit past the grace.
    expect(withinGrace(T + 50, grace, T + 5001)).toBe(true);
  });

  test('the joins (client and server) together take at most a tenth of the grace; more is refused', () => {
    const baseUrl = 'http://127.0.0.1:9/api';
    const grace = { inFlightGraceSeconds: 0.5 }; // a tenth: 50 ms
    expect(() => new RoutingClient({ baseUrl, ...grace, coalesceJoinMs: 1 })).toThrow(
      /together must not exceed a tenth of the in-flight grace \(50 ms\)/,
    ); // the server's default 50 ms leaves nothing
    const client = new RoutingClient({ baseUrl, ...grace, serverCoalesceJoinMs: 20, coalesceJoinMs: 30 });
    expect(client.coalesceJoinMs).toBe(30);
    expect(
      () => new RoutingClient({ baseUrl, ...grace, serverCoalesceJoinMs: 20, coalesceJoinMs: 31 }),
    ).toThrow(RangeError);
    expect(() => new RoutingClient({ baseUrl, ...grace, serverCoalesceJoinMs: 51 })).toThrow(RangeError);
    // defaults: 50 ms each, within the production grace's 500 ms; lowered to what a smaller grace leaves
    expect(new RoutingClient({ baseUrl })).toMatchObject({ coalesceJoinMs: 50, serverCoalesceJoinMs: 50 });
    expect(new RoutingClient({ baseUrl, inFlightGraceSeconds: 0.6 }).coalesceJoinMs).toBe(10);
    expect(
      new RoutingClient({ baseUrl, inFlightGraceSeconds: 0, serverCoalesceJoinMs: 0 }).coalesceJoinMs,
    ).toBe(0);
    expect(() => new RoutingClient({ baseUrl, coalesceJoinMs: -1 })).toThrow(RangeError);
  });

  test("the defaults are what the production profile's config parses to", () => {
    const production = parseConfig({ ROUTELOCK_PROFILE: 'production' });
    expect(production.migration.inFlightGraceSeconds).toBe(DEFAULT_INFLIGHT_GRACE_SECONDS);
    expect(production.timing.coalesceJoinMs).toBe(DEFAULT_SERVER_COALESCE_JOIN_MS);
  });
});
test('resolvedAt for a cached view is when it is served; a service refuses a write older than the grace', async () => {
  h = await hostOnManualClock('production');
  const client = new RoutingClient({ baseUrl: h.api, clock: h.clock.now });
  await client.putRoute('conv-g', SOURCE);
  const fetched = await client.resolveForWrite('conv-g');
  // the host's router read the store for this request, and says so (Routelock-Read-Lead-Ms: 0)
  expect(fetched.resolvedAt).toBe(T);
  h.clock.set(T + 30_000);
  const cached = await client.resolveForWrite('conv-g');
  expect(client.requests).toBe(2); // the put and one GET: the second resolve was a cache hit
  expect(cached.resolvedAt).toBe(T + 30_000);

  // What a service does before committing the write it decided:
  const commit = (resolvedAt: number, now: number) =>
    decide(cached.view, 'write', SOURCE).kind === 'allow' &&
    withinGrace(resolvedAt, client.inFlightGraceSeconds, now);
  expect(commit(cached.resolvedAt, T + 34_000)).toBe(true);
  expect(commit(cached.resolvedAt, T + 35_001)).toBe(false);
});

test("in series with the server's coalescing: resolvedAt counts the server's join too", async () => {
  const clock = new ManualClock(T);
  const held: (() => void)[] = [];
  let gated = false;
  const store = new HeldReadStore(new SqliteStore(':memory:'), () =>
    gated ? new Promise<void>((resolve) => held.push(resolve)) : Promise.resolve(),
  );
  const host = await startLocalHost({
    env: { PORT: '0', ROUTELOCK_PROFILE: 'production' },
    clock: clock.now,
    store,
    log: () => undefined,
  });
  closers.push(() => host.close());
  const api = `${host.url}/api`;
  const setup = new RoutingClient({ baseUrl: api, clock: clock.now });
  await setup.putRoute('conv-s', SOURCE);
  const grant = await setup.prelock('conv-s', { migrationId: 'm-s', owner: 'o', target: TARGET });
  const readAt = Date.parse(grant.startsAt) + 10_000; // started on every clock
  // The server's router holds a copy from a second earlier, so at readAt it goes straight to the write
  // region: one read, begun at readAt, that the later requests join.
  clock.set(readAt - 1000);
  await setup.resolve('conv-s');
  clock.set(readAt);
  gated = true;
  // Two services' clients (no client-side joining between them): the second request reaches the server
  // 50 ms after the first, and the server answers it with the store read the first began.
  const first = new RoutingClient({ baseUrl: api, clock: clock.now }).resolveForWrite('conv-s');
  while (held.length < 1) await new Promise((r) => setTimeout(r, 5));
  clock.set(readAt + 50);
  const second = new RoutingClient({ baseUrl: api, clock: clock.now }).resolveForWrite('conv-s');
  // Told the server joins nothing: the server's Routelock-Read-Lead-Ms (50) dates the view all the same.
  const misinformed = new RoutingClient({
    baseUrl: api,
    clock: clock.now,
    serverCoalesceJoinMs: 0,
  }).resolveForWrite('conv-s');
  // Behind a proxy that drops the header (as from an older server): the declared bound is the fallback.
  const proxy = await Front.start(api);
  proxy.dropHeaders = [READ_LEAD_HEADER.toLowerCase()];
  closers.push(() => proxy.kill());
  const fallback = new RoutingClient({ baseUrl: proxy.api, clock: clock.now }).resolveForWrite('conv-s');
  // Negative control: no header and told the server joins nothing.
  const unaware = new RoutingClient({
    baseUrl: proxy.api,
    clock: clock.now,
    serverCoalesceJoinMs: 0,
  }).resolveForWrite('conv-s');
  while (proxy.requests < 2) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 300));
  const storeReads = held.length;
  gated = false;
  for (const go of held.splice(0)) go();
  const [a, b, m, f, u] = await Promise.all([first, second, misinformed, fallback, unaware]);
  expect(storeReads).toBe(1); // the later four joined the first's store read
  expect(a.resolvedAt).toBe(readAt);
  expect(b.resolvedAt).toBe(readAt); // readAt + 50 − the lead the server said (50)
  expect(m.resolvedAt).toBe(readAt);
  expect(f.resolvedAt).toBeLessThanOrEqual(readAt); // readAt + 50 − the declared 50 ms
  // The control dates the view after the read that answered it: the check above would catch it.
  expect(u.resolvedAt).toBeGreaterThan(readAt);
});
