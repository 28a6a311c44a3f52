import { holderEndsAt } from '../../core/lock/state';
import type { Participant } from '../participants';
import type {
  ActivityResult,
  CopyStep,
  HttpAnswer,
  MigrationInput,
  MigrationSettings,
  ParticipantCall,
  ParticipantRequest,
  ParticipantStep,
  RaceResult,
  SeededGrant,
  Step,
  TaskStep,
} from '../types';
import { has, workflowCapabilities } from './capabilities';
import type { Escalated, WorkflowState } from './state';
import {
  CancelRequested,
  type CancelScope,
  activity,
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

/**
 * How early the real engine may fire a durable timer: the Azure Storage provider delays a timer's message in
 * whole seconds (docs/design.md §6.7), and a copy loop takes a timer's wake as the instant it slept until, so
 * a poll may come this much before its wait ends.
 */
export const TIMER_EARLY_SECONDS = 1;

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
 * The most history actions a migration's copies can record: every copy running as long as
 * it may (the bulk copy to the pre-lock cap, each delta attempt its write budget), every participant
 * polled at the poll cap (less the engine's early wake) after its backoff from the poll minimum. A poll is one activity and one timer, a POST one activity and its race timer,
 * a renewal one activity after the race timer that ended the round. Past the extension's cap an
 * orchestration stops scheduling and hangs (docs/design.md §6.5): config refuses settings that reach it.
 */
export function worstCaseCopyActions(t: CopyShape): number {
  // the polls before the backoff reaches the cap (1, 2, 4 … s), then one per cap, each woken up to
  // TIMER_EARLY_SECONDS before it (config keeps the cap above that: settings.ts)
  const rampPolls = Math.ceil(Math.log2(t.pollMaxSeconds / t.pollMinSeconds));
  const cadenceSeconds = t.pollMaxSeconds - TIMER_EARLY_SECONDS;
  const copy = (seconds: number, leaseSeconds: number) =>
    t.participants * (2 * (rampPolls + Math.ceil(seconds / cadenceSeconds)) + 2) +
    2 * Math.ceil((seconds * 1000) / renewEveryMs(leaseSeconds));
  const writeWindow = Math.min(t.writeLeaseSeconds, t.writeBudgetSeconds);
  // The verify round after each delta (workflow/verify.ts) runs in the same write lock, whose
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

/** Renew the phase lock a copy runs under. */
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

/** One step run at every participant under a phase lock: a copy, or `verify`. */
export interface CopyJob {
  copy: CopyStep | 'verify';
  /** 1 for the bulk copy; the write-lock attempt for the delta and its verify. */
  attempt: number;
  phase: 'hardDelete' | 'write';
  leaseSeconds: number;
  /** The copies are required (a 404 fails, the default); verify is optional (a 404: not implemented). */
  need?: StepNeed;
}

/** A participant's final answer to the step: its 200 body, or a 404 to an optional step. */
export type ParticipantAnswer =
  { participant: string; kind: 'done'; body: unknown } | { participant: string; kind: 'notImplemented' };

/** How a copy ended, and the ETag after the renewals it made on the way. */
export interface CopyOutcome {
  result: ActivityResult<null>;
  etag: string;
  /** On success, each participant's final answer, in the settings' order. */
  answers?: ParticipantAnswer[];
  /**
   * The phase lock's end after the renewals the copy made: a step after it under the same lock (the
   * verify after the delta) runs to this end, not to the grant's first one.
   */
  phaseExpiresAt?: string;
}

/** A participant job's body: the job is (migrationId, migrationAttempt, step, stepAttempt). */
export function participantJob(state: Escalated, job: CopyJob): ParticipantRequest {
  const migrationAttempt = state.input.lock?.attempt ?? 1;
  return {
    migrationId: state.input.migrationId,
    resourceId: state.input.resourceId,
    from: state.from,
    to: state.input.target,
    step: job.copy,
    // the migration's attempt: each retry with a fresh lock is a new job
    migrationAttempt,
    stepAttempt: job.attempt,
    attempt: job.attempt,
    sequence: jobSequence(state.input, job.copy, job.attempt),
    lockAcquiredAt: state.grant.acquiredAt,
  };
}

/**
 * A job's `sequence` (docs/design.md §6.5): every new job of a migration gets a larger number, so a
 * participant can tell the newest job of a resource. Within a migration attempt: bulk copy 1, delta n
 * 2n, verify n 2n + 1, and the end notice (sent after the migration's last attempt; `stepAttempt` not
 * used) last of its attempt, 2 + 2 × deltaAttempts; each migration attempt after the earlier ones'
 * 2 + 2 × deltaAttempts, so an operator's retry of a Failed migration numbers its jobs after the
 * notice of the run before.
 */
export function jobSequence(
  input: Pick<MigrationInput, 'settings' | 'lock'>,
  step: ParticipantStep,
  stepAttempt: number,
): number {
  const before = (input.lock?.attempt ?? 1) - 1;
  const perAttempt = 2 + 2 * input.settings.deltaAttempts;
  const within =
    step === 'bulkCopy'
      ? 1
      : step === 'deltaCopy'
        ? 2 * stepAttempt
        : step === 'verify'
          ? 2 * stepAttempt + 1
          : perAttempt;
  return (before > 0 ? before * perAttempt : 0) + within;
}

/** Where one participant is in a copy step. */
interface Progress {
  readonly participant: Participant;
  /** Set once the job's POST answered 202: poll it here. */
  readonly location: string | undefined;
  /** When its next request may go. */
  readonly dueAt: number;
  /** Polls answered 202 so far (the poll wait backs off with them). */
  readonly polls: number;
  /** Transient answers in a row (an answer that shows progress resets it). */
  readonly transient: number;
  readonly done: boolean;
  /** Its final answer, once done. */
  readonly answer?: ParticipantAnswer;
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

/** One answer applied to a participant's progress: its next progress, or why the attempt fails. */
type Applied = { kind: 'progress'; progress: Progress } | { kind: 'failed'; message: string };

/** The contract's verdict on one answer (participantContract.ts), and the wait it sets. */
function applyAnswer(
  p: Progress,
  answer: HttpAnswer,
  at: number,
  s: MigrationSettings,
  job: CopyJob,
): Applied {
  const kind = p.location === undefined ? 'post' : 'poll';
  const verdict = classifyAnswer(kind, job.need ?? 'required', answer);
  const what = `participant ${p.participant.name} answered ${answer.status || 'nothing'} to ${job.copy}${kind === 'poll' ? ' (poll)' : ''} (attempt ${job.attempt})`;
  const participant = p.participant.name;
  const progress = (next: Progress): Applied => ({ kind: 'progress', progress: next });
  switch (verdict.kind) {
    case 'done':
      return progress({ ...p, done: true, answer: { participant, kind: 'done', body: answer.body } });
    case 'notImplemented':
      return progress({ ...p, done: true, answer: { participant, kind: 'notImplemented' } });
    case 'running': {
      const polls = p.polls + 1;
      return progress({
        ...p,
        location: verdict.location ?? p.location,
        polls,
        // A poll still running is progress; a POST's 202 is not (a job lost at every poll must run out).
        transient: kind === 'poll' ? 0 : p.transient,
        dueAt: at + pollWaitMs(polls, verdict.retryAfterSeconds, s),
      });
    }
    case 'transient': {
      const transient = p.transient + 1;
      if (transientExhausted(transient, s)) {
        const reason = `${verdict.reason}, ${transient} times in a row`;
        return { kind: 'failed', message: failureMessage(what, answer.status, reason) };
      }
      return progress({
        ...p,
        ...(verdict.repost ? { location: undefined, polls: 0 } : {}),
        transient,
        dueAt: at + transientWaitMs(transient, verdict.retryAfterSeconds, s),
      });
    }
    case 'failed':
      return { kind: 'failed', message: failureMessage(what, answer.status, verdict.reason) };
  }
}

/** A round's answers applied to the participants it asked (`due`, the tasks' order). */
function answerRound(
  progress: readonly Progress[],
  due: readonly Progress[],
  race: RaceResult,
  at: number,
  s: MigrationSettings,
  job: CopyJob,
): { kind: 'answered'; progress: Progress[] } | { kind: 'failed'; message: string } {
  const updated = new Map<Progress, Progress>();
  for (const [i, p] of due.entries()) {
    const settled = race.settled[i] as ActivityResult<HttpAnswer> | null | undefined;
    if (settled == null) continue; // abandoned at the deadline: asked again after it
    const answer = settled.ok ? settled.value : { status: 0, body: settled.message };
    const applied = applyAnswer(p, answer, at, s, job);
    if (applied.kind === 'failed') return applied;
    updated.set(p, applied.progress);
  }
  return { kind: 'answered', progress: progress.map((p) => updated.get(p) ?? p) };
}

/** Where a copy stands between two turns of its loop: everything the next turn needs. */
interface CopyLoop {
  /** The ETag after this migration's last write (each renewal's). */
  readonly etag: string;
  /** The holder's own end of the phase lock (its lease less the clock-skew margin). */
  readonly phaseEndsAt: number;
  readonly phaseExpiresAt: string;
  /** False once the lock's end can move no further (the write budget, the parent's cap). */
  readonly renewable: boolean;
  /** When the next renewal is due (kept across rounds: rounds that end early must not push it back). */
  readonly renewAt: number;
  readonly progress: readonly Progress[];
  /**
   * Set by a turn that slept until a participant was due (with `timerFiredIsDue`): the next turn,
   * woken by that timer, takes this instant as reached even if the engine fired the timer early.
   */
  readonly sleptUntil?: number;
}

/** What one turn of the copy loop answers: the state for the next turn, or how the copy ended. */
type CopyTurn = { kind: 'again'; loop: CopyLoop } | { kind: 'end'; outcome: CopyOutcome };

const again = (loop: CopyLoop): CopyTurn => ({ kind: 'again', loop });
const end = (outcome: CopyOutcome): { kind: 'end'; outcome: CopyOutcome } => ({ kind: 'end', outcome });

/** The round's deadline: the next renewal, or the lock's own end once it can be renewed no further. */
const deadlineOf = (loop: CopyLoop): number =>
  loop.renewable ? Math.min(loop.renewAt, loop.phaseEndsAt) : loop.phaseEndsAt;

/** The loop after a renewal that was not refused. */
const afterRenewal = (loop: CopyLoop, renewal: Exclude<Renewal, { kind: 'refused' }>): CopyLoop =>
  renewal.kind === 'final'
    ? { ...loop, renewable: false }
    : {
        ...loop,
        etag: renewal.etag,
        phaseEndsAt: renewal.phaseEndsAt,
        phaseExpiresAt: renewal.phaseExpiresAt,
      };

function startLoop(state: Escalated, job: CopyJob, start: number): CopyLoop {
  const s = state.input.settings;
  return {
    etag: state.etag,
    phaseEndsAt: holderEndsAt(state.grant.phaseExpiresAt, s.clockSkewSeconds ?? 0),
    phaseExpiresAt: state.grant.phaseExpiresAt,
    renewable: true,
    renewAt: start + renewEveryMs(job.leaseSeconds),
    progress: s.participants.map((participant) => ({
      participant,
      location: undefined,
      dueAt: start,
      polls: 0,
      transient: 0,
      done: false,
    })),
  };
}

/**
 * Run one step at every participant at once (docs/design.md §6.4): each participant's job is POSTed
 * once, then its Location polled with plain GETs on durable timers (participantContract.ts), one
 * `callParticipant` activity per request, at most one request per participant in flight. Each round
 * runs the requests due as fresh tasks, raced against the phase lock's renewal deadline when one could
 * still be running at it (a request still running then is abandoned and asked again after the renewal:
 * a POST of the same job is the same job). With nothing due, the workflow sleeps until the next due
 * time or the deadline. When the lock can be renewed no further (the write budget, the parent's cap),
 * the copy may still finish before the lock's own end; a copy still running then has overrun
 * (LockExpired). Verify runs on the same engine (an optional step, `job.need`), reading each
 * participant's final answer (`CopyOutcome.answers`).
 */
export function* copyAll(state: Escalated, job: CopyJob): Generator<Step, CopyOutcome, unknown> {
  let turn: CopyTurn = again(startLoop(state, job, yield* now()));
  while (turn.kind === 'again') turn = yield* copyTurn(state, job, turn.loop);
  return turn.outcome;
}

/** One turn: the requests due (or a sleep until one is), then the deadline's renewal if it came. */
function* copyTurn(state: Escalated, job: CopyJob, woken: CopyLoop): Generator<Step, CopyTurn, unknown> {
  const { sleptUntil, ...loop } = woken;
  const open = loop.progress.filter((p) => !p.done);
  if (open.length === 0) {
    const answers = loop.progress.flatMap((p) => (p.answer ? [p.answer] : []));
    const { etag, phaseExpiresAt } = loop;
    return end({ result: { ok: true, value: null }, etag, answers, phaseExpiresAt });
  }
  const deadline = deadlineOf(loop);
  // A timer the engine fired early still means its instant came: the lock's own checks (the store's
  // rules, atDeadline's ranOut) read the clock themselves, so only when to ask is taken from it.
  const t = Math.max(yield* now(), sleptUntil ?? -Infinity);
  if (t >= deadline) return yield* atDeadline(state, job, loop);
  const due = open.filter((p) => p.dueAt <= t);
  if (due.length === 0) {
    const nextDue = Math.min(...open.map((p) => p.dueAt));
    yield* sleepUntil(Math.min(nextDue, deadline), state.input);
    if (nextDue >= deadline) return yield* atDeadline(state, job, loop);
    const timerFiredIsDue = has(workflowCapabilities(state.input), 'timerFiredIsDue');
    return again(timerFiredIsDue ? { ...loop, sleptUntil: nextDue } : loop);
  }
  const round = yield* requestRound(state, job, loop, due, t);
  return round.kind === 'deadline' ? yield* atDeadline(state, job, round.loop) : round;
}

/**
 * The requests due, as one round. A request could still be running when the renewal is due: renew
 * first (early), so it is not abandoned at the deadline and asked again (config keeps the timeout
 * under the renewal cadence). Answers `deadline` when the round's timer ended it.
 */
function* requestRound(
  state: Escalated,
  job: CopyJob,
  loop: CopyLoop,
  due: readonly Progress[],
  t: number,
): Generator<Step, CopyTurn | { kind: 'deadline'; loop: CopyLoop }, unknown> {
  const timing = participantTiming(state.input.settings);
  let current = loop;
  let at = t;
  if (current.renewable && current.renewAt - at < timing.timeoutSeconds * 1000 + REQUEST_MARGIN_MS) {
    const early = yield* renewBeforeRound(state, job, current);
    if (early.kind === 'end') return early;
    ({ loop: current, at } = early);
  }
  const roundDeadline = deadlineOf(current);
  const tasks = due.map((p) => requestTask(state, job, p));
  // Polls far from the deadline go without a timer under the hard-delete lock: their timeout ends
  // them well before it, so a poll costs the history one activity and one sleep. Under the write
  // lock (short, and writes wait on it) and for a POST, the round keeps its timer.
  const timerless =
    job.phase === 'hardDelete' &&
    due.every((p) => p.location !== undefined) &&
    roundDeadline - at > 2 * timing.timeoutSeconds * 1000;
  const race = yield* step<RaceResult>(
    timerless
      ? { kind: 'all', tasks }
      : { kind: 'race', tasks, deadline: roundDeadline, cancellable: true as const },
  );
  // a cancel ends the round (the requests still running are abandoned, as at a deadline)
  if (race.cancelled) throw new CancelRequested(race.cancelled);
  if (timerless) yield* stopIfCancelled();
  const answered = answerRound(current.progress, due, race, yield* now(), state.input.settings, job);
  if (answered.kind === 'failed')
    return end({
      result: { ok: false, code: 'ParticipantFailed', message: answered.message },
      etag: current.etag,
    });
  const next: CopyLoop = { ...current, progress: answered.progress };
  return race.deadlineFirst ? { kind: 'deadline', loop: next } : again(next);
}

/** The early renewal before a round: the loop renewed and the time after it, or how the copy ended. */
function* renewBeforeRound(
  state: Escalated,
  job: CopyJob,
  loop: CopyLoop,
): Generator<
  Step,
  { kind: 'end'; outcome: CopyOutcome } | { kind: 'renewed'; loop: CopyLoop; at: number },
  unknown
> {
  const renewal = yield* renewForCopy(state, loop.etag, job.phase);
  if (renewal.kind === 'refused') return end({ result: renewal.result, etag: loop.etag });
  const at = yield* now();
  const renewed = afterRenewal({ ...loop, renewAt: at + renewEveryMs(job.leaseSeconds) }, renewal);
  if (at >= renewed.phaseEndsAt) return end({ result: ranOut(job, renewed.phaseEndsAt), etag: renewed.etag });
  return { kind: 'renewed', loop: renewed, at };
}

/** The deadline: renew the phase lock, or the phase is over with the copy still running. */
function* atDeadline(state: Escalated, job: CopyJob, loop: CopyLoop): Generator<Step, CopyTurn, unknown> {
  if (loop.progress.every((p) => p.done)) return again(loop);
  if ((yield* now()) >= loop.phaseEndsAt)
    return end({ result: ranOut(job, loop.phaseEndsAt), etag: loop.etag });
  if (!loop.renewable) return again(loop);
  const renewal = yield* renewForCopy(state, loop.etag, job.phase);
  const renewAt = (yield* now()) + renewEveryMs(job.leaseSeconds);
  if (renewal.kind === 'refused') return end({ result: renewal.result, etag: loop.etag });
  return again(afterRenewal({ ...loop, renewAt }, renewal));
}
