import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { RoutingClient, decide } from '../../shared/core/client';
import { ManualClock } from '../../testkit/clock';
import type { LocationDocument } from '../../shared/core/lock/document';
import { type RouteView, cacheHeaders } from '../../shared/core/lock/view';
import { VirtualScheduler } from '../../testkit/virtualScheduler';
import type { MigrationStatus } from '../../shared/migration/types';
import { Router } from '../../shared/core/router';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { seamedRouterMaker } from '../../testkit/router';

/**
 * The server's cache is a tier in series with the client's (docs/design.md §5.3), over real HTTP on the
 * embedded host, on a manual clock:
 *
 * - a service resolving through one instance while another instance (a second router on the same
 *   store) takes the pre-lock and then the write lock: its RoutingClient sees the pre-lock within one
 *   local TTL of its commit, and never `write: allow` at the source once the write lock has committed.
 *   Negative control: headers without Age (a full max-age and no Age for a copy held a while) break both.
 * - in one host, the runner's writes, force-release and the probe land in the cache that serves HTTP.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const T = Date.UTC(2026, 5, 1);
const STEP_MS = 100;

let host: LocalHost | undefined;
afterEach(async () => {
  await host?.close();
  host = undefined;
});

interface Trace {
  ttlMs: number;
  prelockAt: number;
  writeLockAt: number;
  /** The last instant the client's view did not show the pre-lock. */
  lastWithoutPrelock: number;
  /** Instants at or after the write lock's commit when the client was told `write: allow` at the source. */
  allowedUnderWriteLock: number[];
  /** The largest Age the server sent: proof its cache served held copies. */
  maxAge: number;
  denied: number;
}

/**
 * Dev profile (local TTL 2 s, replication bound 1 s: convergence delay 3 s, skew 0). The service polls
 * every 100 ms from T; the server caches the route at T; the other instance pre-locks at T + 0.1 s and,
 * the moment the lock starts, escalates to hardDelete and write.
 */
async function series(plantOldHeaders: boolean): Promise<Trace> {
  const clock = new ManualClock(T);
  const store = new SqliteStore(':memory:');
  host = await startLocalHost({
    env: { PORT: '0', ROUTELOCK_PROFILE: 'dev' },
    clock: clock.now,
    store,
    log: () => undefined,
    ...(plantOldHeaders
      ? { newRouter: seamedRouterMaker({ cacheHeaders: (doc, now, cfg) => cacheHeaders(doc, now, cfg, 0) }) }
      : {}),
  });
  const timing = host.config.timing;
  expect(timing).toMatchObject({ localCacheTtlSeconds: 2, convergenceDelaySeconds: 3, clockSkewSeconds: 0 });
  const otherInstance = new Router({ store, timing, clock: clock.now });

  // Every response the client gets goes past this fetch: the test records the Age the server sent.
  let maxAge = 0;
  const client = new RoutingClient({
    baseUrl: `${host.url}/api`,
    clock: clock.now,
    clockSkewSeconds: timing.clockSkewSeconds,
    fetch: async (input, init) => {
      const response = await fetch(input, init);
      maxAge = Math.max(maxAge, Number(response.headers.get('age') ?? 0));
      return response;
    },
  });
  await client.putRoute('conv-s', SOURCE); // the server caches the route at T

  let prelockAt = Number.POSITIVE_INFINITY;
  let writeLockAt = Number.POSITIVE_INFINITY;
  let token: string | undefined;
  let startsAt = Number.POSITIVE_INFINITY;
  let lastWithoutPrelock = T;
  const allowedUnderWriteLock: number[] = [];
  let denied = 0;
  for (let now = T; now <= T + 6000; now += STEP_MS) {
    clock.set(now);
    if (now === T + 100) {
      const grant = await otherInstance.prelock('conv-s', { migrationId: 'm-s', owner: 'o', target: TARGET });
      prelockAt = now;
      token = grant.token;
      startsAt = Date.parse(grant.startsAt);
    }
    if (token !== undefined && now >= startsAt && writeLockAt === Number.POSITIVE_INFINITY) {
      await otherInstance.escalate('conv-s', { token, phase: 'hardDelete' });
      await otherInstance.escalate('conv-s', { token, phase: 'write' });
      writeLockAt = now;
    }
    const view: RouteView = await client.resolve('conv-s');
    if (view.lock?.migrationId !== 'm-s') lastWithoutPrelock = now;
    const write = decide(view, 'write', SOURCE);
    if (write.kind === 'deny') denied += 1;
    if (now >= writeLockAt && write.kind === 'allow') allowedUnderWriteLock.push(now - writeLockAt);
  }
  return {
    ttlMs: timing.localCacheTtlSeconds * 1000,
    prelockAt,
    writeLockAt,
    lastWithoutPrelock,
    allowedUnderWriteLock,
    maxAge,
    denied,
  };
}

describe('RoutingClient in series with the server cache, two instances on one store', () => {
  test('the client sees the pre-lock within one local TTL of its commit, and no write allowed under the write lock', async () => {
    const trace = await series(false);
    expect(trace.maxAge).toBeGreaterThan(0); // the server did serve copies it had held
    expect(trace.writeLockAt).toBe(trace.prelockAt + 3000);
    expect(trace.denied).toBeGreaterThan(0);
    expect(trace.lastWithoutPrelock - trace.prelockAt).toBeLessThan(trace.ttlMs);
    expect(trace.allowedUnderWriteLock).toEqual([]);
  });

  test('negative control: with headers of full max-age and no Age the client overstays both bounds', async () => {
    const trace = await series(true);
    expect(trace.maxAge).toBe(0);
    expect(trace.lastWithoutPrelock - trace.prelockAt).toBeGreaterThanOrEqual(trace.ttlMs);
    expect(trace.allowedUnderWriteLock.length).toBeGreaterThan(0);
    // the reported symptom: told `write → allow` at the source for most of a second into the write lock
    expect(Math.max(...trace.allowedUnderWriteLock)).toBeGreaterThanOrEqual(800);
  });
});

describe('RoutingClient honours Age over HTTP', () => {
  test('a copy the server has held 25 s is fresh in the client for max-age − Age, not max-age', async () => {
    const clock = new ManualClock(T);
    host = await startLocalHost({
      env: { PORT: '0', ROUTELOCK_PROFILE: 'production' },
      clock: clock.now,
      store: new SqliteStore(':memory:'),
      log: () => undefined,
    });
    const client = new RoutingClient({ baseUrl: `${host.url}/api`, clock: clock.now });
    await client.putRoute('conv-a', SOURCE); // cached by the server at T
    clock.set(T + 25_000);
    const direct = await fetch(`${host.url}/api/routes/conv-a`);
    expect(direct.headers.get('cache-control')).toBe('private, max-age=35');
    expect(direct.headers.get('age')).toBe('25');

    const before = client.requests;
    await client.resolve('conv-a'); // fresh for 35 − 25 = 10 s
    clock.set(T + 34_900);
    await client.resolve('conv-a');
    expect(client.requests - before).toBe(1);
    clock.set(T + 35_000);
    await client.resolve('conv-a');
    expect(client.requests - before).toBe(2);
  });
});

describe('one host: every writer goes through the router that serves HTTP', () => {
  const get = async (id: string) => {
    const response = await fetch(`${host!.url}/api/routes/${id}`);
    return {
      view: (await response.json()) as RouteView,
      age: response.headers.get('age'),
      cacheControl: response.headers.get('cache-control'),
    };
  };
  const send = (method: string, path: string, body: unknown) =>
    fetch(`${host!.url}/api${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  test("a migration's pre-lock and swap are on the HTTP read path at once (the runner writes through it)", async () => {
    const clock = new ManualClock(T);
    const scheduler = new VirtualScheduler(clock);
    // Notes the virtual time the swap committed: the workflow then confirms it on a replica for longer than
    // the local tier's TTL, so the route must be read at that moment, not when the migration is done.
    let swapCommittedAt: number | undefined;
    const store = new (class extends SqliteStore {
      override async replace(doc: LocationDocument, ifMatch: string) {
        const stored = await super.replace(doc, ifMatch);
        if (stored.doc.lock === null && stored.doc.location.region === TARGET.region)
          swapCommittedAt ??= clock.now();
        return stored;
      }
    })(':memory:');
    host = await startLocalHost({
      env: { PORT: '0', ROUTELOCK_PROFILE: 'dev' },
      scheduler,
      store,
      log: () => undefined,
    });
    await send('PUT', '/routes/conv-m', { location: SOURCE });
    expect(await get('conv-m')).toMatchObject({ view: { lock: null }, age: '0' });

    const started = await send('POST', '/migrations', { resourceId: 'conv-m', target: TARGET });
    expect(started.status).toBe(202);
    const { statusUrl } = (await started.json()) as { statusUrl: string };
    // The runner takes the pre-lock, then sleeps out the convergence delay on a virtual timer.
    for (let turn = 0; turn < 1000 && scheduler.pendingTimers === 0; turn += 1)
      await new Promise<void>((resolve) => setImmediate(resolve));
    expect((await store.read('conv-m', { from: 'writeRegion' })).doc.lock).not.toBeNull();
    expect(clock.now()).toBe(T); // no virtual time has passed since the route was cached
    const pending = await get('conv-m');
    expect(pending.view.lock).toMatchObject({ phase: 'prelock', target: TARGET });
    expect(pending.age).toBe('0'); // the runner's write refreshed the serving cache

    // One timer at a time, then macrotask turns (no timer fires in them) until the swap commits.
    for (let timers = 0; timers < 10_000 && swapCommittedAt === undefined; timers += 1) {
      await scheduler.runUntilIdle({ maxTimers: 1, settleTurns: 0 });
      for (let turn = 0; turn < 50 && swapCommittedAt === undefined; turn += 1)
        await new Promise<void>((resolve) => setImmediate(resolve));
    }
    const swappedAt = clock.now();
    expect(swappedAt).toBe(swapCommittedAt);
    expect(await get('conv-m')).toMatchObject({
      view: { location: TARGET, lock: null, secondary: { role: 'retiredSource', location: SOURCE } },
      age: '0',
    });
    await scheduler.runWhile(() => host!.runner.activeCount > 0);
    const status = (await (await fetch(`${host.url}${statusUrl}`)).json()) as MigrationStatus;
    expect(status).toMatchObject({ status: 'Completed' });
    // the read above came within the local tier's TTL of the swap: only the runner's write can explain it
    expect(swappedAt - Date.parse(status.timeline.swappedAt!)).toBeLessThan(
      host.config.timing.localCacheTtlSeconds * 1000,
    );
  });

  test('a force-release of a pending lock is on the HTTP read path at once', async () => {
    const clock = new ManualClock(T);
    host = await startLocalHost({
      env: { PORT: '0', ROUTELOCK_PROFILE: 'dev' },
      clock: clock.now,
      store: new SqliteStore(':memory:'),
      log: () => undefined,
    });
    await send('PUT', '/routes/conv-f', { location: SOURCE });
    await send('POST', '/routes/conv-f/prelock', { migrationId: 'm-f', owner: 'o', target: TARGET });
    expect((await get('conv-f')).view.lock).toMatchObject({ migrationId: 'm-f' }); // cached, not started
    const opened = await send('POST', '/ops/routes/conv-f/force-release', {
      reason: 'stuck',
      actor: 'alice',
    });
    const { id } = (await opened.json()) as { id: string };
    await send('POST', `/ops/force-release/${id}/approve`, { actor: 'bob' });
    const done = await send('POST', `/ops/force-release/${id}/approve`, { actor: 'carol' });
    expect(await done.json()).toMatchObject({ released: true });
    expect(clock.now()).toBe(T);
    expect((await get('conv-f')).view).toMatchObject({ lock: null, location: SOURCE });
  });

  test('a probe run elsewhere in the process leaves no stale probe route in the serving cache', async () => {
    // Real time (the probe sleeps out its one-second convergence), with a 60 s serving cache.
    host = await startLocalHost({
      env: { PORT: '0', ROUTELOCK_PROFILE: 'dev', ROUTELOCK_CACHE_TIERS: 'local=60' },
      store: new SqliteStore(':memory:'),
      log: () => undefined,
    });
    const probe = async () => (await (await send('POST', '/ops/probe', {})).json()) as { success: boolean };
    // The HTTP API refuses probe- ids, so the serving router is read directly: what its other users
    // (the sweeper, the activities) would be given.
    const serving = host.services.router;
    expect(await probe()).toMatchObject({ success: true, resourceId: 'probe-local' });
    const first = (await serving.view('probe-local')).view.location; // in the serving cache for 60 s
    expect(await probe()).toMatchObject({ success: true });
    const second = await serving.view('probe-local');
    expect(second.view.location).not.toEqual(first);
    expect(second.ageSeconds).toBe(0);
  }, 20_000);
});
