import type { RouteView } from '../../core/lock/view';
import {
  type ActivityInputs,
  type ActivityName,
  type ActivityOutputs,
  type ActivityResult,
  type CancelRequest,
  type MigrationInput,
  type MigrationSettings,
  type MigrationStatus,
  type Step,
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

/** Which migration a wait belongs to: a wait in a migration's scope ends on its cancel request. */
export type CancelScope = Pick<MigrationInput, 'migrationId'>;

/**
 * A cancel request found by a cancellable wait or check. Thrown into the phase, where
 * `guarded` turns it into the `cancelled` ending: the phase stops at once, whatever it was doing, and
 * the cancel path (workflow/cancel.ts) releases the lock.
 */
export class CancelRequested extends Error {
  constructor(readonly request: CancelRequest) {
    super(`cancelled by ${request.by} at ${request.requestedAt}`);
  }
}

/** Has a cancel been requested? Answers the request, or null; never waits. */
export function* cancelRequested(): Generator<Step, CancelRequest | null, unknown> {
  return yield* step<CancelRequest | null>({ kind: 'cancelRequested' });
}

/** Between steps that are not waits: stop here if a cancel was requested meanwhile. */
export function* stopIfCancelled(): Generator<Step, void, unknown> {
  const request = yield* cancelRequested();
  if (request) throw new CancelRequested(request);
}

/**
 * A durable timer; with a `scope`, a cancel request ends it early (CancelRequested). Without one (the
 * waits bounded by a lease, e.g. the gate between attempts) it runs to its end.
 */
export function* sleepUntil(fireAt: number, scope?: CancelScope): Generator<Step, void, unknown> {
  if (scope === undefined) {
    yield* step({ kind: 'timer', fireAt });
    return;
  }
  const request = yield* step<CancelRequest | null>({ kind: 'timer', fireAt, cancellable: true });
  if (request) throw new CancelRequested(request);
}

export function* sleep(ms: number, scope?: CancelScope): Generator<Step, void, unknown> {
  yield* sleepUntil((yield* now()) + ms, scope);
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
  scope?: CancelScope,
): Generator<Step, ActivityResult<ActivityOutputs[K]>, unknown> {
  let result = yield* activity(name, input);
  for (
    let attempt = 1;
    !result.ok && result.code === 'ConvergencePending' && attempt < s.retryAttempts;
    attempt += 1
  ) {
    yield* sleep((result.retryAfterSeconds ?? s.retryIntervalSeconds) * 1000, scope);
    result = yield* activity(name, input);
  }
  return result;
}

/**
 * The route as the write region or a replica holds it; null for a read the runner gave up on (a store
 * outage through its retries): no answer, so the caller asks again or decides without it.
 */
export function* readRouteOrNull(
  resourceId: string,
  from: 'replica' | 'writeRegion',
): Generator<Step, ActivityResult<RouteView> | null, unknown> {
  try {
    return yield* activity('readRoute', { resourceId, from });
  } catch {
    return null;
  }
}
