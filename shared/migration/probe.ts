import type { Clock } from '../core/clock';
import type { TimingConfig } from '../core/settings';
import { parseTimingSettings } from '../core/settingsSchema';
import { isRouteLockError } from '../core/errors';
import { type Location, type LocationDocument, sameLocation } from '../core/lock/document';
import { PROBE_PREFIX, isProbeId } from './probeId';
import { profiles } from '../core/profiles';
import { startedEverywhereAt } from '../core/lock/state';
import type { RouteView } from '../core/lock/view';
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

export async function runProbe(options: ProbeOptions): Promise<ProbeResult> {
  const resourceId = `${PROBE_PREFIX}${options.region}`;
  if (!resourceId.startsWith(PROBE_PREFIX)) throw new Error('the probe only touches probe- resources');
  const started = options.clock();
  const steps: ProbeStep[] = [];
  // The orchestrator side, and a reader whose cache sees what a service resolving the route sees.
  const timing = probeTiming();
  const routerOptions = {
    store: options.store,
    timing,
    clock: options.clock,
    ...options.policy,
    ...(options.onWrite ? { onWrite: options.onWrite } : {}),
  };
  const router = new Router(routerOptions);
  const reader = new Router(routerOptions);
  const a: Location = { region: options.region, account: 'probe-a' };
  const b: Location = { region: options.region, account: 'probe-b' };
  let token: string | undefined;

  const check = async (phase: string, assertions: [string, (view: RouteView) => boolean][]) => {
    // The probe is not a service resolving a route: its read-path check goes low (docs/design.md §5.7).
    const { view } = await reader.backgroundView(resourceId);
    for (const [assertion, holds] of assertions) {
      if (!holds(view)) throw new ProbeFailure(phase, assertion);
    }
    steps.push({ phase, ok: true, detail: JSON.stringify(view.enforcement) });
    return view;
  };

  let result: ProbeResult;
  try {
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
    const target = sameLocation(current, a) ? b : a;

    const request = { migrationId: `probe-${started}`, owner: 'routelock-probe', target };
    const grant = await router
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
    token = grant.token as string;
    await check('prelock', [
      ['pre-lock restricts nothing: writes allowed', (v) => v.enforcement.write === 'allow'],
      ['pre-lock restricts nothing: deletes allowed', (v) => v.enforcement.delete === 'allow'],
      ['the lock is visible on the read path', (v) => v.lock?.migrationId === grant.migrationId],
    ]);

    // The first escalation waits until the lock has started on every clock (the rules refuse it before).
    const startedEverywhere = startedEverywhereAt(grant, timing.clockSkewSeconds);
    await options.sleep(Math.max(0, startedEverywhere - options.clock()) + 50);
    await router.escalate(resourceId, { token, phase: 'hardDelete' });
    await check('hardDelete', [
      ['hard-delete lock: deletes become tombstones', (v) => v.enforcement.delete === 'tombstone'],
      ['hard-delete lock: writes still allowed', (v) => v.enforcement.write === 'allow'],
    ]);

    await router.escalate(resourceId, { token, phase: 'write' });
    await check('write', [
      ['write lock: writes are refused', (v) => v.enforcement.write === 'deny'],
      ['write lock: refusals carry Retry-After', (v) => (v.enforcement.retryAfterSeconds ?? 0) > 0],
      ['write lock: reads are allowed', (v) => v.enforcement.read === 'allow'],
    ]);

    await router.swap(resourceId, { token });
    token = undefined;
    await check('swap', [
      ['swap: the location moved to the target', (v) => sameLocation(v.location, target)],
      ['swap: every lock is gone', (v) => v.lock === null],
    ]);
    result = {
      outcome: 'passed',
      success: true,
      resourceId,
      region: options.region,
      durationMs: options.clock() - started,
      steps,
    };
  } catch (error) {
    if (error instanceof ProbeSkipped)
      return {
        outcome: 'skipped',
        success: false,
        skipReason: error.message,
        resourceId,
        region: options.region,
        durationMs: options.clock() - started,
        steps,
      };
    const phase = error instanceof ProbeFailure ? error.phase : (steps.at(-1)?.phase ?? 'setup');
    const assertion = error instanceof ProbeFailure ? error.assertion : `error: ${(error as Error).message}`;
    steps.push({ phase, ok: false, detail: assertion });
    if (token) await router.release(resourceId, { token }).catch(() => undefined);
    result = {
      outcome: 'failed',
      success: false,
      resourceId,
      region: options.region,
      durationMs: options.clock() - started,
      failedPhase: phase,
      failedAssertion: assertion,
      steps,
    };
  }
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
  return result;
}
