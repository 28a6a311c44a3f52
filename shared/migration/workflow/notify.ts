import type { Participant } from '../participants';
import {
  type ActivityResult,
  type EndNotice,
  type EndStep,
  type HttpAnswer,
  type MigrationInput,
  type MigrationSettings,
  type MigrationState,
  type MigrationStatus,
  type ParticipantRequest,
  type RaceResult,
  type Step,
  type TaskStep,
} from '../types';
import {
  classifyAnswer,
  participantTiming,
  transientExhausted,
  transientWaitMs,
} from '../participantContract';
import { jobSequence } from './copy';
import type { EndJob } from './state';
import { now, publish, sleep, step } from './steps';

/**
 * End notices (docs/design.md §6.11): once a migration has ended
 * Completed (its swap confirmed), Failed (no attempt left) or Cancelled, every participant is told, one
 * POST each, all at once, through the `callParticipant` activity: `completed` with when the source may be
 * cleaned up, `failed` / `cancelled` with why (the target's partial copy may be dropped). Best effort:
 * the final status is published before them and stays what it is; the notices only add `notices`.
 * Nothing is sent for Conflict or NoOp, or when no attempt got as far as reading the route: nothing was
 * copied then.
 */
export function* notifyEnd(
  input: MigrationInput,
  final: MigrationStatus,
  job: EndJob | undefined,
): Generator<Step, MigrationStatus, unknown> {
  const endStep = endStepOf(final.status);
  const { participants } = input.settings;
  if (endStep === null || job === undefined || participants.length === 0) return final;
  const body: ParticipantRequest = {
    ...noticeBody(input, job, endStep),
    ...(endStep === 'completed'
      ? {
          cleanUpSourceAfter:
            job.cleanUpSourceAfter ?? final.timeline.swappedAt ?? new Date(yield* now()).toISOString(),
        }
      : { reason: final.error ?? `the migration was ${endStep}` }),
  };
  const notices = yield* deliver(input.settings, participants, body, endStep);
  return yield* publish(final, { notices });
}

/** The notice a final state gets: none for Conflict and NoOp (nothing was copied) or a running one. */
export function endStepOf(state: MigrationState): EndStep | null {
  switch (state) {
    case 'Completed':
      return 'completed';
    case 'Failed':
      return 'failed';
    case 'Cancelled':
      return 'cancelled';
    default:
      return null;
  }
}

/**
 * The copy jobs' body fields for the attempt that ended, as a job of its own (stepAttempt 1), numbered
 * last of its attempt (`jobSequence`, workflow/copy.ts: the one home of job numbers), so a participant
 * ordering jobs by (lockAcquiredAt, sequence) sees it after every job that attempt could have sent. No
 * credential: the lock's only trace is when it was acquired.
 */
export function noticeBody(input: MigrationInput, job: EndJob, endStep: EndStep): ParticipantRequest {
  return {
    migrationId: input.migrationId,
    resourceId: input.resourceId,
    from: job.from,
    to: input.target,
    step: endStep,
    migrationAttempt: job.migrationAttempt,
    stepAttempt: 1,
    attempt: 1,
    sequence: jobSequence({ ...input, lock: { ...input.lock, attempt: job.migrationAttempt } }, endStep, 1),
    ...(job.lockAcquiredAt === undefined ? {} : { lockAcquiredAt: job.lockAcquiredAt }),
  };
}

/** What one answer to a notice means: the copy contract's classifier, with every 2xx it allows delivered. */
export type NoticeVerdict =
  | { kind: 'delivered' }
  | { kind: 'notImplemented' }
  | { kind: 'transient'; retryAfterSeconds?: number }
  | { kind: 'undelivered' };

/** 200, 202 (accepted: never polled) and 204 deliver; 404 not implemented; the contract's transients retry. */
export function noticeVerdict(answer: HttpAnswer): NoticeVerdict {
  if (answer.status === 200 || answer.status === 202 || answer.status === 204) return { kind: 'delivered' };
  const verdict = classifyAnswer('post', 'optional', answer);
  if (verdict.kind === 'notImplemented') return { kind: 'notImplemented' };
  if (verdict.kind === 'transient')
    return verdict.retryAfterSeconds === undefined
      ? { kind: 'transient' }
      : { kind: 'transient', retryAfterSeconds: verdict.retryAfterSeconds };
  return { kind: 'undelivered' };
}

/** The notices' history actions at their worst (attemptActionsBound's `notices` term). */
export const worstCaseNoticeActions = (participants: number, retryAttempts: number): number =>
  // a round is one activity per participant still to answer, its race timer and the backoff after it
  participants === 0 ? 0 : retryAttempts * (participants + 2);

/**
 * Every participant at once (one race, its timer past the request timeout); the ones answering a transient are asked again after the contract's
 * backoff (the largest any of them needs), until `transientExhausted`: undelivered then.
 */
function* deliver(
  s: MigrationSettings,
  participants: Participant[],
  body: ParticipantRequest,
  endStep: EndStep,
): Generator<Step, EndNotice[], unknown> {
  const outcomes = new Map<string, EndNotice>();
  let pending = participants.map((participant) => ({ participant, tries: 1 }));
  while (pending.length > 0) {
    // a request still running at the deadline (past its own timeout) counts as no answer: asked again
    const deadline = (yield* now()) + 2 * participantTiming(s).timeoutSeconds * 1000;
    const round = yield* step<RaceResult>({
      kind: 'race',
      tasks: pending.map((p) => noticeTask(s, p.participant, body)),
      deadline,
    });
    const at = new Date(yield* now()).toISOString();
    const again: typeof pending = [];
    let waitMs = 0;
    for (const [i, p] of pending.entries()) {
      const settled = round.settled[i] as ActivityResult<HttpAnswer> | null | undefined;
      const answer: HttpAnswer =
        settled == null
          ? { status: 0, body: 'no answer' }
          : settled.ok
            ? settled.value
            : { status: 0, body: settled.message };
      const verdict = noticeVerdict(answer);
      if (verdict.kind === 'transient' && !transientExhausted(p.tries, s)) {
        waitMs = Math.max(waitMs, transientWaitMs(p.tries, verdict.retryAfterSeconds, s));
        again.push({ ...p, tries: p.tries + 1 });
        continue;
      }
      const outcome = verdict.kind === 'transient' ? 'undelivered' : verdict.kind;
      outcomes.set(p.participant.name, { participant: p.participant.name, step: endStep, outcome, at });
    }
    pending = again;
    // the migration has ended: nothing cancels these waits
    if (pending.length > 0) yield* sleep(waitMs);
  }
  return participants.map((p) => outcomes.get(p.name) as EndNotice);
}

function noticeTask(s: MigrationSettings, participant: Participant, body: ParticipantRequest): TaskStep {
  return {
    kind: 'activity',
    name: 'callParticipant',
    input: {
      participant: participant.name,
      participantUrl: participant.url,
      ...(participant.audience === undefined ? {} : { audience: participant.audience }),
      timeoutSeconds: participantTiming(s).timeoutSeconds,
      method: 'POST',
      body,
    },
  };
}
