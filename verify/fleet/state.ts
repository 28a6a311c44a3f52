import { type Config, type TimingConfig, parseConfig } from '../../shared/config';
import { isRouteLockError } from '../../shared/core/errors';
import type { Location, LocationDocument, StoredDocument } from '../../shared/core/lock/document';
import type { Decision } from '../../shared/core/client';
import type { Operation, RouteView } from '../../shared/core/lock/view';
import type { InProcessRunner } from '../../shared/migration/inProcess';
import type { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import type { MigrationSettings } from '../../shared/migration/types';
import type { Router } from '../../shared/core/router';
import type { TokenKeyring } from '../../shared/core/security/tokenKeys';
import type { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { ManualClock } from '../../testkit/clock';
import type { LaggingStore } from '../../testkit/laggingStore';
import { prng } from '../../testkit/prng';
import { VirtualScheduler } from '../../testkit/virtualScheduler';
import { controlTimings } from './controls';
import type { FaultInjectingStore } from './faults';
import type { CrashingState } from './orchestrator';
import type { ParticipantState } from './participants';
import type { CampaignActor } from './campaign';
import type { Service } from './services';
import type { FleetControl, FleetOptions, FleetStats, ViolationKind } from './types';
import { type Random, type RegionData, between, locationKey } from './world';

/** What the whole run shares and that never changes once drawn: options, timings, true (virtual) time. */
export interface FleetEnv {
  options: FleetOptions;
  control: FleetControl;
  random: Random;
  config: Config;
  /** Production timing (its clock-skew margin included): the oracles judge with it, in true time. */
  timing: TimingConfig;
  /** What every router and rule runs with (the noSkewMargins control drops the margins). */
  ruleTiming: TimingConfig;
  /** What the orchestrators run with (the convergence control forgets the edge tier). */
  orchestratorTiming: TimingConfig;
  inFlightBoundMs: number;
  /** The most any clock is off true time: half the declared skew, so any two differ by at most the skew. */
  maxOffsetMs: number;
  clock: ManualClock;
  scheduler: VirtualScheduler;
  violations: { kind: ViolationKind; text: string }[];
  /** The latest events of each resource, for the counterexample. */
  trail: Map<string, string[]>;
  /**
   * Slow reads planted by a hot resource's burst (users.ts hotBursts): router key and id → how long the
   * next write-region read of that id by that router takes. Taken by that read (services.ts).
   */
  heldReads: Map<string, number>;
  /** The burst whose slow read is in flight, by service and resource: when it began and what it read. */
  bursts: Map<string, { at: number; before: StoredDocument }>;
}

/** The run's state: the environment, the stores and services, the actors' bookkeeping, and the stats. */
export interface Fleet extends FleetEnv {
  writeRegion: SqliteStore;
  replicas: LaggingStore;
  /** Below every router: faults over the lagging replicas over the watched write region. */
  store: FaultInjectingStore;
  /** The end of each route's latest retired-source window, as its swap wrote it: outlives a delete. */
  retiredUntil: Map<string, number>;
  services: Map<string, Service>;
  /** The declared tiers' names, then the client tier's. */
  tierNames: string[];
  decideAs: (view: RouteView, operation: Operation, serving: string | Location) => Decision;
  /** Each location's data, and the acknowledged truth it must end up matching. */
  data: Map<string, RegionData>;
  expected: Map<string, Set<string>>;
  resources: string[];
  /** Items already reported lost or back: each is reported once. */
  reported: Set<string>;
  participants: ParticipantState;
  stats: FleetStats;
  /** The journal position after which each migration's process dies. */
  crashPlan: Map<string, number>;
  crashedAt: Set<number>;
  journalLength: Map<string, number>;
  /** The workflow's settings for a legacy migration, and for one that asks for announced locks. */
  settings: MigrationSettings;
  announcedSettings: MigrationSettings;
  keyring: TokenKeyring;
  /** Migration ids handed out so far, by both orchestrators. */
  serial: number;
  state: CrashingState;
  rivalState: SqliteMigrationState;
  /** The crashing orchestrator's current instance; null while its process is down. */
  runner: InProcessRunner | null;
  /** A second deployment with its own state: it never crashes, but it races. */
  rival: InProcessRunner | null;
  /** Every orchestrator instance stopped so far (a crash, the run's end): settled before the state closes. */
  stopping: Promise<void>[];
  done: boolean;
  itemSerial: number;
  /** Routes the route-deleting actor is working on. */
  deleting: Set<string>;
  operatorOffsetMs: number;
  /** The route-deleting actor's own router, on its own clock. */
  operator: Router;
  started: number;
  lastBusyAt: Map<string, number>;
  /** Migrations in flight by resource, for the trail when they end. */
  running: Map<string, string>;
  /** The campaign and its oracles' bookkeeping (FleetOptions.campaign). */
  campaign?: CampaignActor;
  /** When a lock, write lock or window last left each route's write region (readStats.ts). */
  windowEndedAt: Map<string, number>;
  /**
   * Whether the next migration started asks for announced locks: drawn per start by the driver from a
   * generator of its own (the run's other draws stay as they were), read by the runners' settings.
   */
  announceNext: boolean;
  announceRandom: Random;
}

export function fleetEnv(options: FleetOptions): FleetEnv {
  const control = options.control ?? 'none';
  const config = parseConfig({
    ROUTELOCK_PARTICIPANTS: '[{"name":"data","url":"https://data.invalid/migrate"}]',
  });
  const clock = new ManualClock(Date.UTC(2026, 10, 30));
  return {
    options,
    control,
    random: prng(options.seed),
    config,
    ...controlTimings(control, config.timing),
    inFlightBoundMs: config.migration.inFlightGraceSeconds * 1000,
    maxOffsetMs: (config.timing.clockSkewSeconds * 1000) / 2,
    clock,
    scheduler: new VirtualScheduler(clock),
    violations: [],
    trail: new Map(),
    heldReads: new Map(),
    bursts: new Map(),
  };
}

/**
 * A clock's offset from true time, within ±skew/2. The noSkewMargins control draws the edges only: the
 * widest disagreements the skew allows.
 */
export const drawOffset = (env: FleetEnv): number =>
  env.control === 'noSkewMargins'
    ? env.random() < 0.5
      ? -env.maxOffsetMs
      : env.maxOffsetMs
    : Math.round(between(env.random, -env.maxOffsetMs, env.maxOffsetMs));

export function note(env: FleetEnv, resourceId: string, event: string): void {
  const events = env.trail.get(resourceId) ?? [];
  events.push(`${new Date(env.clock.now()).toISOString()} ${event}`);
  if (process.env.FLEET_TRACE === resourceId) process.stderr.write(`${events.at(-1)}\n`);
  if (events.length > 25) events.shift();
  env.trail.set(resourceId, events);
}

export function violation(env: FleetEnv, resourceId: string, message: string, kind: ViolationKind): void {
  note(env, resourceId, `VIOLATION ${message}`);
  env.violations.push({
    kind,
    text: `${resourceId} at ${new Date(env.clock.now()).toISOString()}: ${message}`,
  });
}

/** A failure of the harness itself (an error nothing expected): reported as a violation of its own kind. */
export const harnessError =
  (env: FleetEnv, resourceId: string) =>
  (error: unknown): void =>
    violation(env, resourceId, `unexpected error: ${(error as Error).stack ?? String(error)}`, 'harness');

/** Resolves once `ms` of virtual time have passed. */
export const pause = (env: FleetEnv, ms: number): Promise<void> =>
  env.scheduler.timer(env.clock.now() + Math.round(ms)).promise;

export const regionData = (f: Fleet, location: string | Location): RegionData =>
  f.data.get(typeof location === 'string' ? location : locationKey(location)) as RegionData;

/** The write region's copy. */
export const truth = async (f: Fleet, id: string): Promise<LocationDocument> =>
  (await f.writeRegion.read(id, { from: 'writeRegion' })).doc;

/** The write region's copy, or null while the route-deleting actor has it deleted. */
export const truthOrNull = (f: Fleet, id: string): Promise<LocationDocument | null> =>
  truth(f, id).catch((error: unknown) => {
    if (isRouteLockError(error, 'NotFound')) return null;
    throw error;
  });

export function newStats(
  faults: FleetStats['faults'],
  accountMoves: FleetStats['accountMoves'],
  serviceOffsets: number[],
): FleetStats {
  return {
    migrations: 0,
    outcomes: {},
    reasons: {},
    attempts: { firstAttempt: 0, afterRetry: 0, failedAfterAll: 0, failedEarly: 0, max: 0 },
    virtualHours: 0,
    userOps: {
      joined: 0,
      gaveUp: 0,
      bursts: 0,
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
    faults,
    storeCalls: 0,
    crashes: 0,
    crashSteps: 0,
    journalSteps: { median: 0, max: 0 },
    crashPhases: {},
    longOutages: 0,
    boundaryRestarts: 0,
    stallFors: 0,
    copies: 0,
    verification: { run: 0, mismatches: 0, swapsRefused: 0, itemsDropped: 0 },
    accountMoves,
    routeDeletes: { attempts: 0, refusedConvergencePending: 0, refusedLocked: 0, deleted: 0, recreated: 0 },
    clientTier: { decisions: 0, reads: 0, redirects: 0, requests: 0, maxAgeSeconds: 0 },
    announced: { migrations: 0, legacy: 0, serviceRestarts: 0 },
    writeRegionReads: {
      inWindow: 0,
      legacyLock: 0,
      oldReader: 0,
      afterWindow: 0,
      deadWindow: 0,
      noLock: 0,
      unexplained: 0,
    },
    clockOffsetsMs: {
      services: serviceOffsets,
      orchestrators: { min: Number.POSITIVE_INFINITY, max: Number.NEGATIVE_INFINITY, count: 0 },
    },
  };
}
