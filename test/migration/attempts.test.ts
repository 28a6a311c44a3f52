import { migrationOrchestrator } from '../../functions/migrationOrchestrator';
import { parseConfig } from '../../shared/config';
import { RouteLockError } from '../../shared/core/errors';
import { liveLock } from '../../shared/core/lock/state';
import type { Activities } from '../../shared/migration/activities';
import type { HttpCall, MigrationStatus, ParticipantCall } from '../../shared/migration/types';
import { attemptVerdict } from '../../shared/migration/workflow';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { DurableReplay } from '../../testkit/durableReplay';
import { migrationFixture } from '../../testkit/migrationFixture';
import { copiesOnly, virtualRunner } from '../support/migrationHarness';
import { InProcessMigrationService } from '../../shared/migration/inProcessService';

/**
 * Automatic retry with a fresh lock (docs/design.md §6.3): which
 * failures are retried, attempts recorded in the status, a fresh lock per attempt, never two locks of
 * one migration at once, and never an attempt after a swap.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const PARTICIPANTS = JSON.stringify([{ name: 'p', url: 'https://p.test/migrate' }]);

test.each([
  // transient: another attempt with a fresh lock may succeed
  ['StepFailed', 'retry'],
  ['StoreUnavailable', 'retry'],
  ['PreconditionFailed', 'retry'],
  ['LockExpired', 'retry'],
  ['NotLocked', 'retry'],
  ['InvalidTransition', 'retry'],
  ['MaxLeaseReached', 'retry'],
  ['FreezeBudgetExceeded', 'retry'],
  ['ParticipantFailed', 'retry'],
  ['WriteBudgetExceeded', 'retry'],
  ['NotVisible', 'retry'],
  ['SwapUnknown', 'retry'],
  // final: another attempt would meet the same answer
  ['Locked', 'final'],
  ['ConvergencePending', 'final'],
  ['AlreadyAtTarget', 'final'],
  ['NotFound', 'final'],
  ['RegionNotAllowed', 'final'],
  ['UnsafeConfiguration', 'final'],
  ['BadRequest', 'final'],
  ['Forbidden', 'final'],
  ['Cancelled', 'final'],
  ['SomethingNew', 'final'],
  [undefined, 'final'],
])('attemptVerdict(%s) = %s', (code, verdict) => {
  expect(attemptVerdict(code)).toBe(verdict);
});

type Harness = ReturnType<typeof virtualRunner>;

/**
 * The oracle of "never two locks of one migration": before every pre-lock, the write region must show
 * no live lock of this migration (the earlier attempt's). Answers what it saw.
 */
function watchPrelocks(h: Harness, store: LocationStore = h.store) {
  const violations: string[] = [];
  const prelocks: { attempt: number; at: number }[] = [];
  const prelock = h.activities.prelock;
  h.activities.prelock = async (input) => {
    const { doc } = await store.read(input.resourceId, { from: 'writeRegion' });
    const held = liveLock(doc, h.clock.now());
    if (held && held.migrationId === input.migrationId)
      violations.push(`attempt ${input.lock.attempt ?? 1} pre-locked with a lock of its migration live`);
    prelocks.push({ attempt: input.lock.attempt ?? 1, at: h.clock.now() });
    return prelock(input);
  };
  return { violations, prelocks };
}

async function run(h: Harness, resourceId = 'r-1') {
  await h.router.createRoute(resourceId, SOURCE);
  const { record } = h.runner.start({ resourceId, target: TARGET });
  await h.settle();
  const status = await h.runner.status(record.migrationId);
  const { doc } = await h.store.read(resourceId, { from: 'writeRegion' });
  return { status, doc };
}

/** A participant that refuses (422) every job of the first `failing` migration attempts, then copies. */
const refusingFirst = (failing: number, seen: HttpCall[] = []) =>
  copiesOnly((call: HttpCall) => {
    seen.push(call);
    return Promise.resolve(
      (call.body.migrationAttempt ?? 1) <= failing
        ? { status: 422, body: { error: 'not now' } }
        : { status: 200, body: null },
    );
  });

describe('in-process runner (dev timing, virtual time)', () => {
  const env = { ROUTELOCK_PROFILE: 'dev', ROUTELOCK_PARTICIPANTS: PARTICIPANTS };

  test('a participant that fails only the first attempt: Completed on attempt 2, attempt 1 recorded', async () => {
    const seen: HttpCall[] = [];
    const h = virtualRunner({ env, http: refusingFirst(1, seen) });
    const oracle = watchPrelocks(h);
    const { status, doc } = await run(h);
    expect(status).toMatchObject({ status: 'Completed', phase: 'swapped', attempt: 2 });
    expect(status.attempts).toHaveLength(2);
    expect(status.attempts?.[0]).toMatchObject({ attempt: 1, outcome: 'Failed' });
    expect(status.attempts?.[0]?.reason).toMatch(/participant p answered 422 to bulkCopy.*; lock released$/);
    expect(status.attempts?.[1]).toMatchObject({ attempt: 2, outcome: 'Completed' });
    // the retry waited the delay (dev: 10 s) after attempt 1 ended
    const [first, second] = status.attempts ?? [];
    expect(Date.parse(second!.startedAt) - Date.parse(first!.endedAt)).toBeGreaterThanOrEqual(10_000);
    expect(doc).toMatchObject({ location: TARGET, lock: null });
    // every job names its attempt; attempt 2's jobs come after (supersede) every job of attempt 1
    const jobs = seen.map((c) => [c.body.migrationAttempt, c.body.step, c.body.sequence]);
    expect(jobs).toEqual([
      // 2 + 2 × deltaAttempts (3) job numbers per attempt (workflow/copy.ts jobSequence)
      [1, 'bulkCopy', 1],
      [2, 'bulkCopy', 9],
      [2, 'deltaCopy', 10],
      // the end notice, last of attempt 2 (no notice for attempt 1)
      [2, 'completed', 16],
    ]);
    // each attempt its own lock (a fresh Idempotency-Key: attempt 2's pre-lock was not a replay)
    expect(oracle.prelocks.map((p) => p.attempt)).toEqual([1, 2]);
    expect(oracle.violations).toEqual([]);
  });

  test('attempts exhausted: Failed only after all 3, every reason kept, the backoff doubling', async () => {
    const h = virtualRunner({ env, http: refusingFirst(99) });
    const { status, doc } = await run(h);
    expect(status).toMatchObject({ status: 'Failed', phase: 'released', attempt: 3 });
    expect(status.attempts?.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'Failed'],
      [2, 'Failed'],
      [3, 'Failed'],
    ]);
    for (const a of status.attempts ?? []) expect(a.reason).toMatch(/answered 422 to bulkCopy/);
    expect(status.error).toBe(status.attempts?.[2]?.reason);
    const gaps = (status.attempts ?? [])
      .slice(1)
      .map((a, i) => Date.parse(a.startedAt) - Date.parse(status.attempts![i]!.endedAt));
    expect(gaps[0]).toBeGreaterThanOrEqual(10_000);
    expect(gaps[1]).toBeGreaterThanOrEqual(20_000);
    expect(doc).toMatchObject({ location: SOURCE, lock: null });
  });

  test('a store outage through every step retry fails attempt 1; attempt 2 completes', async () => {
    const h = virtualRunner({ env: { ROUTELOCK_PROFILE: 'dev' } });
    const escalate = h.activities.escalate;
    let outage = h.config.migration.retryAttempts; // every retry of the first escalation
    h.activities.escalate = async (input) => {
      if (outage-- > 0) throw new RouteLockError('StoreUnavailable', 'Store throttled (429).');
      return escalate(input);
    };
    const oracle = watchPrelocks(h);
    const { status, doc } = await run(h);
    expect(status).toMatchObject({ status: 'Completed', attempt: 2 });
    expect(status.attempts?.[0]?.reason).toMatch(/^Store throttled \(429\)\.; lock released$/);
    expect(doc).toMatchObject({ location: TARGET, lock: null });
    expect(oracle.violations).toEqual([]);
  });

  test('a release that fails too: the next attempt waits until the old lock is gone (never two locks)', async () => {
    const h = virtualRunner({ env, http: refusingFirst(1) });
    const release = h.activities.release;
    let down = true; // attempt 1's release fails through every retry, and again in the gate
    h.activities.release = async (input) => {
      if (down && (input.lock.attempt ?? 1) === 1) throw new RouteLockError('StoreUnavailable', 'down');
      return release(input);
    };
    const oracle = watchPrelocks(h);
    const started = h.clock.now();
    const { status } = await run(h);
    down = false;
    expect(status).toMatchObject({ status: 'Completed', attempt: 2 });
    expect(status.attempts?.[0]?.reason).toMatch(/release failed \(down\); the lease will free it$/);
    expect(oracle.violations).toEqual([]);
    // attempt 2 pre-locked only after attempt 1's lock lapsed (dev pre-lock lease: 600 s)
    expect(oracle.prelocks[1]!.at - started).toBeGreaterThan(600_000);
  });

  test('negative control (a): a planted retry without releasing is caught by the oracle', async () => {
    const h = virtualRunner({ env, http: refusingFirst(1) });
    // the planted bug: the release answers released without releasing, and the gate is told no lock
    // is held (so the workflow cannot see it)
    const readRoute = h.activities.readRoute;
    h.activities.release = (input) => readRoute({ resourceId: input.resourceId, from: 'writeRegion' });
    h.activities.readRoute = async (input) => {
      const seen = await readRoute(input);
      return seen.ok && input.from === 'writeRegion'
        ? { ok: true, value: { ...seen.value, lock: null } }
        : seen;
    };
    const oracle = watchPrelocks(h);
    await run(h);
    expect(oracle.violations).toEqual(['attempt 2 pre-locked with a lock of its migration live']);
  });

  test('a swap whose answer was lost is not retried: the route is at the target, Completed', async () => {
    const h = virtualRunner({ env: { ROUTELOCK_PROFILE: 'dev' } });
    const swaps = loseSwapAnswers(h.activities);
    const oracle = watchPrelocks(h);
    const { status, doc } = await run(h);
    // every retry of the swap landed as the replay it is, and lost its answer too
    expect(swaps.committed).toBe(h.config.migration.retryAttempts);
    expect(oracle.prelocks.filter((p) => p.at > swaps.firstAt!)).toEqual([]);
    expect(status).toMatchObject({ status: 'Completed', phase: 'swapped', attempt: 1 });
    expect(status.attempts).toEqual([expect.objectContaining({ attempt: 1, outcome: 'Completed' })]);
    expect(doc).toMatchObject({ location: TARGET, lock: null });
  });

  test('negative control (b): a planted retry after a swap is caught', async () => {
    const h = virtualRunner({ env: { ROUTELOCK_PROFILE: 'dev' } });
    const swaps = loseSwapAnswers(h.activities);
    // the planted bug: the gate between attempts does not see where the route is
    const readRoute = h.activities.readRoute;
    h.activities.readRoute = async (input) => {
      const seen = await readRoute(input);
      return seen.ok && input.from === 'writeRegion' && swaps.committed > 0
        ? { ok: true, value: { ...seen.value, location: SOURCE } }
        : seen;
    };
    const oracle = watchPrelocks(h);
    await run(h);
    expect(oracle.prelocks.filter((p) => p.at > swaps.firstAt!).map((p) => p.attempt)).toEqual([2]);
  });

  test('Conflict (a rival holds the resource) and NoOp are not retried', async () => {
    const h = virtualRunner({ env: { ROUTELOCK_PROFILE: 'dev' } });
    await h.router.createRoute('r-rival', SOURCE);
    await h.router.prelock('r-rival', { migrationId: 'rival', owner: 'o', target: TARGET });
    const rival = h.runner.start({ resourceId: 'r-rival', target: TARGET }).record;
    await h.router.createRoute('r-there', TARGET);
    const there = h.runner.start({ resourceId: 'r-there', target: TARGET }).record;
    await h.settle();
    const conflict = await h.runner.status(rival.migrationId);
    expect(conflict).toMatchObject({ status: 'Conflict', attempt: 1 });
    expect(conflict.attempts?.map((a) => a.outcome)).toEqual(['Conflict']);
    const noOp = await h.runner.status(there.migrationId);
    expect(noOp).toMatchObject({ status: 'NoOp', attempt: 1 });
    expect(noOp.attempts?.map((a) => a.outcome)).toEqual(['NoOp']);
  });
});

/** Commits every swap, then loses its answer (a timeout after the commit), through every retry. */
function loseSwapAnswers(activities: Activities) {
  const swaps: { committed: number; firstAt: number | undefined } = { committed: 0, firstAt: undefined };
  const swap = activities.swap;
  activities.swap = async (input) => {
    const result = await swap(input);
    if (result.ok) {
      swaps.committed += 1;
      swaps.firstAt ??= Date.parse(result.value.swappedAt ?? '');
    }
    throw new RouteLockError('StoreUnavailable', 'Store request timed out.');
  };
  return swaps;
}

test.each([0, 8, 15])(
  'through the Durable replay harness: a participant that fails only the first attempt completes on attempt 2 (crash before run %i)',
  async (crashBeforeRun) => {
    const config = parseConfig({ ROUTELOCK_PROFILE: 'dev', ROUTELOCK_PARTICIPANTS: PARTICIPANTS });
    const start = Date.UTC(2026, 2, 1);
    const fixture = await migrationFixture({ config, start, source: SOURCE, target: TARGET });
    const input = fixture.input;
    const jobs: [number | undefined, string, number | undefined][] = [];
    fixture.activities.callParticipant = async (call: ParticipantCall) => {
      if (call.method !== 'POST') return { ok: true, value: { status: 200, body: null } };
      // the copies only: verify (optional) not implemented, the end notice not recorded
      if (call.body.step !== 'bulkCopy' && call.body.step !== 'deltaCopy')
        return { ok: true, value: { status: 404, body: null } };
      jobs.push([call.body.migrationAttempt, call.body.step, call.body.sequence]);
      const refuse = (call.body.migrationAttempt ?? 1) === 1;
      return { ok: true, value: refuse ? { status: 422, body: 'not now' } : { status: 200, body: null } };
    };
    const harness: DurableReplay = new DurableReplay({
      orchestrator: migrationOrchestrator,
      name: 'migrationOrchestrator',
      instanceId: input.instanceId,
      input,
      start,
      activity: (fn, activityInput) => fixture.runActivity(fn, activityInput, harness.now),
      // the host dies before that episode: the history replays through the attempt loop
      ...(crashBeforeRun ? { crashBeforeRun } : {}),
    });
    const result = await harness.run();
    expect(result.error).toBeUndefined();
    if (crashBeforeRun) expect(result.runs).toBeGreaterThan(crashBeforeRun);
    const status = result.output as MigrationStatus;
    expect(status).toMatchObject({ status: 'Completed', attempt: 2 });
    expect(status.attempts?.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'Failed'],
      [2, 'Completed'],
    ]);
    // attempt 2's jobs numbered after attempt 1's 2 + 2 × deltaAttempts (workflow/copy.ts jobSequence)
    expect(jobs).toEqual([
      [1, 'bulkCopy', 1],
      [2, 'bulkCopy', 9],
      [2, 'deltaCopy', 10],
    ]);
    const { doc } = await fixture.store.read('conv-1', { from: 'writeRegion' });
    expect(doc).toMatchObject({ location: TARGET, lock: null });
  },
);

test('no further attempt when the history could not hold one more at its worst (the Durable action cap)', async () => {
  const config = parseConfig({ ROUTELOCK_PROFILE: 'dev', ROUTELOCK_PARTICIPANTS: PARTICIPANTS });
  const start = Date.UTC(2026, 2, 1);
  const fixture = await migrationFixture({ config, start, source: SOURCE, target: TARGET });
  // one attempt's worst case as large as the extension's whole cap: attempt 1's steps leave no room
  const input = {
    ...fixture.input,
    settings: { ...fixture.input.settings, attemptActionsBound: 100_000 },
  };
  fixture.activities.callParticipant = async () => ({ ok: true, value: { status: 422, body: 'no' } });
  const harness: DurableReplay = new DurableReplay({
    orchestrator: migrationOrchestrator,
    name: 'migrationOrchestrator',
    instanceId: input.instanceId,
    input,
    start,
    activity: (fn, activityInput) => fixture.runActivity(fn, activityInput, harness.now),
  });
  const status = (await harness.run()).output as MigrationStatus;
  expect(status).toMatchObject({ status: 'Failed', attempt: 1 });
  expect(status.error).toMatch(/\(no room in the history for another attempt\)$/);
});

describe('a cancel during the wait before the next attempt', () => {
  /** Cancel through the service the moment the first attempt's failure is published (still Running). */
  function cancelInRetryDelay(h: Harness) {
    const service = new InProcessMigrationService(h.runner, h.router);
    const save = h.state.saveStatus.bind(h.state);
    let asked = false;
    h.state.saveStatus = async (id, status, done) => {
      await save(id, status, done);
      if (!asked && status.status === 'Running' && (status.attempts?.length ?? 0) === 1) {
        asked = true;
        await service.cancel(id, { id: 'op' });
      }
    };
  }

  test('after a swap that landed with its answer lost: Completed at the target, the cancel too late', async () => {
    const h = virtualRunner({ env: { ROUTELOCK_PROFILE: 'dev' } });
    loseSwapAnswers(h.activities);
    cancelInRetryDelay(h);
    const { status, doc } = await run(h);
    expect(status).toMatchObject({ status: 'Completed', phase: 'swapped', cancelRequestedBy: 'op' });
    expect(doc.location).toEqual(TARGET);
  });

  test('with attempt 1’s release failed: the old lock is seen gone before the migration calls itself Cancelled', async () => {
    const h = virtualRunner({
      env: { ROUTELOCK_PROFILE: 'dev', ROUTELOCK_PARTICIPANTS: PARTICIPANTS },
      http: refusingFirst(5),
    });
    h.activities.release = async () => {
      throw new RouteLockError('StoreUnavailable', 'down');
    };
    cancelInRetryDelay(h);
    const { status, doc } = await run(h);
    expect(status).toMatchObject({ status: 'Cancelled', cancelRequestedBy: 'op' });
    // the gate waited the lease out: no lock of the migration is live when it says Cancelled
    expect(liveLock(doc, h.clock.now())).toBeNull();
  });
});
