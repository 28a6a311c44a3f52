import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocalHost } from '../local/host';
import { type Config, parseConfig } from '../shared/config';
import { RoutingClient } from '../shared/core/client';
import type { Clock } from '../shared/core/clock';
import type { LockGrant } from '../shared/core/lock/view';
import type { StoredDocument } from '../shared/core/lock/document';
import { activationOpensAt, announcedWaitUntil, earliestEscalationAt } from '../shared/core/lock/state';
import { routeView } from '../shared/core/lock/view';
import { Router } from '../shared/core/router';
import type { LocationStore, ReadFrom, ReadOptions } from '../shared/core/store/ports/locations';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import type { TimingConfig } from '../shared/core/settings';
import { ManualClock } from '../testkit/clock';
import { ForwardingStore } from '../testkit/forwardingStore';
import { LaggingStore } from '../testkit/laggingStore';
import { VirtualScheduler } from '../testkit/virtualScheduler';
import { percentileOf, table } from './lib';

/**
 * The read path of one migrating resource under the two lock rules, side by side in one run (design §3.7,
 * §5.1, §5.4): a legacy lock (every resolve from its start reads the write region) against an announced one
 * (served from the cache outside the write window, refreshed from the nearest replica once per local TTL).
 * Production timing, virtual time (ManualClock): nothing here depends on the machine's speed.
 *
 * - Library mode: one service process's Router resolving one id 100 times a second. Store reads take
 *   virtual time (write region 50 ms, replica 5 ms: a VirtualScheduler timer per read, the answer taken as
 *   the read starts, as testkit/heldReadStore does), so concurrent resolves join reads in flight exactly as
 *   the join bound allows. The replica lags the write region by the replication bound R. An orchestrator
 *   (its own Router, unheld reads, not counted) writes the lock through the real rules. Counted: the
 *   reader's store reads by region, and each resolve's latency (virtual: from its arrival to its answer).
 * - The write window: each rule's write lock held for the same time, then the swap; every resolve in the
 *   window must be answered by a write-region read begun at most the join bound before it.
 * - HTTP: RoutingClient against the embedded host in this process (production profile, the same virtual
 *   clock for both, reads instant), one resolve at a time; counted: HTTP fetches, and the server's store
 *   reads by region. Refresh ahead is on (the default); its fetches are counted too.
 * - Costs: what the announced rule adds to a migration, computed from the timing with the rules' own
 *   functions (state.ts), production and dev.
 */

export interface AnnouncedReadsOptions {
  /** How long the resource is held in its hard-delete phase under traffic (virtual seconds). */
  holdSeconds: number;
  /** The same for the HTTP client (each resolve is a real request when it is not a cache hit). */
  httpHoldSeconds: number;
  resolvesPerSecond: number;
  writeRegionReadMs: number;
  replicaReadMs: number;
  /** How long the write lock is held before the swap (the delta copy), the same under both rules. */
  writeHoldSeconds: number;
  /** Traffic after the swap (s); absent: R + 2 local TTLs, while the replica still shows the write lock. */
  afterSwapSeconds?: number;
}

type Rule = 'legacy' | 'announced';
const RULES: Rule[] = ['legacy', 'announced'];
const ID = 'bench-announced';
const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const T0 = Date.UTC(2026, 0, 1);
const SECOND = 1000;
const TOKEN = 'bench-token';

interface ReadRecord {
  from: ReadFrom;
  startedAt: number;
}

/**
 * A store that logs each read (where, when it began), answers each read with an object of its own (so a
 * resolve's answer names the read it came from), and holds each read for `holdMs(from)` of virtual time.
 */
class TimedReads extends ForwardingStore {
  readonly log: ReadRecord[] = [];
  private readonly origin = new WeakMap<StoredDocument, ReadRecord>();

  constructor(
    inner: LocationStore,
    private readonly clock: Clock,
    private readonly hold: (from: ReadFrom) => Promise<void> | undefined,
  ) {
    super(inner);
  }

  override async read(id: string, options: ReadOptions): Promise<StoredDocument> {
    const record: ReadRecord = { from: options.from, startedAt: this.clock() };
    this.log.push(record);
    const answer = this.inner.read(id, options); // taken as the read starts
    await this.hold(options.from);
    const stored = { ...(await answer) };
    this.origin.set(stored, record);
    return stored;
  }

  readOf(stored: StoredDocument): ReadRecord | undefined {
    return this.origin.get(stored);
  }

  count(from: ReadFrom, start: number, end: number): number {
    return this.log.filter((r) => r.from === from && r.startedAt >= start && r.startedAt < end).length;
  }
}

interface Resolve {
  at: number;
  doneAt: number;
  stored: StoredDocument;
}

interface Event {
  at: number;
  run: () => Promise<unknown>;
}

/** One store, a replica R behind, a virtual clock; an orchestrator writing the lock, a reader resolving. */
class LibraryWorld {
  readonly clock = new ManualClock(T0);
  readonly scheduler = new VirtualScheduler(this.clock);
  readonly lagging: LaggingStore;
  readonly reads: TimedReads;
  readonly orchestrator: Router;
  readonly reader: Router;

  constructor(
    readonly timing: TimingConfig,
    options: AnnouncedReadsOptions,
  ) {
    const R = timing.replicationBoundSeconds * SECOND;
    this.lagging = new LaggingStore(new SqliteStore(':memory:'), this.clock.now, () => R);
    const holdMs = (from: ReadFrom) =>
      from === 'writeRegion' ? options.writeRegionReadMs : options.replicaReadMs;
    this.reads = new TimedReads(
      this.lagging,
      this.clock.now,
      (from) => this.scheduler.timer(this.clock.now() + holdMs(from)).promise,
    );
    this.orchestrator = new Router({
      store: this.lagging,
      timing,
      clock: this.clock.now,
      newToken: () => TOKEN,
    });
    this.reader = new Router({ store: this.reads, timing, clock: this.clock.now });
  }

  /** Run `work` on virtual time: timers fire as soon as everything released before them has settled. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    let done = false;
    const running = work().finally(() => (done = true));
    await this.scheduler.runWhile(() => !done);
    return running;
  }

  sleepUntil(at: number): Promise<void> {
    return at > this.clock.now() ? this.scheduler.timer(at).promise : Promise.resolve();
  }

  /** Resolves arriving `perSecond` a second over [from, to), each `events` run at its own instant on the way. */
  drive(from: number, to: number, perSecond: number, events: Event[] = []): Promise<Resolve[]> {
    return this.run(async () => {
      const log: Resolve[] = [];
      const pending: Promise<void>[] = [];
      const queue = [...events];
      const step = SECOND / perSecond;
      for (let i = 0, at = from; at < to; i += 1, at = from + i * step) {
        while (queue[0] !== undefined && queue[0].at <= at) {
          const event = queue.shift()!;
          await this.sleepUntil(event.at);
          await event.run();
        }
        await this.sleepUntil(at);
        const arrival = at;
        pending.push(
          this.reader.resolve(ID).then((stored) => {
            log.push({ at: arrival, doneAt: this.clock.now(), stored });
          }),
        );
      }
      await Promise.all(pending);
      return log.sort((a, b) => a.at - b.at);
    });
  }
}

/** The pre-lock and, for a legacy lock, its escalation: when the holder may rely on the hard-delete lock. */
async function holdHardDelete(
  rule: Rule,
  orchestrator: Router,
  timing: TimingConfig,
  clock: ManualClock,
): Promise<{ grant: LockGrant; hardDeleteAt: number; escalate?: Event }> {
  await orchestrator.createRoute(ID, SOURCE);
  clock.advance(SECOND);
  const grant = await orchestrator.prelock(ID, {
    migrationId: 'bench-m',
    owner: 'bench',
    target: TARGET,
    ...(rule === 'announced' ? { announced: true as const } : {}),
  });
  if (rule === 'announced')
    return { grant, hardDeleteAt: announcedWaitUntil(grant, timing.clockSkewSeconds) };
  const hardDeleteAt = Math.ceil(earliestEscalationAt(grant, timing));
  return {
    grant,
    hardDeleteAt,
    escalate: {
      at: hardDeleteAt,
      run: () => orchestrator.escalate(ID, { token: TOKEN, phase: 'hardDelete' }),
    },
  };
}

interface Span {
  resolves: number;
  writeRegionReads: number;
  replicaReads: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

function span(world: LibraryWorld, log: Resolve[], start: number, end: number): Span {
  const inSpan = log.filter((r) => r.at >= start && r.at < end);
  const latencies = inSpan.map((r) => r.doneAt - r.at).sort((a, b) => a - b);
  return {
    resolves: inSpan.length,
    writeRegionReads: world.reads.count('writeRegion', start, end),
    replicaReads: world.reads.count('nearest', start, end),
    p50Ms: percentileOf(latencies, 50),
    p99Ms: percentileOf(latencies, 99),
    maxMs: latencies.at(-1) ?? 0,
  };
}

/**
 * Resolves in [start, end) not answered by a write-region read begun at most the join bound before them
 * (a cache hit, a replica's copy, or a read too old to join): in the write window there must be none.
 */
function notReadThrough(world: LibraryWorld, log: Resolve[], start: number, end: number): number {
  const join = world.timing.coalesceJoinMs;
  return log.filter((r) => {
    if (r.at < start || r.at >= end) return false;
    const read = world.reads.readOf(r.stored);
    return read === undefined || read.from !== 'writeRegion' || read.startedAt < r.at - join;
  }).length;
}

/**
 * Resolves in [start, end) whose answer allowed a write at the source, by when the read that answered began:
 * `afterCommit` must be 0 (a read begun once the write lock committed shows it); `beforeCommit` are joins of
 * a read begun up to the join bound before the commit, which the in-flight grace covers (design §5.8).
 */
function writesAllowed(world: LibraryWorld, log: Resolve[], committedAt: number, end: number) {
  const allowed = log.filter(
    (r) =>
      r.at >= committedAt &&
      r.at < end &&
      r.stored.doc.location.region === SOURCE.region &&
      routeView(r.stored, r.at, world.timing).enforcement.write === 'allow',
  );
  const begun = (r: Resolve) => world.reads.readOf(r.stored)?.startedAt ?? Number.NEGATIVE_INFINITY;
  const afterCommit = allowed.filter((r) => begun(r) >= committedAt).length;
  return { afterCommit, beforeCommit: allowed.length - afterCommit };
}

// ---------------------------------------------------------------------------------------------
// Library mode: the hard-delete hold, then the write lock
// ---------------------------------------------------------------------------------------------

interface WritePhase {
  /** The minute before the window (announced) or before the write lock (legacy). */
  before: Span;
  /** [W − S, activation): read through, nothing denied yet (announced only). */
  window: Span | null;
  writeLock: Span & { notReadThrough: number; writesAllowed: { afterCommit: number; beforeCommit: number } };
  /** From the swap, `afterSwapSeconds`. */
  afterSwap: Span;
  /** The orchestrator's write lock, commit to swap, and the freeze as the reader's answers showed it. */
  writeLockSeconds: number;
  firstDenialAfterCommitMs: number | null;
  deniedSeconds: number;
}

interface LibraryRun {
  rule: Rule;
  hold: Span;
  write: WritePhase;
}

const MINUTE = 60 * SECOND;

async function libraryRun(
  rule: Rule,
  timing: TimingConfig,
  options: AnnouncedReadsOptions,
): Promise<LibraryRun> {
  const world = new LibraryWorld(timing, options);
  const { hardDeleteAt, escalate } = await holdHardDelete(rule, world.orchestrator, timing, world.clock);
  const holdEnd = hardDeleteAt + options.holdSeconds * SECOND;
  const rate = options.resolvesPerSecond;
  const holdLog = await world.drive(hardDeleteAt - MINUTE, holdEnd, rate, escalate ? [escalate] : []);
  const hold = span(world, holdLog, hardDeleteAt, holdEnd);
  return { rule, hold, write: await writePhase(rule, world, holdEnd + MINUTE, options) };
}

/** The bulk copy ends at `bulkEnd`: the write lock (announced: its window first), held, then the swap. */
async function writePhase(
  rule: Rule,
  world: LibraryWorld,
  bulkEnd: number,
  options: AnnouncedReadsOptions,
): Promise<WritePhase> {
  const { timing, orchestrator } = world;
  const S = timing.clockSkewSeconds * SECOND;
  let windowFrom = bulkEnd;
  let writeLockAt = bulkEnd;
  if (rule === 'announced') {
    world.clock.set(bulkEnd);
    const announced = await orchestrator.announce(ID, { token: TOKEN, phase: 'write' });
    windowFrom = Date.parse(announced.writeWindowAt!) - S;
    writeLockAt = activationOpensAt(announced, timing.clockSkewSeconds);
  }
  const swapAt = writeLockAt + options.writeHoldSeconds * SECOND;
  const afterSwap =
    options.afterSwapSeconds ?? timing.replicationBoundSeconds + 2 * timing.localCacheTtlSeconds;
  const end = swapAt + afterSwap * SECOND;
  const stamps = { writeAt: '', committedAt: 0, swappedAt: 0 };
  const events: Event[] = [
    {
      at: writeLockAt,
      run: async () => {
        stamps.writeAt = (await orchestrator.escalate(ID, { token: TOKEN, phase: 'write' })).writeAt!;
        stamps.committedAt = world.clock.now();
      },
    },
    {
      at: swapAt,
      run: async () => {
        const swapped = await orchestrator.swapWithTime(ID, { token: TOKEN, writeAt: stamps.writeAt });
        stamps.swappedAt = Date.parse(swapped.swappedAt!);
      },
    },
  ];
  const log = await world.drive(windowFrom - MINUTE, end, options.resolvesPerSecond, events);
  return {
    before: span(world, log, windowFrom - MINUTE, windowFrom),
    window: rule === 'announced' ? span(world, log, windowFrom, writeLockAt) : null,
    writeLock: {
      ...span(world, log, writeLockAt, swapAt),
      notReadThrough: notReadThrough(world, log, windowFrom, swapAt),
      writesAllowed: writesAllowed(world, log, stamps.committedAt, swapAt),
    },
    afterSwap: span(world, log, swapAt, end),
    writeLockSeconds: (stamps.swappedAt - Date.parse(stamps.writeAt)) / SECOND,
    ...freezeSeen(world, log, stamps.committedAt),
  };
}

/** When the reader's answers first denied a write at the source after the commit, and for how long. */
function freezeSeen(world: LibraryWorld, log: Resolve[], committedAt: number) {
  const denies = (r: Resolve) =>
    r.stored.doc.location.region === SOURCE.region &&
    routeView(r.stored, r.at, world.timing).enforcement.write === 'deny';
  const first = log.find((r) => r.at >= committedAt && denies(r));
  const after = first === undefined ? undefined : log.find((r) => r.at > first.at && !denies(r));
  return {
    firstDenialAfterCommitMs: first === undefined ? null : first.at - committedAt,
    deniedSeconds: first === undefined || after === undefined ? 0 : (after.at - first.at) / SECOND,
  };
}

// ---------------------------------------------------------------------------------------------
// HTTP: RoutingClient against the embedded host
// ---------------------------------------------------------------------------------------------

interface HttpRun {
  rule: Rule;
  resolves: number;
  fetches: number;
  serverWriteRegionReads: number;
  serverReplicaReads: number;
}

async function httpRun(rule: Rule, options: AnnouncedReadsOptions): Promise<HttpRun> {
  const timing = parseConfig({ ROUTELOCK_PROFILE: 'production' }).timing;
  const dir = mkdtempSync(join(tmpdir(), 'routelock-announced-reads-'));
  const clock = new ManualClock(T0);
  const R = timing.replicationBoundSeconds * SECOND;
  const lagging = new LaggingStore(new SqliteStore(':memory:'), clock.now, () => R);
  const served = new TimedReads(lagging, clock.now, () => undefined);
  const host = await startLocalHost({
    env: {
      PORT: '0',
      ROUTELOCK_PROFILE: 'production',
      ROUTELOCK_AUTH: 'none',
      ROUTELOCK_SQLITE_PATH: join(dir, 'state.db'),
    },
    clock: clock.now,
    store: served,
    log: () => undefined,
  });
  try {
    const orchestrator = new Router({ store: lagging, timing, clock: clock.now, newToken: () => TOKEN });
    const { hardDeleteAt, escalate } = await holdHardDelete(rule, orchestrator, timing, clock);
    const counting = countingFetch();
    const client = new RoutingClient({
      baseUrl: `${host.url}/api`,
      clock: clock.now,
      clockSkewSeconds: timing.clockSkewSeconds,
      fetch: counting.fetch,
    });
    const end = hardDeleteAt + options.httpHoldSeconds * SECOND;
    const step = SECOND / options.resolvesPerSecond;
    let resolves = 0;
    let fetchesBefore: number | undefined;
    for (let i = 0, at = hardDeleteAt - MINUTE; at < end; i += 1, at = hardDeleteAt - MINUTE + i * step) {
      if (escalate !== undefined && escalate.at <= at && clock.now() < escalate.at) {
        clock.set(escalate.at);
        await escalate.run();
      }
      clock.set(at);
      if (at >= hardDeleteAt && fetchesBefore === undefined) fetchesBefore = counting.count();
      await client.resolve(ID);
      await counting.idle(); // a refresh ahead in the background lands before the clock moves on
      if (at >= hardDeleteAt) resolves += 1;
    }
    return {
      rule,
      resolves,
      fetches: counting.count() - (fetchesBefore ?? 0),
      serverWriteRegionReads: served.count('writeRegion', hardDeleteAt, end),
      serverReplicaReads: served.count('nearest', hardDeleteAt, end),
    };
  } finally {
    await host.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `fetch` that counts requests and knows when none is in flight (its body read in full before it answers). */
function countingFetch() {
  let requests = 0;
  let inFlight = 0;
  const counted: typeof fetch = async (input, init) => {
    requests += 1;
    inFlight += 1;
    try {
      const answer = await fetch(input, init);
      const body = await answer.arrayBuffer();
      return new Response(body, { status: answer.status, headers: answer.headers });
    } finally {
      inFlight -= 1;
    }
  };
  const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
  return {
    fetch: counted,
    count: () => requests,
    async idle(): Promise<void> {
      await turn();
      while (inFlight > 0) await turn();
      await turn();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Costs, computed from the timing with the rules' own functions
// ---------------------------------------------------------------------------------------------

interface Costs {
  profile: 'production' | 'dev';
  /** When the bulk copy may start, from the pre-lock (s): legacy, announced. */
  bulkCopyAfterPrelock: [number, number];
  /** The announcement's wait before each write-lock attempt (s), and what a retried one adds past the retry delay. */
  perWriteAttempt: number;
  perRetriedAttempt: number;
  /** The write lock's budget (s), the same rule for both; the read-through before an activation (s). */
  writeLockBudget: number;
  readThroughBeforeActivation: number;
  /** A dead workflow: deletes tombstoned, writes denied, other migrations blocked, after its last renewal (s). */
  deadTombstones: number;
  deadDeniesWrites: number;
  deadBlocksMigrations: number;
  /** A dead workflow: write-region reads on every resolve continue this long (s): legacy, announced (a window open). */
  deadReadThrough: [number, number];
  oldReaderExtraFreeze: number;
}

function costs(profile: 'production' | 'dev'): Costs {
  const config: Config = parseConfig({ ROUTELOCK_PROFILE: profile });
  const t = config.timing;
  const { inFlightGraceSeconds: G, deltaRetryDelaySeconds: delay } = config.migration;
  const S = t.clockSkewSeconds;
  const iso = (seconds: number) => new Date(T0 + seconds * SECOND).toISOString();
  const after = (at: number) => (at - T0) / SECOND;
  const legacyCopy =
    after(earliestEscalationAt({ acquiredAt: iso(0), startsAt: iso(t.convergenceDelaySeconds) }, t)) + G;
  const announcedCopy = after(announcedWaitUntil({ startsAt: iso(t.announceLeadSeconds) }, S)) + G;
  // An announcement at 0 opens its window L later; the activation may land from W + S.
  const perWriteAttempt = after(activationOpensAt({ writeWindowAt: iso(t.announceLeadSeconds) }, S));
  const A = S + Math.min(t.writeLeaseSeconds, t.writeBudgetSeconds);
  return {
    profile,
    bulkCopyAfterPrelock: [legacyCopy, announcedCopy],
    perWriteAttempt,
    perRetriedAttempt: Math.max(0, perWriteAttempt - delay),
    writeLockBudget: t.writeBudgetSeconds,
    readThroughBeforeActivation: 2 * S,
    deadTombstones: t.hardDeleteLeaseSeconds,
    deadDeniesWrites: t.writeLeaseSeconds,
    deadBlocksMigrations: t.prelockLeaseSeconds,
    // Legacy: read through until the write region shows the parent dead (its end + 2S). Announced: only in
    // a window it announced, from W − S until writeWindowUntil + 2S.
    deadReadThrough: [t.prelockLeaseSeconds + 2 * S, A + 3 * S],
    oldReaderExtraFreeze: 0,
  };
}

// ---------------------------------------------------------------------------------------------
// The run and its tables
// ---------------------------------------------------------------------------------------------

export async function runAnnouncedReads(options: AnnouncedReadsOptions) {
  const timing = parseConfig({ ROUTELOCK_PROFILE: 'production' }).timing;
  const library: LibraryRun[] = [];
  for (const rule of RULES) library.push(await libraryRun(rule, timing, options));
  const http: HttpRun[] = [];
  for (const rule of RULES) http.push(await httpRun(rule, options));
  const data = { options, timing, library, http, costs: [costs('production'), costs('dev')] };
  return { table: tables(data), data };
}

type Data = Parameters<typeof tables>[0];

function tables(data: {
  options: AnnouncedReadsOptions;
  library: LibraryRun[];
  http: HttpRun[];
  costs: Costs[];
}): string {
  const o = data.options;
  const ms = (s: Span) => `${s.p50Ms} / ${s.p99Ms} / ${s.maxMs}`;
  const hold = table(
    [
      `library: hard-delete held ${o.holdSeconds} s, ${o.resolvesPerSecond} resolves/s`,
      'resolves',
      'write-region reads',
      'replica reads',
      'latency ms p50 / p99 / max',
    ],
    data.library.map((r) => [
      r.rule,
      r.hold.resolves,
      r.hold.writeRegionReads,
      r.hold.replicaReads,
      ms(r.hold),
    ]),
  );
  const http = table(
    [
      `HTTP client: hard-delete held ${o.httpHoldSeconds} s, ${o.resolvesPerSecond} resolves/s`,
      'resolves',
      'HTTP fetches',
      'server write-region reads',
      'server replica reads',
    ],
    data.http.map((r) => [r.rule, r.resolves, r.fetches, r.serverWriteRegionReads, r.serverReplicaReads]),
  );
  return [hold, http, writeTable(data), costTable(data.costs)].join('\n\n');
}

function writeTable(data: Data): string {
  const rows: (string | number)[][] = [];
  for (const r of data.library) {
    const w = r.write;
    const cells = (name: string, s: Span | null, extra = '') =>
      s === null
        ? [r.rule, name, '—', '—', '—', '—', extra]
        : [
            r.rule,
            name,
            s.resolves,
            s.writeRegionReads,
            s.replicaReads,
            `${s.p50Ms} / ${s.p99Ms} / ${s.maxMs}`,
            extra,
          ];
    rows.push(cells('60 s before', w.before));
    rows.push(cells('window before the write lock (W − S … W + S)', w.window));
    rows.push(
      cells(
        `write lock, ${w.writeLockSeconds} s`,
        w.writeLock,
        `${w.writeLock.notReadThrough} not read through; writes allowed: ${w.writeLock.writesAllowed.afterCommit} on a read begun after the commit, ${w.writeLock.writesAllowed.beforeCommit} joining one begun before it; denied from +${w.firstDenialAfterCommitMs} ms for ${w.deniedSeconds} s`,
      ),
    );
    rows.push(
      cells(`after the swap, ${w.afterSwap.resolves / data.options.resolvesPerSecond} s`, w.afterSwap),
    );
  }
  return table(
    [
      'library: the write lock',
      'span',
      'resolves',
      'write-region reads',
      'replica reads',
      'latency ms p50 / p99 / max',
      'checks',
    ],
    rows,
  );
}

function costTable(all: Costs[]): string {
  const pair = (f: (c: Costs) => [number, number]) =>
    all.map((c) => {
      const [legacy, announced] = f(c);
      return `${legacy} → ${announced} (${announced - legacy >= 0 ? '+' : ''}${announced - legacy})`;
    });
  const same = (f: (c: Costs) => number) => all.map((c) => `${f(c)} → ${f(c)} (+0)`);
  const rows: [string, ...string[]][] = [
    ['bulk copy may start, after the pre-lock', ...pair((c) => c.bulkCopyAfterPrelock)],
    ['each write-lock attempt: wait from its announcement', ...pair((c) => [0, c.perWriteAttempt])],
    ['a retried attempt, beyond the retry delay', ...pair((c) => [0, c.perRetriedAttempt])],
    ['write lock budget (its hold)', ...same((c) => c.writeLockBudget)],
    [
      'read-through before the activation, nothing denied',
      ...pair((c) => [0, c.readThroughBeforeActivation]),
    ],
    ['dead workflow: deletes tombstoned after its last renewal', ...same((c) => c.deadTombstones)],
    ['dead workflow: writes denied after its last write-lock renewal', ...same((c) => c.deadDeniesWrites)],
    [
      'dead workflow: other migrations blocked after its last renewal',
      ...same((c) => c.deadBlocksMigrations),
    ],
    ['dead workflow: write-region reads on every resolve for', ...pair((c) => c.deadReadThrough)],
    ['old-version reader: extra write freeze', ...same((c) => c.oldReaderExtraFreeze)],
  ];
  return table(['cost (s), legacy → announced (added)', ...all.map((c) => c.profile)], rows);
}
