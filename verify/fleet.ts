import { TokenKeyring } from '../shared/security/tokenKeys';
import { prng } from '../testkit/prng';
import { type Decision, decide } from '../shared/client';
import { ManualClock } from '../testkit/clock';
import { type TimingConfig, parseConfig } from '../shared/config';
import { RouteLockError, isRouteLockError } from '../shared/errors';
import {
  type Location,
  type LocationDocument,
  type StoredDocument,
  newLocationDocument,
  sameLocation,
} from '../shared/lock/document';
import { hardDeleteInForce, isLive, liveLock, writeLockInForce } from '../shared/lock/rules';
import {
  type Enforcement,
  type Operation,
  type RouteView,
  cacheHeaders,
  enforcement,
  routeView,
} from '../shared/lock/view';
import { createActivities } from '../shared/migration/activities';
import { InProcessRunner } from '../shared/migration/inProcess';
import { type JournalEntry, type MigrationRecord, SqliteMigrationState } from '../shared/migration/records';
import { VirtualScheduler } from '../testkit/virtualScheduler';
import type { Scheduler } from '../shared/migration/scheduler';
import type { HttpCall, HttpResult, ParticipantRequest } from '../shared/migration/types';
import { terminalStates } from '../shared/migration/types';
import { migrationSettings } from '../shared/migration/workflow';
import { Router } from '../shared/router';
import type { LocationStore } from '../shared/store/port';
import { SqliteStore } from '../shared/store/sqlite';
import { ForwardingStore, type StoreCall, isWriteCall } from '../testkit/forwardingStore';
import { LaggingStore } from '../testkit/laggingStore';
import { ClientTier } from './clientTier';
import type { ScenarioResult } from './scenarios';

/**
 * The fleet simulation (issue #7 §3): the real router, lock rules, workflow and in-process runner, on
 * virtual time, in an environment that misbehaves. Only the environment is simulated:
 *
 * - one write region (SQLite) under replicas that lag by up to the replication bound (LaggingStore);
 * - store faults on every call at `faultRate`: throttling (429), outage (503), timeouts (half of the
 *   timed-out writes did commit: the caller cannot tell), and real 412s (a concurrent write lands first);
 * - a service per location (three regions; westeurope with two accounts beside its account-less
 *   location, so some migrations move between two accounts of one region), each declaring its full
 *   location to `decide()`, with the three declared cache tiers, each a Router whose cache TTL is that
 *   tier's (edge 2 h, regional 30 min, local 60 s by default), enforcing `decide()` on user reads, writes
 *   and deletes against per-location data; and a fourth way in, the service's own `RoutingClient` in
 *   series behind its largest tier (edge), over "HTTP" answered by that tier's router (`ClientTier`):
 *   the in-series overstay the old headers allowed (up to twice the TTL) would exceed the delay;
 * - skewed clocks: every service (its routers and its `decide` time) and every orchestrator instance
 *   (runner and activities router; each restart is a new instance) is off true time by its own offset
 *   within ±skew/2 (production's 5 s skew), so any two differ by at most the declared skew;
 * - participants that bulk- and delta-copy that data, as real ones would (snapshot at start, upsert at
 *   the end, the delta being everything changed since the bulk copy began);
 * - migrations through the in-process runner, whose process is killed after every step (migration i
 *   dies after its journal step i mod 30) and restarted after a pause, sometimes past a lease, sometimes
 *   around the end of a phase lease; that now and then stalls (its timers held) until around the end
 *   of a write lease it holds; and a rival orchestrator that now and then starts a migration of its own;
 * - a user or operator who, shortly after some swaps, DELETEs the route through a router (409
 *   ConvergencePending during the retired-source window; Retry-After honoured) and re-creates it at
 *   the same location.
 *
 * Oracles, judged in true (virtual) time, allowing any clock its offset within the declared skew,
 * checked at the instant of every user operation against the write region's copy, on every committed
 * version, and at the end: no write or physical delete accepted at the source once the lock that
 * forbids it is in force (on every clock), nor anywhere but the committed (full) location; no refusal
 * without a lock in force (a lock outliving its lease); a location changes only by one write that also
 * drops the lock, while every clock still sees the write lock; no phase lease extended or built on
 * after some clock saw it end; no pre-lock while the retired source of the route's last swap is still
 * write-blocked, even across a delete and re-create; every acknowledged write, and no deleted item, at
 * the committed location at the end; every migration ends Completed, Failed, Conflict or NoOp; no lock
 * past its cap.
 */

export type FleetControl =
  | 'none'
  | 'convergenceShorterThanCacheTtl'
  | 'noReadThrough'
  | 'noInFlightGrace'
  | 'regionOnlyDecide'
  | 'noSkewMargins'
  | 'deleteDuringRetiredWindow'
  | 'serverCacheNoAge';

export interface FleetOptions {
  migrations: number;
  concurrency: number;
  resources: number;
  /** Share of store calls that fail. */
  faultRate: number;
  seed: number;
  control?: FleetControl;
  /** Controls stop at their first violation: being caught is all they have to show. */
  stopAtFirstViolation?: boolean;
}

export interface FleetStats {
  migrations: number;
  outcomes: Record<string, number>;
  /** Why migrations ended Failed or Conflict (numbers elided), with counts. */
  reasons: Record<string, number>;
  virtualHours: number;
  userOps: Record<
    | 'reads'
    | 'writes'
    | 'deletes'
    | 'refused'
    | 'tombstoned'
    | 'redirected'
    | 'unavailable'
    | 'raced'
    | 'landedUnderLock'
    | 'noRoute',
    number
  >;
  faults: Record<
    'throttled' | 'unavailable' | 'readTimeout' | 'writeTimeoutLost' | 'writeTimeoutCommitted' | 'conflict',
    number
  >;
  storeCalls: number;
  crashes: number;
  /** Distinct journal positions (1..30) right after which a migration's process died. */
  crashSteps: number;
  /** Journaled steps per migration run by the crashing orchestrator. */
  journalSteps: { median: number; max: number };
  /** Phases the migrations were in when their process died, with counts. */
  crashPhases: Record<string, number>;
  /** Restarts that came after a lease could lapse. */
  longOutages: number;
  /** Restarts timed to come around the end of a phase lease of a migration in flight. */
  boundaryRestarts: number;
  /** Orchestrator stalls, each until around the end of a write lease. */
  stallFors: number;
  copies: number;
  /** Migrations between two accounts of one region: started, and swapped. */
  accountMoves: { started: number; swapped: number };
  /** The route-deleting actor (DELETE shortly after a swap, then re-create at the same location). */
  routeDeletes: {
    attempts: number;
    refusedConvergencePending: number;
    refusedLocked: number;
    deleted: number;
    recreated: number;
  };
  /**
   * The client tier (each service's RoutingClient behind its edge tier): writes and deletes decided on
   * its views at the location that served them (judged by the decision oracles), reads, redirects,
   * requests that reached the edge, and the largest Age the edge sent.
   */
  clientTier: {
    decisions: number;
    reads: number;
    redirects: number;
    requests: number;
    maxAgeSeconds: number;
  };
  /** Clock offsets drawn (ms): per service, and per orchestrator instance (each restart draws anew). */
  clockOffsetsMs: { services: number[]; orchestrators: { min: number; max: number; count: number } };
}

export interface FleetResult extends ScenarioResult {
  stats: FleetStats;
}

/**
 * Where routes live: three regions, one of them (westeurope) with two accounts beside its account-less
 * location, so some migrations move between two accounts of one region. A service per location.
 */
const LOCATIONS: readonly Location[] = [
  { region: 'westeurope' },
  { region: 'westeurope', account: 'a1' },
  { region: 'westeurope', account: 'a2' },
  { region: 'eastus' },
  { region: 'northeurope' },
];
const locationKey = (l: Location): string =>
  l.account === undefined ? l.region : `${l.region}/${l.account}`;
/**
 * What a service declares to `decide()`: its full location. An account-less location in both forms
 * the API takes: the string (westeurope, northeurope) and an object without an account (eastus).
 */
const declaredLocation = (l: Location): string | Location =>
  l.account !== undefined
    ? { region: l.region, account: l.account }
    : l.region === 'eastus'
      ? { region: l.region }
      : l.region;
/** The share of orchestrator crashes after which the process returns around the end of a phase lease. */
const BOUNDARY_RESTART_SHARE = 0.2;
/** The share of an orchestrator's timer firings that start a stall (until around a write lease's end). */
const STALL_SHARE = 0.02;
/** The share of swaps after which the route-deleting actor deletes and re-creates the route. */
const DELETE_AFTER_SWAP_SHARE = 0.3;
const CRASH_STEPS = 30;
const TRAFFIC_EVERY_MS = 10_000;
const DRIVER_EVERY_MS = 30_000;
/**
 * Writes and deletes land a while after they were decided: 0.5 s steps up to 90 % of the declared
 * in-flight grace (steps keep the number of distinct virtual instants, and so the run time, down).
 */
const LANDING_STEP_MS = 500;

type Random = () => number;
const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
const between = (random: Random, lo: number, hi: number) => lo + random() * (hi - lo);
/** Log-uniform: durations spread over orders of magnitude. */
const logBetween = (random: Random, lo: number, hi: number) =>
  Math.exp(between(random, Math.log(lo), Math.log(hi)));

/**
 * The store's misbehaviour, drawn from a seeded generator. Sits above the lagging replicas and the
 * write region, below every router; the oracles read the write region directly.
 */
class FaultInjectingStore extends ForwardingStore {
  calls = 0;
  readonly faults: FleetStats['faults'] = {
    throttled: 0,
    unavailable: 0,
    readTimeout: 0,
    writeTimeoutLost: 0,
    writeTimeoutCommitted: 0,
    conflict: 0,
  };
  enabled = true;

  constructor(
    inner: LocationStore,
    private readonly random: Random,
    private readonly rate: number,
  ) {
    super(inner);
  }

  override get kind(): string {
    return `faulty(${this.inner.kind})`;
  }

  private draw(write: boolean): 'none' | 'throttled' | 'unavailable' | 'timeout' | 'conflict' {
    this.calls += 1;
    if (!this.enabled || this.random() >= this.rate) return 'none';
    return write
      ? pick(this.random, ['throttled', 'unavailable', 'timeout', 'conflict'] as const)
      : pick(this.random, ['throttled', 'unavailable', 'timeout'] as const);
  }

  private fail(kind: 'throttled' | 'unavailable' | 'timeout'): never {
    const message = {
      throttled: 'Store throttled the request (429).',
      unavailable: 'Store unavailable (503).',
      timeout: 'Store request timed out.',
    }[kind];
    throw new RouteLockError('StoreUnavailable', message, { retryAfterSeconds: 1 });
  }

  /** Reads and lists: a 412 has no meaning there. */
  private async readLike<T>(work: () => Promise<T>): Promise<T> {
    const fault = this.draw(false);
    if (fault === 'throttled' || fault === 'unavailable') {
      this.faults[fault] += 1;
      this.fail(fault);
    }
    if (fault === 'timeout') {
      this.faults.readTimeout += 1;
      this.fail('timeout');
    }
    return work();
  }

  private async writeLike<T>(id: string, work: () => Promise<T>): Promise<T> {
    const fault = this.draw(true);
    if (fault === 'throttled' || fault === 'unavailable') {
      this.faults[fault] += 1;
      this.fail(fault);
    }
    if (fault === 'timeout') {
      // The caller cannot tell a timeout that committed from one that did not.
      if (this.random() < 0.5) {
        this.faults.writeTimeoutLost += 1;
        this.fail('timeout');
      }
      await work(); // a refusal (412, 409) is answered as it is: nothing committed
      this.faults.writeTimeoutCommitted += 1;
      this.fail('timeout');
    }
    if (fault === 'conflict') {
      // A real 412: another writer commits first (the same document again, a new ETag).
      const current = await this.inner.read(id, { from: 'writeRegion' }).catch(() => undefined);
      if (current) {
        this.faults.conflict += 1;
        await this.inner.replace(current.doc, current.etag);
      }
    }
    return work();
  }

  protected override around<T>(call: StoreCall, work: () => Promise<T>): Promise<T> {
    return isWriteCall(call) ? this.writeLike(call.id as string, work) : this.readLike(work);
  }
}

/** The write region, checking every committed version against the previous one: no partial cutover. */
class CommitWatchingStore extends ForwardingStore {
  private readonly last = new Map<string, LocationDocument>();

  constructor(
    inner: LocationStore,
    private readonly now: () => number,
    private readonly violation: (resourceId: string, message: string, kind: ViolationKind) => void,
    private readonly onSwap: (before: LocationDocument, after: LocationDocument) => void,
    /** The end of the latest retired-source window of a route, kept by the harness across a delete. */
    private readonly retiredUntil: (resourceId: string) => number | undefined,
    /** The most any clock is ahead of (or behind) true time: the declared skew's half. */
    private readonly maxOffsetMs: number,
  ) {
    super(inner);
  }
  override async create(doc: LocationDocument) {
    const stored = await this.inner.create(doc);
    this.last.set(doc.id, stored.doc);
    return stored;
  }
  override async replace(doc: LocationDocument, ifMatch: string) {
    const stored = await this.inner.replace(doc, ifMatch);
    const before = this.last.get(doc.id);
    this.last.set(doc.id, stored.doc);
    if (before) this.checkVersion(before, stored.doc);
    return stored;
  }

  private checkVersion(before: LocationDocument, after: LocationDocument): void {
    const now = this.now();
    const problems: string[] = [];
    const lock = after.lock;
    if (lock && Date.parse(lock.expiresAt) > Date.parse(lock.maxExpiresAt))
      problems.push('a lock lease past its cap');
    for (const phaseEnd of [lock?.hardDeleteExpiresAt, lock?.writeExpiresAt])
      if (lock && phaseEnd && Date.parse(phaseEnd) > Date.parse(lock.expiresAt))
        problems.push('a phase lease past its parent lease');
    // Live on every clock within the skew: even one that is maxOffset ahead of true time.
    const liveEverywhere = (l: LocationDocument['lock']) => isLive(l, now + this.maxOffsetMs);
    if (before.lock && lock && liveEverywhere(before.lock) && before.lock.migrationId !== lock.migrationId)
      problems.push(`a live lock of ${before.lock.migrationId} replaced by one of ${lock.migrationId}`);
    // A phase boundary as the clock furthest ahead sees it: nothing may extend or build on a phase that
    // clock already sees over (the clock-skew margins).
    const ahead = now + this.maxOffsetMs;
    const was = before.lock;
    if (was && lock && was.migrationId === lock.migrationId) {
      const later = (a: string | undefined, b: string | undefined) =>
        a !== undefined && b !== undefined && Date.parse(a) > Date.parse(b);
      if (was.phase === 'write' && lock.phase === 'write' && later(lock.writeExpiresAt, was.writeExpiresAt))
        if (!writeLockInForce(was, ahead))
          problems.push(
            `the write lock extended after a clock within the skew saw it end (${was.writeExpiresAt})`,
          );
      if (
        was.phase === 'hardDelete' &&
        lock.phase === 'hardDelete' &&
        later(lock.hardDeleteExpiresAt, was.hardDeleteExpiresAt) &&
        !hardDeleteInForce(was, ahead)
      )
        problems.push(
          `the hard-delete lock extended after a clock within the skew saw it end (${was.hardDeleteExpiresAt})`,
        );
      if (was.phase === 'hardDelete' && lock.phase === 'write' && !hardDeleteInForce(was, ahead))
        problems.push(
          `escalated to write after a clock within the skew saw the hard-delete lock end (${was.hardDeleteExpiresAt})`,
        );
    }
    if (lock?.phase === 'prelock' && before.lock?.migrationId !== lock.migrationId) {
      // A new migration's pre-lock: never while the retired source of the route's last swap is still
      // write-blocked on every clock, whatever happened to the route in between (a delete, a re-create).
      const until = this.retiredUntil(after.id);
      if (until !== undefined && now + this.maxOffsetMs < until)
        this.violation(
          after.id,
          `${lock.migrationId} pre-locked ${Math.round((until - now) / 1000)} s before the retired-source window of its last swap ends (${new Date(until).toISOString()})`,
          'window',
        );
    }
    if (!sameLocation(before.location, after.location)) {
      this.checkCutover(before, after, problems);
      this.onSwap(before, after);
    }
    for (const p of problems) this.violation(after.id, p, 'version');
  }

  private checkCutover(before: LocationDocument, after: LocationDocument, problems: string[]): void {
    const now = this.now();
    // In force on every clock within the skew (the one furthest ahead lets writes in first).
    if (!before.lock || !writeLockInForce(before.lock, now + this.maxOffsetMs))
      problems.push('the location changed without a write lock in force (on every clock)');
    else if (!sameLocation(after.location, before.lock.target))
      problems.push("the location changed to somewhere other than the lock's target");
    if (after.lock !== null) problems.push('the location changed but the lock stayed (partial cutover)');
    if (after.secondary?.role !== 'retiredSource' || !sameLocation(after.secondary.location, before.location))
      problems.push('the location changed without retiring the source');
  }
}

/**
 * What a violation is about: a service's decision at one request, the data at a committed location, a
 * committed document version, a migration's end, or the harness itself. A control is caught only by the
 * kinds its bug must produce.
 */
type ViolationKind = 'decision' | 'data' | 'version' | 'window' | 'lifecycle' | 'harness';
const controlCaughtBy: Record<Exclude<FleetControl, 'none'>, ViolationKind[]> = {
  convergenceShorterThanCacheTtl: ['decision', 'data'],
  noReadThrough: ['decision', 'data'],
  noInFlightGrace: ['data'],
  regionOnlyDecide: ['decision', 'data'],
  // A phase boundary crossed on one clock and not another: a decision, lost data, or a late swap.
  noSkewMargins: ['decision', 'data', 'version'],
  deleteDuringRetiredWindow: ['window'],
  // A client holding a copy the edge had held: a decision on a view older than the convergence delay.
  serverCacheNoAge: ['decision', 'data'],
};

/**
 * Negative control: `decide()` as it was, comparing regions only (a serving location without an
 * account matches any account; the string form compares the region) and not checking the secondary.
 */
function regionOnlyDecide(view: RouteView, operation: Operation, serving: string | Location): Decision {
  const sameRegion =
    typeof serving === 'string'
      ? view.location.region === serving
      : view.location.region === serving.region &&
        (serving.account === undefined || view.location.account === serving.account);
  if (!sameRegion) return { kind: 'notHere', location: view.location };
  const e = view.enforcement;
  const verdict = operation === 'read' ? e.read : operation === 'write' ? e.write : e.delete;
  if (verdict === 'allow') return { kind: 'allow' };
  if (verdict === 'tombstone') return { kind: 'tombstone' };
  return { kind: 'deny', retryAfterSeconds: e.retryAfterSeconds ?? 1 };
}

/**
 * An orchestrator instance's time: the shared virtual scheduler, read through its own clock offset. The
 * instance may stall (an overloaded or paused process): `stallUntil`, asked as a timer fires, may start
 * a stall, and every timer due during one fires when it ends (true time).
 */
class InstanceScheduler implements Scheduler {
  constructor(
    private readonly inner: VirtualScheduler,
    private readonly offsetMs: number,
    private readonly stallUntil: () => Promise<number | undefined>,
  ) {}
  private stalledUntil = 0;
  now(): number {
    return this.inner.now() + this.offsetMs;
  }
  timer(fireAt: number) {
    const first = this.inner.timer(fireAt - this.offsetMs);
    let cancelled = false;
    let late: { promise: Promise<void>; cancel(): void } | undefined;
    const promise = first.promise.then(async () => {
      if (this.inner.now() >= this.stalledUntil) this.stalledUntil = (await this.stallUntil()) ?? 0;
      const until = this.stalledUntil;
      if (until <= this.inner.now()) return;
      late = this.inner.timer(until);
      if (cancelled) late.cancel();
      await late.promise;
    });
    return {
      promise,
      cancel: () => {
        cancelled = true;
        first.cancel();
        late?.cancel();
      },
    };
  }
}

/** What a tier answers: the real Router, or (negative control) a cache that never reads through. */
interface Tier {
  view(id: string): Promise<{ view: RouteView }>;
}

/** Negative control: holds whatever it fetched for its TTL, started lock or not. */
class NoReadThroughTier implements Tier {
  private readonly held = new Map<string, { stored: StoredDocument; until: number }>();
  constructor(
    private readonly router: Router,
    private readonly timing: TimingConfig,
    private readonly now: () => number,
  ) {}
  async view(id: string) {
    const now = this.now();
    let hit = this.held.get(id);
    if (!hit || now >= hit.until) {
      this.router.forget(id);
      hit = { stored: await this.router.resolve(id), until: now + this.timing.localCacheTtlSeconds * 1000 };
      this.held.set(id, hit);
    }
    return { view: routeView(hit.stored, now, this.timing) };
  }
}

interface Item {
  seq: number;
  tombstone: boolean;
}

/** One resource's data in one region, with its live items indexed for a random pick. */
class Shelf {
  readonly items = new Map<string, Item>();
  private readonly liveIds: string[] = [];
  private readonly position = new Map<string, number>();

  set(id: string, item: Item): void {
    const wasLive = this.position.has(id);
    this.items.set(id, item);
    if (!item.tombstone && !wasLive) {
      this.position.set(id, this.liveIds.length);
      this.liveIds.push(id);
    } else if (item.tombstone && wasLive) {
      this.unlist(id);
    }
  }
  remove(id: string): void {
    if (this.position.has(id)) this.unlist(id);
    this.items.delete(id);
  }
  clear(): void {
    this.items.clear();
    this.liveIds.length = 0;
    this.position.clear();
  }
  get live(): readonly string[] {
    return this.liveIds;
  }
  private unlist(id: string): void {
    const at = this.position.get(id) as number;
    const last = this.liveIds.pop() as string;
    if (last !== id) {
      this.liveIds[at] = last;
      this.position.set(last, at);
    }
    this.position.delete(id);
  }
}

/** Each region's copy of each resource's data. */
class RegionData {
  private readonly shelves = new Map<string, Shelf>();
  private seq = 0;
  shelf(resourceId: string): Shelf {
    let shelf = this.shelves.get(resourceId);
    if (!shelf) this.shelves.set(resourceId, (shelf = new Shelf()));
    return shelf;
  }
  write(resourceId: string, itemId: string): void {
    this.shelf(resourceId).set(itemId, { seq: ++this.seq, tombstone: false });
  }
  tombstone(resourceId: string, itemId: string): void {
    this.shelf(resourceId).set(itemId, { seq: ++this.seq, tombstone: true });
  }
  get current(): number {
    return this.seq;
  }
  /** The items changed after `since` (every item when 0), as a copy takes them. */
  snapshot(resourceId: string, since = 0): Map<string, Item> {
    const items = this.shelf(resourceId).items;
    if (since === 0) return new Map(items);
    return new Map([...items].filter(([, item]) => item.seq > since));
  }
  upsert(resourceId: string, copied: Map<string, Item>): void {
    const shelf = this.shelf(resourceId);
    for (const [id, item] of copied) shelf.set(id, { seq: ++this.seq, tombstone: item.tombstone });
  }
}

export async function fleet(options: FleetOptions): Promise<FleetResult> {
  const control = options.control ?? 'none';
  const random = prng(options.seed);
  const config = parseConfig({
    ROUTELOCK_PARTICIPANTS: '[{"name":"data","url":"https://data.invalid/migrate"}]',
  });
  // The oracles judge with production timing (its clock-skew margin included) against true time.
  const timing = config.timing;
  // Control: every router and rule without clock-skew margins, on the same skewed clocks.
  const ruleTiming: TimingConfig = control === 'noSkewMargins' ? { ...timing, clockSkewSeconds: 0 } : timing;
  const inFlightBoundMs = config.migration.inFlightGraceSeconds * 1000;
  const edge = Math.max(...timing.cacheTiers.map((t) => t.ttlSeconds));
  // Control: the declaration forgot the largest tier (edge), as a service that added a CDN might.
  const orchestratorTiming: TimingConfig =
    control === 'convergenceShorterThanCacheTtl'
      ? {
          ...ruleTiming,
          convergenceDelaySeconds:
            Math.max(0, ...timing.cacheTiers.map((t) => t.ttlSeconds).filter((s) => s < edge)) +
            timing.replicationBoundSeconds,
        }
      : ruleTiming;
  // Every clock is off true (virtual) time by up to half the declared skew, so any two differ by at
  // most the skew. The control draws the edges only (±skew/2): the widest disagreements it allows.
  const maxOffsetMs = (timing.clockSkewSeconds * 1000) / 2;
  const drawOffset = (): number =>
    control === 'noSkewMargins'
      ? random() < 0.5
        ? -maxOffsetMs
        : maxOffsetMs
      : Math.round(between(random, -maxOffsetMs, maxOffsetMs));

  const clock = new ManualClock(Date.UTC(2026, 10, 30));
  const scheduler = new VirtualScheduler(clock);
  const violations: { kind: ViolationKind; text: string }[] = [];
  const trail = new Map<string, string[]>();
  const note = (resourceId: string, event: string) => {
    const events = trail.get(resourceId) ?? [];
    events.push(`${new Date(clock.now()).toISOString()} ${event}`);
    if (process.env.FLEET_TRACE === resourceId) process.stderr.write(`${events.at(-1)}\n`);
    if (events.length > 25) events.shift();
    trail.set(resourceId, events);
  };
  const violation = (resourceId: string, message: string, kind: ViolationKind) => {
    note(resourceId, `VIOLATION ${message}`);
    violations.push({ kind, text: `${resourceId} at ${new Date(clock.now()).toISOString()}: ${message}` });
  };

  const writeRegion = new SqliteStore(':memory:');
  // After a swap, once requests in flight have landed, the new location must hold what was acknowledged.
  let checkData: (resourceId: string, when: string) => Promise<void> = async () => {};
  let afterSwap: (resourceId: string) => void = () => {};
  const accountMoves = { started: 0, swapped: 0 };
  // The end of each route's latest retired-source window, as its swap wrote it: outlives a delete.
  const retiredUntil = new Map<string, number>();
  const onSwap = (before: LocationDocument, after: LocationDocument) => {
    if (after.secondary?.role === 'retiredSource')
      retiredUntil.set(after.id, Date.parse(after.secondary.writesBlockedUntil));
    if (before.location.region === after.location.region) accountMoves.swapped += 1;
    void scheduler
      .timer(clock.now() + inFlightBoundMs + 1)
      .promise.then(() => checkData(after.id, 'after its swap'));
    afterSwap(after.id);
  };
  const watched = new CommitWatchingStore(
    writeRegion,
    clock.now,
    violation,
    onSwap,
    (id) => retiredUntil.get(id),
    maxOffsetMs,
  );
  const replicas = new LaggingStore(watched, clock.now, () =>
    Math.floor(random() * timing.replicationBoundSeconds * 1000),
  );
  const store = new FaultInjectingStore(replicas, random, options.faultRate);

  // Services: one per location, three cache tiers each, all on the service's own clock, and a fourth
  // way in: the service's own RoutingClient in series behind its largest tier (edge), over HTTP
  // answered by that tier's router (Cache-Control and Age as the API sends them).
  interface Service {
    location: Location;
    serves: string | Location;
    offsetMs: number;
    /** The declared tiers (by `timing.cacheTiers` index), then the client tier. */
    tiers: Tier[];
    client: ClientTier;
  }
  const behindTier = timing.cacheTiers.findIndex((t) => t.ttlSeconds === edge);
  const tierNames = [
    ...timing.cacheTiers.map((t) => t.name),
    `client behind ${timing.cacheTiers[behindTier]?.name}`,
  ];
  const services = new Map<string, Service>();
  const serviceOffsets: number[] = [];
  for (const location of LOCATIONS) {
    const offsetMs = drawOffset();
    serviceOffsets.push(offsetMs);
    const serviceClock = () => clock.now() + offsetMs;
    const routers = timing.cacheTiers.map((tier, index) => {
      const tierTiming = { ...ruleTiming, localCacheTtlSeconds: tier.ttlSeconds };
      // Control: the tier feeding the client sends the old headers (a full max-age, Age 0, however
      // long its cache has held the copy).
      const oldHeaders = control === 'serverCacheNoAge' && index === behindTier;
      return new Router({
        store,
        timing: tierTiming,
        clock: serviceClock,
        ...(oldHeaders
          ? {
              cacheHeaders: (doc: LocationDocument, now: number, cfg: TimingConfig) =>
                cacheHeaders(doc, now, cfg, 0),
            }
          : {}),
      });
    });
    const client = new ClientTier(routers[behindTier] as Router, serviceClock, ruleTiming.clockSkewSeconds);
    services.set(locationKey(location), {
      location,
      serves: declaredLocation(location),
      offsetMs,
      tiers: [
        ...routers.map((router, index) =>
          control === 'noReadThrough'
            ? new NoReadThroughTier(
                router,
                { ...ruleTiming, localCacheTtlSeconds: timing.cacheTiers[index]?.ttlSeconds ?? 0 },
                serviceClock,
              )
            : router,
        ),
        client,
      ],
      client,
    });
  }
  const decideAs = control === 'regionOnlyDecide' ? regionOnlyDecide : decide;

  // Data, and the acknowledged truth it must end up matching.
  const data = new Map<string, RegionData>(LOCATIONS.map((l) => [locationKey(l), new RegionData()]));
  const regionData = (location: string | Location) =>
    data.get(typeof location === 'string' ? location : locationKey(location)) as RegionData;
  const expected = new Map<string, Set<string>>();
  const resources: string[] = [];
  store.enabled = false;
  for (let i = 0; i < options.resources; i += 1) {
    const id = `r${i}`;
    resources.push(id);
    expected.set(id, new Set());
    await replicas.create(newLocationDocument(id, pick(random, LOCATIONS), clock.now()));
  }
  store.enabled = true;
  // Every replica has the routes before the first request.
  clock.advance(timing.replicationBoundSeconds * 1000 + 1);
  const truth = async (id: string) => (await writeRegion.read(id, { from: 'writeRegion' })).doc;
  /** The write region's copy, or null while the route-deleting actor has it deleted. */
  const truthOrNull = (id: string) =>
    truth(id).catch((error: unknown) => {
      if (isRouteLockError(error, 'NotFound')) return null;
      throw error;
    });
  const reported = new Set<string>();
  checkData = (id, when) =>
    truthOrNull(id).then((doc) => {
      if (!doc) return; // deleted for a moment: checked again at the end
      const live = new Set(regionData(doc.location).shelf(id).live);
      const want = expected.get(id) as Set<string>;
      const lost = [...want].filter((item) => !live.has(item) && !reported.has(item));
      const back = [...live].filter((item) => !want.has(item) && !reported.has(item));
      for (const item of [...lost, ...back]) reported.add(item);
      const at = `at ${locationKey(doc.location)} ${when}`;
      if (lost.length > 0)
        violation(
          id,
          `${lost.length} acknowledged write(s) missing ${at}: ${lost.slice(0, 3).join(', ')}`,
          'data',
        );
      if (back.length > 0)
        violation(id, `${back.length} deleted item(s) back ${at}: ${back.slice(0, 3).join(', ')}`, 'data');
    });

  // Participants: copy one resource's data between regions, as a real data service would.
  const jobs = new Map<string, Promise<HttpResult>>();
  const bulkStartedAt = new Map<string, number>();
  const currentCopy = new Map<string, string>();
  let copies = 0;
  const copy = async (body: ParticipantRequest): Promise<HttpResult> => {
    const source = regionData(body.from);
    const target = regionData(body.to);
    // The newest job for a resource supersedes every older one (a delta attempt that overran, an older
    // migration's copy): an older job that finishes later must not land on a target that may be live.
    const job = `${body.migrationId}/${body.step}/${body.attempt}`;
    currentCopy.set(body.resourceId, job);
    let snapshot: Map<string, Item>;
    if (body.step === 'bulkCopy') {
      bulkStartedAt.set(body.migrationId, source.current);
      target.shelf(body.resourceId).clear();
      snapshot = source.snapshot(body.resourceId);
    } else {
      const since = bulkStartedAt.get(body.migrationId) ?? 0;
      snapshot = source.snapshot(body.resourceId, since);
    }
    const seconds =
      body.step === 'bulkCopy'
        ? logBetween(random, 600, 3 * 3600)
        : random() < 0.1
          ? between(random, 960, 1500) // overruns the write budget
          : logBetween(random, 10, 600);
    await scheduler.timer(clock.now() + Math.round(seconds * 1000)).promise;
    if (random() < 0.02) return { status: 503, body: 'participant busy' };
    if (currentCopy.get(body.resourceId) !== job) {
      note(body.resourceId, `${job} superseded: not applied`);
      return { status: 409, body: 'superseded' };
    }
    target.upsert(body.resourceId, snapshot);
    copies += 1;
    note(body.resourceId, `${body.migrationId} ${body.step} #${body.attempt} done (${snapshot.size} items)`);
    return { status: 200, body: { copied: snapshot.size } };
  };
  const http = (call: HttpCall): Promise<HttpResult> => {
    const key = `${call.body.migrationId}/${call.body.step}/${call.body.attempt}`;
    let job = jobs.get(key);
    if (!job) {
      job = copy(call.body).then((result) => {
        if (result.status >= 500) jobs.delete(key); // a failed job runs again when asked again
        return result;
      });
      jobs.set(key, job);
    }
    return job;
  };

  // The orchestrator: its process dies after journal step (i mod 30) of the i-th migration it started.
  const stats: FleetStats = {
    migrations: 0,
    outcomes: {},
    reasons: {},
    virtualHours: 0,
    userOps: {
      reads: 0,
      writes: 0,
      deletes: 0,
      refused: 0,
      tombstoned: 0,
      redirected: 0,
      unavailable: 0,
      raced: 0,
      landedUnderLock: 0,
      noRoute: 0,
    },
    faults: store.faults,
    storeCalls: 0,
    crashes: 0,
    crashSteps: 0,
    journalSteps: { median: 0, max: 0 },
    crashPhases: {},
    longOutages: 0,
    boundaryRestarts: 0,
    stallFors: 0,
    copies: 0,
    accountMoves,
    routeDeletes: { attempts: 0, refusedConvergencePending: 0, refusedLocked: 0, deleted: 0, recreated: 0 },
    clientTier: { decisions: 0, reads: 0, redirects: 0, requests: 0, maxAgeSeconds: 0 },
    clockOffsetsMs: {
      services: serviceOffsets,
      orchestrators: { min: Number.POSITIVE_INFINITY, max: Number.NEGATIVE_INFINITY, count: 0 },
    },
  };
  const crashPlan = new Map<string, number>();
  const crashedAt = new Set<number>();
  const journalLength = new Map<string, number>();
  // Control: copies start the moment their lock commits, while requests decided just before still land.
  const settings = {
    ...migrationSettings(config),
    ...(control === 'noInFlightGrace' ? { inFlightGraceSeconds: 0 } : {}),
    ...(control === 'noSkewMargins' ? { clockSkewSeconds: 0 } : {}),
  };
  let serial = 0;
  const keyring = TokenKeyring.ephemeral();
  // Each orchestrator instance (a process start) has its own clock: its runner and its router.
  const newRunner = (migrationState: SqliteMigrationState, prefix: string) => {
    const offsetMs = drawOffset();
    const o = stats.clockOffsetsMs.orchestrators;
    o.min = Math.min(o.min, offsetMs);
    o.max = Math.max(o.max, offsetMs);
    o.count += 1;
    const instanceClock = () => clock.now() + offsetMs;
    return new InProcessRunner({
      activities: createActivities(
        new Router({ store, timing: orchestratorTiming, clock: instanceClock }),
        orchestratorTiming,
        { keyring, records: migrationState },
      ),
      keyring,
      state: migrationState,
      scheduler: new InstanceScheduler(scheduler, offsetMs, () => stallFor(migrationState)),
      settings,
      http,
      newId: () => `${prefix}${++serial}`,
      log: (message, fields) => {
        if (message === 'migration runner failed')
          violation(String(fields.migrationId), `the runner failed: ${String(fields.error)}`, 'harness');
      },
    });
  };
  let runner: InProcessRunner | null = null;
  /**
   * Now and then an orchestrator instance stalls until around the end of a write lease one of its
   * migrations holds: the renewal due meanwhile lands at the boundary, where clocks that disagree matter.
   */
  const stallFor = async (migrationState: SqliteMigrationState): Promise<number | undefined> => {
    if (random() >= STALL_SHARE) return undefined;
    const now = clock.now();
    const ends: { id: string; end: number }[] = [];
    for (const record of migrationState.unfinished()) {
      const lock = (await truthOrNull(record.input.resourceId))?.lock;
      if (lock?.migrationId !== record.migrationId || lock.phase !== 'write' || !lock.writeExpiresAt)
        continue;
      const end = Date.parse(lock.writeExpiresAt);
      if (end > now + timing.clockSkewSeconds * 1000 && end <= now + timing.writeLeaseSeconds * 1000)
        ends.push({ id: record.input.resourceId, end });
    }
    if (ends.length === 0) return undefined;
    stats.stallFors += 1;
    const { id, end } = pick(random, ends);
    const until = Math.round(end + between(random, -2 * maxOffsetMs, maxOffsetMs));
    note(
      id,
      `the orchestrator stalls until ${new Date(until).toISOString()} (write lease ends ${new Date(end).toISOString()})`,
    );
    return until;
  };

  /** The process dies right after journaling the step, then comes back after an outage. */
  const crash = (): void => {
    if (!runner) return;
    runner.stop();
    runner = null;
    stats.crashes += 1;
    for (const record of state.unfinished()) {
      const phase = record.status.phase;
      stats.crashPhases[phase] = (stats.crashPhases[phase] ?? 0) + 1;
      note(record.input.resourceId, `orchestrator crashed (${record.migrationId} in ${phase})`);
    }
    const crashedAtMs = clock.now();
    const unfinished = state.unfinished();
    void (async () => {
      const draw = random();
      // Sometimes the process comes back around the end of a phase lease of a migration in flight (from
      // the skew before it to half the skew after, on the lock's timestamps): where clocks that disagree
      // matter most.
      const boundary =
        draw >= 0.06 && draw < 0.06 + BOUNDARY_RESTART_SHARE
          ? await phaseEndNear(unfinished, crashedAtMs)
          : undefined;
      const outageMs =
        draw < 0.01
          ? (timing.hardDeleteLeaseSeconds + 3600) * 1000 // past every phase lease
          : draw < 0.06
            ? between(random, timing.writeLeaseSeconds, 3600) * 1000 // past the write lease
            : boundary !== undefined
              ? boundary - crashedAtMs + between(random, -2 * maxOffsetMs, maxOffsetMs)
              : between(random, 0, 120) * 1000;
      if (boundary !== undefined) stats.boundaryRestarts += 1;
      if (outageMs > timing.writeLeaseSeconds * 1000) stats.longOutages += 1;
      await scheduler.timer(crashedAtMs + Math.round(outageMs)).promise;
      if (done) return;
      runner = newRunner(state, 'm');
      runner.resumeAll();
    })().catch((error: unknown) => {
      violation('fleet', `unexpected error: ${(error as Error).stack ?? String(error)}`, 'harness');
    });
  };
  /**
   * The end of a write lease held by one of these migrations (else of a hard-delete lease), if within
   * the hour: where a late renewal or swap would land.
   */
  const phaseEndNear = async (records: MigrationRecord[], from: number): Promise<number | undefined> => {
    const ends: number[] = [];
    const writeEnds: number[] = [];
    for (const record of records) {
      const lock = (await truthOrNull(record.input.resourceId))?.lock;
      if (!lock || lock.migrationId !== record.migrationId) continue;
      const end =
        lock.phase === 'write'
          ? lock.writeExpiresAt
          : lock.phase === 'hardDelete'
            ? lock.hardDeleteExpiresAt
            : undefined;
      const endMs = end === undefined ? Number.NaN : Date.parse(end);
      if (endMs > from + timing.clockSkewSeconds * 1000 && endMs < from + 3600_000)
        (lock.phase === 'write' ? writeEnds : ends).push(endMs);
    }
    if (writeEnds.length > 0) return pick(random, writeEnds);
    return ends.length > 0 ? pick(random, ends) : undefined;
  };
  class CrashingState extends SqliteMigrationState {
    override append(migrationId: string, key: string, entry: JournalEntry): void {
      super.append(migrationId, key, entry);
      journalLength.set(migrationId, Math.max(journalLength.get(migrationId) ?? 0, Number(key)));
      if (crashPlan.get(migrationId) === Number(key)) {
        crashPlan.delete(migrationId);
        crashedAt.add(Number(key));
        crash();
      }
    }
  }
  const state = new CrashingState(':memory:');
  runner = newRunner(state, 'm');
  // A second orchestrator deployment with its own state: it never crashes, but it races.
  const rivalState = new SqliteMigrationState(':memory:');
  const rival = newRunner(rivalState, 'x');
  let done = false;

  // User traffic: each op goes to a random region's service and tier, follows one redirect, and is
  // checked against the write region at that very instant.
  let itemSerial = 0;
  const userOp = async (resourceId: string, location: string, tierIndex: number, op: Operation) => {
    let serving = location;
    for (let hop = 0; hop < 2; hop += 1) {
      const service = services.get(serving) as Service;
      const tier = service.tiers[tierIndex] as Tier;
      const at = clock.now();
      // The write region's copy as the request begins: a lock committed after this is one the request
      // could not have seen; the in-flight grace, not the service, has to cover it.
      const beforeStored = await writeRegion.read(resourceId, { from: 'writeRegion' }).catch((e: unknown) => {
        if (isRouteLockError(e, 'NotFound')) return null; // the route-deleting actor is at work
        throw e;
      });
      if (!beforeStored) {
        stats.userOps.noRoute += 1;
        return;
      }
      const before = beforeStored.doc;
      const beforeEtag = beforeStored.etag;
      let view: RouteView;
      try {
        view = (await tier.view(resourceId)).view;
      } catch (error) {
        if (isRouteLockError(error, 'StoreUnavailable')) {
          stats.userOps.unavailable += 1;
          return;
        }
        if (isRouteLockError(error, 'NotFound')) {
          stats.userOps.noRoute += 1;
          return;
        }
        throw error;
      }
      const decision = decideAs(view, op, service.serves);
      const viaClient = tier === service.client;
      if (viaClient) {
        const c = stats.clientTier;
        if (decision.kind === 'notHere') c.redirects += 1;
        else if (op === 'read') c.reads += 1;
        else c.decisions += 1;
      }
      if (decision.kind === 'notHere') {
        stats.userOps.redirected += 1;
        serving = locationKey(decision.location);
        continue;
      }
      if (clock.now() !== at) throw new Error('harness: virtual time moved during one user operation');
      // Judged in true time, allowing each service the clock offset the declared skew allows: a
      // decision is wrong only if it is wrong on every clock within maxOffset of true time.
      const [early, inForce, late] = [at - maxOffsetMs, at, at + maxOffsetMs].map((t) =>
        enforcement(before, t, timing),
      ) as [Enforcement, Enforcement, Enforcement];
      const where = `${op} at ${serving} (tier ${tierNames[tierIndex]}, clock ${service.offsetMs >= 0 ? '+' : ''}${service.offsetMs} ms)`;
      if (op === 'read') {
        stats.userOps.reads += 1;
        return;
      }
      const verdict = (e: Enforcement) => (op === 'write' ? e.write : e.delete);
      if (decision.kind === 'deny') {
        stats.userOps.refused += 1;
        const afterDoc = await truthOrNull(resourceId);
        const views = [early, inForce, late];
        if (afterDoc)
          for (const t of [at - maxOffsetMs, at, at + maxOffsetMs])
            views.push(enforcement(afterDoc, t, timing));
        if (!views.some((e) => verdict(e) === 'deny'))
          violation(
            resourceId,
            `${where} refused with no write lock in force (a lock outlived its lease)`,
            'decision',
          );
        return;
      }
      // A lock that committed while this request resolved its route is one it could not have seen:
      // judged as the request began (`before`), and left to the in-flight grace and the data oracle.
      const now = await writeRegion.read(resourceId, { from: 'writeRegion' }).catch(() => null);
      if (now?.etag !== beforeEtag) stats.userOps.raced += 1;
      if (!sameLocation(before.location, service.location))
        violation(
          resourceId,
          `${where} accepted; the route is at ${locationKey(before.location)}`,
          'decision',
        );
      if (op === 'write' && early.write !== 'allow' && late.write !== 'allow')
        violation(resourceId, `${where} accepted during the write lock`, 'decision');
      if (op === 'delete' && early.delete === 'deny' && late.delete === 'deny')
        violation(
          resourceId,
          `${where}: ${decision.kind === 'tombstone' ? 'tombstone' : 'delete'} accepted during the write lock`,
          'decision',
        );
      else if (
        op === 'delete' &&
        decision.kind === 'allow' &&
        early.delete !== 'allow' &&
        late.delete !== 'allow'
      )
        violation(
          resourceId,
          `${where}: physical delete accepted while the ${before.lock?.phase} lock is in force`,
          'decision',
        );
      // Requests take a while to land what they decided, within the declared in-flight bound.
      const land = () => apply(resourceId, serving, op, decision.kind === 'tombstone', where, at, inForce);
      const steps = Math.floor((0.9 * inFlightBoundMs) / LANDING_STEP_MS);
      if (steps > 0) {
        const landAt = at + LANDING_STEP_MS * (1 + Math.floor(random() * steps));
        void scheduler
          .timer(landAt)
          .promise.then(land)
          .catch((error: unknown) => {
            violation(resourceId, `unexpected error: ${(error as Error).stack ?? String(error)}`, 'harness');
          });
      } else {
        await land();
      }
      return;
    }
  };

  const apply = async (
    resourceId: string,
    serving: string,
    op: Operation,
    tombstone: boolean,
    where: string,
    decidedAt: number,
    decided: Enforcement,
  ) => {
    const items = regionData(serving);
    let late = '';
    if (clock.now() > decidedAt) {
      late = ` (landed ${clock.now() - decidedAt} ms after its decision)`;
      const doc = await truthOrNull(resourceId);
      const now = doc ? enforcement(doc, clock.now(), timing) : decided;
      const verdict = (e: Enforcement) => (op === 'write' ? e.write : e.delete);
      if (verdict(decided) === 'allow' && verdict(now) !== 'allow') {
        stats.userOps.landedUnderLock += 1;
        late += ', under a lock that committed meanwhile';
      }
    }
    if (op === 'write') {
      const itemId = `${resourceId}.i${++itemSerial}`;
      items.write(resourceId, itemId);
      (expected.get(resourceId) as Set<string>).add(itemId);
      stats.userOps.writes += 1;
      note(resourceId, `${where}: accepted ${itemId}${late}`);
      return;
    }
    const live = items.shelf(resourceId).live;
    if (live.length === 0) return;
    const itemId = pick(random, live);
    (expected.get(resourceId) as Set<string>).delete(itemId);
    stats.userOps.deletes += 1;
    if (tombstone) {
      stats.userOps.tombstoned += 1;
      items.tombstone(resourceId, itemId);
      note(resourceId, `${where}: tombstoned ${itemId}${late}`);
    } else {
      items.shelf(resourceId).remove(itemId);
      note(resourceId, `${where}: deleted ${itemId}${late}`);
    }
  };

  const traffic = async () => {
    for (let i = 0; i < options.resources; i += 1) {
      const r = random();
      const op: Operation = r < 0.45 ? 'read' : r < 0.85 ? 'write' : 'delete';
      await userOp(
        pick(random, resources),
        locationKey(pick(random, LOCATIONS)),
        Math.floor(random() * tierNames.length),
        op,
      );
    }
  };

  // The route-deleting actor (a user or operator): shortly after some swaps it DELETEs the route through
  // a router of its own, expecting 409 ConvergencePending while the retired source is write-blocked, and
  // comes back after Retry-After; once deleted, the route is re-created at once at the same location.
  // Control: it deletes straight through the store, stopped only by a live lock (as the old code was).
  const deleting = new Set<string>();
  const operatorOffsetMs = drawOffset();
  const operatorClock = () => clock.now() + operatorOffsetMs;
  const operator = new Router({ store, timing: ruleTiming, clock: operatorClock });
  const pause = (ms: number) => scheduler.timer(clock.now() + Math.round(ms)).promise;
  const deleteRoute = async (id: string): Promise<void> => {
    if (control !== 'deleteDuringRetiredWindow') return operator.deleteRoute(id);
    const current = await store.read(id, { from: 'writeRegion' });
    const lock = liveLock(current.doc, operatorClock());
    if (lock) throw new RouteLockError('Locked', `Route ${id} is locked by ${lock.migrationId}.`);
    await store.delete(id, current.etag);
  };
  const deleteAndRecreate = async (id: string, round: number): Promise<void> => {
    if (done || deleting.has(id)) return;
    const doc = await truthOrNull(id);
    if (!doc) return;
    deleting.add(id);
    stats.routeDeletes.attempts += 1;
    let comeBackInMs: number | undefined;
    try {
      for (let attempt = 1; ; attempt += 1) {
        try {
          await deleteRoute(id);
          break;
        } catch (error) {
          if (isRouteLockError(error, 'ConvergencePending')) {
            stats.routeDeletes.refusedConvergencePending += 1;
            note(
              id,
              `DELETE route: 409 ConvergencePending (Retry-After ${error.retryAfterSeconds ?? '-'} s)`,
            );
            comeBackInMs = (error.retryAfterSeconds ?? 1) * 1000 + between(random, 0, 600_000);
            return;
          }
          if (isRouteLockError(error, 'Locked')) {
            stats.routeDeletes.refusedLocked += 1;
            note(id, 'DELETE route: 423 Locked');
            return;
          }
          // A lost answer may have committed: a retry then finds the route gone.
          if (isRouteLockError(error, 'NotFound') && attempt > 1) break;
          if (!isRouteLockError(error, 'StoreUnavailable') && !isRouteLockError(error, 'PreconditionFailed'))
            throw error;
          if (attempt >= 10) return;
          await pause(1000);
        }
      }
      stats.routeDeletes.deleted += 1;
      note(id, `DELETE route: deleted (at ${locationKey(doc.location)}); re-creating it there`);
      for (;;) {
        try {
          await operator.createRoute(id, doc.location);
          break;
        } catch (error) {
          if (!isRouteLockError(error, 'StoreUnavailable')) throw error;
          await pause(1000);
        }
      }
      stats.routeDeletes.recreated += 1;
      note(id, `PUT route: re-created at ${locationKey(doc.location)}`);
    } finally {
      deleting.delete(id);
      if (comeBackInMs !== undefined && round < 3) {
        const later = comeBackInMs;
        void pause(later)
          .then(() => deleteAndRecreate(id, round + 1))
          .catch((error: unknown) => {
            violation(id, `unexpected error: ${(error as Error).stack ?? String(error)}`, 'harness');
          });
      }
    }
  };
  afterSwap = (id) => {
    if (random() >= DELETE_AFTER_SWAP_SHARE) return;
    void pause(between(random, 1000, 600_000))
      .then(() => deleteAndRecreate(id, 1))
      .catch((error: unknown) => {
        violation(id, `unexpected error: ${(error as Error).stack ?? String(error)}`, 'harness');
      });
  };

  // The driver: keeps `concurrency` migrations going until `migrations` have started. A resource
  // mostly rests three hours after its last migration; sometimes it goes again at once (409s).
  let started = 0;
  const lastBusyAt = new Map<string, number>();
  const running = new Map<string, string>();
  const busyResources = () =>
    new Set([...state.unfinished(), ...rivalState.unfinished()].map((m) => m.input.resourceId));
  const startOne = async (busy: Set<string>) => {
    const idle = resources.filter((id) => !busy.has(id) && !deleting.has(id));
    const cooled = idle.filter((id) => clock.now() - (lastBusyAt.get(id) ?? 0) > 3 * 3600_000);
    const rivalRace = random() < 0.03 && busy.size > 0;
    const pool = rivalRace
      ? [...busy].filter((id) => !deleting.has(id))
      : random() < 0.9 && cooled.length > 0
        ? cooled
        : idle;
    const by = rivalRace ? rival : runner;
    if (pool.length === 0 || !by) return false;
    const resourceId = pick(random, pool);
    const here = (await truth(resourceId)).location;
    const elsewhere = LOCATIONS.filter((l) => !sameLocation(l, here));
    // From a region with several accounts, half the moves go to another account of the same region.
    const sameRegion = elsewhere.filter((l) => l.region === here.region);
    const target: Location =
      random() < 0.05
        ? here
        : sameRegion.length > 0 && random() < 0.5
          ? pick(random, sameRegion)
          : pick(random, elsewhere);
    const { record, created } = by.start({ resourceId, target });
    if (!created) return false;
    if (target.region === here.region && !sameLocation(target, here)) accountMoves.started += 1;
    started += 1;
    busy.add(resourceId);
    running.set(resourceId, record.migrationId);
    // Journal position 0 is the first status, never journaled: crash positions run 1..CRASH_STEPS.
    if (by === runner) crashPlan.set(record.migrationId, 1 + (started % CRASH_STEPS));
    note(
      resourceId,
      `${record.migrationId} started ${locationKey(here)} → ${locationKey(target)}${rivalRace ? ' (rival)' : ''}`,
    );
    return true;
  };
  const drive = async () => {
    const busy = busyResources();
    for (const [id, migrationId] of running)
      if (!busy.has(id)) {
        running.delete(id);
        const record = (await state.get(migrationId)) ?? (await rivalState.get(migrationId));
        note(id, `${migrationId} ended ${record?.status.status}: ${record?.status.error ?? ''}`);
      }
    for (const id of busy) lastBusyAt.set(id, clock.now());
    const launchable = Math.min(options.concurrency - busy.size, options.migrations - started);
    for (let i = 0; i < launchable; i += 1) if (!(await startOne(busy))) break;
    if (started >= options.migrations && busy.size === 0) done = true;
  };

  const every = (ms: number, work: () => Promise<void>): void => {
    void (async () => {
      while (!done) {
        await scheduler.timer(clock.now() + ms).promise;
        if (!done)
          await work().catch((error: unknown) => {
            violation('fleet', `unexpected error: ${(error as Error).stack ?? String(error)}`, 'harness');
          });
      }
    })();
  };
  const startedAtMs = clock.now();
  every(TRAFFIC_EVERY_MS, traffic);
  every(DRIVER_EVERY_MS, drive);
  const limitMs = startedAtMs + 5000 * 3600_000;
  while (!done) {
    await scheduler.runUntilIdle({ maxTimers: 1 });
    if (options.stopAtFirstViolation && violations.length > 0) done = true;
    if (clock.now() > limitMs) throw new Error('harness: the fleet did not finish in 5,000 virtual hours');
  }
  (runner as InProcessRunner | null)?.stop();
  rival.stop();
  stats.virtualHours = (clock.now() - startedAtMs) / 3600_000;

  // The end state.
  const records = [...state.recent(1_000_000), ...rivalState.recent(1_000_000)];
  for (const record of records) {
    const outcome = record.status.status;
    stats.outcomes[outcome] = (stats.outcomes[outcome] ?? 0) + 1;
    if (outcome === 'Failed' || outcome === 'Conflict') {
      const reason = `${record.migrationId.startsWith('x') ? 'rival ' : ''}${outcome}: ${(record.status.error ?? '').replace(/\d[\d:.TZ-]*/g, 'N').slice(0, 90)}`;
      stats.reasons[reason] = (stats.reasons[reason] ?? 0) + 1;
    }
    if (!terminalStates.has(outcome) && !options.stopAtFirstViolation)
      violation(record.input.resourceId, `${record.migrationId} ended ${outcome}`, 'lifecycle');
  }
  stats.migrations = records.length;
  // The data, even after a control stopped early: whatever has swapped must hold what was acknowledged.
  await Promise.all(resources.map((id) => checkData(id, 'at the end')));
  stats.storeCalls = store.calls;
  stats.crashSteps = crashedAt.size;
  const lengths = [...journalLength.values()].sort((a, b) => a - b);
  stats.journalSteps = { median: lengths[Math.floor(lengths.length / 2)] ?? 0, max: lengths.at(-1) ?? 0 };
  stats.copies = copies;
  for (const service of services.values()) {
    stats.clientTier.requests += service.client.requests;
    stats.clientTier.maxAgeSeconds = Math.max(stats.clientTier.maxAgeSeconds, service.client.maxAgeSeconds);
  }
  state.close();
  rivalState.close();
  await writeRegion.close();

  // A control is caught by the kind of violation its bug must cause, not by any failure at all.
  const caught =
    control === 'none' ? undefined : violations.some((v) => controlCaughtBy[control].includes(v.kind));
  const first = violations.find((v) => v.kind === 'harness') ?? violations[0];
  const firstResource = first?.text.split(' ')[0] ?? '';
  return {
    scenario:
      control === 'none'
        ? `fleet: ${options.faultRate * 100} % store faults, orchestrator crashes`
        : `control (fleet): ${control}`,
    runs: stats.migrations,
    violations: violations.length,
    seed: options.seed,
    ...(caught === undefined ? {} : { caught }),
    ...(first
      ? {
          counterexample: `${violations.length} violation(s); first: ${first.text}\n    events of ${firstResource}:\n      ${(trail.get(firstResource) ?? []).join('\n      ')}`,
        }
      : {}),
    ...(control === 'none' ? { summary: summarize(stats) } : {}),
    stats,
  };
}

const n = (value: number) => value.toLocaleString('en-US');
const counts = (record: Record<string, number>) =>
  Object.entries(record)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${n(v)}`)
    .join(', ');

function summarize(s: FleetStats): string {
  const f = s.faults;
  const injected =
    f.throttled + f.unavailable + f.readTimeout + f.writeTimeoutLost + f.writeTimeoutCommitted + f.conflict;
  const u = s.userOps;
  const lines = [
    `${n(s.migrations)} migrations (${counts(s.outcomes)}) in ${s.virtualHours.toFixed(1)} virtual hours; ${n(s.copies)} participant copies`,
    `store: ${n(s.storeCalls)} calls, ${n(injected)} faults injected (${((100 * injected) / s.storeCalls).toFixed(1)} %): ` +
      `429 ${n(f.throttled)}, 503 ${n(f.unavailable)}, read timeouts ${n(f.readTimeout)}, write timeouts ` +
      `${n(f.writeTimeoutLost + f.writeTimeoutCommitted)} (${n(f.writeTimeoutCommitted)} of them committed), 412 ${n(f.conflict)}`,
    `orchestrator: ${n(s.crashes)} process crashes, each right after the planned journal position (1–${CRASH_STEPS}) of ` +
      `one migration — ${s.crashSteps} distinct positions hit (a migration journals ${s.journalSteps.median} steps at the ` +
      `median, ${s.journalSteps.max} at most); migrations in flight at a crash, by phase: ` +
      `${counts(s.crashPhases)}; ${n(s.longOutages)} outages longer than the write lease; ${n(s.boundaryRestarts)} restarts ` +
      `timed to around the end of a phase lease, ${n(s.stallFors)} stalls (timers held until around the end of a write lease)`,
    `users: ${n(u.reads)} reads, ${n(u.writes)} writes, ${n(u.deletes)} deletes (${n(u.tombstoned)} tombstoned), ` +
      `${n(u.refused)} refused (423), ${n(u.redirected)} redirected, ${n(u.unavailable)} store-unavailable; ` +
      `every write and delete lands 0.5–4.5 s after its decision: ${n(u.landedUnderLock)} landed under a lock ` +
      `that committed meanwhile; ${n(u.raced)} requests raced a commit while resolving their route; ` +
      `${n(u.noRoute)} found no route (deleted for a moment)`,
    `accounts: ${n(s.accountMoves.started)} migrations between two accounts of one region started, ` +
      `${n(s.accountMoves.swapped)} swapped`,
    `route DELETE after a swap: ${n(s.routeDeletes.attempts)} attempts, ${n(s.routeDeletes.refusedConvergencePending)} ` +
      `refused 409 ConvergencePending, ${n(s.routeDeletes.refusedLocked)} refused 423 Locked, ` +
      `${n(s.routeDeletes.deleted)} deleted and ${n(s.routeDeletes.recreated)} re-created at the same location`,
    `client tier (each service's RoutingClient behind its edge tier, over HTTP): ${n(s.clientTier.decisions)} ` +
      `writes and deletes decided on its views, ${n(s.clientTier.reads)} reads, ${n(s.clientTier.redirects)} ` +
      `redirects; ${n(s.clientTier.requests)} requests reached the edge (the largest Age it sent: ` +
      `${n(s.clientTier.maxAgeSeconds)} s)`,
    `clocks: service offsets ${s.clockOffsetsMs.services.map((o) => `${o >= 0 ? '+' : ''}${o}`).join(', ')} ms; ` +
      `${n(s.clockOffsetsMs.orchestrators.count)} orchestrator instances, offsets ` +
      `${s.clockOffsetsMs.orchestrators.min} … ${s.clockOffsetsMs.orchestrators.max} ms`,
  ];
  if (Object.keys(s.reasons).length > 0) lines.push(`not completed: ${counts(s.reasons)}`);
  return lines.join('\n');
}
