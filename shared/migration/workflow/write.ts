import type { Step } from '../types';
import { copyAll, inFlightGrace, renewLock } from './copy';
import {
  type Ending,
  type Escalated,
  type Moving,
  type PhaseResult,
  failed,
  guarded,
  next,
  refused,
} from './state';
import { activity, now, publish, sleep, stopIfCancelled, waitingOutConvergence } from './steps';
import { announceWriteWindow, holdHardDeleteUntil } from './announced';
import { releaseReason } from './cleanUp';
import { swapPhase } from './swap';
import { announcedWindowPhase, windowPhase } from './window';
import { verifyRound } from './verify';

/**
 * A write-lock attempt whose delta (or swap) overran the write budget, or whose verify found a
 * mismatch (`mismatch`); writes resumed.
 */
interface Overran {
  kind: 'overran';
  state: Moving;
  overrun: string;
  mismatch?: true;
}

/**
 * 6. Write lock, delta copy, verify, and swap, within the write budget, up to
 * `deltaAttempts` times. A delta that overruns, or a verify that finds a mismatch: release the write
 * lock (writes resume, the hard-delete lock stays), wait, renew the hard-delete lock, try again; after
 * the last attempt, fail (`VerificationFailed` when the last one found a mismatch).
 *
 * `announced` (an announced lock is held): each attempt announces its write window first and holds the
 * hard-delete lock until it opens (workflow/announced.ts); after an overrun the retry delay runs inside
 * that wait instead of before it. The write lock, delta, verify, swap and downgrade are as without.
 */
export function* writePhase(state: Moving, announced = false): Generator<Step, Ending, unknown> {
  const s = state.input.settings;
  let current = state;
  let lastOverrun = '';
  let lastMismatched = false;
  for (let attempt = 1; attempt <= s.deltaAttempts; attempt += 1) {
    // announced: the retry delay runs inside the announcement's wait, which starts at once
    const delayEndsAt = attempt > 1 && announced ? yield* retryDelayEndsAt(current) : undefined;
    if (attempt > 1 && !announced) {
      const renewed = yield* guarded(current, renewBetweenAttempts);
      if (renewed.kind !== 'next') return renewed;
      current = renewed.state;
    }
    // the write lock only inside the cutover window (workflow/window.ts)
    const open = announced
      ? yield* guarded(current, (held) => announcedWindow(held, delayEndsAt))
      : yield* guarded(current, windowPhase);
    if (open.kind !== 'next') return open;
    current = open.state;
    const tried = yield* guarded(current, (held) => writeAttempt(held, attempt, announced));
    if (tried.kind !== 'overran') return tried;
    current = tried.state;
    lastOverrun = tried.overrun;
    lastMismatched = tried.mismatch === true;
  }
  if (lastMismatched)
    return failed(
      current,
      `verification failed on write-lock attempt ${s.deltaAttempts} of ${s.deltaAttempts}, no swap: ${lastOverrun}`,
      'VerificationFailed',
    );
  return failed(
    current,
    `write budget exceeded on all ${s.deltaAttempts} attempts (${lastOverrun})`,
    'WriteBudgetExceeded',
  );
}

/**
 * The overrun attempts ran on the hard-delete lease; renew it before the next write lock, or a short
 * lease (the dev profile's) lapses between attempts and the copy could never finish.
 */
function* renewBetweenAttempts(state: Moving): Generator<Step, PhaseResult<Moving>, unknown> {
  yield* sleep(state.input.settings.deltaRetryDelaySeconds * 1000, state.input);
  const renewed = yield* renewLock(state, 'hardDelete');
  if (renewed.ok) return next({ ...state, etag: renewed.value.etag });
  if (renewed.code !== 'MaxLeaseReached') return refused(state, 'renew the hard-delete lock', renewed);
  return next(state);
}

/** When the delay after an overrun attempt ends (its own clock), for an announced lock's next attempt. */
function* retryDelayEndsAt(state: Moving): Generator<Step, number, unknown> {
  return (yield* now()) + state.input.settings.deltaRetryDelaySeconds * 1000;
}

/**
 * Before each write-lock attempt on an announced lock: the cutover window's slot (if any) an
 * announcement's lead ahead, the announcement, then the hard-delete lock held (renewed) until the
 * window opens on every clock and the retry delay, if any, is over.
 */
function* announcedWindow(
  state: Moving,
  delayEndsAt: number | undefined,
): Generator<Step, PhaseResult<Moving>, unknown> {
  const slotted = yield* announcedWindowPhase(state);
  if (slotted.kind !== 'next') return slotted;
  const skewMs = (state.input.settings.clockSkewSeconds ?? 0) * 1000;
  const at = slotted.slot === undefined ? undefined : slotted.slot - skewMs;
  const announced = yield* announceWriteWindow(slotted.state, at);
  if (announced.kind !== 'announced') return announced;
  return yield* holdHardDeleteUntil(announced.state, Math.max(announced.opensAt, delayEndsAt ?? 0));
}

function* writeAttempt(
  state: Moving,
  attempt: number,
  announced: boolean,
): Generator<Step, Ending | Overran, unknown> {
  const { resourceId, lock } = state.input;
  yield* stopIfCancelled();
  const request = { resourceId, lock, phase: 'write' as const, ifMatch: state.etag };
  // An announced lock's write lock opens with the window on every clock: an activity on a clock behind
  // the workflow's is told to wait (ConvergencePending, Retry-After), and waits it out.
  const w = announced
    ? yield* waitingOutConvergence('escalate', request, state.input.settings, state.input)
    : yield* activity('escalate', request);
  if (!w.ok) return refused(state, 'escalate to write', w);
  const writing: Escalated = {
    ...state,
    status: yield* publish(state.status, {
      phase: 'write',
      deltaAttempts: attempt,
      timeline: { ...state.status.timeline, writeAt: w.value.writeAt ?? null },
    }),
    etag: w.value.etag,
    grant: w.value,
  };
  return yield* guarded(writing, (held) => deltaCopyAndSwap(held, attempt));
}

function* deltaCopyAndSwap(state: Escalated, attempt: number): Generator<Step, Ending | Overran, unknown> {
  const s = state.input.settings;
  yield* inFlightGrace(s, state.input);
  const copy = yield* copyAll(state, {
    copy: 'deltaCopy',
    attempt,
    phase: 'write',
    leaseSeconds: Math.min(s.writeLeaseSeconds, s.writeBudgetSeconds),
  });
  // the write lock as the delta's renewals left it: verify runs on under it, to its renewed end
  const grant =
    copy.phaseExpiresAt === undefined ? state.grant : { ...state.grant, phaseExpiresAt: copy.phaseExpiresAt };
  const copied: Escalated = { ...state, etag: copy.etag, grant };
  if (!copy.result.ok) {
    if (copy.result.code !== 'LockExpired')
      return failed(copied, `deltaCopy: ${copy.result.code}: ${copy.result.message}`, copy.result.code);
    return yield* releaseWriteLock(copied, `deltaCopy: ${copy.result.message}`);
  }
  let verified = copied;
  if (s.participants.length > 0) {
    const round = yield* verifyRound(copied, attempt);
    if (round.kind === 'mismatch') return yield* releaseWriteLock(round.state, round.reason, true);
    if (round.kind === 'overran') return yield* releaseWriteLock(round.state, round.overrun);
    if (round.kind !== 'verified') return round;
    verified = round.state;
  }
  const swapped = yield* swapPhase(verified);
  return swapped.kind === 'lapsed' ? yield* releaseWriteLock(verified, swapped.overrun) : swapped;
}

/**
 * The delta overran, or its verify found a mismatch: let writes resume (the hard-delete lock stays),
 * pinned to this attempt.
 */
function* releaseWriteLock(
  state: Escalated,
  overrun: string,
  mismatch = false,
): Generator<Step, Ending | Overran, unknown> {
  const { resourceId, lock } = state.input;
  const down = yield* activity('release', {
    resourceId,
    lock,
    phase: 'write',
    ifMatch: state.etag,
    writeAt: state.grant.writeAt,
    reason: releaseReason(overrun, mismatch ? 'VerificationFailed' : 'WriteBudgetExceeded'),
  });
  if (!down.ok) return refused(state, 'release the write lock', down);
  const resumed: Moving = {
    input: state.input,
    status: yield* publish(state.status, { phase: 'hardDelete' }),
    etag: down.value.etag,
    from: state.from,
  };
  return { kind: 'overran', state: resumed, overrun, ...(mismatch ? { mismatch: true as const } : {}) };
}
