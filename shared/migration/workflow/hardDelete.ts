import type { Step } from '../types';
import { copyAll, inFlightGrace } from './copy';
import { type Escalated, type Moving, type PhaseResult, failed, guarded, next, refused } from './state';
import { publish, stopIfCancelled, waitingOutConvergence } from './steps';

/**
 * 5. The hard-delete lock and the bulk copy at every participant, renewing the hard-delete lease on a
 * timer. An activity whose clock is behind the runner's may find the lock not yet started on every
 * clock (ConvergencePending, with Retry-After): that is waited out, a few times at most.
 */
export function* hardDeletePhase(state: Moving): Generator<Step, PhaseResult<Moving>, unknown> {
  return yield* guarded(state, escalateToHardDelete);
}

function* escalateToHardDelete(state: Moving): Generator<Step, PhaseResult<Moving>, unknown> {
  const { resourceId, lock, settings } = state.input;
  yield* stopIfCancelled();
  const hd = yield* waitingOutConvergence(
    'escalate',
    { resourceId, lock, phase: 'hardDelete', ifMatch: state.etag },
    settings,
    state.input,
  );
  if (!hd.ok) return refused(state, 'escalate to hardDelete', hd);
  const escalated: Escalated = {
    ...state,
    status: yield* publish(state.status, {
      phase: 'hardDelete',
      timeline: { ...state.status.timeline, hardDeleteAt: hd.value.hardDeleteAt ?? null },
    }),
    etag: hd.value.etag,
    grant: hd.value,
  };
  return yield* guarded(escalated, bulkCopy);
}

/** The bulk copy under a hard-delete lock held: after the in-flight grace, at every participant. */
export function* bulkCopy(state: Escalated): Generator<Step, PhaseResult<Moving>, unknown> {
  const s = state.input.settings;
  yield* inFlightGrace(s, state.input);
  const copy = yield* copyAll(state, {
    copy: 'bulkCopy',
    attempt: 1,
    phase: 'hardDelete',
    leaseSeconds: s.hardDeleteLeaseSeconds,
  });
  if (!copy.result.ok)
    return failed(state, `bulkCopy: ${copy.result.code}: ${copy.result.message}`, copy.result.code);
  return next({ input: state.input, status: state.status, etag: copy.etag, from: state.from });
}
