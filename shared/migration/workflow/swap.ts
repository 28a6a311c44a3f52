import type { Step } from '../types';
import { confirmSwap } from './confirm';
import { type Ending, type Escalated, guarded, refused } from './state';
import { activity, stopIfCancelled } from './steps';

/** The write lock lapsed before the swap: an overrun, tried again on the next write-lock attempt. */
export interface SwapLapsed {
  kind: 'lapsed';
  overrun: string;
}

/**
 * The swap, pinned to this write-lock attempt (`writeAt`): one conditional write, so never a partial
 * cutover. Completed once a replica shows it (workflow/confirm.ts), a lapsed write lock
 * (`InvalidTransition`), or a failure.
 */
export function* swapPhase(state: Escalated): Generator<Step, Ending | SwapLapsed, unknown> {
  // A swap the runner gave up on may have committed unseen: never retried blindly (workflow/gate.ts).
  return yield* guarded(state, swap, 'SwapUnknown');
}

function* swap(state: Escalated): Generator<Step, Ending | SwapLapsed, unknown> {
  const { resourceId, lock } = state.input;
  // the last moment a cancel can stop the migration; once the swap runs, its answer decides
  yield* stopIfCancelled();
  const swapped = yield* activity('swap', {
    resourceId,
    lock,
    ifMatch: state.etag,
    writeAt: state.grant.writeAt,
  });
  if (swapped.ok) return yield* confirmSwap(state, swapped.value);
  if (swapped.code !== 'InvalidTransition') return refused(state, 'swap', swapped);
  return { kind: 'lapsed', overrun: `swap: ${swapped.message}` };
}
