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
import { activity, publish, sleep, stopIfCancelled } from './steps';
import { swapPhase } from './swap';
import { windowPhase } from './window';

/** A write-lock attempt whose delta (or swap) overran the write budget; writes resumed. */
interface Overran {
  kind: 'overran';
  state: Moving;
  overrun: string;
}

/**
 * 6. Write lock, delta copy and swap, within the write budget, up to `deltaAttempts` times. A delta
 * that overruns: release the write lock (writes resume, the hard-delete lock stays), wait, renew the
 * hard-delete lock, try again; after the last attempt, fail.
 */
export function* writePhase(state: Moving): Generator<Step, Ending, unknown> {
  const s = state.input.settings;
  let current = state;
  let lastOverrun = '';
  for (let attempt = 1; attempt <= s.deltaAttempts; attempt += 1) {
    if (attempt > 1) {
      const renewed = yield* guarded(current, renewBetweenAttempts);
      if (renewed.kind !== 'next') return renewed;
      current = renewed.state;
    }
    // version 4: the write lock only inside the cutover window (workflow/window.ts)
    const open = yield* guarded(current, windowPhase);
    if (open.kind !== 'next') return open;
    current = open.state;
    const tried = yield* guarded(current, (held) => writeAttempt(held, attempt));
    if (tried.kind !== 'overran') return tried;
    current = tried.state;
    lastOverrun = tried.overrun;
  }
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

function* writeAttempt(state: Moving, attempt: number): Generator<Step, Ending | Overran, unknown> {
  const { resourceId, lock } = state.input;
  yield* stopIfCancelled(state.input);
  const w = yield* activity('escalate', { resourceId, lock, phase: 'write', ifMatch: state.etag });
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
  const copied: Escalated = { ...state, etag: copy.etag };
  if (!copy.result.ok) {
    if (copy.result.code !== 'LockExpired')
      return failed(copied, `deltaCopy: ${copy.result.code}: ${copy.result.message}`, copy.result.code);
    return yield* releaseWriteLock(copied, `deltaCopy: ${copy.result.message}`);
  }
  const swapped = yield* swapPhase(copied);
  return swapped.kind === 'lapsed' ? yield* releaseWriteLock(copied, swapped.overrun) : swapped;
}

/** The delta overran: let writes resume (the hard-delete lock stays), pinned to this attempt. */
function* releaseWriteLock(state: Escalated, overrun: string): Generator<Step, Ending | Overran, unknown> {
  const { resourceId, lock } = state.input;
  const down = yield* activity('release', {
    resourceId,
    lock,
    phase: 'write',
    ifMatch: state.etag,
    writeAt: state.grant.writeAt,
  });
  if (!down.ok) return refused(state, 'release the write lock', down);
  const resumed: Moving = {
    input: state.input,
    status: yield* publish(state.status, { phase: 'hardDelete' }),
    etag: down.value.etag,
    from: state.from,
  };
  return { kind: 'overran', state: resumed, overrun };
}
