import type { Clock } from '../core/clock';
import type { TimingConfig } from '../core/settings';
import { parseTimingSettings } from '../core/settingsSchema';
import { isRouteLockError } from '../core/errors';
import { type Location, type LocationDocument, sameLocation } from '../core/lock/document';
import { PROBE_PREFIX, isProbeId } from './probeId';
import { profiles } from '../core/profiles';
import { startedEverywhereAt } from '../core/lock/state';
import type { LockGrant, RouteView } from '../core/lock/view';
import { Router } from '../core/router';
import type { LocationStore } from '../core/store/ports/locations';
import type { TelemetrySink } from './telemetry/sink';

/**
 * The synthetic probe (docs/design.md §7.3): on `probe-{region}`, run the whole lock cycle through the real
 * library and check enforcement on the read path at each phase, so an enforcement regression shows as
 * a probe failure rather than a data anomaly. It uses its own short timings, and only ever on
 * `probe-` resources.
 */

export { PROBE_PREFIX, isProbeId };

/** The probe's own route: marked when it created it, or (created before the mark) at one of its accounts. */
function isProbeRoute(doc: LocationDocument, a: Location, b: Location): boolean {
  return doc.createdBy === 'probe' || sameLocation(doc.location, a) || sameLocation(doc.location, b);
}

/**
 * The probe's timing (the `probe` profile: one-second convergence), parsed when the probe runs rather
 * than when this module loads, so a bad table stops the probe run, not every importer.
 */
export function probeTiming(): TimingConfig {
  return parseTimingSettings('production', profiles.probe);
}

export interface ProbeStep {
  phase: string;
  ok: boolean;
  detail: string;
}

export interface ProbeResult {
  /**
   * `skipped`: another probe run holds the probe route's lock (runs overlapped); nothing was checked,
   * nothing failed, and no availability result is recorded (the probe-failing alert reads those).
   */
  outcome: 'passed' | 'failed' | 'skipped';
  /** The lock cycle was enforced at every phase (`outcome` is `passed`). */
  success: boolean;
  /** Why the run was skipped. */
  skipReason?: string;
  resourceId: string;
  region: string;
  durationMs: number;
  /** The phase and the assertion that failed, when one did. */
  failedPhase?: string;
  failedAssertion?: string;
  steps: ProbeStep[];
}

export interface ProbeOptions {
  store: LocationStore;
  region: string;
  clock: Clock;
  /** Waits out the probe's convergence delay (virtual in tests). */
  sleep: (ms: number) => Promise<void>;
  sink?: TelemetrySink;
  /** The serving router's guards (declared regions, an unsafe store), kept by the probe's own routers. */
  policy?: Router['policy'];
  /**
   * Told after each write the probe attempts: the app passes the serving router's `forget`, so the
   * cache that serves HTTP never holds a copy of the probe route older than the probe's last write.
   */
  onWrite?: (resourceId: string) => void;
}

/** Another probe run is mid-cycle on the same route: this one steps aside. */
class ProbeSkipped extends Error {}

/** A write that lost to another probe run's lock on the route (it prelocked first). */
const lostToAnotherRun = (error: unknown): boolean =>
  isRouteLockError(error, 'Locked') ||
  isRouteLockError(error, 'MigrationInProgress') ||
  isRouteLockError(error, 'PreconditionFailed');

class ProbeFailure extends Error {
  constructor(
    readonly phase: string,
    readonly assertion: string,
  ) {
    super(`${phase}: ${assertion}`);
  }
}

/** What one run works with: its route, the two accounts it moves between, and its own routers. */
interface ProbeRun {
  options: ProbeOptions;
  resourceId: string;
  started: number;
  timing: TimingConfig;
  /** The orchestrator side. */
  router: Router;
  /** A reader whose cache sees what a service resolving the route sees. */
  reader: Router;
  a: Location;
  b: Location;
}

/** The lock this run took, its token, and where it is moving the route. */
interface Held {
  grant: LockGrant;
  token: string;
  target: Location;
}

/** How a run stopped short: another run held the route (skipped), or a phase failed. */
type Stop = { skipped: string } | { phase: string; assertion: string };

/**
 * Where a run is: the steps that passed, the token while the probe still holds the lock (released if the
 * run stops), and what stopped it, if something did.
 */
interface Progress {
  steps: ProbeStep[];
  token?: string | undefined;
  stop?: Stop;
}

type Assertion = [assertion: string, holds: (view: RouteView, held: Held) => boolean];

/**
 * A phase under the lock: the write it makes (none for the pre-lock, taken before the phases run), then
 * what the read path must show.
 */
interface LockedPhase {
  phase: string;
  write?: (run: ProbeRun, held: Held) => Promise<unknown>;
  expect: Assertion[];
  /** Once its write lands the lock is gone: nothing is left to release if the check then fails. */
  endsLock?: boolean;
}

const lockedPhases: LockedPhase[] = [
  {
    phase: 'prelock',
    expect: [
      ['pre-lock restricts nothing: writes allowed', (v) => v.enforcement.write === 'allow'],
      ['pre-lock restricts nothing: deletes allowed', (v) => v.enforcement.delete === 'allow'],
      ['the lock is visible on the read path', (v, held) => v.lock?.migrationId === held.grant.migrationId],
    ],
  },
  {
    phase: 'hardDelete',
    // The first escalation waits until the lock has started on every clock (the rules refuse it before).
    write: async ({ options, router, resourceId, timing }, { grant, token }) => {
      const startedEverywhere = startedEverywhereAt(grant, timing.clockSkewSeconds);
      await options.sleep(Math.max(0, startedEverywhere - options.clock()) + 50);
      return router.escalate(resourceId, { token, phase: 'hardDelete' });
    },
    expect: [
      ['hard-delete lock: deletes become tombstones', (v) => v.enforcement.delete === 'tombstone'],
      ['hard-delete lock: writes still allowed', (v) => v.enforcement.write === 'allow'],
    ],
  },
  {
    phase: 'write',
    write: ({ router, resourceId }, held) =>
      router.escalate(resourceId, { token: held.token, phase: 'write' }),
    expect: [
      ['write lock: writes are refused', (v) => v.enforcement.write === 'deny'],
      ['write lock: refusals carry Retry-After', (v) => (v.enforcement.retryAfterSeconds ?? 0) > 0],
      ['write lock: reads are allowed', (v) => v.enforcement.read === 'allow'],
    ],
  },
  {
    phase: 'swap',
    write: ({ router, resourceId }, held) => router.swap(resourceId, { token: held.token }),
    expect: [
      ['swap: the location moved to the target', (v, held) => sameLocation(v.location, held.target)],
      ['swap: every lock is gone', (v) => v.lock === null],
    ],
    endsLock: true,
  },
];

type Attempt<T> = { ok: true; value: T } | { ok: false; stop: Stop };

/**
 * Runs one piece of a phase, a thrown error answered as the stop it means. An unexpected error is charged
 * to the last phase that passed (or setup): the phase whose state the run was leaving.
 */
async function attempt<T>(work: () => Promise<T>, steps: ProbeStep[]): Promise<Attempt<T>> {
  try {
    return { ok: true, value: await work() };
  } catch (error) {
    if (error instanceof ProbeSkipped) return { ok: false, stop: { skipped: error.message } };
    if (error instanceof ProbeFailure)
      return { ok: false, stop: { phase: error.phase, assertion: error.assertion } };
    const phase = steps.at(-1)?.phase ?? 'setup';
    return { ok: false, stop: { phase, assertion: `error: ${(error as Error).message}` } };
  }
}

/** The phase's step when the read path shows every assertion holding; the first that does not fails it. */
async function check(run: ProbeRun, held: Held, { phase, expect }: LockedPhase): Promise<ProbeStep> {
  // The probe is not a service resolving a route: its read-path check goes low (docs/design.md §5.7).
  const { view } = await run.reader.backgroundView(run.resourceId);
  const broken = expect.find(([, holds]) => !holds(view, held));
  if (broken) throw new ProbeFailure(phase, broken[0]);
  return { phase, ok: true, detail: JSON.stringify(view.enforcement) };
}

/** One locked phase on from `progress`: its write, then its check. A stopped run stays as it is. */
async function advance(run: ProbeRun, held: Held, progress: Progress, phase: LockedPhase): Promise<Progress> {
  const { steps, token, stop } = progress;
  if (stop) return progress;
  const wrote = await attempt(async () => phase.write?.(run, held), steps);
  if (!wrote.ok) return { steps, token, stop: wrote.stop };
  const still = phase.endsLock ? undefined : token;
  const checked = await attempt(() => check(run, held, phase), steps);
  return checked.ok
    ? { steps: [...steps, checked.value], token: still }
    : { steps, token: still, stop: checked.stop };
}

/**
 * Creates the probe route or adopts the probe's own, clears a dead run's lock, and answers where to
 * move the route.
 */
async function setup({ router, resourceId, a, b }: ProbeRun): Promise<Location> {
  const { stored } = await router
    .createRoute(resourceId, a, { createdBy: 'probe' })
    .catch(async (error: unknown) => {
      if (!isRouteLockError(error, 'AlreadyExists')) throw error;
      return { stored: await router.readAuthoritative(resourceId) };
    });
  if (!isProbeRoute(stored.doc, a, b)) {
    // A route the probe did not create (a real resource that happens to carry the id): never moved.
    throw new ProbeFailure(
      'setup',
      `${resourceId} exists and was not created by the probe; it is left alone`,
    );
  }
  if (stored.doc.lock) {
    // A previous probe that died: its short lease is over by now, and reclaimed. A live one is a run
    // still under way (runs overlapped): not a failure of enforcement, so this run is skipped.
    const cleared = await router.reclaim(resourceId).catch(() => null);
    if (!cleared)
      throw new ProbeSkipped(
        `another probe run holds ${resourceId}'s lock (migration ${stored.doc.lock.migrationId}) until ${stored.doc.lock.expiresAt}`,
      );
  }
  const current = (await router.readAuthoritative(resourceId)).doc.location;
  return sameLocation(current, a) ? b : a;
}

/** Takes the pre-lock towards `target`; losing it to another run skips this one. */
async function prelock(
  { options, router, resourceId, started }: ProbeRun,
  target: Location,
): Promise<LockGrant> {
  const request = { migrationId: `probe-${started}`, owner: 'routelock-probe', target };
  return router
    .prelock(resourceId, request)
    .catch(async (error: unknown) => {
      // The previous run's swap retired the other location a moment ago: wait it out once.
      if (!isRouteLockError(error, 'ConvergencePending')) throw error;
      await options.sleep((error.retryAfterSeconds ?? 1) * 1000);
      return router.prelock(resourceId, request);
    })
    .catch((error: unknown) => {
      if (lostToAnotherRun(error))
        throw new ProbeSkipped(`another probe run took ${resourceId}'s lock first`);
      throw error;
    });
}

/** The whole cycle: setup, the pre-lock, then each locked phase in turn, folded into the run's progress. */
async function lockCycle(run: ProbeRun): Promise<Progress> {
  const target = await attempt(() => setup(run), []);
  if (!target.ok) return { steps: [], stop: target.stop };
  const grant = await attempt(() => prelock(run, target.value), []);
  if (!grant.ok) return { steps: [], stop: grant.stop };
  const held: Held = { grant: grant.value, token: grant.value.token as string, target: target.value };
  return lockedPhases.reduce(
    async (prior, phase) => advance(run, held, await prior, phase),
    Promise.resolve<Progress>({ steps: [], token: held.token }),
  );
}

function probeRun(options: ProbeOptions, resourceId: string, started: number): ProbeRun {
  const timing = probeTiming();
  const routerOptions = {
    store: options.store,
    timing,
    clock: options.clock,
    ...options.policy,
    ...(options.onWrite ? { onWrite: options.onWrite } : {}),
  };
  const a: Location = { region: options.region, account: 'probe-a' };
  const b: Location = { region: options.region, account: 'probe-b' };
  return {
    options,
    resourceId,
    started,
    timing,
    router: new Router(routerOptions),
    reader: new Router(routerOptions),
    a,
    b,
  };
}

/** The run's result: passed with no stop, skipped, or failed with its failing step last. */
function probeResult(run: ProbeRun, { steps, stop }: Progress, durationMs: number): ProbeResult {
  const { resourceId } = run;
  const region = run.options.region;
  if (!stop) return { outcome: 'passed', success: true, resourceId, region, durationMs, steps };
  if ('skipped' in stop)
    return {
      outcome: 'skipped',
      success: false,
      skipReason: stop.skipped,
      resourceId,
      region,
      durationMs,
      steps,
    };
  const { phase, assertion } = stop;
  return {
    outcome: 'failed',
    success: false,
    resourceId,
    region,
    durationMs,
    failedPhase: phase,
    failedAssertion: assertion,
    steps: [...steps, { phase, ok: false, detail: assertion }],
  };
}

/** The availability result the probe-failing alert reads. */
async function report({ options, resourceId }: ProbeRun, result: ProbeResult): Promise<void> {
  options.sink?.availability({
    name: 'routelock-probe',
    success: result.success,
    durationMs: result.durationMs,
    runLocation: options.region,
    message: result.success
      ? 'lock cycle enforced at every phase'
      : `${result.failedPhase}: ${result.failedAssertion}`,
    properties: { resourceId, ...(result.failedPhase ? { failedPhase: result.failedPhase } : {}) },
  });
  await options.sink?.flush();
}

export async function runProbe(options: ProbeOptions): Promise<ProbeResult> {
  const resourceId = `${PROBE_PREFIX}${options.region}`;
  if (!resourceId.startsWith(PROBE_PREFIX)) throw new Error('the probe only touches probe- resources');
  const started = options.clock();
  const run = probeRun(options, resourceId, started);
  const progress = await lockCycle(run);
  // A run that stopped under its lock lets it go rather than leave it to lapse.
  if (progress.token) await run.router.release(resourceId, { token: progress.token }).catch(() => undefined);
  const result = probeResult(run, progress, options.clock() - started);
  // A skipped run checked nothing: it records no availability result.
  if (result.outcome !== 'skipped') await report(run, result);
  return result;
}
