import type { Location } from '../../core/lock/document';
import type {
  CancelRequest,
  MigrationInput,
  MigrationStatus,
  PrelockGrant,
  SeededGrant,
  Step,
} from '../types';
import { CancelRequested } from './steps';

/**
 * What a running migration carries from one phase to the next. Each phase generator takes a state and
 * returns the next one (or how the migration ends); nothing is shared between phases by mutation, so
 * a phase can be driven alone.
 */
export interface WorkflowState {
  readonly input: MigrationInput;
  /** The status last published: a failure amends it. */
  readonly status: MigrationStatus;
  /** The routing document's ETag after this migration's last write to it. */
  readonly etag: string;
}

/**
 * After the pre-lock: its grant, from which the convergence wait is counted, and where the route was
 * when it committed.
 */
export interface Prelocked extends WorkflowState {
  readonly grant: PrelockGrant;
}

/** After the route was re-read: where the resource moves from. */
export interface Moving extends WorkflowState {
  readonly from: Location;
}

/** Holding a hard-delete or write lock: its grant (its end, and the write-lock attempt's `writeAt`). */
export interface Escalated extends Moving {
  readonly grant: SeededGrant;
}

/**
 * What the end notices (workflow/notify.ts) tell participants of the attempt that ended: the
 * copies' source and lock, and after a swap when the source may be cleaned up. Set once the route was
 * read (a job may have been sent); absent before that, when nothing was copied.
 */
export interface EndJob {
  from: Location;
  migrationAttempt: number;
  lockAcquiredAt?: string;
  /** The swap's retired-source window's end (a `completed` notice's `cleanUpSourceAfter`). */
  cleanUpSourceAfter?: string;
}

/** The end job of a state that read the route (its source) and, once escalated, holds a grant. */
export function endJobOf(state: WorkflowState): EndJob | undefined {
  const { from, grant } = state as Partial<Escalated>;
  if (from === undefined) return undefined;
  return {
    from,
    migrationAttempt: state.input.lock?.attempt ?? 1,
    ...(grant === undefined ? {} : { lockAcquiredAt: grant.acquiredAt }),
  };
}

const withJob = (state: WorkflowState): { job?: EndJob } => {
  const job = endJobOf(state);
  return job === undefined ? {} : { job };
};

/** The attempt must stop: workflow/attempts.ts releases the lock and records the failure with its reason. */
export interface Failure {
  kind: 'failed';
  status: MigrationStatus;
  reason: string;
  /** For the end notices: the attempt's job, when it got as far as reading the route. */
  job?: EndJob;
  /**
   * What failed, for `attemptVerdict` (workflow/attempts.ts): a lock error's code, `StepFailed` (a step
   * the runner gave up on: a store outage through every retry), `SwapUnknown` (the swap's own answer
   * was lost: it may have landed), or the workflow's own (`NotVisible`, `WriteBudgetExceeded`).
   */
  code?: string;
}

/**
 * An operator cancelled: `cancelMigration` (workflow/cancel.ts) releases the lock, when one
 * may be held, and publishes Cancelled.
 */
export interface Cancelled {
  kind: 'cancelled';
  status: MigrationStatus;
  request: CancelRequest;
  /** False only where this migration cannot hold a lock (a pre-lock refused and waiting). */
  lockHeld: boolean;
  job?: EndJob;
}

/** How a migration ends: its final status already published, or a failure or a cancel still to clean up. */
export type Ending = { kind: 'done'; status: MigrationStatus; job?: EndJob } | Failure | Cancelled;

export type PhaseResult<S> = { kind: 'next'; state: S } | Ending;

export const next = <S>(state: S): { kind: 'next'; state: S } => ({ kind: 'next', state });

export const done = (status: MigrationStatus): Ending => ({ kind: 'done', status });

export const failed = (state: WorkflowState, reason: string, code?: string): Failure => ({
  kind: 'failed',
  status: state.status,
  reason,
  ...(code === undefined ? {} : { code }),
  ...withJob(state),
});

/** A lock operation refused: the migration fails, naming what it tried. */
export const refused = (
  state: WorkflowState,
  what: string,
  result: { code: string; message: string },
): Failure => failed(state, `${what}: ${result.code}: ${result.message}`, result.code);

export const cancelled = (state: WorkflowState, request: CancelRequest, lockHeld = true): Cancelled => ({
  kind: 'cancelled',
  status: state.status,
  request,
  lockHeld,
  ...withJob(state),
});

export const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * Runs `body` on `state`. A step the runner gave up on (an activity out of retries) is thrown into the
 * workflow: it fails the migration at `state`'s status, the last one published. A phase guards what
 * follows each status it publishes, so a failure always amends the status the world last saw. A cancel
 * request found by a wait or a check (CancelRequested) ends it the same way, as `cancelled`.
 */
export function* guarded<S extends WorkflowState, T>(
  state: S,
  body: (state: S) => Generator<Step, T, unknown>,
  code = 'StepFailed',
): Generator<Step, T | Failure | Cancelled, unknown> {
  try {
    return yield* body(state);
  } catch (error) {
    if (error instanceof CancelRequested) return cancelled(state, error.request);
    return failed(state, messageOf(error), code);
  }
}
