import { LRUCache } from 'lru-cache';
import { ManualClock } from '../testkit/clock';
import type { TimingConfig } from '../shared/config';
import { RouteLockError } from '../shared/core/errors';
import type { StoredDocument } from '../shared/core/lock/document';
import { hasStarted, isLive } from '../shared/core/lock/state';
import { enforcement } from '../shared/core/lock/view';
import { Router } from '../shared/core/router';
import { type LocationStore, resetCounters } from '../shared/core/store/ports/locations';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import { type CosmosTestServer, startCosmosServer } from '../testkit/cosmosServer';
import { LaggingStore } from '../testkit/laggingStore';
import { devTiming, productionTiming, seconds } from './support/timing';
import { codeOf } from './support/errorCode';

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };

function setup(timing: TimingConfig = productionTiming) {
  const clock = new ManualClock();
  const store = new SqliteStore(':memory:');
  let n = 0;
  const router = new Router({ store, timing, clock: clock.now, newToken: () => `token-${++n}` });
  const reads = () => ({
    nearest: store.counters.nearestReads,
    writeRegion: store.counters.writeRegionReads,
  });
  const resetReads = () => resetCounters(store.counters);
  return { clock, store, router, reads, resetReads };
}

describe('router read path: store reads per case (fake clock, production timing)', () => {
  test('unlocked and cached: zero reads', async () => {
    const { router, reads, resetReads } = setup();
    await router.createRoute('r', SOURCE);
    router.forget('r');
    resetReads();
    await router.resolve('r'); // miss
    expect(reads()).toEqual({ nearest: 1, writeRegion: 0 });
    resetReads();
    for (let i = 0; i < 1000; i += 1) await router.resolve('r');
    expect(reads()).toEqual({ nearest: 0, writeRegion: 0 });
  });

  test('miss on an unlocked resource: one nearest read, no lock-specific read', async () => {
    const { router, reads, resetReads } = setup();
    await router.createRoute('r', SOURCE);
    router.forget('r');
    resetReads();
    const stored = await router.resolve('r');
    expect(stored.doc.lock).toBeNull();
    expect(reads()).toEqual({ nearest: 1, writeRegion: 0 });
  });

  test('cached entry expires with the local tier TTL and is fetched again from the nearest replica', async () => {
    const { router, clock, reads, resetReads } = setup();
    await router.createRoute('r', SOURCE);
    resetReads();
    await router.resolve('r');
    expect(reads()).toEqual({ nearest: 0, writeRegion: 0 });
    clock.advanceSeconds(productionTiming.localCacheTtlSeconds + 1);
    await router.resolve('r');
    expect(reads()).toEqual({ nearest: 1, writeRegion: 0 });
  });

  test('cached with a pending lock: zero reads until startsAt − skew, then one write-region read every time', async () => {
    const { router, clock, reads, resetReads } = setup();
    await router.createRoute('r', SOURCE);
    const grant = await router.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
    resetReads();
    await router.resolve('r');
    expect(reads()).toEqual({ nearest: 0, writeRegion: 0 });
    // the cache holds it for one local TTL; the pending lock keeps being served until it starts
    clock.set(Date.parse(grant.startsAt) - seconds(productionTiming.clockSkewSeconds) - 1);
    router.forget('r');
    await router.resolve('r');
    resetReads();
    await router.resolve('r');
    expect(reads()).toEqual({ nearest: 0, writeRegion: 0 });
    clock.advance(1); // startsAt − skew
    for (let i = 0; i < 10; i += 1) await router.resolve('r');
    expect(reads()).toEqual({ nearest: 0, writeRegion: 10 });
  });

  test('miss whose nearest copy carries a started lock: nearest, then the write region', async () => {
    const { router, clock, reads, resetReads } = setup();
    await router.createRoute('r', SOURCE);
    const grant = await router.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
    clock.set(Date.parse(grant.startsAt) + seconds(productionTiming.clockSkewSeconds));
    router.forget('r');
    resetReads();
    await router.resolve('r');
    expect(reads()).toEqual({ nearest: 1, writeRegion: 1 });
  });

  test('a lock the write region shows as dead is cached again (no read per request for an orphan)', async () => {
    const { router, clock, reads, resetReads } = setup();
    await router.createRoute('r', SOURCE);
    const grant = await router.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
    clock.set(Date.parse(grant.expiresAt) + seconds(60));
    router.forget('r');
    resetReads();
    await router.resolve('r'); // nearest shows a lock: it may have been renewed, so ask the write region
    expect(reads()).toEqual({ nearest: 1, writeRegion: 1 });
    resetReads();
    for (let i = 0; i < 10; i += 1) await router.resolve('r');
    expect(reads()).toEqual({ nearest: 0, writeRegion: 0 });
  });

  test('a cached copy whose lock looks expired is not trusted: the lock may have been renewed', async () => {
    const { router, store, clock } = setup();
    const orchestrator = new Router({
      store,
      timing: productionTiming,
      clock: clock.now,
      newToken: () => 'tok',
    });
    await orchestrator.createRoute('r', SOURCE);
    const grant = await orchestrator.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
    clock.set(Date.parse(grant.startsAt) + seconds(productionTiming.clockSkewSeconds) + 1);
    await orchestrator.escalate('r', { token: 'tok', phase: 'hardDelete' });
    const held = await orchestrator.escalate('r', { token: 'tok', phase: 'write' });
    await router.resolve('r'); // the reader caches the write lock, live until writeExpiresAt
    clock.set(Date.parse(held.phaseExpiresAt) - seconds(10));
    await orchestrator.renew('r', { token: 'tok' }); // renewed behind the reader's back
    clock.set(Date.parse(held.phaseExpiresAt) + seconds(1)); // the reader's copy says the write lock lapsed
    const seen = await router.resolve('r');
    expect(enforcement(seen.doc, clock.now(), productionTiming).write).toBe('deny');
  });
});

describe('router mutations: reads and writes', () => {
  test('each mutation reads the write region once and writes once; If-Match of the cached copy skips the read', async () => {
    const { router, store, clock, reads, resetReads } = setup();
    await router.createRoute('r', SOURCE);
    resetReads();
    const grant = await router.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
    expect(reads()).toEqual({ nearest: 0, writeRegion: 1 });
    expect(store.counters.replaces).toBe(1);
    clock.set(Date.parse(grant.startsAt) + seconds(productionTiming.clockSkewSeconds));
    resetReads();
    const hd = await router.escalate(
      'r',
      { token: grant.token!, phase: 'hardDelete' },
      { ifMatch: grant.etag },
    );
    const w = await router.escalate('r', { token: grant.token!, phase: 'write' }, { ifMatch: hd.etag });
    clock.advanceSeconds(60);
    const renewed = await router.renew('r', { token: grant.token! }, { ifMatch: w.etag });
    const view = await router.swap('r', { token: grant.token! }, { ifMatch: renewed.etag });
    expect(view.location).toEqual(TARGET);
    expect(reads()).toEqual({ nearest: 0, writeRegion: 0 });
    expect(store.counters.replaces).toBe(4);
  });

  test('a no-op answered from the If-Match copy is confirmed with one read (no write could catch a stale copy)', async () => {
    const { router, store, clock, reads, resetReads } = setup();
    await router.createRoute('r', SOURCE);
    const grant = await router.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
    clock.set(Date.parse(grant.startsAt) + seconds(productionTiming.clockSkewSeconds));
    const hd = await router.escalate('r', { token: grant.token!, phase: 'hardDelete' });
    resetReads();
    resetCounters(store.counters);
    const again = await router.escalate(
      'r',
      { token: grant.token!, phase: 'hardDelete' },
      { ifMatch: hd.etag },
    );
    expect(again).toEqual(hd);
    expect(reads()).toEqual({ nearest: 0, writeRegion: 1 });
    expect(store.counters.replaces).toBe(0);
  });

  test('a stale If-Match is 412 and writes nothing', async () => {
    const { router, store } = setup();
    const { stored } = await router.createRoute('r', SOURCE);
    await router.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
    resetCounters(store.counters);
    expect(
      await codeOf(
        router.prelock('r', { migrationId: 'm2', owner: 'o2', target: TARGET }, { ifMatch: stored.etag }),
      ),
    ).toBe('PreconditionFailed');
    expect(store.counters.replaces).toBe(0);
  });

  test('a losing racer re-reads once after its 412 and gets 423', async () => {
    const { store, clock } = setup();
    const a = new Router({ store, timing: productionTiming, clock: clock.now, newToken: () => 'ta' });
    const b = new Router({ store, timing: productionTiming, clock: clock.now, newToken: () => 'tb' });
    await a.createRoute('r', SOURCE);
    await b.resolve('r');
    const [ra, rb] = await Promise.all([
      codeOf(a.prelock('r', { migrationId: 'ma', owner: 'a', target: TARGET })),
      codeOf(b.prelock('r', { migrationId: 'mb', owner: 'b', target: TARGET })),
    ]);
    expect([ra, rb].sort()).toEqual(['Locked', 'ok']);
    expect(store.counters.writeRegionReads).toBe(3); // two reads to decide, one re-read by the loser
  });

  test('PUT semantics: created, identical (200), different (409)', async () => {
    const { router } = setup();
    expect((await router.createRoute('r', SOURCE)).created).toBe(true);
    expect((await router.createRoute('r', { ...SOURCE })).created).toBe(false);
    expect(await codeOf(router.createRoute('r', TARGET))).toBe('AlreadyExists');
  });

  test('DELETE is refused while a live lock holds the route, and works after its release', async () => {
    const { router } = setup();
    await router.createRoute('r', SOURCE);
    const grant = await router.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
    expect(await codeOf(router.deleteRoute('r'))).toBe('Locked');
    await router.release('r', { token: grant.token! });
    await router.deleteRoute('r');
    expect(await codeOf(router.resolve('r'))).toBe('NotFound');
  });

  test('a token is checked before any write: a wrong token never reaches the store', async () => {
    const { router, store, clock } = setup();
    await router.createRoute('r', SOURCE);
    const grant = await router.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
    clock.set(Date.parse(grant.startsAt) + seconds(productionTiming.clockSkewSeconds));
    resetCounters(store.counters);
    for (const call of [
      router.escalate('r', { token: 'wrong', phase: 'hardDelete' }),
      router.renew('r', { token: 'wrong' }),
      router.swap('r', { token: 'wrong' }),
      router.release('r', { token: 'wrong' }),
    ]) {
      expect(await codeOf(call)).toBe('Locked');
    }
    expect(store.counters.replaces).toBe(0);
  });
});

describe('lagging replica: the router never returns stale lock state once a lock has started', () => {
  type Resolve = (id: string) => Promise<StoredDocument>;

  /**
   * Walk a full migration on a 250 ms virtual clock while a reader resolves on every tick through a
   * replica that lags by up to the replication bound. Counts the ticks on which the reader's copy
   * differs from the write region's while the write region holds a started, live lock.
   */
  async function staleObservations(
    makeReader: (store: LocationStore, clock: ManualClock) => Resolve,
    lag: 'max' | 'random',
  ) {
    const timing = devTiming;
    const clock = new ManualClock();
    const inner = new SqliteStore(':memory:');
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const bound = seconds(timing.replicationBoundSeconds);
    const store = new LaggingStore(inner, clock.now, () =>
      lag === 'max' ? bound : Math.floor(random() * bound),
    );
    const orchestrator = new Router({ store, timing, clock: clock.now, newToken: () => 'tok' });
    const resolve = makeReader(store, clock);
    await orchestrator.createRoute('r', SOURCE);
    clock.advance(bound); // the new route reaches the replica

    let stale = 0;
    let checkedStarted = 0;
    const tick = async () => {
      clock.advance(250);
      const seen = await resolve('r');
      const truth = await inner.read('r', { from: 'writeRegion' });
      const lock = truth.doc.lock;
      if (isLive(lock, clock.now()) && hasStarted(lock, clock.now(), timing.clockSkewSeconds)) {
        checkedStarted += 1;
        if (seen.etag !== truth.etag) stale += 1;
      }
    };
    for (let i = 0; i < 20; i += 1) await tick(); // warm caches with the unlocked route
    const grant = await orchestrator.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
    while (clock.now() < Date.parse(grant.startsAt) + seconds(timing.safetyBufferSeconds)) await tick();
    await orchestrator.escalate('r', { token: 'tok', phase: 'hardDelete' });
    for (let i = 0; i < 12; i += 1) await tick();
    await orchestrator.renew('r', { token: 'tok' });
    for (let i = 0; i < 6; i += 1) await tick();
    await orchestrator.escalate('r', { token: 'tok', phase: 'write' });
    for (let i = 0; i < 6; i += 1) await tick();
    await orchestrator.release('r', { token: 'tok', phase: 'write' });
    for (let i = 0; i < 6; i += 1) await tick();
    await orchestrator.escalate('r', { token: 'tok', phase: 'write' });
    for (let i = 0; i < 6; i += 1) await tick();
    await orchestrator.swap('r', { token: 'tok' });
    for (let i = 0; i < 20; i += 1) await tick();
    expect(checkedStarted).toBeGreaterThan(30);
    return stale;
  }

  test.each(['max', 'random'] as const)(
    'router, replica lag %s (≤ replication bound): zero stale observations',
    async (lag) => {
      const stale = await staleObservations((store, clock) => {
        const reader = new Router({ store, timing: devTiming, clock: clock.now });
        return (id) => reader.resolve(id);
      }, lag);
      expect(stale).toBe(0);
    },
  );

  test('negative control: a cache that never reads through to the write region is caught serving stale locks', async () => {
    const stale = await staleObservations((store, clock) => {
      const cache = new LRUCache<string, StoredDocument>({
        max: 100,
        ttl: devTiming.localCacheTtlSeconds * 1000,
        ttlResolution: 0,
        perf: { now: clock.now },
      });
      return async (id) => {
        const hit = cache.get(id);
        if (hit) return hit;
        const read = await store.read(id, { from: 'nearest' });
        cache.set(id, read);
        return read;
      };
    }, 'max');
    expect(stale).toBeGreaterThan(0);
  });
});

describe.each([
  [
    'sqlite',
    async () => ({ store: new SqliteStore(':memory:') as LocationStore, done: async () => undefined }),
  ],
  [
    'cosmos',
    async () => {
      const server: CosmosTestServer = await startCosmosServer();
      return { store: (await server.connect()) as LocationStore, done: () => server.close() };
    },
  ],
])('50 concurrent pre-locks from distinct owners through the router (%s)', (_name, open) => {
  test('exactly one token, 49 Locked', async () => {
    const { store, done } = await open();
    try {
      const clock = new ManualClock();
      const setupRouter = new Router({ store, timing: productionTiming, clock: clock.now });
      await setupRouter.createRoute('contended', SOURCE);
      const outcomes = await Promise.all(
        Array.from({ length: 50 }, async (_, i) => {
          // each owner is its own service instance with its own router and cache
          const router = new Router({ store, timing: productionTiming, clock: clock.now });
          try {
            const grant = await router.prelock('contended', {
              migrationId: `m-${i}`,
              owner: `owner-${i}`,
              target: TARGET,
            });
            return { ok: true as const, grant, owner: `owner-${i}` };
          } catch (error) {
            return {
              ok: false as const,
              code: (error as RouteLockError).code,
              retryAfter: (error as RouteLockError).retryAfterSeconds,
            };
          }
        }),
      );
      const winners = outcomes.filter((o) => o.ok);
      const losers = outcomes.filter((o) => !o.ok);
      expect(winners).toHaveLength(1);
      expect(losers).toHaveLength(49);
      for (const loser of losers) {
        expect(loser).toMatchObject({ code: 'Locked', retryAfter: expect.any(Number) });
      }
      const stored = await store.read('contended', { from: 'writeRegion' });
      expect(stored.doc.lock?.owner).toBe(winners[0]!.ok && winners[0]!.owner);
      expect(
        await codeOf(
          setupRouter.renew('contended', { token: winners[0]!.ok ? winners[0]!.grant.token! : '' }),
        ),
      ).toBe('ok');
    } finally {
      await store.close();
      await done();
    }
  });
});
