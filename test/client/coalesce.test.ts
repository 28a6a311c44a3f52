import { DEFAULT_INFLIGHT_GRACE_SECONDS, RoutingClient, decide, withinGrace } from '../../shared/client';
import { parseConfig } from '../../shared/config';
import type { RouteView } from '../../shared/lock/view';
import { ManualClock } from '../../testkit/clock';
import { type HostOnClock, SOURCE, T, TARGET, hostOnManualClock, scriptedServer } from './harness';

/**
 * Issue 20 §3: concurrent resolves of one id share one request (shared/inflight.ts), and a joined view
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

test('on the system clock: 2,000 concurrent resolves of a started-locked id cost 1–2 requests', async () => {
  h = await hostOnManualClock('dev');
  h.clock.set(Date.now() - 10_000);
  const setup = new RoutingClient({ baseUrl: h.api, clock: h.clock.now, clockSkewSeconds: 0 });
  await setup.putRoute('conv-hot', SOURCE);
  await setup.prelock('conv-hot', { migrationId: 'm-hot', owner: 'o', target: TARGET });
  h.clock.set(Date.now()); // the lock (startsAt = 3 s after the pre-lock) has started on every clock
  const client = new RoutingClient({ baseUrl: h.api, clockSkewSeconds: 0 });
  const views = await Promise.all(Array.from({ length: 2000 }, () => client.resolve('conv-hot')));
  expect(client.requests).toBeGreaterThanOrEqual(1);
  expect(client.requests).toBeLessThanOrEqual(2);
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
    const client = new RoutingClient({ baseUrl: server.api, clock: clock.now, coalesceJoinMs: 50 });
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

  test('a join bound longer than the declared grace is refused; the default never exceeds the grace', () => {
    const baseUrl = 'http://127.0.0.1:9/api';
    expect(() => new RoutingClient({ baseUrl, inFlightGraceSeconds: 0.02, coalesceJoinMs: 21 })).toThrow(
      /must not exceed the in-flight grace/,
    );
    expect(
      new RoutingClient({ baseUrl, inFlightGraceSeconds: 0.02, coalesceJoinMs: 20 }).coalesceJoinMs,
    ).toBe(20);
    expect(new RoutingClient({ baseUrl }).coalesceJoinMs).toBe(50);
    expect(new RoutingClient({ baseUrl, inFlightGraceSeconds: 0 }).coalesceJoinMs).toBe(0);
    expect(() => new RoutingClient({ baseUrl, coalesceJoinMs: -1 })).toThrow(RangeError);
  });

  test("the default grace is the production profile's ROUTELOCK_INFLIGHT_GRACE_SECONDS", () => {
    expect(parseConfig({ ROUTELOCK_PROFILE: 'production' }).migration.inFlightGraceSeconds).toBe(
      DEFAULT_INFLIGHT_GRACE_SECONDS,
    );
  });
});

test('resolvedAt for a cached view is when it is served; a service refuses a write older than the grace', async () => {
  h = await hostOnManualClock('production');
  const client = new RoutingClient({ baseUrl: h.api, clock: h.clock.now });
  await client.putRoute('conv-g', SOURCE);
  const fetched = await client.resolveForWrite('conv-g');
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
