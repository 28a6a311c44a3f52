import { TokenKeyring } from '../shared/security/tokenKeys';
import { prng } from '../bench/lib';
import { decide } from '../shared/client';
import { ManualClock } from '../shared/clock';
import { type TimingConfig, parseConfig } from '../shared/config';
import { RouteLockError, isRouteLockError } from '../shared/errors';
import {
  type Location,
  type LocationDocument,
  type StoredDocument,
  newLocationDocument,
  sameLocation,
} from '../shared/lock/document';
import { isLive, writeLockInForce } from '../shared/lock/rules';
import {
  type Enforcement,
  type Operation,
  type RouteView,
  enforcement,
  routeView,
} from '../shared/lock/view';
import { createActivities } from '../shared/migration/activities';
import { InProcessRunner } from '../shared/migration/inProcess';
import { type JournalEntry, SqliteMigrationState } from '../shared/migration/records';
import { VirtualScheduler } from '../shared/migration/scheduler';
import type { HttpCall, HttpResult, ParticipantRequest } from '../shared/migration/types';
import { terminalStates } from '../shared/migration/types';
import { migrationSettings } from '../shared/migration/workflow';
import { Router } from '../shared/router';
import type { ListOptions, ListPage, LocationStore, ReadFrom } from '../shared/store/port';
import { SqliteStore } from '../shared/store/sqlite';
import { LaggingStore } from '../test/support/laggingStore';
import type { ScenarioResult } from './scenarios';

/**
 * The fleet simulation (issue #7 §3): the real router, lock rules, workflow and in-process runner, on
 * virtual time, in an environment that misbehaves. Only the environment is simulated:
 *
 * - one write region (SQLite) under replicas that lag by up to the replication bound (LaggingStore);
 * - store faults on every call at `faultRate`: throttling (429), outage (503), timeouts (half of the
 *   timed-out writes did commit: the caller cannot tell), and real 412s (a concurrent write lands first);
 * - a service per region with the three declared cache tiers, each a Router whose cache TTL is that
 *   tier's (edge 2 h, regional 30 min, local 60 s by default), enforcing `decide()` on user reads, writes
 *   and deletes against per-region data;
 * - participants that bulk- and delta-copy that data, as real ones would (snapshot at start, upsert at
 *   the end, the delta being everything changed since the bulk copy began);
 * - migrations through the in-process runner, whose process is killed after every step (migration i
 *   dies after its journal step i mod 30) and restarted after a pause, sometimes past a lease; and a
 *   rival orchestrator that now and then starts a migration of its own.
 *
 * Oracles, checked at the instant of every user operation against the write region's copy, on every
 * committed version, and at the end: no write or physical delete accepted at the source once the lock
 * that forbids it is in force, nor anywhere but the committed location; no refusal without a lock in
 * force (a lock outliving its lease); a location changes only by one write that also drops the lock;
 * every acknowledged write, and no deleted item, at the committed location at the end; every migration
 * ends Completed, Failed, Conflict or NoOp; no lock past its cap.
 */

export type FleetControl = 'none' | 'convergenceShorterThanCacheTtl' | 'noReadThrough' | 'noInFlightGrace';

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
    | 'landedUnderLock',
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
  copies: number;
}

export interface FleetResult extends ScenarioResult {
  stats: FleetStats;
}

const REGIONS = ['westeurope', 'eastus', 'northeurope'] as const;
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
class FaultInjectingStore implements LocationStore {
  readonly kind: string;
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
    private readonly inner: LocationStore,
    private readonly random: Random,
    private readonly rate: number,
  ) {
    this.kind = `faulty(${inner.kind})`;
  }

  get counters() {
    return this.inner.counters;
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

  read(id: string, options: { from: ReadFrom }): Promise<StoredDocument> {
    return this.readLike(() => this.inner.read(id, options));
  }
  create(doc: LocationDocument): Promise<StoredDocument> {
    return this.writeLike(doc.id, () => this.inner.create(doc));
  }
  replace(doc: LocationDocument, ifMatch: string): Promise<StoredDocument> {
    return this.writeLike(doc.id, () => this.inner.replace(doc, ifMatch));
  }
  delete(id: string, ifMatch: string): Promise<void> {
    return this.writeLike(id, () => this.inner.delete(id, ifMatch));
  }
  list(options: ListOptions): Promise<ListPage> {
    return this.readLike(() => this.inner.list(options));
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

/** The write region, checking every committed version against the previous one: no partial cutover. */
class CommitWatchingStore implements LocationStore {
  readonly kind: string;
  private readonly last = new Map<string, LocationDocument>();

  constructor(
    private readonly inner: LocationStore,
    private readonly now: () => number,
    private readonly violation: (resourceId: string, message: string, kind: ViolationKind) => void,
    private readonly onSwap: (resourceId: string) => void,
  ) {
    this.kind = inner.kind;
  }
  get counters() {
    return this.inner.counters;
  }
  read(id: string, options: { from: ReadFrom }) {
    return this.inner.read(id, options);
  }
  async create(doc: LocationDocument) {
    const stored = await this.inner.create(doc);
    this.last.set(doc.id, stored.doc);
    return stored;
  }
  async replace(doc: LocationDocument, ifMatch: string) {
    const stored = await this.inner.replace(doc, ifMatch);
    const before = this.last.get(doc.id);
    this.last.set(doc.id, stored.doc);
    if (before) this.checkVersion(before, stored.doc);
    return stored;
  }
  delete(id: string, ifMatch: string) {
    return this.inner.delete(id, ifMatch);
  }
  list(options: ListOptions) {
    return this.inner.list(options);
  }
  close() {
    return this.inner.close();
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
    if (before.lock && lock && isLive(before.lock, now) && before.lock.migrationId !== lock.migrationId)
      problems.push(`a live lock of ${before.lock.migrationId} replaced by one of ${lock.migrationId}`);
    if (!sameLocation(before.location, after.location)) {
      this.checkCutover(before, after, problems);
      this.onSwap(after.id);
    }
    for (const p of problems) this.violation(after.id, p, 'version');
  }

  private checkCutover(before: LocationDocument, after: LocationDocument, problems: string[]): void {
    const now = this.now();
    if (!before.lock || !writeLockInForce(before.lock, now))
      problems.push('the location changed without a write lock in force');
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
type ViolationKind = 'decision' | 'data' | 'version' | 'lifecycle' | 'harness';
const controlCaughtBy: Record<Exclude<FleetControl, 'none'>, ViolationKind[]> = {
  convergenceShorterThanCacheTtl: ['decision', 'data'],
  noReadThrough: ['decision', 'data'],
  noInFlightGrace: ['data'],
};

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
  const timing = config.timing;
  const inFlightBoundMs = config.migration.inFlightGraceSeconds * 1000;
  const edge = Math.max(...timing.cacheTiers.map((t) => t.ttlSeconds));
  // Control: the declaration forgot the largest tier (edge), as a service that added a CDN might.
  const orchestratorTiming: TimingConfig =
    control === 'convergenceShorterThanCacheTtl'
      ? {
          ...timing,
          convergenceDelaySeconds:
            Math.max(0, ...timing.cacheTiers.map((t) => t.ttlSeconds).filter((s) => s < edge)) +
            timing.replicationBoundSeconds,
        }
      : timing;

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
  const watched = new CommitWatchingStore(writeRegion, clock.now, violation, (resourceId) => {
    void scheduler
      .timer(clock.now() + inFlightBoundMs + 1)
      .promise.then(() => checkData(resourceId, 'after its swap'));
  });
  const replicas = new LaggingStore(watched, clock.now, () =>
    Math.floor(random() * timing.replicationBoundSeconds * 1000),
  );
  const store = new FaultInjectingStore(replicas, random, options.faultRate);

  // Services: one per region, three cache tiers each.
  const services = new Map<string, Tier[]>();
  for (const region of REGIONS) {
    services.set(
      region,
      timing.cacheTiers.map((tier) => {
        const tierTiming = { ...timing, localCacheTtlSeconds: tier.ttlSeconds };
        const router = new Router({ store, timing: tierTiming, clock: clock.now });
        return control === 'noReadThrough' ? new NoReadThroughTier(router, tierTiming, clock.now) : router;
      }),
    );
  }

  // Data, and the acknowledged truth it must end up matching.
  const data = new Map<string, RegionData>(REGIONS.map((r) => [r, new RegionData()]));
  const regionData = (region: string) => data.get(region) as RegionData;
  const expected = new Map<string, Set<string>>();
  const resources: string[] = [];
  store.enabled = false;
  for (let i = 0; i < options.resources; i += 1) {
    const id = `r${i}`;
    resources.push(id);
    expected.set(id, new Set());
    await replicas.create(newLocationDocument(id, { region: pick(random, REGIONS) }, clock.now()));
  }
  store.enabled = true;
  // Every replica has the routes before the first request.
  clock.advance(timing.replicationBoundSeconds * 1000 + 1);
  const truth = async (id: string) => (await writeRegion.read(id, { from: 'writeRegion' })).doc;
  const reported = new Set<string>();
  checkData = (id, when) =>
    truth(id).then((doc) => {
      const live = new Set(regionData(doc.location.region).shelf(id).live);
      const want = expected.get(id) as Set<string>;
      const lost = [...want].filter((item) => !live.has(item) && !reported.has(item));
      const back = [...live].filter((item) => !want.has(item) && !reported.has(item));
      for (const item of [...lost, ...back]) reported.add(item);
      const at = `at ${doc.location.region} ${when}`;
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
    const source = regionData(body.from.region);
    const target = regionData(body.to.region);
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
    },
    faults: store.faults,
    storeCalls: 0,
    crashes: 0,
    crashSteps: 0,
    journalSteps: { median: 0, max: 0 },
    crashPhases: {},
    longOutages: 0,
    copies: 0,
  };
  const crashPlan = new Map<string, number>();
  const crashedAt = new Set<number>();
  const journalLength = new Map<string, number>();
  // Control: copies start the moment their lock commits, while requests decided just before still land.
  const settings =
    control === 'noInFlightGrace'
      ? { ...migrationSettings(config), inFlightGraceSeconds: 0 }
      : migrationSettings(config);
  let serial = 0;
  const keyring = TokenKeyring.ephemeral();
  const newRunner = (migrationState: SqliteMigrationState, prefix: string) =>
    new InProcessRunner({
      activities: createActivities(
        new Router({ store, timing: orchestratorTiming, clock: clock.now }),
        orchestratorTiming,
        { keyring, records: migrationState },
      ),
      keyring,
      state: migrationState,
      scheduler,
      settings,
      http,
      newId: () => `${prefix}${++serial}`,
      log: (message, fields) => {
        if (message === 'migration runner failed')
          violation(String(fields.migrationId), `the runner failed: ${String(fields.error)}`, 'harness');
      },
    });
  let runner: InProcessRunner | null = null;

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
    const draw = random();
    const outageMs =
      draw < 0.01
        ? (timing.hardDeleteLeaseSeconds + 3600) * 1000 // past every phase lease
        : draw < 0.06
          ? between(random, timing.writeLeaseSeconds, 3600) * 1000 // past the write lease
          : between(random, 0, 120) * 1000;
    if (outageMs > timing.writeLeaseSeconds * 1000) stats.longOutages += 1;
    void scheduler.timer(clock.now() + Math.round(outageMs)).promise.then(() => {
      if (done) return;
      runner = newRunner(state, 'm');
      runner.resumeAll();
    });
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
  const userOp = async (resourceId: string, region: string, tierIndex: number, op: Operation) => {
    let serving = region;
    for (let hop = 0; hop < 2; hop += 1) {
      const tier = (services.get(serving) as Tier[])[tierIndex] as Tier;
      const at = clock.now();
      // The write region's copy as the request begins: a lock committed after this is one the request
      // could not have seen; the in-flight grace, not the service, has to cover it.
      const beforeStored = await writeRegion.read(resourceId, { from: 'writeRegion' });
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
        throw error;
      }
      const decision = decide(view, op, serving);
      if (decision.kind === 'notHere') {
        stats.userOps.redirected += 1;
        serving = decision.location.region;
        continue;
      }
      if (clock.now() !== at) throw new Error('harness: virtual time moved during one user operation');
      const inForce = enforcement(before, at, timing);
      const where = `${op} at ${serving} (tier ${timing.cacheTiers[tierIndex]?.name})`;
      if (op === 'read') {
        stats.userOps.reads += 1;
        return;
      }
      if (decision.kind === 'deny') {
        stats.userOps.refused += 1;
        const after = enforcement(await truth(resourceId), at, timing);
        const verdict = (e: typeof inForce) => (op === 'write' ? e.write : e.delete);
        if (verdict(inForce) !== 'deny' && verdict(after) !== 'deny')
          violation(
            resourceId,
            `${where} refused with no write lock in force (a lock outlived its lease)`,
            'decision',
          );
        return;
      }
      // A lock that committed while this request resolved its route is one it could not have seen:
      // judged as the request began (`before`), and left to the in-flight grace and the data oracle.
      if ((await writeRegion.read(resourceId, { from: 'writeRegion' })).etag !== beforeEtag)
        stats.userOps.raced += 1;
      if (before.location.region !== serving)
        violation(resourceId, `${where} accepted; the route is at ${before.location.region}`, 'decision');
      if (op === 'write' && inForce.write !== 'allow')
        violation(resourceId, `${where} accepted during the write lock`, 'decision');
      if (op === 'delete' && inForce.delete === 'deny')
        violation(
          resourceId,
          `${where}: ${decision.kind === 'tombstone' ? 'tombstone' : 'delete'} accepted during the write lock`,
          'decision',
        );
      else if (op === 'delete' && decision.kind === 'allow' && inForce.delete !== 'allow')
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
      const now = enforcement(await truth(resourceId), clock.now(), timing);
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
        pick(random, REGIONS),
        Math.floor(random() * timing.cacheTiers.length),
        op,
      );
    }
  };

  // The driver: keeps `concurrency` migrations going until `migrations` have started. A resource
  // mostly rests three hours after its last migration; sometimes it goes again at once (409s).
  let started = 0;
  const lastBusyAt = new Map<string, number>();
  const running = new Map<string, string>();
  const busyResources = () =>
    new Set([...state.unfinished(), ...rivalState.unfinished()].map((m) => m.input.resourceId));
  const startOne = async (busy: Set<string>) => {
    const idle = resources.filter((id) => !busy.has(id));
    const cooled = idle.filter((id) => clock.now() - (lastBusyAt.get(id) ?? 0) > 3 * 3600_000);
    const rivalRace = random() < 0.03 && busy.size > 0;
    const pool = rivalRace ? [...busy] : random() < 0.9 && cooled.length > 0 ? cooled : idle;
    const by = rivalRace ? rival : runner;
    if (pool.length === 0 || !by) return false;
    const resourceId = pick(random, pool);
    const here = (await truth(resourceId)).location;
    const target: Location =
      random() < 0.05
        ? here
        : {
            region: pick(
              random,
              REGIONS.filter((r) => r !== here.region),
            ),
          };
    const { record, created } = by.start({ resourceId, target });
    if (!created) return false;
    started += 1;
    busy.add(resourceId);
    running.set(resourceId, record.migrationId);
    // Journal position 0 is the first status, never journaled: crash positions run 1..CRASH_STEPS.
    if (by === runner) crashPlan.set(record.migrationId, 1 + (started % CRASH_STEPS));
    note(resourceId, `${record.migrationId} started → ${target.region}${rivalRace ? ' (rival)' : ''}`);
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
      `${counts(s.crashPhases)}; ${n(s.longOutages)} outages longer than the write lease`,
    `users: ${n(u.reads)} reads, ${n(u.writes)} writes, ${n(u.deletes)} deletes (${n(u.tombstoned)} tombstoned), ` +
      `${n(u.refused)} refused (423), ${n(u.redirected)} redirected, ${n(u.unavailable)} store-unavailable; ` +
      `every write and delete lands 0.5–4.5 s after its decision: ${n(u.landedUnderLock)} landed under a lock ` +
      `that committed meanwhile; ${n(u.raced)} requests raced a commit while resolving their route`,
  ];
  if (Object.keys(s.reasons).length > 0) lines.push(`not completed: ${counts(s.reasons)}`);
  return lines.join('\n');
}
