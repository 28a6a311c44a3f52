import { LRUCache } from 'lru-cache';
import { ManualClock } from '../testkit/clock';
import { type TimingConfig, parseConfig } from '../shared/config';
import { type LocationDocument, type StoredDocument, newLocationDocument } from '../shared/lock/document';
import { enforcement } from '../shared/lock/view';
import { Router } from '../shared/router';
import { resetCounters } from '../shared/store/ports/locations';
import { SqliteStore } from '../shared/store/sqlite/locations';
import { heapMiB, median, percentileOf, table } from './lib';
import { prng } from '../testkit/prng';

/**
 * Lock-check cost on the read path. routelock (the lock inside the routing document; a store read only
 * for a resource whose lock has started) against a dedicated lock record read on every operation that
 * could touch a migrating resource (the DynamoDB Lock Client pattern), on the same SQLite store, for a
 * fraction f of operations on locked resources. The physical limit: a bare lru-cache get loop.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

export interface ReadPathOptions {
  resources: number;
  fractions: number[];
  ops: number;
  repeats: number;
}

interface Contender {
  name: string;
  op: (id: string) => unknown | Promise<unknown>;
  lockReads: () => number;
}

/** The baseline: routes cached, but the lock lives in its own record, read on every operation. */
class DedicatedLockRecordRouter {
  private readonly cache: LRUCache<string, StoredDocument>;
  constructor(
    private readonly store: SqliteStore,
    private readonly timing: TimingConfig,
    private readonly clock: () => number,
    max: number,
  ) {
    this.cache = new LRUCache({
      max,
      ttl: timing.localCacheTtlSeconds * 1000,
      ttlResolution: 0,
      perf: { now: clock },
    });
  }
  async decide(id: string) {
    let route = this.cache.get(id);
    if (!route) {
      route = await this.store.read(id, { from: 'nearest' });
      this.cache.set(id, route);
    }
    // The lock record: a consistent read on every operation, locked or not.
    const lock = await this.store.read(`lock:${id}`, { from: 'writeRegion' });
    return enforcement({ ...route.doc, lock: lock.doc.lock }, this.clock(), this.timing);
  }
}

export async function setupReadPath(resources: number, lockedCount: number) {
  const timing = parseConfig({}).timing;
  const clock = new ManualClock();
  const store = new SqliteStore(':memory:');
  // The production cache setting (1 ms TTL resolution); the bench's clock does not move during a run.
  const router = new Router({
    store,
    timing,
    clock: clock.now,
    cacheMax: resources + 10,
    ttlResolutionMs: 1,
  });
  const ids = Array.from({ length: resources }, (_, i) => `res-${i}`);
  const insert = store.database.transaction((docs: LocationDocument[]) => {
    const statement = store.database.prepare(
      'INSERT INTO locations (id, etag, doc, updated_at) VALUES (?, ?, ?, ?)',
    );
    for (const doc of docs) statement.run(doc.id, `e-${doc.id}`, JSON.stringify(doc), 0);
  });
  insert(ids.map((id) => newLocationDocument(id, SOURCE)));
  // the baseline's lock records: one per resource (an empty record reads as "unlocked")
  insert(ids.map((id) => ({ ...newLocationDocument(`lock:${id}`, SOURCE) })));
  const locked = ids.slice(0, lockedCount);
  for (const id of locked) {
    const grant = await router.prelock(id, { migrationId: `m-${id}`, owner: 'bench', target: TARGET });
    const lockDoc = (await store.read(id, { from: 'writeRegion' })).doc.lock;
    const record = await store.read(`lock:${id}`, { from: 'writeRegion' });
    await store.replace({ ...record.doc, lock: lockDoc }, record.etag);
    void grant;
  }
  // Every lock has started (and is live): the case that costs routelock a read.
  clock.advanceSeconds(timing.convergenceDelaySeconds + 1);
  const baseline = new DedicatedLockRecordRouter(store, timing, clock.now, resources + 10);
  return { timing, clock, store, router, baseline, ids, locked };
}

function operations(
  ids: string[],
  locked: string[],
  fraction: number,
  count: number,
  seed: number,
): string[] {
  const random = prng(seed);
  const unlocked = ids.slice(locked.length);
  return Array.from({ length: count }, () =>
    random() < fraction
      ? (locked[Math.floor(random() * locked.length)] as string)
      : (unlocked[Math.floor(random() * unlocked.length)] as string),
  );
}

async function measure(contender: Contender, ops: string[], repeats: number) {
  // warm-up: fills caches and lets the JIT settle
  for (const id of ops.slice(0, Math.min(ops.length, 20_000))) await contender.op(id);
  // Throughput: a plain loop (no per-operation timing), repeated; the median is reported.
  const rates: number[] = [];
  let reads = 0;
  for (let r = 0; r < repeats; r += 1) {
    const before = contender.lockReads();
    const started = process.hrtime.bigint();
    for (let i = 0; i < ops.length; i += 1) {
      const result = contender.op(ops[i] as string);
      if (result instanceof Promise) await result;
    }
    rates.push(ops.length / (Number(process.hrtime.bigint() - started) / 1e9));
    reads = (contender.lockReads() - before) / ops.length;
  }
  // Latency: one more pass timing each operation (the timer itself costs ~0.05 µs).
  const samples = new Float64Array(ops.length);
  for (let i = 0; i < ops.length; i += 1) {
    const t0 = process.hrtime.bigint();
    const result = contender.op(ops[i] as string);
    if (result instanceof Promise) await result;
    samples[i] = Number(process.hrtime.bigint() - t0);
  }
  const latencies = Array.from(samples).sort((a, b) => a - b);
  return {
    opsPerSecond: median(rates),
    lockReadsPerOp: reads,
    p50us: percentileOf(latencies, 50) / 1000,
    p99us: percentileOf(latencies, 99) / 1000,
  };
}

/** Alternate two contenders so both see the same machine state; medians of each. */
async function sideBySide(a: Contender, b: Contender, ops: string[], repeats: number) {
  const resultsA: Awaited<ReturnType<typeof measure>>[] = [];
  const resultsB: Awaited<ReturnType<typeof measure>>[] = [];
  for (let r = 0; r < repeats; r += 1) {
    resultsA.push(await measure(a, ops, 1));
    resultsB.push(await measure(b, ops, 1));
  }
  const pick = (list: Awaited<ReturnType<typeof measure>>[]) => ({
    opsPerSecond: median(list.map((x) => x.opsPerSecond)),
    lockReadsPerOp: median(list.map((x) => x.lockReadsPerOp)),
    p50us: median(list.map((x) => x.p50us)),
    p99us: median(list.map((x) => x.p99us)),
  });
  return [pick(resultsA), pick(resultsB)] as const;
}

export async function runReadPath(options: ReadPathOptions) {
  const lockedCount = Math.max(10, Math.ceil(options.resources / 100));
  const h = await setupReadPath(options.resources, lockedCount);
  const rows: Record<string, unknown>[] = [];
  const routelock: Contender = {
    name: 'routelock',
    // the synchronous fast path for an unlocked cached route; a started lock reads the write region
    op: (id) => {
      const cached = h.router.peek(id);
      if (cached) return enforcement(cached.doc, h.clock.now(), h.timing);
      return h.router.resolve(id).then((stored) => enforcement(stored.doc, h.clock.now(), h.timing));
    },
    lockReads: () => h.store.counters.writeRegionReads,
  };
  const routelockAsync: Contender = {
    name: 'routelock (await resolve)',
    op: async (id) => enforcement((await h.router.resolve(id)).doc, h.clock.now(), h.timing),
    lockReads: () => h.store.counters.writeRegionReads,
  };
  const baseline: Contender = {
    name: 'dedicated lock record',
    op: (id) => h.baseline.decide(id),
    lockReads: () => h.store.counters.writeRegionReads,
  };
  for (const fraction of options.fractions) {
    const ops = operations(h.ids, h.locked, fraction, options.ops, 42);
    resetCounters(h.store.counters);
    const [a, b] = await sideBySide(routelock, baseline, ops, options.repeats);
    rows.push({
      f: fraction,
      routelock: a,
      baseline: b,
      lockReadRatio: a.lockReadsPerOp > 0 ? b.lockReadsPerOp / a.lockReadsPerOp : null,
      speedRatio: a.opsPerSecond / b.opsPerSecond,
    });
  }
  // The physical limit: a bare lru-cache get loop on the same keys (f = 0, everything cached).
  const keys = operations(h.ids, h.locked, 0, options.ops, 42);
  const lru = new LRUCache<string, StoredDocument>({ max: options.resources + 10 });
  for (const id of h.ids) lru.set(id, { doc: newLocationDocument(id, SOURCE), etag: 'e' });
  const bareContender: Contender = { name: 'bare lru-cache', op: (id) => lru.get(id), lockReads: () => 0 };
  const [bare, unlockedCached] = await sideBySide(bareContender, routelock, keys, options.repeats);
  const [, unlockedAwait] = await sideBySide(bareContender, routelockAsync, keys, options.repeats);
  const speedVsLru = unlockedCached.opsPerSecond / bare.opsPerSecond;

  const text = [
    table(
      [
        'f (locked ops)',
        'routelock lock reads/op',
        'baseline lock reads/op',
        'ratio',
        'routelock ops/s',
        'baseline ops/s',
        'routelock p50/p99 µs',
        'baseline p50/p99 µs',
      ],
      rows.map((r) => {
        const a = r.routelock as Awaited<ReturnType<typeof measure>>;
        const b = r.baseline as Awaited<ReturnType<typeof measure>>;
        return [
          `${(Number(r.f) * 100).toString()} %`,
          a.lockReadsPerOp,
          b.lockReadsPerOp,
          r.lockReadRatio === null ? '∞' : Number(r.lockReadRatio),
          Math.round(a.opsPerSecond),
          Math.round(b.opsPerSecond),
          `${a.p50us.toFixed(2)} / ${a.p99us.toFixed(2)}`,
          `${b.p50us.toFixed(2)} / ${b.p99us.toFixed(2)}`,
        ];
      }),
    ),
    '',
    table(
      ['unlocked, cached (f = 0)', 'ops/s', 'vs bare lru-cache'],
      [
        ['bare lru-cache get', Math.round(bare.opsPerSecond), 1],
        ['routelock router.peek + enforcement', Math.round(unlockedCached.opsPerSecond), speedVsLru],
        [
          'routelock await router.resolve + enforcement',
          Math.round(unlockedAwait.opsPerSecond),
          unlockedAwait.opsPerSecond / bare.opsPerSecond,
        ],
      ],
    ),
  ].join('\n');
  return {
    table: text,
    data: {
      resources: options.resources,
      lockedResources: lockedCount,
      ops: options.ops,
      repeats: options.repeats,
      rows,
      bare,
      unlockedCached,
      unlockedAwait,
      speedVsLru,
      heapMiB: heapMiB(),
    },
  };
}
