import { type Step, workflowVersionOf } from '../types';
import { confirmSwap } from './confirm';
import { type Ending, type Escalated, done, guarded, refused } from './state';
import { lateCancel } from './cancel';
import { activity, publish, stopIfCancelled } from './steps';

/** The write lock lapsed before the swap: an overrun, tried again on the next write-lock attempt. */
export interface SwapLapsed {
  kind: 'lapsed';
  overrun: string;
}

/**
 * The swap, pinned to this write-lock attempt (`writeAt`): one conditional write, so never a partial
 * cutover. Completed (version 4: once confirmed on a replica), a lapsed write lock (`InvalidTransition`),
 * or a failure.
 */
export function* swapPhase(state: Escalated): Generator<Step, Ending | SwapLapsed, unknown> {
  // A swap the runner gave up on may have committed unseen: never retried blindly (workflow/attempts.ts).
  return yield* guarded(state, swap, 'SwapUnknown');
}

function* swap(state: Escalated): Generator<Step, Ending | SwapLapsed, unknown> {
  const { resourceId, lock } = state.input;
  // the last moment a cancel can stop the migration; once the swap runs, its answer decides
  yield* stopIfCancelled(state.input);
  const swapped = yield* activity('swap', {
    resourceId,
    lock,
    ifMatch: state.etag,
    writeAt: state.grant.writeAt,
  });
  // Version 4: Completed only once a replica shows the swap (workflow/confirm.ts).
  if (swapped.ok && workflowVersionOf(state.input) >= 4) return yield* confirmSwap(state, swapped.value);
  if (swapped.ok) {
    return done(
      yield* publish(state.status, {
        status: 'Completed',
        phase: 'swapped',
        timeline: { ...state.status.timeline, swappedAt: swapped.value.swappedAt },
        ...(yield* lateCancel(state.input)),
      }),
    );
  }
  if (swapped.code !== 'InvalidTransition') return refused(state, 'swap', swapped);
  return { kind: 'lapsed', overrun: `swap: ${swapped.message}` };
}
