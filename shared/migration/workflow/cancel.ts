import type { CancelRequest, MigrationInput, MigrationStatus, Step } from '../types';
import { releaseAfterFailure, releaseReason } from './cleanUp';
import type { Cancelled } from './state';
import { cancelRequested, publish } from './steps';

/**
 * The cancel path (docs/design.md §6.8). A cancel request ends the migration at its next step:
 * whatever the phase, the lock is released with its token (the `release` activity, unpinned like
 * a failed attempt's: the whole lock goes, so writes and deletes resume at the source), and the migration ends
 * Cancelled, naming who asked (an actor id, never a credential) and when. The swap is the one step a
 * cancel cannot stop once it runs: a swap that committed ends Completed, with the late request recorded.
 */
export function* cancelMigration(
  input: MigrationInput,
  ending: Cancelled,
): Generator<Step, MigrationStatus, unknown> {
  const lock = ending.lockHeld
    ? `lock ${yield* releaseAfterFailure(input, releaseReason(cancelReason(ending.request), 'Cancelled'))}`
    : 'no lock was held';
  return yield* publish(ending.status, {
    status: 'Cancelled',
    phase: ending.lockHeld ? 'released' : ending.status.phase,
    ...requestFields(ending.request),
    error: `${cancelReason(ending.request)}; ${lock}`,
  });
}

/** Before the pre-lock: a migration cancelled already never starts; null when it may. */
export function* cancelledBeforeStart(
  input: MigrationInput,
  status: MigrationStatus,
): Generator<Step, MigrationStatus | null, unknown> {
  const request = yield* cancelRequested();
  if (!request) return null;
  return yield* publish(status, {
    status: 'Cancelled',
    ...requestFields(request),
    error: `${cancelReason(request)} before the pre-lock; no lock was taken`,
  });
}

/** After a swap that committed: a cancel requested meanwhile came too late, and the status says so. */
export function* lateCancel(): Generator<Step, Partial<MigrationStatus>, unknown> {
  const request = yield* cancelRequested();
  return request ? requestFields(request) : {};
}

const requestFields = (request: CancelRequest): Partial<MigrationStatus> => ({
  cancelRequestedAt: request.requestedAt,
  cancelRequestedBy: request.by,
});

const cancelReason = (request: CancelRequest): string =>
  `cancelled by ${request.by} (requested at ${request.requestedAt})`;
