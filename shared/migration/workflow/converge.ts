import { sameLocation } from '../../lock/document';
import type { Step } from '../types';
import { type Moving, type PhaseResult, type Prelocked, done, failed, guarded, next, refused } from './state';
import { activity, publish, sleep, sleepUntil, stopIfCancelled } from './steps';

/**
 * 2–4. Re-read the route (a stale location read upstream may have sent us a resource already moved:
 * release, NoOp), wait out cache convergence on a durable timer until `waitUntil`, then confirm the
 * lock is visible where services look before anything is restricted.
 */
export function* convergencePhase(
  state: Prelocked,
  waitUntil: number,
): Generator<Step, PhaseResult<Moving>, unknown> {
  return yield* guarded(state, (prelocked) => reread(prelocked, waitUntil));
}

function* reread(state: Prelocked, waitUntil: number): Generator<Step, PhaseResult<Moving>, unknown> {
  const { resourceId, lock, target } = state.input;
  yield* stopIfCancelled(state.input);
  const route = yield* activity('readRoute', { resourceId, from: 'writeRegion' });
  if (!route.ok) return refused(state, 'read the route', route);
  if (sameLocation(route.value.location, target)) {
    const released = yield* activity('release', { resourceId, lock });
    if (!released.ok) return refused(state, 'release', released);
    return done(
      yield* publish(state.status, {
        status: 'NoOp',
        phase: 'released',
        error: 'the resource already sits at the target',
      }),
    );
  }
  const converging: Moving = {
    input: state.input,
    status: yield* publish(state.status, { phase: 'converging' }),
    etag: state.etag,
    from: route.value.location,
  };
  return yield* guarded(converging, (moving) => awaitVisibility(moving, waitUntil));
}

function* awaitVisibility(state: Moving, waitUntil: number): Generator<Step, PhaseResult<Moving>, unknown> {
  const { resourceId, migrationId, settings: s } = state.input;
  yield* sleepUntil(waitUntil, state.input);
  for (let attempt = 1; attempt <= s.retryAttempts; attempt += 1) {
    const seen = yield* activity('readRoute', { resourceId, from: 'readPath' });
    if (!seen.ok) return refused(state, 'read the route', seen);
    if (seen.value.lock?.migrationId === migrationId) return next(state);
    yield* sleep(s.retryIntervalSeconds * 1000, state.input);
  }
  return failed(state, 'the pre-lock never became visible on the read path', 'NotVisible');
}
