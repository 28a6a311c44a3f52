import type { StoredDocument } from '../../core/lock/document';
import type { Seal } from '../../core/security/tokenKeys';
import type {
  ActivityResult,
  MigrationInput,
  MigrationState,
  MigrationStatus,
  PrelockGrant,
  Step,
} from '../types';
import { type Cancelled, type Prelocked, cancelled, messageOf } from './state';
import { CancelRequested, activity, publish, waitingOutConvergence } from './steps';
import { releaseReason } from './cleanUp';
import { takesAnnouncedLocks } from './announced';

/** A pre-lock refused: another lock or a swap just now is a conflict; the resource already there, none. */
export const prelockRefusal = (code: string): MigrationState =>
  code === 'Locked' || code === 'ConvergencePending'
    ? 'Conflict'
    : code === 'AlreadyAtTarget'
      ? 'NoOp'
      : 'Failed';

/** A pre-lock tried: the grant, its refusal, or no answer (and what became of a lock committed unseen). */
export type PrelockTried =
  | { kind: 'next'; state: Prelocked }
  /** Cancelled while waiting out a refusal: no lock of this migration's is held. */
  | Cancelled
  | { kind: 'refused'; result: { code: string; message: string } }
  | { kind: 'unanswered'; message: string; left: string };

/**
 * 1. pre-lock. Its token and Idempotency-Key derive from the input's random `lock` seed under a key
 * only the activities hold. A swap moments ago (ConvergencePending) is waited out, a few times at most.
 * A store that stays down through every retry fails the attempt here, never leaving it unfinished. It
 * answers how the pre-lock went; workflow/attempts.ts judges it (no lock is held but the grant's).
 */
export function* tryPrelock(
  input: MigrationInput,
  status: MigrationStatus,
): Generator<Step, PrelockTried, unknown> {
  const { resourceId, migrationId, lock } = input;
  const request = {
    resourceId,
    migrationId,
    owner: input.instanceId,
    target: input.target,
    lock,
    ...prelockSaving,
    ...listedFor(input),
    ...(takesAnnouncedLocks(input) ? { announced: true as const } : {}),
  };
  let pre: ActivityResult<PrelockGrant>;
  try {
    pre = yield* waitingOutConvergence('prelock', request, input.settings, input);
  } catch (error) {
    // cancelled while waiting out a refusal: no lock of this migration's is held
    if (error instanceof CancelRequested) return cancelled({ input, status, etag: '' }, error.request, false);
    const left = yield* releaseUnseenPrelock(input);
    return { kind: 'unanswered', message: messageOf(error), left };
  }
  if (!pre.ok) return { kind: 'refused', result: pre };
  const prelocked = yield* publish(status, {
    phase: 'prelock',
    timeline: { ...status.timeline, prelockAt: pre.value.acquiredAt },
  });
  return { kind: 'next', state: { input, status: prelocked, etag: pre.value.etag, grant: pre.value } };
}

/**
 * The pre-lock answers where the route was, so the route is not read again (converge.ts), and its
 * activity decides on the version the router holds (activities.ts): the read it saves, a 412 and a
 * re-read when that version is stale.
 */
const prelockSaving = { withLocation: true } as const;

/**
 * The campaign's listed copy, for the migration's first attempt alone: a later one comes after the first
 * attempt's own writes, where the listed version is stale and would cost a refused write before the read.
 */
const listedFor = ({
  listed,
  listedSeal,
  lock,
  earlierAttempts,
}: MigrationInput): { known?: StoredDocument; knownSeal?: Seal } =>
  listed !== undefined && (lock.attempt ?? 1) <= (earlierAttempts?.length ?? 0) + 1
    ? { known: listed, ...(listedSeal === undefined ? {} : { knownSeal: listedSeal }) }
    : {};

/**
 * The clean-up after a pre-lock that failed unanswered. A timed-out pre-lock may have committed
 * unseen, and would hold the resource for its whole lease: if the write region shows this migration's
 * pre-lock, release it (its token derives from the seed). Answers what was left, for the status.
 */
export function* releaseUnseenPrelock(input: MigrationInput): Generator<Step, string, unknown> {
  const { resourceId, migrationId, lock } = input;
  try {
    const seen = yield* activity('readRoute', { resourceId, from: 'writeRegion' });
    if (!seen.ok) return 'a pre-lock that committed unseen lapses with its lease';
    if (seen.value.lock?.migrationId !== migrationId) return 'no lock is held by this migration';
    const released = yield* activity('release', {
      resourceId,
      lock,
      reason: releaseReason('the pre-lock committed unseen (its answer was lost)', 'StepFailed'),
    });
    return released.ok
      ? 'its pre-lock, committed unseen, was released'
      : 'its pre-lock committed unseen and could not be released; the lease frees it';
  } catch {
    return 'a pre-lock that committed unseen lapses with its lease';
  }
}
