import { type Location, sameLocation } from '../../lock/document';
import { leadingCode, phaseReached } from '../stopped';
import type {
  CancelRequest,
  MigrationAttempt,
  MigrationInput,
  MigrationPhase,
  MigrationState,
  MigrationStatus,
  Step,
  Verification,
} from '../types';
import { pendingStatus, terminalStates, workflowVersionOf } from '../types';
import { lockGone, releaseAfterFailure, releaseReason } from './cleanUp';
import { MAX_ORCHESTRATION_ACTIONS } from './copy';
import { tryPrelock, prelockRefusal } from './prelock';
import { cancelMigration, cancelledBeforeStart } from './cancel';
import { confirmDelayMs } from './confirm';
import { notifyEnd } from './notify';
import { type EndJob, type Ending, type Failure, type Prelocked, cancelled } from './state';
import { windowShutBeforePrelock } from './window';
import {
  CancelRequested,
  activity,
  cancelRequested,
  now,
  publish,
  readRouteOrNull,
  sleep,
  sleepUntil,
} from './steps';

/**
 * Automatic retry with a fresh lock (workflow version 3, issue 18 §1; docs/design.md §6.3). An attempt
 * is one lock, from pre-lock to swap or release. One that fails for a transient reason is released,
 * and after `migrationRetryDelaySeconds × 2^(n−1)` on a durable timer the migration takes a fresh
 * pre-lock (the activities derive attempt n's seed: `attemptSeed`), up to `migrationAttempts` times.
 * Never two locks of one migration: the next attempt pre-locks only once the write region shows no
 * live lock of this migration (released again, or waited out to its lease's end). Never an attempt
 * after a swap: a route found at the target ends the migration.
 */

/** Whether a failed attempt is tried again: the one home of the rule (table test: attempts.table.test.ts). */
export type AttemptVerdict = 'retry' | 'final';

/**
 * Transient: the store out through every step retry, a lease that lapsed or a lock gone, a participant
 * that failed (its permanent refusal fails the attempt at once, and the next attempt is a new job with
 * a new lock, so it may well succeed: docs/design.md §6.3), the write budget spent on every delta
 * attempt, a lock never visible, a swap whose answer was lost (the gate between attempts checks the
 * route first). Final: everything that another attempt would meet again: a rival's lock (Conflict),
 * the resource already there (NoOp), a route gone, a region not allowed, a key missing from the ring,
 * a request the API refuses, a cancel, a participant that must verify and cannot (VerifyNotImplemented),
 * and any code not named here.
 */
const transientCodes: ReadonlySet<string> = new Set([
  'StepFailed',
  'StoreUnavailable',
  'PreconditionFailed',
  'LockExpired',
  'NotLocked',
  'InvalidTransition',
  'MaxLeaseReached',
  'FreezeBudgetExceeded',
  'ParticipantFailed',
  'WriteBudgetExceeded',
  'NotVisible',
  'SwapUnknown',
  // version 4: a swap a write-region failover dropped (workflow/confirm.ts); a fresh lock starts over
  'SwapLost',
  // version 4: the target differed from the source on every write-lock attempt; a fresh attempt copies again
  'VerificationFailed',
]);

export function attemptVerdict(code: string | undefined): AttemptVerdict {
  return code !== undefined && transientCodes.has(code) ? 'retry' : 'final';
}

/** The delay before the attempt after `failedInSeries` failed ones of this run: the delay × 2^(n−1). */
export const retryDelayMs = (input: MigrationInput, failedInSeries: number): number =>
  (input.settings.migrationRetryDelaySeconds ?? 0) * 1000 * 2 ** Math.max(0, failedInSeries - 1);

const iso = (ms: number): string => new Date(ms).toISOString();

/** What one attempt came to: its final status (published), or a failure with or without a lock held. */
type AttemptEnd = Extract<Ending, { kind: 'done' }> | (Failure & { lockHeld: boolean });

/**
 * The migration of a version-3 input: attempts numbered after an operator's earlier ones
 * (`earlierAttempts`), each with its own lock, until one ends or `migrationAttempts` were made.
 * Version 4: once the final status is published, the end notices (workflow/notify.ts).
 */
export function* attemptingMigration(
  input: MigrationInput,
  withPrelock: (prelocked: Prelocked) => Generator<Step, Ending, unknown>,
): Generator<Step, MigrationStatus, unknown> {
  const seen = { swapLost: false };
  const { status, job } = yield* attemptsToTheEnd(input, withPrelock, seen);
  if (workflowVersionOf(input) < 4) return status;
  // A swap a failover dropped was live a while: the target may hold writes the source lacks, so no
  // `failed` / `cancelled` notice (drop the target's copy) after one; only a later swap's `completed`.
  const told = seen.swapLost && status.status !== 'Completed' ? undefined : job;
  return yield* notifyEnd(input, status, told);
}

/** The final status (published), and the job of the last attempt that read the route (the notices'). */
interface MigrationEnd {
  status: MigrationStatus;
  job: EndJob | undefined;
}

function* attemptsToTheEnd(
  input: MigrationInput,
  withPrelock: (prelocked: Prelocked) => Generator<Step, Ending, unknown>,
  seen: { swapLost: boolean },
): Generator<Step, MigrationEnd, unknown> {
  let ended: MigrationAttempt[] = [...(input.earlierAttempts ?? [])];
  let lastJob: EndJob | undefined;
  const first = ended.length + 1;
  const last = ended.length + Math.max(1, input.settings.migrationAttempts ?? 1);
  const history = { actions: 0 };
  const v4 = workflowVersionOf(input) >= 4;
  let verifications: Verification[] = [];
  for (let n = first; ; n += 1) {
    const attemptInput: MigrationInput = { ...input, lock: { ...input.lock, attempt: n } };
    const startedAt = yield* now();
    // Issue 21 §4: an attempt that did not complete also records its code and the phase it reached
    // (none on a Completed one: its status is exactly what it always was).
    const entry = (
      endedAt: number,
      outcome: MigrationState,
      reason?: string,
      stop?: { code: string | undefined; stoppedAt: MigrationPhase },
    ): MigrationAttempt => ({
      attempt: n,
      startedAt: iso(startedAt),
      endedAt: iso(endedAt),
      outcome,
      ...(reason === undefined ? {} : { reason }),
      ...(stop === undefined || outcome === 'Completed'
        ? {}
        : { ...(stop.code === undefined ? {} : { code: stop.code }), stoppedAt: stop.stoppedAt }),
    });
    const earlier = ended;
    let final: MigrationStatus | undefined;
    const end = yield* stampingStatuses(
      oneAttempt(attemptInput, earlier, n, withPrelock, verifications),
      (status, endedAt, reached) => {
        const stop = {
          code: status.status === 'Cancelled' ? 'Cancelled' : leadingCode(status.error),
          stoppedAt: reached,
        };
        const stamped = {
          ...status,
          attempt: n,
          attempts:
            endedAt === undefined ? earlier : [...earlier, entry(endedAt, status.status, status.error, stop)],
        };
        if (endedAt !== undefined) final = stamped;
        return stamped;
      },
      history,
    );
    lastJob = end.job ?? lastJob;
    if (end.kind === 'failed' && end.code === 'SwapLost') seen.swapLost = true;
    if (end.kind === 'done') return { status: final ?? end.status, job: lastJob };
    // version 4: the next attempt's status keeps this one's verifications
    verifications = end.status.verifications ?? verifications;
    const lock = end.lockHeld
      ? `; lock ${yield* releaseAfterFailure(attemptInput, releaseReason(end.reason, end.code))}`
      : '';
    const reason = `${end.reason}${lock}`;
    ended = [
      ...ended,
      entry(yield* now(), 'Failed', reason, {
        code: end.code ?? leadingCode(end.reason),
        stoppedAt: phaseReached(end.status),
      }),
    ];
    const failedStatus = {
      ...end.status,
      phase: 'released' as const,
      error: reason,
      attempt: n,
      attempts: ended,
    };
    const swapUnknown = end.code === 'SwapUnknown';
    // The gate's verdict on a swap whose answer was lost: the route decides, not the attempts left.
    const endAtGate = function* (
      gate: Extract<Gate, { kind: 'ended' }>,
      cancel?: CancelRequest,
    ): Generator<Step, MigrationEnd, unknown> {
      const patched = gate.outcome === 'Completed' ? relabelLast(ended, 'Completed', gate.reason) : ended;
      const status = yield* publish(failedStatus, {
        status: gate.outcome,
        phase: gate.outcome === 'Completed' ? 'swapped' : 'released',
        error: gate.outcome === 'Failed' ? `${reason}; ${gate.reason}` : gate.reason,
        attempts: patched,
        ...(cancel ? { cancelRequestedAt: cancel.requestedAt, cancelRequestedBy: cancel.by } : {}),
      });
      // Version 4: no notice on a swap the gate could not settle (a failed one could drop a live target)
      if (gate.unconfirmed || (swapUnknown && v4 && gate.outcome === 'Failed'))
        return { status, job: undefined };
      const landed = gate.cleanUpSourceAfter;
      return { status, job: lastJob && landed ? { ...lastJob, cleanUpSourceAfter: landed } : lastJob };
    };
    // Version 4: a swap whose answer was lost goes to the gate even with no attempt left: it may have
    // landed, and a Failed migration's notice has the participants drop the target.
    // Still Running meanwhile; a cancel requested by the time it ends is recorded (too late after a swap).
    if (swapUnknown && v4) {
      yield* publish(failedStatus);
      const gate = yield* previousLockGone(attemptInput, true, reason);
      if (gate.kind === 'free' && gate.sawSwap) seen.swapLost = true;
      if (gate.kind !== 'free') return yield* endAtGate(gate, (yield* cancelRequested(input)) ?? undefined);
    }
    // Another attempt only while the history can hold one more at its worst (the Durable extension stops
    // an orchestration at MAX_ORCHESTRATION_ACTIONS; config.ts holds one attempt's worst case under it).
    const room = history.actions + (input.settings.attemptActionsBound ?? 0) <= MAX_ORCHESTRATION_ACTIONS;
    if (n >= last || attemptVerdict(end.code) === 'final' || !room) {
      const why =
        n < last && attemptVerdict(end.code) === 'retry' && !room
          ? ' (no room in the history for another attempt)'
          : '';
      const status = yield* publish(failedStatus, { status: 'Failed', error: `${reason}${why}` });
      return { status, job: lastJob };
    }
    // Still Running: the reason is kept in `attempts`, the migration goes on.
    if (!(swapUnknown && v4)) yield* publish(failedStatus);
    let cancel: CancelRequest | undefined;
    try {
      // a cancel ends the wait for the next attempt
      yield* sleep(retryDelayMs(input, n - first + 1), input);
    } catch (error) {
      if (!(error instanceof CancelRequested)) throw error;
      cancel = error.request;
    }
    // Before another attempt, or before calling a cancel done: attempt n's lock must be gone (its
    // release may have failed, or a pre-lock committed unseen), and a swap whose answer was lost ends
    // the migration Completed, a cancel then too late (review of issue 18).
    const gate = yield* previousLockGone(attemptInput, swapUnknown, reason);
    if (gate.kind === 'free' && gate.sawSwap) seen.swapLost = true;
    if (gate.kind !== 'free') return yield* endAtGate(gate, cancel);
    if (cancel) {
      // attempt n's lock is seen gone: nothing left to release
      const ending = cancelled({ input, status: failedStatus, etag: '' }, cancel, false);
      return { status: yield* cancelMigration(attemptInput, ending), job: lastJob };
    }
  }
}

/** The last attempt relabelled (a lost swap found landed: Completed, without a failure's code and phase). */
const relabelLast = (attempts: MigrationAttempt[], outcome: MigrationState, reason: string) =>
  attempts.map((a, i) => {
    if (i !== attempts.length - 1) return a;
    const { code: _code, stoppedAt: _stoppedAt, ...rest } = a;
    return { ...rest, outcome, reason };
  });

/** One attempt: its pre-lock and, with the lock held, steps 2–6. */
function* oneAttempt(
  input: MigrationInput,
  earlier: MigrationAttempt[],
  n: number,
  withPrelock: (prelocked: Prelocked) => Generator<Step, Ending, unknown>,
  verifications: Verification[],
): Generator<Step, AttemptEnd, unknown> {
  const fresh: MigrationStatus = {
    ...pendingStatus(input),
    attempt: n,
    attempts: earlier,
    ...(verifications.length > 0 ? { verifications } : {}),
  };
  const running = yield* publish(fresh, { status: 'Running' });
  // a cancel before this attempt's pre-lock: it never takes a lock (workflow/cancel.ts)
  const neverStarted = yield* cancelledBeforeStart(input, running);
  if (neverStarted) return { kind: 'done', status: neverStarted };
  // version 4: a cutover window closed for good, or beyond a new lock's cap, takes no lock
  const shut = yield* windowShutBeforePrelock(input);
  if (shut) return { kind: 'failed', status: running, ...shut, lockHeld: false };
  const tried = yield* tryPrelock(input, running);
  if (tried.kind === 'cancelled') return { kind: 'done', status: yield* cancelMigration(input, tried) };
  if (tried.kind === 'unanswered') {
    return {
      kind: 'failed',
      status: running,
      reason: `prelock: ${tried.message}; ${tried.left}`,
      code: 'StepFailed',
      lockHeld: false,
    };
  }
  if (tried.kind === 'refused') {
    const { code, message } = tried.result;
    const state = prelockRefusal(code);
    if (state !== 'Failed')
      return {
        kind: 'done',
        status: yield* publish(running, { status: state, error: `${code}: ${message}` }),
      };
    return { kind: 'failed', status: running, reason: `prelock: ${code}: ${message}`, code, lockHeld: false };
  }
  const ending = yield* withPrelock(tried.state);
  if (ending.kind === 'cancelled') {
    const status = yield* cancelMigration(input, ending);
    return { kind: 'done', status, ...(ending.job ? { job: ending.job } : {}) };
  }
  return ending.kind === 'done' ? ending : { ...ending, lockHeld: true };
}

/**
 * Runs `inner`, stamping every status it publishes (`stamp`; a terminal one gets the time it ended,
 * from a `now` step just before, and the furthest phase the attempt's statuses reached), and counting
 * the history actions of the steps it yields. Every other step, and every error the runner throws in,
 * passes through.
 */
function* stampingStatuses<T>(
  inner: Generator<Step, T, unknown>,
  stamp: (status: MigrationStatus, endedAt: number | undefined, reached: MigrationPhase) => MigrationStatus,
  history: { actions: number },
): Generator<Step, T, unknown> {
  let result = inner.next();
  let reached: MigrationPhase | undefined;
  while (!result.done) {
    const step = result.value;
    history.actions += historyActions(step);
    if (step.kind === 'status') {
      reached = phaseReached(step.status, reached);
      const endedAt = terminalStates.has(step.status.status) ? yield* now() : undefined;
      yield { kind: 'status', status: stamp(step.status, endedAt, reached) };
      result = inner.next(undefined);
      continue;
    }
    let answer: unknown;
    try {
      answer = yield step;
    } catch (error) {
      result = inner.throw(error);
      continue;
    }
    result = inner.next(answer);
  }
  return result.value;
}

/** The Durable history actions a step records: a task one each, a race its timer too (as copy.ts counts). */
export function historyActions(step: Step): number {
  switch (step.kind) {
    case 'activity':
    case 'http':
      return 1;
    // a cancellable wait also waits for the cancel event (version 3)
    case 'timer':
      return step.cancellable ? 2 : 1;
    case 'race':
      return step.tasks.length + (step.cancellable ? 2 : 1);
    case 'all':
      return step.tasks.length;
    // at most a timer due at once (the first check; docs/design.md §6.8)
    case 'cancelRequested':
      return 1;
    case 'now':
    case 'status':
      return 0;
  }
}

type Gate =
  /** `sawSwap`: the write region showed the swap, gone since (a failover dropped it). */
  | { kind: 'free'; sawSwap?: true }
  | {
      kind: 'ended';
      outcome: 'Completed' | 'NoOp' | 'Failed';
      reason: string;
      /** Completed: the retired-source window's end, while the route shows one (the completed notice). */
      cleanUpSourceAfter?: string;
      /** Completed in the write region, never shown on a replica: no end notice. */
      unconfirmed?: true;
    };

/**
 * Before attempt n+1: the write region must show no live lock of this migration (attempt n's, whose
 * release failed or went unanswered). Released again with attempt n's seed, or waited out to the end of
 * its lease; a route already at the target ends the migration (after a swap whose answer was lost,
 * Completed: never a second attempt after a swap).
 */
function* previousLockGone(
  input: MigrationInput,
  swapUnknown: boolean,
  /** Why attempt n ended: its lock, released again here, records it. */
  failure: string,
): Generator<Step, Gate, unknown> {
  const { resourceId, migrationId, target, settings: s } = input;
  const attempt = input.lock.attempt ?? 1;
  // The last round only looks: the one before it waited out the lease.
  const rounds = Math.max(2, s.retryAttempts);
  let sawSwap = false;
  for (let round = 1; round <= rounds; round += 1) {
    let seen;
    try {
      seen = yield* activity('readRoute', { resourceId, from: 'writeRegion' });
    } catch {
      yield* sleep(s.retryIntervalSeconds * 1000 * 2 ** (round - 1));
      continue;
    }
    if (!seen.ok)
      return { kind: 'ended', outcome: 'Failed', reason: `read the route: ${seen.code}: ${seen.message}` };
    if (atTarget(seen.value.location, target)) {
      // Version 4: a swap whose answer was lost is Completed (and its source cleaned up on the notice)
      // only once a replica shows it after the replication bound, as confirmSwap asks of any swap: the
      // write region's copy alone may be one a failover drops. Not shown yet: look again next round.
      if (swapUnknown && workflowVersionOf(input) >= 4) {
        sawSwap = true;
        yield* sleepUntil((yield* now()) + confirmDelayMs(s));
        const replica = yield* readRouteOrNull(resourceId, 'replica');
        const shown =
          replica?.ok === true &&
          atTarget(replica.value.location, target) &&
          replica.value.lock?.migrationId !== migrationId;
        if (!shown) continue;
      }
      return swapUnknown
        ? {
            kind: 'ended',
            outcome: 'Completed',
            reason: `attempt ${attempt}'s swap landed; its answer was lost`,
            ...(seen.value.secondary?.role === 'retiredSource'
              ? { cleanUpSourceAfter: seen.value.secondary.writesBlockedUntil }
              : {}),
          }
        : { kind: 'ended', outcome: 'NoOp', reason: 'the resource already sits at the target' };
    }
    const lock = seen.value.lock;
    if (!lock || lock.migrationId !== migrationId) return { kind: 'free', ...(sawSwap ? { sawSwap } : {}) };
    try {
      const released = yield* activity('release', {
        resourceId,
        lock: input.lock,
        reason: releaseReason(`attempt ${attempt} ended, its lock left behind: ${failure}`),
      });
      if (lockGone(released)) continue;
    } catch {
      // the store is still out: try again after a backoff, and at last wait out the lease
    }
    if (round < rounds - 1) yield* sleep(s.retryIntervalSeconds * 1000 * 2 ** (round - 1));
    else yield* sleepUntil(Date.parse(lock.expiresAt) + ((s.clockSkewSeconds ?? 0) + 1) * 1000);
  }
  // Version 4: the write region showed the swap but no replica confirmed it: never Failed (its notice
  // would have the live target dropped), and no completed notice either (the source must stay).
  if (sawSwap)
    return {
      kind: 'ended',
      outcome: 'Completed',
      reason: `attempt ${attempt}'s swap landed in the write region; its answer was lost and no replica showed it: no completed notice`,
      unconfirmed: true,
    };
  return {
    kind: 'ended',
    outcome: 'Failed',
    reason: `could not see attempt ${attempt}'s lock gone from the write region; no further attempt`,
  };
}

const atTarget = (location: Location, target: Location): boolean => sameLocation(location, target);
