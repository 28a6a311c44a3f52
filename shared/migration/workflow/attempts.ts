import { leadingCode, phaseReached } from '../stopped';
import type {
  CancelRequest,
  MigrationAttempt,
  MigrationInput,
  MigrationPhase,
  MigrationState,
  MigrationStatus,
  Step,
  Verification,
} from '../types';
import { pendingStatus, terminalStates } from '../types';
import { releaseAfterFailure, releaseReason } from './cleanUp';
import { MAX_ORCHESTRATION_ACTIONS } from './copy';
import { type Gate, previousLockGone } from './gate';
import { tryPrelock, prelockRefusal } from './prelock';
import { cancelMigration, cancelledBeforeStart } from './cancel';
import { notifyEnd } from './notify';
import { type EndJob, type Ending, type Failure, type Prelocked, cancelled } from './state';
import { windowShutBeforePrelock } from './window';
import { CancelRequested, cancelRequested, now, publish, sleep } from './steps';

/**
 * Automatic retry with a fresh lock (docs/design.md §6.3). An attempt
 * is one lock, from pre-lock to swap or release. One that fails for a transient reason is released,
 * and after `migrationRetryDelaySeconds × 2^(n−1)` on a durable timer the migration takes a fresh
 * pre-lock (the activities derive attempt n's seed: `attemptSeed`), up to `migrationAttempts` times.
 * Never two locks of one migration: the next attempt pre-locks only once the write region shows no
 * live lock of this migration (released again, or waited out to its lease's end). Never an attempt
 * after a swap: a route found at the target ends the migration.
 */

/** Whether a failed attempt's code allows another: the one home of the rule (table-tested). */
export type AttemptVerdict = 'retry' | 'final';

/**
 * Transient: the store out through every step retry, a lease that lapsed or a lock gone, a participant
 * that failed (its permanent refusal fails the attempt at once, and the next attempt is a new job with
 * a new lock, so it may well succeed: docs/design.md §6.3), the write budget spent on every delta
 * attempt, a lock never visible, a swap whose answer was lost (the gate between attempts checks the
 * route first). Final: everything that another attempt would meet again: a rival's lock (Conflict),
 * the resource already there (NoOp), a route gone, a region not allowed, a key missing from the ring,
 * a request the API refuses, a cancel, a participant that must verify and cannot (VerifyNotImplemented),
 * and any code not named here.
 */
const transientCodes: ReadonlySet<string> = new Set([
  'StepFailed',
  'StoreUnavailable',
  'PreconditionFailed',
  'LockExpired',
  'NotLocked',
  'InvalidTransition',
  'MaxLeaseReached',
  'FreezeBudgetExceeded',
  'ParticipantFailed',
  'WriteBudgetExceeded',
  'NotVisible',
  'SwapUnknown',
  // a swap a write-region failover dropped (workflow/confirm.ts); a fresh lock starts over
  'SwapLost',
  // the target differed from the source on every write-lock attempt; a fresh attempt copies again
  'VerificationFailed',
]);

export function attemptVerdict(code: string | undefined): AttemptVerdict {
  return code !== undefined && transientCodes.has(code) ? 'retry' : 'final';
}

/** The delay before the attempt after `failedInSeries` failed ones of this run: the delay × 2^(n−1). */
export const retryDelayMs = (input: MigrationInput, failedInSeries: number): number =>
  (input.settings.migrationRetryDelaySeconds ?? 0) * 1000 * 2 ** Math.max(0, failedInSeries - 1);

const iso = (ms: number): string => new Date(ms).toISOString();

/** What follows a failed attempt: the gate first, another attempt, or the end (with a note). */
export type AfterFailure = { kind: 'gate' } | { kind: 'retry' } | { kind: 'final'; note: string };

/** What decides what follows a failed attempt. */
export interface FailedAttempt {
  /** What failed (`Failure.code`). */
  code: string | undefined;
  /** This attempt's number, and the last this run may make. */
  attempt: number;
  last: number;
  /** History actions this run recorded so far, and one attempt's worst case (`attemptActionsBound`). */
  actions: number;
  attemptActionsBound: number;
  /** The gate already let this failure through (the route was free). */
  gated: boolean;
}

/**
 * The one rule of what follows a failed attempt (table-tested). A swap whose answer was lost goes to
 * the gate first, even with no attempt left: it may have landed, and a Failed migration's notice has
 * the participants drop the target. Then: the end, when no attempt is left or the code is final;
 * another attempt only while the history can hold one more at its worst (the Durable extension stops
 * an orchestration at MAX_ORCHESTRATION_ACTIONS; settings.ts holds one attempt's worst case under it).
 */
export function afterFailedAttempt(f: FailedAttempt): AfterFailure {
  if (f.code === 'SwapUnknown' && !f.gated) return { kind: 'gate' };
  if (f.attempt >= f.last || attemptVerdict(f.code) === 'final') return { kind: 'final', note: '' };
  if (f.actions + f.attemptActionsBound > MAX_ORCHESTRATION_ACTIONS)
    return { kind: 'final', note: ' (no room in the history for another attempt)' };
  return { kind: 'retry' };
}

/** What one attempt came to: its final status (published), or a failure with or without a lock held. */
type AttemptEnd = Extract<Ending, { kind: 'done' }> | (Failure & { lockHeld: boolean });

/** The final status (published), and the job of the last attempt that read the route (the notices'). */
interface MigrationEnd {
  status: MigrationStatus;
  job: EndJob | undefined;
  /** A swap was seen and then lost (a failover dropped it). */
  swapLost: boolean;
}

/** Where a run's attempts stand between two of them: everything the next one, and the end, need. */
interface Series {
  /** The attempt to run next. */
  readonly n: number;
  /** The attempts that ended, an operator's earlier ones first. */
  readonly ended: MigrationAttempt[];
  /** The job of the last attempt that read the route. */
  readonly lastJob: EndJob | undefined;
  /** History actions this run's attempts recorded. */
  readonly actions: number;
  /** The verifications so far: the next attempt's status keeps them. */
  readonly verifications: Verification[];
  readonly swapLost: boolean;
}

/** What one turn of the attempts' loop answers: the series for the next attempt, or the end. */
type SeriesTurn = { kind: 'next'; series: Series } | { kind: 'end'; end: MigrationEnd };

const endTurn = (end: MigrationEnd): SeriesTurn => ({ kind: 'end', end });

/** This run's attempts: numbered after an operator's earlier ones, `migrationAttempts` at most. */
const seriesBounds = (input: MigrationInput): { first: number; last: number } => {
  const before = input.earlierAttempts?.length ?? 0;
  return { first: before + 1, last: before + Math.max(1, input.settings.migrationAttempts ?? 1) };
};

/**
 * The migration: attempts, each with its own lock, until one ends or `migrationAttempts` were made;
 * once the final status is published, the end notices (workflow/notify.ts).
 */
export function* attemptingMigration(
  input: MigrationInput,
  withPrelock: (prelocked: Prelocked) => Generator<Step, Ending, unknown>,
): Generator<Step, MigrationStatus, unknown> {
  const { status, job, swapLost } = yield* attemptsToTheEnd(input, withPrelock);
  // A swap a failover dropped was live a while: the target may hold writes the source lacks, so no
  // `failed` / `cancelled` notice (drop the target's copy) after one; only a later swap's `completed`.
  const told = swapLost && status.status !== 'Completed' ? undefined : job;
  return yield* notifyEnd(input, status, told);
}

/** A fold over the series: each attempt's turn answers the next series, or the end. */
function* attemptsToTheEnd(
  input: MigrationInput,
  withPrelock: (prelocked: Prelocked) => Generator<Step, Ending, unknown>,
): Generator<Step, MigrationEnd, unknown> {
  const earlier = input.earlierAttempts ?? [];
  let turn: SeriesTurn = {
    kind: 'next',
    series: {
      n: seriesBounds(input).first,
      ended: [...earlier],
      lastJob: undefined,
      actions: 0,
      verifications: [],
      swapLost: false,
    },
  };
  while (turn.kind === 'next') turn = yield* attemptTurn(input, withPrelock, turn.series);
  return turn.end;
}

/** Attempt n: run it, stamping its statuses; then its end, or what its failure leads to. */
function* attemptTurn(
  input: MigrationInput,
  withPrelock: (prelocked: Prelocked) => Generator<Step, Ending, unknown>,
  series: Series,
): Generator<Step, SeriesTurn, unknown> {
  const { n } = series;
  const attemptInput: MigrationInput = { ...input, lock: { ...input.lock, attempt: n } };
  const startedAt = yield* now();
  const run = yield* stampingStatuses(
    oneAttempt(attemptInput, series.ended, n, withPrelock, series.verifications),
    stampFor(n, startedAt, series.ended),
  );
  const end = run.result;
  const lastJob = end.job ?? series.lastJob;
  const swapLost = series.swapLost || (end.kind === 'failed' && end.code === 'SwapLost');
  if (end.kind === 'done') return endTurn({ status: run.final ?? end.status, job: lastJob, swapLost });
  const settling = yield* failedAttempt(input, attemptInput, n, end, startedAt, series.ended);
  const after: Series = {
    n: n + 1,
    ended: settling.status.attempts ?? [],
    lastJob,
    actions: series.actions + run.actions,
    verifications: end.status.verifications ?? series.verifications,
    swapLost,
  };
  return yield* settleFailure(settling, after);
}

/** A failed attempt being settled: which, why, and the status that records it (still Running). */
interface Settling {
  readonly input: MigrationInput;
  /** The input with the attempt's lock seed: its lock is the one released or waited out. */
  readonly attemptInput: MigrationInput;
  readonly n: number;
  readonly code: string | undefined;
  readonly reason: string;
  readonly status: MigrationStatus;
}

/** Release a lock still held, and record the attempt as Failed with its code and furthest phase. */
function* failedAttempt(
  input: MigrationInput,
  attemptInput: MigrationInput,
  n: number,
  end: Exclude<AttemptEnd, { kind: 'done' }>,
  startedAt: number,
  ended: MigrationAttempt[],
): Generator<Step, Settling, unknown> {
  const lock = end.lockHeld
    ? `; lock ${yield* releaseAfterFailure(attemptInput, releaseReason(end.reason, end.code))}`
    : '';
  const reason = `${end.reason}${lock}`;
  const stop = { code: end.code ?? leadingCode(end.reason), stoppedAt: phaseReached(end.status) };
  const attempts = [...ended, attemptEntry(n, startedAt, yield* now(), 'Failed', reason, stop)];
  const status: MigrationStatus = { ...end.status, phase: 'released', error: reason, attempt: n, attempts };
  return { input, attemptInput, n, code: end.code, reason, status };
}

/** What follows a failed attempt (afterFailedAttempt), carried out. */
function* settleFailure(settling: Settling, after: Series): Generator<Step, SeriesTurn, unknown> {
  const { input } = settling;
  const decide = (gated: boolean): AfterFailure =>
    afterFailedAttempt({
      code: settling.code,
      attempt: settling.n,
      last: seriesBounds(input).last,
      actions: after.actions,
      attemptActionsBound: input.settings.attemptActionsBound ?? 0,
      gated,
    });
  const first = decide(false);
  if (first.kind !== 'gate') return yield* endOrRetry(settling, after, first);
  // Still Running meanwhile; a cancel requested by the time the gate ends is recorded (too late after a swap).
  yield* publish(settling.status);
  const gate = yield* previousLockGone(settling.attemptInput, true, settling.reason);
  if (gate.kind !== 'free') {
    const cancel = (yield* cancelRequested()) ?? undefined;
    return endTurn(yield* endAtGate(settling, after, gate, cancel));
  }
  // once gated, the rule never answers the gate again
  return yield* endOrRetry(
    settling,
    sawSwap(after, gate),
    decide(true) as Exclude<AfterFailure, { kind: 'gate' }>,
  );
}

const sawSwap = (series: Series, gate: Extract<Gate, { kind: 'free' }>): Series =>
  gate.sawSwap ? { ...series, swapLost: true } : series;

function* endOrRetry(
  settling: Settling,
  after: Series,
  move: Exclude<AfterFailure, { kind: 'gate' }>,
): Generator<Step, SeriesTurn, unknown> {
  if (move.kind === 'retry') return yield* retryAfterDelay(settling, after);
  const error = `${settling.reason}${move.note}`;
  const status = yield* publish(settling.status, { status: 'Failed', error });
  return endTurn({ status, job: after.lastJob, swapLost: after.swapLost });
}

/**
 * Another attempt after its delay. Still Running: the reason is kept in `attempts`. A cancel ends the
 * wait; before another attempt, or before calling a cancel done, the gate: attempt n's lock must be
 * gone (its release may have failed, or a pre-lock committed unseen), and a swap whose answer was lost
 * ends the migration Completed, a cancel then too late.
 */
function* retryAfterDelay(settling: Settling, after: Series): Generator<Step, SeriesTurn, unknown> {
  const { input, attemptInput } = settling;
  const swapUnknown = settling.code === 'SwapUnknown';
  // a lost swap's status was published before its gate
  if (!swapUnknown) yield* publish(settling.status);
  const cancel = yield* waitForNextAttempt(input, settling.n - seriesBounds(input).first + 1);
  const gate = yield* previousLockGone(attemptInput, swapUnknown, settling.reason);
  if (gate.kind !== 'free') return endTurn(yield* endAtGate(settling, after, gate, cancel));
  const series = sawSwap(after, gate);
  if (!cancel) return { kind: 'next', series };
  // attempt n's lock is seen gone: nothing left to release
  const ending = cancelled({ input, status: settling.status, etag: '' }, cancel, false);
  const status = yield* cancelMigration(attemptInput, ending);
  return endTurn({ status, job: series.lastJob, swapLost: series.swapLost });
}

/** The delay before the next attempt on a durable timer; a cancel request ends it (and is answered). */
function* waitForNextAttempt(
  input: MigrationInput,
  failedInSeries: number,
): Generator<Step, CancelRequest | undefined, unknown> {
  try {
    yield* sleep(retryDelayMs(input, failedInSeries), input);
    return undefined;
  } catch (error) {
    if (!(error instanceof CancelRequested)) throw error;
    return error.request;
  }
}

/** The gate's verdict on the migration: the route decides, not the attempts left. */
function* endAtGate(
  settling: Settling,
  after: Series,
  gate: Extract<Gate, { kind: 'ended' }>,
  cancel: CancelRequest | undefined,
): Generator<Step, MigrationEnd, unknown> {
  const ended = settling.status.attempts ?? [];
  const completed = gate.outcome === 'Completed';
  const status = yield* publish(settling.status, {
    status: gate.outcome,
    phase: completed ? 'swapped' : 'released',
    error: gate.outcome === 'Failed' ? `${settling.reason}; ${gate.reason}` : gate.reason,
    attempts: completed ? relabelLast(ended, 'Completed', gate.reason) : ended,
    ...(cancel ? { cancelRequestedAt: cancel.requestedAt, cancelRequestedBy: cancel.by } : {}),
  });
  const { lastJob, swapLost } = after;
  // No notice on a swap the gate could not settle (a failed one could drop a live target).
  if (gate.unconfirmed || (settling.code === 'SwapUnknown' && gate.outcome === 'Failed'))
    return { status, job: undefined, swapLost };
  const landed = gate.cleanUpSourceAfter;
  return { status, job: lastJob && landed ? { ...lastJob, cleanUpSourceAfter: landed } : lastJob, swapLost };
}

/** The last attempt relabelled (a lost swap found landed: Completed, without a failure's code and phase). */
const relabelLast = (attempts: MigrationAttempt[], outcome: MigrationState, reason: string) =>
  attempts.map((a, i) => {
    if (i !== attempts.length - 1) return a;
    const { code: _code, stoppedAt: _stoppedAt, ...rest } = a;
    return { ...rest, outcome, reason };
  });

/** Where an attempt that did not complete stopped: its code and the furthest phase it reached. */
interface AttemptStop {
  code: string | undefined;
  stoppedAt: MigrationPhase;
}

/** One ended attempt as `attempts` records it (a Completed one without a stop: its status says it all). */
function attemptEntry(
  n: number,
  startedAt: number,
  endedAt: number,
  outcome: MigrationState,
  reason?: string,
  stop?: AttemptStop,
): MigrationAttempt {
  return {
    attempt: n,
    startedAt: iso(startedAt),
    endedAt: iso(endedAt),
    outcome,
    ...(reason === undefined ? {} : { reason }),
    ...(stop === undefined || outcome === 'Completed'
      ? {}
      : { ...(stop.code === undefined ? {} : { code: stop.code }), stoppedAt: stop.stoppedAt }),
  };
}

/** How attempt n stamps each status it publishes: its number, and the attempts ended before it. */
const stampFor =
  (n: number, startedAt: number, earlier: MigrationAttempt[]) =>
  (status: MigrationStatus, endedAt: number | undefined, reached: MigrationPhase): MigrationStatus => ({
    ...status,
    attempt: n,
    attempts:
      endedAt === undefined
        ? earlier
        : [
            ...earlier,
            attemptEntry(n, startedAt, endedAt, status.status, status.error, {
              code: status.status === 'Cancelled' ? 'Cancelled' : leadingCode(status.error),
              stoppedAt: reached,
            }),
          ],
  });

/** One attempt: its pre-lock and, with the lock held, steps 2–6. */
function* oneAttempt(
  input: MigrationInput,
  earlier: MigrationAttempt[],
  n: number,
  withPrelock: (prelocked: Prelocked) => Generator<Step, Ending, unknown>,
  verifications: Verification[],
): Generator<Step, AttemptEnd, unknown> {
  const fresh: MigrationStatus = {
    ...pendingStatus(input),
    attempt: n,
    attempts: earlier,
    ...(verifications.length > 0 ? { verifications } : {}),
  };
  const running = yield* publish(fresh, { status: 'Running' });
  // a cancel before this attempt's pre-lock: it never takes a lock (workflow/cancel.ts)
  const neverStarted = yield* cancelledBeforeStart(input, running);
  if (neverStarted) return { kind: 'done', status: neverStarted };
  // a cutover window closed for good, or beyond a new lock's cap, takes no lock
  const shut = yield* windowShutBeforePrelock(input);
  if (shut) return { kind: 'failed', status: running, ...shut, lockHeld: false };
  const tried = yield* tryPrelock(input, running);
  if (tried.kind === 'cancelled') return { kind: 'done', status: yield* cancelMigration(input, tried) };
  if (tried.kind === 'unanswered') {
    return {
      kind: 'failed',
      status: running,
      reason: `prelock: ${tried.message}; ${tried.left}`,
      code: 'StepFailed',
      lockHeld: false,
    };
  }
  if (tried.kind === 'refused') {
    const { code, message } = tried.result;
    const state = prelockRefusal(code);
    if (state !== 'Failed')
      return {
        kind: 'done',
        status: yield* publish(running, { status: state, error: `${code}: ${message}` }),
      };
    return { kind: 'failed', status: running, reason: `prelock: ${code}: ${message}`, code, lockHeld: false };
  }
  const ending = yield* withPrelock(tried.state);
  if (ending.kind === 'cancelled') {
    const status = yield* cancelMigration(input, ending);
    return { kind: 'done', status, ...(ending.job ? { job: ending.job } : {}) };
  }
  return ending.kind === 'done' ? ending : { ...ending, lockHeld: true };
}

/** What a stamped run came to: its result, the history actions it recorded, its last terminal status. */
interface Stamped<T> {
  result: T;
  actions: number;
  final: MigrationStatus | undefined;
}

/** What the stamping has seen so far. */
interface Stamping {
  readonly reached: MigrationPhase | undefined;
  readonly actions: number;
  readonly final: MigrationStatus | undefined;
}

/**
 * Runs `inner`, stamping every status it publishes (`stamp`; a terminal one gets the time it ended,
 * from a `now` step just before, and the furthest phase the attempt's statuses reached), and counting
 * the history actions of the steps it yields. Every other step, and every error the runner throws in,
 * passes through.
 */
function* stampingStatuses<T>(
  inner: Generator<Step, T, unknown>,
  stamp: (status: MigrationStatus, endedAt: number | undefined, reached: MigrationPhase) => MigrationStatus,
): Generator<Step, Stamped<T>, unknown> {
  let seen: Stamping = { reached: undefined, actions: 0, final: undefined };
  let next = inner.next();
  while (!next.done) {
    const step = next.value;
    const actions = seen.actions + historyActions(step);
    if (step.kind !== 'status') {
      seen = { ...seen, actions };
      next = yield* passThrough(inner, step);
      continue;
    }
    const reached = phaseReached(step.status, seen.reached);
    const endedAt = terminalStates.has(step.status.status) ? yield* now() : undefined;
    const stamped = stamp(step.status, endedAt, reached);
    yield { kind: 'status', status: stamped };
    seen = { reached, actions, final: endedAt === undefined ? seen.final : stamped };
    next = inner.next(undefined);
  }
  return { result: next.value, actions: seen.actions, final: seen.final };
}

/** One step passed to the runner, and its answer (or its error) passed back into `inner`. */
function* passThrough<T>(
  inner: Generator<Step, T, unknown>,
  step: Step,
): Generator<Step, IteratorResult<Step, T>, unknown> {
  let answer: unknown;
  try {
    answer = yield step;
  } catch (error) {
    return inner.throw(error);
  }
  return inner.next(answer);
}

/** The Durable history actions a step records: a task one each, a race its timer too (as copy.ts counts). */
export function historyActions(step: Step): number {
  switch (step.kind) {
    case 'activity':
      return 1;
    // a cancellable wait also waits for the cancel event
    case 'timer':
      return step.cancellable ? 2 : 1;
    case 'race':
      return step.tasks.length + (step.cancellable ? 2 : 1);
    case 'all':
      return step.tasks.length;
    // at most a timer due at once (the first check; docs/design.md §6.8)
    case 'cancelRequested':
      return 1;
    case 'now':
    case 'status':
      return 0;
  }
}
