import { holderEndsAt } from '../../lock/state';
import type { Participant } from '../../config';
import type { Location } from '../../lock/document';
import {
  type ActivityResult,
  type CopyStep,
  type HttpAnswer,
  type HttpResult,
  type MigrationInput,
  type MigrationSettings,
  type ParticipantCall,
  type ParticipantRequest,
  type ParticipantStep,
  type RaceResult,
  type SeededGrant,
  type Step,
  type TaskStep,
  workflowVersionOf,
} from '../types';
import type { Escalated, WorkflowState } from './state';
import {
  CancelRequested,
  type CancelScope,
  activity,
  cancellable,
  now,
  sleep,
  sleepUntil,
  step,
  stopIfCancelled,
} from './steps';
import {
  type StepNeed,
  classifyAnswer,
  failureMessage,
  participantTiming,
  pollWaitMs,
  transientExhausted,
  transientWaitMs,
} from '../participantContract';

/** Slack for a request beyond its timeout (the activity's scheduling) when deciding to renew first. */
const REQUEST_MARGIN_MS = 1000;

/** Renew a phase lock a few times per lease, so one lost renewal never lets it lapse. */
export const renewEveryMs = (leaseSeconds: number): number =>
  Math.max(1000, Math.floor((leaseSeconds * 1000) / 3));

/** The Durable extension's default cap on one orchestration's actions (host.json `maxOrchestrationActions`). */
export const MAX_ORCHESTRATION_ACTIONS = 100_000;

/** What bounds a migration's copies: its participants, leases and budgets, and the poll cadence. */
export interface CopyShape {
  participants: number;
  prelockMaxSeconds: number;
  hardDeleteLeaseSeconds: number;
  writeLeaseSeconds: number;
  writeBudgetSeconds: number;
  deltaAttempts: number;
  pollMinSeconds: number;
  pollMaxSeconds: number;
}

/**
 * The most history actions a migration's copies can record (version 2): every copy running as long as
 * it may (the bulk copy to the pre-lock cap, each delta attempt its write budget), every participant
 * polled at the poll cap after its backoff from the poll minimum. A poll is one activity and one timer, a POST one activity and its race timer,
 * a renewal one activity after the race timer that ended the round. Past the extension's cap an
 * orchestration stops scheduling and hangs (docs/design.md §6.5): config refuses settings that reach it.
 */
export function worstCaseCopyActions(t: CopyShape): number {
  // the polls before the backoff reaches the cap (1, 2, 4 … s), then one per cap
  const rampPolls = Math.ceil(Math.log2(t.pollMaxSeconds / t.pollMinSeconds));
  const copy = (seconds: number, leaseSeconds: number) =>
    t.participants * (2 * (rampPolls + Math.ceil(seconds / t.pollMaxSeconds)) + 2) +
    2 * Math.ceil((seconds * 1000) / renewEveryMs(leaseSeconds));
  const writeWindow = Math.min(t.writeLeaseSeconds, t.writeBudgetSeconds);
  // Version 4's verify round after each delta (workflow/verify.ts) runs in the same write lock, whose
  // life the write budget bounds: its polls at the cap and its renewals on the cadence share the
  // budget the delta's term already counts in full. What it adds is its own start: a POST (and its race
  // timer) per participant, the poll ramp again from the poll minimum, and the renewal cadence begun
  // again (one early renewal before its first round, one more where the cadence restarts).
  const verifyRound = t.participants === 0 ? 0 : t.participants * (2 * rampPolls + 2) + 2 * 2;
  return (
    copy(t.prelockMaxSeconds, t.hardDeleteLeaseSeconds) +
    t.deltaAttempts * (copy(t.writeBudgetSeconds, writeWindow) + verifyRound)
  );
}

/** Renew the hard-delete or write lock held, on the ETag of this migration's last write. */
export function* renewLock(
  state: WorkflowState,
  phase: 'hardDelete' | 'write',
): Generator<Step, ActivityResult<SeededGrant>, unknown> {
  const { resourceId, lock } = state.input;
  return yield* activity('renew', { resourceId, lock, phase, ifMatch: state.etag });
}

/** How a phase-lock renewal at a copy's deadline went. */
type Renewal =
  | { kind: 'renewed'; etag: string; phaseEndsAt: number; phaseExpiresAt: string }
  /** The lock's end can move no further (the write budget, the parent's cap): the copy runs to it. */
  | { kind: 'final' }
  | { kind: 'refused'; result: Extract<ActivityResult<null>, { ok: false }> };

/** Renew the phase lock a copy runs under (both versions: the same one activity). */
function* renewForCopy(
  state: Escalated,
  etag: string,
  phase: CopyJob['phase'],
): Generator<Step, Renewal, unknown> {
  const renewed = yield* renewLock({ ...state, etag }, phase);
  if (renewed.ok) {
    const phaseEndsAt = holderEndsAt(
      renewed.value.phaseExpiresAt,
      state.input.settings.clockSkewSeconds ?? 0,
    );
    return {
      kind: 'renewed',
      etag: renewed.value.etag,
      phaseEndsAt,
      phaseExpiresAt: renewed.value.phaseExpiresAt,
    };
  }
  if (renewed.code === 'FreezeBudgetExceeded' || renewed.code === 'MaxLeaseReached') return { kind: 'final' };
  return { kind: 'refused', result: renewed };
}

/** The phase lock's own end came with the copy still running: it overran. */
const ranOut = (job: CopyJob, phaseEndsAt: number): ActivityResult<null> => ({
  ok: false,
  code: 'LockExpired',
  message: `the ${job.phase} lock ran out at ${new Date(phaseEndsAt).toISOString()} with ${job.copy} still running`,
});

/** Requests that resolved the route just before a lock committed land before any copy starts. */
export function* inFlightGrace(s: MigrationSettings, scope?: CancelScope): Generator<Step, void, unknown> {
  if (s.inFlightGraceSeconds && s.participants.length > 0) yield* sleep(s.inFlightGraceSeconds * 1000, scope);
}

function participantCallV1(
  input: MigrationInput,
  from: Location,
  participant: Participant,
  copy: CopyJob['copy'],
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
 * Version 1: one race's answers, each the final answer of a polled call (the runner followed 202 +
 * Location). A participant still copying stays pending; the rest is judged by the contract
 * (participantContract.ts), so a 202 left after polling (no Location) or a 201/204 fails, never counts
 * as done: the data-loss fix applies to instances started before version 2 too. Transient answers are
 * asked again after the same backoff version 1 always used (no Retry-After reaches it), so the timers
 * of a history recorded then replay unchanged.
 */
export function settleRound(
  pending: Pending[],
  race: RaceResult,
  s: MigrationSettings,
  copy: CopyJob['copy'],
): Round {
  const still: Pending[] = [];
  let backoffMs = 0;
  for (const [i, participant] of pending.entries()) {
    const result = race.settled[i] as HttpResult | null | undefined;
    if (result == null) {
      still.push(participant); // still copying
      continue;
    }
    const verdict = classifyAnswer('post', 'required', result);
    if (verdict.kind === 'done' || verdict.kind === 'notImplemented') continue;
    if (verdict.kind === 'transient' && !transientExhausted(participant.attempt, s)) {
      backoffMs = Math.max(backoffMs, transientWaitMs(participant.attempt, undefined, s));
      still.push({ ...participant, attempt: participant.attempt + 1 });
      continue;
    }
    const reason = verdict.kind === 'transient' || verdict.kind === 'failed' ? verdict.reason : '';
    const what = `participant ${participant.name} answered ${result.status || 'nothing'} to ${copy} (attempt ${participant.attempt})`;
    return { ok: false, code: 'ParticipantFailed', message: failureMessage(what, result.status, reason) };
  }
  return { ok: true, pending: still, backoffMs };
}

/** One step run at every participant under a phase lock: a copy, or (version 4) `verify`. */
export interface CopyJob {
  copy: CopyStep | 'verify';
  /** 1 for the bulk copy; the write-lock attempt for the delta and its verify. */
  attempt: number;
  phase: 'hardDelete' | 'write';
  leaseSeconds: number;
  /** The copies are required (a 404 fails, the default); verify is optional (a 404: not implemented). */
  need?: StepNeed;
}

/** A participant's final answer to the step (version 2): its 200 body, or a 404 to an optional step. */
export type ParticipantAnswer =
  { participant: string; kind: 'done'; body: unknown } | { participant: string; kind: 'notImplemented' };

/** How a copy ended, and the ETag after the renewals it made on the way. */
export interface CopyOutcome {
  result: ActivityResult<null>;
  etag: string;
  /** On success (version 2), each participant's final answer, in the settings' order. */
  answers?: ParticipantAnswer[];
  /**
   * The phase lock's end after the renewals the copy made (version 2): a step after it under the same
   * lock (version 4's verify after the delta) runs to this end, not to the grant's first one.
   */
  phaseExpiresAt?: string;
}

/**
 * Version 1 (inputs without `workflowVersion`; see WORKFLOW_VERSION): kept step for step so histories
 * recorded by it replay. One copy step at every participant at once, in rounds of polled `http` calls
 * raced against a renewal timer; when the timer wins, the lock is renewed and the participants still
 * copying are asked again. Answers are judged by the version-2 classifier (participantContract.ts).
 */
function* copyAllV1(state: Escalated, job: CopyJob): Generator<Step, CopyOutcome, unknown> {
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
      tasks: pending.map((p) => participantCallV1(state.input, state.from, p, job.copy, job.attempt)),
      deadline,
    });
    const round = settleRound(pending, race, s, job.copy);
    if (!round.ok) return { result: round, etag };
    pending = round.pending;
    if (race.deadlineFirst && pending.length > 0) {
      if (deadline >= phaseEndsAt) return { result: ranOut(job, phaseEndsAt), etag };
      const renewal = yield* renewForCopy(state, etag, job.phase);
      if (renewal.kind === 'refused') return { result: renewal.result, etag };
      if (renewal.kind === 'final') renewable = false;
      else ({ etag, phaseEndsAt } = renewal);
    } else if (round.backoffMs > 0) {
      yield* sleep(round.backoffMs);
    }
  }
  return { result: { ok: true, value: null }, etag };
}

/**
 * Run one copy step at every participant at once. Version 2 dispatches on the input's version:
 * an instance started by version 1 replays the steps it recorded (copyAllV1).
 */
export function* copyAll(state: Escalated, job: CopyJob): Generator<Step, CopyOutcome, unknown> {
  return workflowVersionOf(state.input) === 1 ? yield* copyAllV1(state, job) : yield* copyAllV2(state, job);
}

/** Version 2's job body (contract17.md): the job is (migrationId, migrationAttempt, step, stepAttempt). */
export function participantJob(state: Escalated, job: CopyJob): ParticipantRequest {
  const migrationAttempt = state.input.lock?.attempt ?? 1;
  return {
    migrationId: state.input.migrationId,
    resourceId: state.input.resourceId,
    from: state.from,
    to: state.input.target,
    step: job.copy,
    // The migration's attempt (version 3 retries with a fresh lock; one before it).
    migrationAttempt,
    stepAttempt: job.attempt,
    attempt: job.attempt,
    sequence: jobSequence(state.input, job.copy, job.attempt),
    lockAcquiredAt: state.grant.acquiredAt,
  };
}

/**
 * A job's `sequence` (docs/design.md §6.5): every new job of a migration gets a larger number, so a
 * participant can tell the newest job of a resource. Versions 2 and 3: within a migration attempt the
 * bulk copy 1, delta attempt n 1 + n; each migration attempt after the earlier ones' 1 + deltaAttempts.
 * Version 4 also orders verify and the end notice: bulk copy 1, delta n 2n, verify n 2n + 1, and the
 * end notice (sent after the migration's last attempt; `stepAttempt` not used) last of its attempt,
 * 2 + 2 × deltaAttempts; each migration attempt after the earlier ones' 2 + 2 × deltaAttempts, so an
 * operator's retry of a Failed migration numbers its jobs after the notice of the run before.
 */
export function jobSequence(
  input: Pick<MigrationInput, 'workflowVersion' | 'settings' | 'lock'>,
  step: ParticipantStep,
  stepAttempt: number,
): number {
  const before = (input.lock?.attempt ?? 1) - 1;
  const jobsBefore = (perAttempt: () => number) => (before > 0 ? before * perAttempt() : 0);
  if (workflowVersionOf(input) < 4)
    return jobsBefore(() => 1 + input.settings.deltaAttempts) + (step === 'bulkCopy' ? 1 : 1 + stepAttempt);
  const perAttempt = 2 + 2 * input.settings.deltaAttempts;
  const within =
    step === 'bulkCopy'
      ? 1
      : step === 'deltaCopy'
        ? 2 * stepAttempt
        : step === 'verify'
          ? 2 * stepAttempt + 1
          : perAttempt;
  return jobsBefore(() => perAttempt) + within;
}

/** Where one participant is in a copy step (version 2). */
interface Progress {
  readonly participant: Participant;
  /** Set once the job's POST answered 202: poll it here. */
  location: string | undefined;
  /** When its next request may go. */
  dueAt: number;
  /** Polls answered 202 so far (the poll wait backs off with them). */
  polls: number;
  /** Transient answers in a row (an answer that shows progress resets it). */
  transient: number;
  done: boolean;
  /** Its final answer, once done. */
  answer?: ParticipantAnswer;
}

function requestTask(state: Escalated, job: CopyJob, p: Progress): TaskStep {
  const { participant } = p;
  const common = {
    participant: participant.name,
    participantUrl: participant.url,
    ...(participant.audience === undefined ? {} : { audience: participant.audience }),
    timeoutSeconds: participantTiming(state.input.settings).timeoutSeconds,
  };
  const input: ParticipantCall =
    p.location === undefined
      ? { ...common, method: 'POST', body: participantJob(state, job) }
      : { ...common, method: 'GET', url: p.location };
  return { kind: 'activity', name: 'callParticipant', input };
}

/**
 * Apply one answer to a participant's progress: the contract's verdict and its waits; answers the
 * failure message when the attempt fails.
 */
function applyAnswer(
  p: Progress,
  answer: HttpAnswer,
  at: number,
  s: MigrationSettings,
  job: CopyJob,
): string | undefined {
  const kind = p.location === undefined ? 'post' : 'poll';
  const verdict = classifyAnswer(kind, job.need ?? 'required', answer);
  const what = `participant ${p.participant.name} answered ${answer.status || 'nothing'} to ${job.copy}${kind === 'poll' ? ' (poll)' : ''} (attempt ${job.attempt})`;
  const participant = p.participant.name;
  switch (verdict.kind) {
    case 'done':
      p.done = true;
      p.answer = { participant, kind: 'done', body: answer.body };
      return undefined;
    case 'notImplemented':
      p.done = true;
      p.answer = { participant, kind: 'notImplemented' };
      return undefined;
    case 'running':
      p.location = verdict.location ?? p.location;
      p.polls += 1;
      // A poll still running is progress; a POST's 202 is not (a job lost at every poll must run out).
      if (kind === 'poll') p.transient = 0;
      p.dueAt = at + pollWaitMs(p.polls, verdict.retryAfterSeconds, s);
      return undefined;
    case 'transient':
      p.transient += 1;
      if (transientExhausted(p.transient, s))
        return failureMessage(what, answer.status, `${verdict.reason}, ${p.transient} times in a row`);
      if (verdict.repost) {
        p.location = undefined;
        p.polls = 0;
      }
      p.dueAt = at + transientWaitMs(p.transient, verdict.retryAfterSeconds, s);
      return undefined;
    case 'failed':
      return failureMessage(what, answer.status, verdict.reason);
  }
}

/**
 * Version 2: each participant's job is POSTed once, then its Location polled with plain GETs on durable
 * timers (participantContract.ts), one `callParticipant` activity per request, at most one request per
 * participant in flight. Each round runs the requests due as fresh tasks, raced against the phase
 * lock's renewal deadline when one could still be running at it (a request still running then is
 * abandoned and asked again after the renewal: a POST of the same job is the same job). With nothing
 * due, the workflow sleeps until the next due time or the deadline. When the lock can be renewed no
 * further (the write budget, the parent's cap), the copy may still finish before the lock's own end; a
 * copy still running then has overrun (LockExpired). Version 4's verify runs on the same engine (an
 * optional step, `job.need`), reading each participant's final answer (`CopyOutcome.answers`).
 */
function* copyAllV2(state: Escalated, job: CopyJob): Generator<Step, CopyOutcome, unknown> {
  const s = state.input.settings;
  const timing = participantTiming(s);
  let etag = state.etag;
  const skew = s.clockSkewSeconds ?? 0;
  let phaseEndsAt = holderEndsAt(state.grant.phaseExpiresAt, skew);
  let phaseExpiresAt = state.grant.phaseExpiresAt;
  let renewable = true;
  const start = yield* now();
  // Kept across rounds: rounds that end early must not push the renewal back.
  let renewAt = start + renewEveryMs(job.leaseSeconds);
  const progress: Progress[] = s.participants.map((participant) => ({
    participant,
    location: undefined,
    dueAt: start,
    polls: 0,
    transient: 0,
    done: false,
  }));
  const fail = (message: string): CopyOutcome => ({
    result: { ok: false, code: 'ParticipantFailed', message },
    etag,
  });
  for (;;) {
    const open = progress.filter((p) => !p.done);
    if (open.length === 0) {
      const answers = progress.flatMap((p) => (p.answer ? [p.answer] : []));
      return { result: { ok: true, value: null }, etag, answers, phaseExpiresAt };
    }
    const deadline = renewable ? Math.min(renewAt, phaseEndsAt) : phaseEndsAt;
    let t = yield* now();
    if (t < deadline) {
      const due = open.filter((p) => p.dueAt <= t);
      if (due.length === 0) {
        const nextDue = Math.min(...open.map((p) => p.dueAt));
        yield* sleepUntil(Math.min(nextDue, deadline), state.input);
        if (nextDue < deadline) continue;
      } else {
        // A request could still be running when the renewal is due: renew first (early), so it is not
        // abandoned at the deadline and asked again (config keeps the timeout under the renewal cadence).
        if (renewable && renewAt - t < timing.timeoutSeconds * 1000 + REQUEST_MARGIN_MS) {
          const renewal = yield* renewForCopy(state, etag, job.phase);
          if (renewal.kind === 'refused') return { result: renewal.result, etag };
          t = yield* now();
          renewAt = t + renewEveryMs(job.leaseSeconds);
          if (renewal.kind === 'final') renewable = false;
          else ({ etag, phaseEndsAt, phaseExpiresAt } = renewal);
          if (t >= phaseEndsAt) return { result: ranOut(job, phaseEndsAt), etag };
        }
        const roundDeadline = renewable ? Math.min(renewAt, phaseEndsAt) : phaseEndsAt;
        const tasks = due.map((p) => requestTask(state, job, p));
        // Polls far from the deadline go without a timer under the hard-delete lock: their timeout ends
        // them well before it, so a poll costs the history one activity and one sleep. Under the write
        // lock (short, and writes wait on it) and for a POST, the round keeps its timer.
        const timerless =
          job.phase === 'hardDelete' &&
          due.every((p) => p.location !== undefined) &&
          roundDeadline - t > 2 * timing.timeoutSeconds * 1000;
        const canCancel = cancellable(state.input);
        const race = yield* step<RaceResult>(
          timerless
            ? { kind: 'all', tasks }
            : {
                kind: 'race',
                tasks,
                deadline: roundDeadline,
                ...(canCancel ? { cancellable: true as const } : {}),
              },
        );
        // a cancel ends the round (the requests still running are abandoned, as at a deadline)
        if (race.cancelled) throw new CancelRequested(race.cancelled);
        if (timerless) yield* stopIfCancelled(state.input);
        t = yield* now();
        for (const [i, p] of due.entries()) {
          const settled = race.settled[i] as ActivityResult<HttpAnswer> | null | undefined;
          if (settled == null) continue; // abandoned at the deadline: asked again after it
          const answer = settled.ok ? settled.value : { status: 0, body: settled.message };
          const failure = applyAnswer(p, answer, t, s, job);
          if (failure !== undefined) return fail(failure);
        }
        if (!race.deadlineFirst) continue;
      }
    }
    // The deadline: renew the phase lock, or the phase is over with the copy still running.
    if (progress.every((p) => p.done)) continue;
    if ((yield* now()) >= phaseEndsAt) return { result: ranOut(job, phaseEndsAt), etag };
    if (!renewable) continue;
    const renewal = yield* renewForCopy(state, etag, job.phase);
    renewAt = (yield* now()) + renewEveryMs(job.leaseSeconds);
    if (renewal.kind === 'refused') return { result: renewal.result, etag };
    if (renewal.kind === 'final') renewable = false;
    else ({ etag, phaseEndsAt, phaseExpiresAt } = renewal);
  }
}
