import { type Location, sameLocation } from '../../core/lock/document';
import type { MigrationInput, Step } from '../types';
import { releaseReason } from './cleanUp';
import { type Moving, type PhaseResult, type Prelocked, done, failed, guarded, next, refused } from './state';
import { activity, publish, sleep, sleepUntil, stopIfCancelled } from './steps';

/**
 * 2–4. Take where the route was from the pre-lock's answer (or read it: a resource already moved is
 * released, NoOp), wait out cache convergence on a durable timer until `waitUntil`, then confirm the
 * lock is visible where services look before anything is restricted.
 */
export function* convergencePhase(
  state: Prelocked,
  waitUntil: number,
): Generator<Step, PhaseResult<Moving>, unknown> {
  return yield* guarded(state, (prelocked) => locate(prelocked, waitUntil));
}

function* locate(state: Prelocked, waitUntil: number): Generator<Step, PhaseResult<Moving>, unknown> {
  const { resourceId, lock, target } = state.input;
  yield* stopIfCancelled();
  // The pre-lock's answer says where the route was: the write region's copy it was decided on,
  // conditional on its ETag (a route already at the target was refused there: AlreadyAtTarget).
  // Whatever changes it later (an operator's force-release, a delete) changes the ETag the next
  // escalation names: a 412, decided again on the write region's copy, where the lock is not ours.
  const known = state.grant.location;
  if (known !== undefined) return yield* converging(state, known, waitUntil);
  // A grant without it (an activity that did not answer it): read the route; already there, NoOp.
  const route = yield* activity('readRoute', { resourceId, from: 'writeRegion' });
  if (!route.ok) return refused(state, 'read the route', route);
  if (sameLocation(route.value.location, target)) {
    const released = yield* activity('release', {
      resourceId,
      lock,
      reason: releaseReason('the resource already sits at the target', 'AlreadyAtTarget'),
    });
    if (!released.ok) return refused(state, 'release', released);
    return done(
      yield* publish(state.status, {
        status: 'NoOp',
        phase: 'released',
        error: 'the resource already sits at the target',
      }),
    );
  }
  return yield* converging(state, route.value.location, waitUntil);
}

function* converging(
  state: Prelocked,
  from: Location,
  waitUntil: number,
): Generator<Step, PhaseResult<Moving>, unknown> {
  const moving: Moving = {
    input: state.input,
    status: yield* publish(state.status, { phase: 'converging' }),
    etag: state.etag,
    from,
  };
  return yield* guarded(moving, (held) => awaitVisibility(held, waitUntil));
}

/**
 * Where the workflow looks for the lock after the wait: a replica (what a service's cache miss reads; the
 * write region's read-through adds nothing a conditional escalation does not catch), and for a
 * lock-only migration nowhere. The check exists so the copies may rely on every service enforcing the
 * lock, as the in-flight grace does; with no participant nothing is copied, and the lock-only swap
 * is still confirmed on a replica after the replication bound (confirm.ts).
 */
export function visibilityRead(input: MigrationInput): 'replica' | null {
  return input.settings.participants.length === 0 ? null : 'replica';
}

function* awaitVisibility(state: Moving, waitUntil: number): Generator<Step, PhaseResult<Moving>, unknown> {
  const { resourceId, migrationId, settings: s } = state.input;
  yield* sleepUntil(waitUntil, state.input);
  const from = visibilityRead(state.input);
  if (from === null) return next(state);
  for (let attempt = 1; attempt <= s.retryAttempts; attempt += 1) {
    const seen = yield* activity('readRoute', { resourceId, from });
    if (!seen.ok) return refused(state, 'read the route', seen);
    if (seen.value.lock?.migrationId === migrationId) return next(state);
    yield* sleep(s.retryIntervalSeconds * 1000, state.input);
  }
  return failed(state, 'the pre-lock never became visible on the read path', 'NotVisible');
}
