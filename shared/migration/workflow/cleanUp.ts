import { boundedReleaseReason } from '../../core/lock/rules';
import type { MigrationInput, Step } from '../types';
import { activity } from './steps';

/**
 * What a release records as its reason (docs/design.md §6.12): the failure's reason led by its stable code when
 * the text does not name it already, bounded and credential-free (`boundedReleaseReason`).
 */
export const releaseReason = (reason: string, code?: string): string =>
  boundedReleaseReason(code !== undefined && !reason.includes(code) ? `${code}: ${reason}` : reason);

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
