import { boundedReleaseReason } from '../../lock/rules';
import type { MigrationInput, MigrationStatus, Step } from '../types';
import type { Failure } from './state';
import { activity, publish } from './steps';

/**
 * What a release records as its reason (issue 21 §4): the failure's reason led by its stable code when
 * the text does not name it already, bounded and credential-free (`boundedReleaseReason`).
 */
export const releaseReason = (reason: string, code?: string): string =>
  boundedReleaseReason(code !== undefined && !reason.includes(code) ? `${code}: ${reason}` : reason);

/**
 * 7. Any failure with a lock held: release with the token, then Failed with the reason and what
 * became of the lock (a lapsed lock is as good as released; otherwise its lease frees it).
 */
export function* cleanUp(input: MigrationInput, failure: Failure): Generator<Step, MigrationStatus, unknown> {
  const released = yield* releaseAfterFailure(input, releaseReason(failure.reason, failure.code));
  return yield* publish(failure.status, {
    status: 'Failed',
    phase: 'released',
    error: `${failure.reason}; lock ${released}`,
  });
}

/** A release's answer that leaves the lock gone: released, lapsed, or not there any more. */
export const lockGone = (released: { ok: boolean; code?: string }): boolean =>
  released.ok || released.code === 'LockExpired' || released.code === 'NotLocked';

/** Release with the token, saying why (`releaseReason`); answers what became of the lock, for the status. */
export function* releaseAfterFailure(
  input: MigrationInput,
  reason: string,
): Generator<Step, string, unknown> {
  try {
    const released = yield* activity('release', { resourceId: input.resourceId, lock: input.lock, reason });
    if (lockGone(released) || released.ok) return 'released';
    return `release refused (${released.code}); the lease will free it`;
  } catch (releaseError) {
    return `release failed (${(releaseError as Error).message}); the lease will free it`;
  }
}
