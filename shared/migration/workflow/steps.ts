import type {
  ActivityInputs,
  ActivityName,
  ActivityOutputs,
  ActivityResult,
  MigrationSettings,
  MigrationStatus,
  Step,
} from '../types';

/**
 * The workflow's primitives: each yields one `Step` and hands back what the runner answered. Nothing
 * here reads a clock or does I/O; the runner does, and Durable replays the answers from history.
 */

export function* step<T>(value: Step): Generator<Step, T, unknown> {
  return (yield value) as T;
}

export function* activity<K extends ActivityName>(
  name: K,
  input: ActivityInputs[K],
): Generator<Step, ActivityResult<ActivityOutputs[K]>, unknown> {
  return yield* step<ActivityResult<ActivityOutputs[K]>>({ kind: 'activity', name, input });
}

export function* now(): Generator<Step, number, unknown> {
  return yield* step<number>({ kind: 'now' });
}

export function* sleepUntil(fireAt: number): Generator<Step, void, unknown> {
  yield* step({ kind: 'timer', fireAt });
}

export function* sleep(ms: number): Generator<Step, void, unknown> {
  yield* sleepUntil((yield* now()) + ms);
}

/** Publish `status` amended by `patch`; the published copy is the new status (nothing mutates it). */
export function* publish(
  status: MigrationStatus,
  patch: Partial<MigrationStatus> = {},
): Generator<Step, MigrationStatus, unknown> {
  const snapshot = structuredClone({ ...status, ...patch });
  yield* step({ kind: 'status', status: snapshot });
  return snapshot;
}

/**
 * An activity whose answer may be `ConvergencePending` (with Retry-After), asked again after that wait,
 * a few times at most: a pre-lock just after a swap, or the first escalation on a clock behind.
 */
export function* waitingOutConvergence<K extends ActivityName>(
  name: K,
  input: ActivityInputs[K],
  s: MigrationSettings,
): Generator<Step, ActivityResult<ActivityOutputs[K]>, unknown> {
  let result = yield* activity(name, input);
  for (
    let attempt = 1;
    !result.ok && result.code === 'ConvergencePending' && attempt < s.retryAttempts;
    attempt += 1
  ) {
    yield* sleep((result.retryAfterSeconds ?? s.retryIntervalSeconds) * 1000);
    result = yield* activity(name, input);
  }
  return result;
}
