import { activationOpensAt } from '../../core/lock/state';
import type { MigrationInput, MigrationSettings, PrelockGrant, SeededGrant, Step } from '../types';
import { has, workflowCapabilities } from './capabilities';
import { renewEveryMs, renewLock } from './copy';
import { bulkCopy } from './hardDelete';
import { type Escalated, type Moving, type PhaseResult, guarded, next, refused } from './state';
import { activity, now, publish, sleepUntil, stopIfCancelled } from './steps';

/**
 * The workflow's steps under announced locks (lock rule 2, docs/design.md §3.7 and §6): the pre-lock is
 * the hard-delete lock, in force a lead L after its grant; each write-lock attempt first announces its
 * write window L ahead and holds the hard-delete lock until the window opens on every clock, then takes
 * the write lock as before. The write lock's hold (writeAt, budget, delta, verify, swap) is unchanged.
 */

/**
 * Whether this instance asks for announced locks: its version has `announcedEscalations` and its input
 * was started with the flag on. Both are fixed at the start, so the answer never changes mid-run.
 */
export function takesAnnouncedLocks(input: MigrationInput): boolean {
  return has(workflowCapabilities(input), 'announcedEscalations') && input.settings.announcedLocks === true;
}

/**
 * Whether a grant is an announced lock. The path follows the lock actually held, not what was asked: a
 * router that granted a legacy lock (one without announced locks) is escalated as before.
 */
export const isAnnouncedGrant = (grant: Pick<SeededGrant, 'announceLeadSeconds'>): boolean =>
  grant.announceLeadSeconds !== undefined;

/** The lead (ms) the holder plans with: the input's, else the grant's, else none. */
export const announceLeadMs = (s: MigrationSettings): number => (s.announceLeadSeconds ?? 0) * 1000;

/**
 * 5, announced. The grant is already the hard-delete lock, in force on every clock by now (the wait was
 * `announcedWaitUntil`): publish it, then the bulk copy as after an escalation.
 */
export function* announcedHardDeletePhase(
  state: Moving,
  grant: PrelockGrant,
): Generator<Step, PhaseResult<Moving>, unknown> {
  return yield* guarded(state, function* (moving) {
    yield* stopIfCancelled();
    const { location: _location, ...held } = grant;
    const escalated: Escalated = {
      ...moving,
      status: yield* publish(moving.status, {
        phase: 'hardDelete',
        timeline: { ...moving.status.timeline, hardDeleteAt: grant.hardDeleteAt ?? null },
      }),
      grant: held,
    };
    return yield* guarded(escalated, bulkCopy);
  });
}

/**
 * Announce the write window (at the earliest `at`, a cutover slot less the skew margin), and publish it
 * on the timeline. Answers the state and the instant the write lock may be taken (`activationOpensAt`).
 */
export function* announceWriteWindow(
  state: Moving,
  at: number | undefined,
): Generator<Step, PhaseResult<Moving> | { kind: 'announced'; state: Moving; opensAt: number }, unknown> {
  const { resourceId, lock, settings } = state.input;
  yield* stopIfCancelled();
  const announced = yield* activity('announce', {
    resourceId,
    lock,
    ifMatch: state.etag,
    ...(at === undefined ? {} : { at: new Date(at).toISOString() }),
  });
  if (!announced.ok) return refused(state, 'announce the write window', announced);
  const windowAt = announced.value.writeWindowAt;
  const status = yield* publish(state.status, {
    timeline: { ...state.status.timeline, writeWindowAt: windowAt ?? null },
  });
  return {
    kind: 'announced',
    state: { ...state, status, etag: announced.value.etag },
    opensAt: activationOpensAt(announced.value, settings.clockSkewSeconds ?? 0),
  };
}

/**
 * Hold the hard-delete lock until `until`: each round renews it (an announced lock's renewal must land
 * at least the lead before its end, which a round of a third of the lease leaves: settings.ts, the
 * inequalities under announced locks), then sleeps at most one renewal period on a cancellable timer. A
 * lock at its cap (MaxLeaseReached) is held as it is; any other refusal fails the attempt. A timer set
 * for `until` that fires is taken as reaching it (`timerFiredIsDue`): the activation that follows waits
 * out a clock still short of the window (ConvergencePending).
 */
export function* holdHardDeleteUntil(
  state: Moving,
  until: number,
): Generator<Step, PhaseResult<Moving>, unknown> {
  const s = state.input.settings;
  let current = state;
  let t = yield* now();
  while (t < until) {
    const renewed = yield* renewLock(current, 'hardDelete');
    if (renewed.ok) current = { ...current, etag: renewed.value.etag };
    else if (renewed.code !== 'MaxLeaseReached')
      return refused(current, 'renew the hard-delete lock', renewed);
    const fireAt = Math.min(until, t + renewEveryMs(s.hardDeleteLeaseSeconds));
    yield* sleepUntil(fireAt, current.input);
    if (fireAt === until) break;
    t = yield* now();
  }
  return next(current);
}
