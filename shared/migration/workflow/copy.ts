import { holderEndsAt } from '../../lock/state';
import type { Participant } from '../../config';
import type { Location } from '../../lock/document';
import type {
  ActivityResult,
  CopyStep,
  HttpResult,
  MigrationInput,
  MigrationSettings,
  RaceResult,
  SeededGrant,
  Step,
  TaskStep,
} from '../types';
import type { Escalated, WorkflowState } from './state';
import { activity, now, sleep, step } from './steps';

/** Renew a phase lock a few times per lease, so one lost renewal never lets it lapse. */
export const renewEveryMs = (leaseSeconds: number): number =>
  Math.max(1000, Math.floor((leaseSeconds * 1000) / 3));

/** Renew the hard-delete or write lock held, on the ETag of this migration's last write. */
export function* renewLock(
  state: WorkflowState,
  phase: 'hardDelete' | 'write',
): Generator<Step, ActivityResult<SeededGrant>, unknown> {
  const { resourceId, lock } = state.input;
  return yield* activity('renew', { resourceId, lock, phase, ifMatch: state.etag });
}

/** Requests that resolved the route just before a lock committed land before any copy starts. */
export function* inFlightGrace(s: MigrationSettings): Generator<Step, void, unknown> {
  if (s.inFlightGraceSeconds && s.participants.length > 0) yield* sleep(s.inFlightGraceSeconds * 1000);
}

function participantCall(
  input: MigrationInput,
  from: Location,
  participant: Participant,
  copy: CopyStep,
  attempt: number,
): TaskStep {
  return {
    kind: 'http',
    call: {
      method: 'POST',
      url: participant.url,
      // The runner calls with a managed-identity token for it; no credential is in the step itself.
      ...(participant.audience === undefined ? {} : { audience: participant.audience }),
      body: {
        migrationId: input.migrationId,
        resourceId: input.resourceId,
        from,
        to: input.target,
        step: copy,
        attempt,
      },
    },
  };
}

/** A participant still to answer, and which call (of the retry attempts) it is on. */
type Pending = Participant & { attempt: number };

type Round =
  | { ok: true; pending: Pending[]; backoffMs: number }
  | { ok: false; code: 'ParticipantFailed'; message: string };

/**
 * One race's answers: a participant still copying stays pending, a 2xx is done, a 5xx or transport
 * failure (status 0) is asked again after a backoff, up to the retry attempts; anything else fails.
 */
export function settleRound(
  pending: Pending[],
  race: RaceResult,
  s: MigrationSettings,
  copy: CopyStep,
): Round {
  const still: Pending[] = [];
  let backoffMs = 0;
  for (const [i, participant] of pending.entries()) {
    const result = race.settled[i] as HttpResult | null | undefined;
    if (result == null) {
      still.push(participant); // still copying
    } else if (result.status >= 200 && result.status < 300) {
      continue;
    } else if ((result.status === 0 || result.status >= 500) && participant.attempt < s.retryAttempts) {
      backoffMs = Math.max(backoffMs, s.retryIntervalSeconds * 1000 * 2 ** (participant.attempt - 1));
      still.push({ ...participant, attempt: participant.attempt + 1 });
    } else {
      return {
        ok: false,
        code: 'ParticipantFailed',
        message: `participant ${participant.name} answered ${result.status || 'nothing'} to ${copy} (attempt ${participant.attempt})`,
      };
    }
  }
  return { ok: true, pending: still, backoffMs };
}

export interface CopyJob {
  copy: CopyStep;
  /** 1 for the bulk copy; the write-lock attempt for the delta. */
  attempt: number;
  phase: 'hardDelete' | 'write';
  leaseSeconds: number;
}

/** How a copy ended, and the ETag after the renewals it made on the way. */
export interface CopyOutcome {
  result: ActivityResult<null>;
  etag: string;
}

/**
 * Run one copy step at every participant at once, in rounds raced against a renewal timer. When the
 * timer wins, the phase lock is renewed and the participants still copying are asked again: the
 * participant contract makes `POST` idempotent per (migration, step, attempt), answering 202 while
 * the job runs. When the lock can be renewed no further (the write budget, the parent's cap), the
 * copy may still finish before the lock's own end; a copy still running then has overrun. 5xx and
 * transport failures are retried with backoff, up to the retry attempts.
 */
export function* copyAll(state: Escalated, job: CopyJob): Generator<Step, CopyOutcome, unknown> {
  const s = state.input.settings;
  let pending: Pending[] = s.participants.map((p) => ({ ...p, attempt: 1 }));
  let etag = state.etag;
  // The holder's own end of the phase: its lease less the clock-skew margin, after which the rules
  // refuse the renewal or the swap (another clock may already see the phase over).
  const skew = s.clockSkewSeconds ?? 0;
  let phaseEndsAt = holderEndsAt(state.grant.phaseExpiresAt, skew);
  let renewable = true;
  while (pending.length > 0) {
    const deadline = renewable
      ? Math.min((yield* now()) + renewEveryMs(job.leaseSeconds), phaseEndsAt)
      : phaseEndsAt;
    const race = yield* step<RaceResult>({
      kind: 'race',
      tasks: pending.map((p) => participantCall(state.input, state.from, p, job.copy, job.attempt)),
      deadline,
    });
    const round = settleRound(pending, race, s, job.copy);
    if (!round.ok) return { result: round, etag };
    pending = round.pending;
    if (race.deadlineFirst && pending.length > 0) {
      if (deadline >= phaseEndsAt) {
        const message = `the ${job.phase} lock ran out at ${new Date(phaseEndsAt).toISOString()} with ${job.copy} still running`;
        return { result: { ok: false, code: 'LockExpired', message }, etag };
      }
      const renewed = yield* renewLock({ ...state, etag }, job.phase);
      if (renewed.ok) {
        etag = renewed.value.etag;
        phaseEndsAt = holderEndsAt(renewed.value.phaseExpiresAt, skew);
      } else if (renewed.code === 'FreezeBudgetExceeded' || renewed.code === 'MaxLeaseReached') {
        renewable = false;
      } else {
        return { result: renewed, etag };
      }
    } else if (round.backoffMs > 0) {
      yield* sleep(round.backoffMs);
    }
  }
  return { result: { ok: true, value: null }, etag };
}
