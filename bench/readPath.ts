import { LRUCache } from 'lru-cache';
import { ManualClock } from '../testkit/clock';
import { type TimingConfig, parseConfig } from '../shared/config';
import {
  type LocationDocument,
  type StoredDocument,
  newLocationDocument,
} from '../shared/core/lock/document';
import { enforcement } from '../shared/core/lock/view';
import { resetCounters } from '../shared/core/store/ports/locations';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import { heapMiB, median, percentileOf, table } from './lib';
import { prng } from '../testkit/prng';
import { HeldReadStore } from '../testkit/heldReadStore';
import { seamedRouter } from '../testkit/router';

/**
 * Lock-check cost on the read path. routelock (the lock inside the routing document; a store read only
 * for a resource whose lock has started) against a dedicated lock record read on every operation that
 * could touch a migrating resource (the DynamoDB Lock Client pattern), on the same SQLite store, for a
 * fraction f of operations on locked resources. The physical limit: a bare lru-cache get loop.
 *
 * Coalescing (docs/design.md §5.8), side by side with the read path as it was (`coalesceReads: false`):
 *  - a burst: N concurrent resolves of one resource whose lock has started, on a store whose reads take
 *    5 ms, production timing on a clock that moves (50 ms join bound): write-region reads counted;
 *  - f = 100 % with requests in flight together (a service's normal state), not one at a time: the
 *    dedicated lock record still reads once per operation, routelock once per in-flight read of an id.
 *
 * One at a time (docs/design.md §5.8), also interleaved chunk by chunk so every contender sees the same
 * machine state, and a control: the dedicated lock record read ETag-conditionally, as routelock's
 * read-through is (`readIfChanged`). The read path as it was before that read is the base tree, run in its
 * own process: a second store class in this process would make the Router's code polymorphic for every
 * contender.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

export interface ReadPathOptions {
  resources: number;
  fractions: number[];
  ops: number;
  repeats: number;
  /** The burst: this many concurrent resolves of one started-locked resource (2,000). */
  burst?: number;
  /** Store latency for the burst, ms (5). */
  burstLatencyMs?: number;
  /** Requests in flight together for the concurrent f = 100 % rows (100). */
  inFlight?: number;
}

interface Contender {
  name: string;
  op: (id: string) => unknown | Promise<unknown>;
  lockReads: () => number;
}

/**
 * The baseline: routes cached, but the lock lives in its own record, read on every operation. With
 * `conditional` (a control, not the baseline: DynamoDB, the pattern's home, has no such read) the lock
 * record is read ETag-conditionally too, as routelock's read-through is: what is left between the two is
 * routelock's own overhead per read-through.
 */
class DedicatedLockRecordRouter {
  private readonly cache: LRUCache<string, StoredDocument>;
  private readonly lockRecords = new Map<string, StoredDocument>();
  constructor(
    private readonly store: SqliteStore,
    private readonly timing: TimingConfig,
    private readonly clock: () => number,
    max: number,
    private readonly conditional = false,
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
    const lock = this.conditional
      ? await this.readLockIfChanged(id)
      : await this.store.read(`lock:${id}`, { from: 'writeRegion' });
    return enforcement({ ...route.doc, lock: lock.doc.lock }, this.clock(), this.timing);
  }
  private async readLockIfChanged(id: string): Promise<StoredDocument> {
    const held = this.lockRecords.get(id);
    if (held === undefined) {
      const read = await this.store.read(`lock:${id}`, { from: 'writeRegion' });
      this.lockRecords.set(id, read);
      return read;
    }
    const answer = await this.store.readIfChanged(`lock:${id}`, held.etag, { from: 'writeRegion' });
    if (answer === 'notModified') return held;
    this.lockRecords.set(id, answer);
    return answer;
  }
}

export async function setupReadPath(resources: number, lockedCount: number) {
  const timing = parseConfig({}).timing;
  const clock = new ManualClock();
  const store = new SqliteStore(':memory:');
  const routerOver = (coalesceReads: boolean) =>
    seamedRouter({
      store,
      timing,
      clock: clock.now,
      cacheMax: resources + 10,
      coalesceReads,
    });
  const router = routerOver(true);
  // No coalescing: one store read per resolve that needs one (the read-through still conditional; the
  // read path before the conditional read is the base tree, measured in its own process).
  const uncoalesced = routerOver(false);
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
  const conditionalBaseline = new DedicatedLockRecordRouter(store, timing, clock.now, resources + 10, true);
  return {
    timing,
    clock,
    store,
    router,
    uncoalesced,
    baseline,
    conditionalBaseline,
    ids,
    locked,
  };
}

/**
 * The burst: `count` concurrent resolves of one resource whose lock has started, reads taking
 * `latencyMs`, production timing on a clock that moves with real time. Cached (the copy is one the
 * router read before: a read-through) and a miss (nearest, then the write region).
 */
export async function burst(count: number, latencyMs: number, coalesceReads: boolean) {
  const timing = parseConfig({}).timing;
  const sqlite = new SqliteStore(':memory:');
  let offsetMs = 0;
  const clock = () => Date.now() + offsetMs;
  const store = new HeldReadStore(sqlite, () => new Promise((r) => setTimeout(r, latencyMs)));
  const router = seamedRouter({ store, timing, clock, coalesceReads });
  const results: Record<'cached' | 'miss', { nearest: number; writeRegion: number; ms: number }> = {
    cached: { nearest: 0, writeRegion: 0, ms: 0 },
    miss: { nearest: 0, writeRegion: 0, ms: 0 },
  };
  await router.createRoute('hot', SOURCE);
  await router.prelock('hot', { migrationId: 'm-hot', owner: 'bench', target: TARGET });
  offsetMs = (timing.convergenceDelaySeconds + 1) * 1000; // the lock has started
  for (const kind of ['miss', 'cached'] as const) {
    if (kind === 'miss') router.forget('hot');
    else await router.resolve('hot');
    resetCounters(sqlite.counters);
    const started = process.hrtime.bigint();
    await Promise.all(Array.from({ length: count }, () => router.resolve('hot')));
    results[kind] = {
      nearest: sqlite.counters.nearestReads,
      writeRegion: sqlite.counters.writeRegionReads,
      ms: Number(process.hrtime.bigint() - started) / 1e6,
    };
  }
  await sqlite.close();
  return results;
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

/** Throughput with `inFlight` operations in flight together (windows of that many), medians of `repeats`. */
async function measureInFlight(contender: Contender, ops: string[], inFlight: number) {
  const run = async () => {
    for (let i = 0; i < ops.length; i += inFlight) {
      const window: unknown[] = [];
      for (let j = i; j < Math.min(ops.length, i + inFlight); j += 1)
        window.push(contender.op(ops[j] as string));
      await Promise.all(window);
    }
  };
  await run(); // warm-up
  const before = contender.lockReads();
  const started = process.hrtime.bigint();
  await run();
  return {
    opsPerSecond: ops.length / (Number(process.hrtime.bigint() - started) / 1e9),
    lockReadsPerOp: (contender.lockReads() - before) / ops.length,
  };
}

/**
 * One at a time, interleaved: every contender runs the same chunk of `chunk` operations in turn, chunk
 * after chunk, so all of them see the same machine state (other processes come and go on a shared
 * machine within a block of 50,000). Each contender's time per chunk, against the first contender's.
 * A chunk may pay for a scavenge the previous contender's garbage made due (the baseline makes the most);
 * a forced gc() between chunks was tried and is worse: a full GC drops optimized code's weak maps, so
 * each chunk re-optimizes, which costs the longest code path (routelock's) most.
 */
const INTERLEAVE_CHUNK = 10_000;

async function interleavedOneAtATime(contenders: Contender[], ops: string[], chunk: number, rounds: number) {
  const times = contenders.map(() => [] as number[]);
  for (const c of contenders) for (const id of ops.slice(0, Math.min(ops.length, 20_000))) await c.op(id); // warm-up
  for (let round = 0; round < rounds; round += 1)
    for (let from = 0; from < ops.length; from += chunk) {
      const slice = ops.slice(from, from + chunk);
      for (const [index, c] of contenders.entries()) {
        const started = process.hrtime.bigint();
        for (const id of slice) {
          const result = c.op(id);
          if (result instanceof Promise) await result;
        }
        times[index]?.push(Number(process.hrtime.bigint() - started));
      }
    }
  const reference = times[0] as number[];
  return contenders.map((c, index) => {
    const mine = times[index] as number[];
    const ratios = mine.map((t, i) => (reference[i] as number) / t).sort((a, b) => a - b);
    const total = mine.reduce((sum, t) => sum + t, 0);
    return {
      name: c.name,
      opsPerSecond: (ops.length * rounds) / (total / 1e9),
      /** This contender's speed ÷ the reference's, per chunk: median, p10, p90. */
      ratio: {
        p50: percentileOf(ratios, 50),
        p10: percentileOf(ratios, 10),
        p90: percentileOf(ratios, 90),
      },
    };
  });
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
  // f = 100 %, one at a time and `inFlight` together: routelock coalescing, as it was, the baseline.
  const uncoalesced: Contender = {
    name: 'routelock, no coalescing (conditional read-through)',
    op: (id) => h.uncoalesced.resolve(id).then((stored) => enforcement(stored.doc, h.clock.now(), h.timing)),
    lockReads: () => h.store.counters.writeRegionReads,
  };
  const conditionalBaseline: Contender = {
    name: 'dedicated lock record, ETag-conditional (control)',
    op: (id) => h.conditionalBaseline.decide(id),
    lockReads: () => h.store.counters.writeRegionReads,
  };
  const inFlight = options.inFlight ?? 100;
  const lockedOps = operations(h.ids, h.locked, 1, options.ops, 42);
  const concurrentRows: { name: string; oneAtATime: number; together: number; readsPerOp: number }[] = [];
  {
    const samples = new Map<string, { one: number[]; together: number[]; reads: number[] }>();
    for (let r = 0; r < options.repeats; r += 1) {
      for (const c of [routelock, uncoalesced, baseline, conditionalBaseline]) {
        const sample = samples.get(c.name) ?? { one: [], together: [], reads: [] };
        sample.one.push((await measure(c, lockedOps, 1)).opsPerSecond);
        const t = await measureInFlight(c, lockedOps, inFlight);
        sample.together.push(t.opsPerSecond);
        sample.reads.push(t.lockReadsPerOp);
        samples.set(c.name, sample);
      }
    }
    for (const [name, sample] of samples)
      concurrentRows.push({
        name,
        oneAtATime: median(sample.one),
        together: median(sample.together),
        readsPerOp: median(sample.reads),
      });
  }
  const baselineRow = concurrentRows.find((r) => r.name === baseline.name) as (typeof concurrentRows)[number];
  const interleaved = await interleavedOneAtATime(
    [baseline, routelock, uncoalesced, conditionalBaseline],
    lockedOps,
    INTERLEAVE_CHUNK,
    options.repeats,
  );
  const burstCount = options.burst ?? 2000;
  const burstLatencyMs = options.burstLatencyMs ?? 5;
  const burstAfter = await burst(burstCount, burstLatencyMs, true);
  const burstBefore = await burst(burstCount, burstLatencyMs, false);

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
    '',
    table(
      [
        `${burstCount} concurrent resolves, lock started, ${burstLatencyMs} ms reads`,
        'write-region reads (cached)',
        'reads (miss: nearest + write region)',
        'ms (cached / miss)',
      ],
      [
        ['no coalescing', burstBefore],
        ['coalescing (50 ms join bound)', burstAfter],
      ].map(([name, b]) => {
        const r = b as Awaited<ReturnType<typeof burst>>;
        return [
          name as string,
          r.cached.writeRegion,
          `${r.miss.nearest} + ${r.miss.writeRegion}`,
          `${Math.round(r.cached.ms)} / ${Math.round(r.miss.ms)}`,
        ];
      }),
    ),
    '',
    table(
      [
        'f = 100 % (all ops on locked resources)',
        'ops/s one at a time',
        'vs baseline',
        `ops/s ${inFlight} in flight`,
        'vs baseline',
        `lock reads/op (${inFlight} in flight)`,
        `one at a time, interleaved by ${INTERLEAVE_CHUNK.toLocaleString('en-US')}: vs baseline (p10–p90 of chunks)`,
      ],
      concurrentRows.map((r) => {
        const mine = interleaved.find((x) => x.name === r.name);
        const reference = interleaved[0];
        const chunks = mine?.ratio;
        return [
          r.name,
          Math.round(r.oneAtATime),
          r.oneAtATime / baselineRow.oneAtATime,
          Math.round(r.together),
          r.together / baselineRow.together,
          r.readsPerOp,
          mine && reference && chunks
            ? `${(mine.opsPerSecond / reference.opsPerSecond).toFixed(2)} (${chunks.p10.toFixed(2)}–${chunks.p90.toFixed(2)})`
            : '—',
        ];
      }),
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
      burst: { count: burstCount, latencyMs: burstLatencyMs, before: burstBefore, after: burstAfter },
      lockedConcurrent: { inFlight, rows: concurrentRows, interleaved },
      heapMiB: heapMiB(),
    },
  };
}
