import { newLocationDocument } from '../../shared/core/lock/document';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import { Router } from '../../shared/core/router';
import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { LaggingStore } from '../../testkit/laggingStore';
import { prng } from '../../testkit/prng';
import { operatorNow } from './routeDeleter';
import { checkCampaignStep, judgeCampaign, newCampaignActor, startCampaignInstance } from './campaign';
import { controlSettings } from './controls';
import { startDriving } from './driver';
import { FaultInjectingStore, WriteRegionFailover } from './faults';
import { CommitWatchingStore, checkData, swapped } from './oracles';
import { CrashingState, journaled, newRunner } from './orchestrator';
import { newParticipantState } from './participants';
import { countEnd, fleetResult, judgeOutcomes } from './report';
import { countWriteRegionRead, noteWindowEnd } from './readStats';
import { createServices, startServiceRestarts } from './services';
import {
  type Fleet,
  type FleetEnv,
  drawOffset,
  fleetEnv,
  harnessError,
  newStats,
  note,
  violation,
} from './state';
import type { FleetOptions, FleetResult } from './types';
import { LOCATIONS, RegionData, locationKey, pick } from './world';

export type { FleetControl, FleetOptions, FleetResult, FleetStats } from './types';

/**
 * The fleet simulation: the real router, lock rules, workflow and in-process runner, on
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
 *   the in-series overstay headers without Age would allow (up to twice the TTL) would exceed the delay;
 * - skewed clocks: every service (its routers and its `decide` time) and every orchestrator instance
 *   (runner and activities router; each restart is a new instance) is off true time by its own offset
 *   within ±skew/2 (production's 5 s skew), so any two differ by at most the declared skew;
 * - participants that bulk- and delta-copy that data, as real ones would (snapshot at start, upsert at
 *   the end, the delta being everything changed since the bulk copy began);
 * - migrations through the in-process runner, whose process is killed after every step (migration i
 *   dies after its journal step i mod 30) and restarted after a pause, sometimes past a lease, sometimes
 *   around the end of a phase lease; that now and then stalls (its timers held) until around the end
 *   of a write lease it holds; and a rival orchestrator that now and then starts a migration of its own;
 * - every service router coalescing its reads (the configured join bound), and hot resources: for
 *   resources being migrated, a slow write-region read (a tenth of the grace to twice it) with writes
 *   arriving while it is in flight, judged as the read they joined began (users.ts hotBursts);
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
 *
 * With `campaign` in the options, one campaign over every resource (the real Campaigns service, tick and
 * in-process campaign runner, in the orchestrator's process: campaign.ts) starts the migrations instead
 * of the driver, under faults of its own store and deaths mid-tick, with its limit and rate oracles.
 *
 * One file a concern, every function given the run's state (`Fleet`, in state.ts) explicitly: world
 * (locations, per-location data), services (the tiers and the client), users, participants,
 * routeDeleter, orchestrator (crashes, restarts, stalls), faults (the store's, the instance clocks'),
 * oracles (the committed-version checks and the data check), controls (the planted bugs), driver
 * (starts migrations), report (the end state and the summary).
 */
export async function fleet(options: FleetOptions): Promise<FleetResult> {
  const env = fleetEnv(options);
  const { clock, random, timing } = env;
  // The write region (the oracles read it directly), under replicas that lag, under the faults.
  const writeRegion = new SqliteStore(':memory:');
  const retiredUntil = new Map<string, number>();
  const watched = new CommitWatchingStore(
    writeRegion,
    clock.now,
    (resourceId, message, kind) => violation(env, resourceId, message, kind),
    (before, after) => {
      swapped(f, before, after);
      failover.afterSwap(after.id);
    },
    (id) => retiredUntil.get(id),
    env.maxOffsetMs,
    (before, after) => noteWindowEnd(f, before, after),
  );
  const replicas = new LaggingStore(watched, clock.now, () =>
    Math.floor(random() * timing.replicationBoundSeconds * 1000),
  );
  const store = new FaultInjectingStore(replicas, random, options.faultRate);
  // Now and then after a swap, a failover that drops the replication window's writes (docs/design.md §6.11).
  const failover = new WriteRegionFailover({
    random,
    scheduler: env.scheduler,
    replicas,
    writeRegion: watched,
    retiredUntil,
    onFailover: (resourceId, message) => note(env, resourceId, message),
    onError: (resourceId) => harnessError(env, resourceId),
  });
  const { services, serviceOffsets, tierNames, decideAs } = createServices(env, store, (id, oldReader) =>
    countWriteRegionRead(f, id, oldReader),
  );
  const { resources, expected } = await seedRoutes(env, replicas, store);

  const f: Fleet = {
    ...env,
    writeRegion,
    replicas,
    store,
    retiredUntil,
    services,
    tierNames,
    decideAs,
    data: new Map(LOCATIONS.map((l) => [locationKey(l), new RegionData()])),
    expected,
    resources,
    reported: new Set(),
    participants: newParticipantState(env.clock),
    stats: newStats(store.faults, { started: 0, swapped: 0 }, serviceOffsets),
    crashPlan: new Map(),
    crashedAt: new Set(),
    journalLength: new Map(),
    settings: controlSettings(env.control, env.config, env.orchestratorTiming, false),
    announcedSettings: controlSettings(env.control, env.config, env.orchestratorTiming, true),
    keyring: TokenKeyring.ephemeral(),
    serial: 0,
    // Stamped in virtual time, so `recent()` orders by it, not by how fast this machine ran the turn.
    state: new CrashingState(':memory:', clock.now, (migrationId, position) =>
      journaled(f, migrationId, position),
    ),
    rivalState: new SqliteMigrationState(':memory:', clock.now),
    runner: null,
    rival: null,
    stopping: [],
    done: false,
    itemSerial: 0,
    deleting: new Set(),
    operatorOffsetMs: 0,
    operator: new Router({ store, timing: env.ruleTiming, clock: () => operatorNow(f) }),
    started: 0,
    lastBusyAt: new Map(),
    running: new Map(),
    ...(options.campaign ? { campaign: newCampaignActor(options.campaign) } : {}),
    windowEndedAt: new Map(),
    announceNext: false,
    // Its own generator: drawing per start leaves every other draw of the run where it was.
    announceRandom: prng(options.seed ^ 0x5eed34),
  };
  // Clock offsets are drawn in this order: the orchestrator, its rival, then the route-deleting actor.
  f.runner = newRunner(f, f.state, 'm');
  f.rival = newRunner(f, f.rivalState, 'x');
  f.operatorOffsetMs = drawOffset(f);
  startCampaignInstance(f);

  // The run, on virtual time, until every migration has ended (a control: until its first violation).
  // One function from here to the closes: requests still in flight when the run stops keep going, and
  // the counts are read at the same turns as they always were.
  const startedAtMs = clock.now();
  startDriving(f);
  startServiceRestarts(f);
  const limitMs = startedAtMs + 5000 * 3600_000;
  while (!f.done) {
    await f.scheduler.runUntilIdle({ maxTimers: 1 });
    checkCampaignStep(f);
    if (options.stopAtFirstViolation && f.violations.length > 0) f.done = true;
    if (clock.now() > limitMs) throw new Error('harness: the fleet did not finish in 5,000 virtual hours');
  }
  for (const runner of [f.runner, f.rival]) if (runner) f.stopping.push(runner.stop());
  judgeOutcomes(f, (clock.now() - startedAtMs) / 3600_000);
  await judgeCampaign(f);
  // The data, even after a control stopped early: whatever has swapped must hold what was acknowledged.
  await Promise.all(resources.map((id) => checkData(f, id, 'at the end')));
  countEnd(f);
  f.stats.failovers = { count: failover.count, swapsLost: failover.swapsLost };
  await settleRunners(f);
  f.state.close();
  f.rivalState.close();
  f.campaign?.truth.close();
  await writeRegion.close();
  return fleetResult(f);
}

/**
 * Before the states close, every orchestrator instance has ended its runs: one still inside a step (a
 * store or participant call on virtual time) finishes it while the clock runs on. (Closing under a run
 * that still read its state was an unhandled rejection that ended the whole verification.)
 */
async function settleRunners(f: Fleet): Promise<void> {
  let settled = false;
  void Promise.all(f.stopping).then(() => (settled = true));
  const limitMs = f.clock.now() + 24 * 3600_000;
  await f.scheduler.runWhile(() => !settled && f.clock.now() <= limitMs);
  if (!settled) throw new Error('harness: an orchestrator did not stop within 24 virtual hours');
}

/** The routes, each at a random location, on every replica before the first request. */
async function seedRoutes(env: FleetEnv, replicas: LaggingStore, store: FaultInjectingStore) {
  const resources: string[] = [];
  const expected = new Map<string, Set<string>>();
  store.enabled = false;
  for (let i = 0; i < env.options.resources; i += 1) {
    const id = `r${i}`;
    resources.push(id);
    expected.set(id, new Set<string>());
    await replicas.create(newLocationDocument(id, pick(env.random, LOCATIONS), env.clock.now()));
  }
  store.enabled = true;
  env.clock.advance(env.timing.replicationBoundSeconds * 1000 + 1);
  return { resources, expected };
}
