import { RouteLockError, isRouteLockError } from '../../shared/core/errors';
import { liveLock } from '../../shared/core/lock/state';
import { type Fleet, harnessError, note, pause, truthOrNull } from './state';
import { DELETE_AFTER_SWAP_SHARE, between, locationKey } from './world';

/**
 * The route-deleting actor (a user or operator): shortly after some swaps it DELETEs the route through
 * a router of its own, expecting 409 ConvergencePending while the retired source is write-blocked, and
 * comes back after Retry-After; once deleted, the route is re-created at once at the same location.
 * Control: it deletes straight through the store, stopped only by a live lock.
 */

/** The actor's clock: true time off by its own offset. */
export const operatorNow = (f: Fleet): number => f.clock.now() + f.operatorOffsetMs;

async function deleteRoute(f: Fleet, id: string): Promise<void> {
  if (f.control !== 'deleteDuringRetiredWindow') return f.operator.deleteRoute(id);
  const current = await f.store.read(id, { from: 'writeRegion' });
  const lock = liveLock(current.doc, operatorNow(f));
  if (lock) throw new RouteLockError('Locked', `Route ${id} is locked by ${lock.migrationId}.`);
  await f.store.delete(id, current.etag);
}

async function deleteAndRecreate(f: Fleet, id: string, round: number): Promise<void> {
  if (f.done || f.deleting.has(id)) return;
  const doc = await truthOrNull(f, id);
  if (!doc) return;
  f.deleting.add(id);
  f.stats.routeDeletes.attempts += 1;
  let comeBackInMs: number | undefined;
  try {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await deleteRoute(f, id);
        break;
      } catch (error) {
        if (isRouteLockError(error, 'ConvergencePending')) {
          f.stats.routeDeletes.refusedConvergencePending += 1;
          note(
            f,
            id,
            `DELETE route: 409 ConvergencePending (Retry-After ${error.retryAfterSeconds ?? '-'} s)`,
          );
          comeBackInMs = (error.retryAfterSeconds ?? 1) * 1000 + between(f.random, 0, 600_000);
          return;
        }
        if (isRouteLockError(error, 'Locked')) {
          f.stats.routeDeletes.refusedLocked += 1;
          note(f, id, 'DELETE route: 423 Locked');
          return;
        }
        // A lost answer may have committed: a retry then finds the route gone.
        if (isRouteLockError(error, 'NotFound') && attempt > 1) break;
        if (!isRouteLockError(error) || !error.retriable) throw error; // retriable: per the code's table entry
        if (attempt >= 10) return;
        await pause(f, 1000);
      }
    }
    f.stats.routeDeletes.deleted += 1;
    note(f, id, `DELETE route: deleted (at ${locationKey(doc.location)}); re-creating it there`);
    for (;;) {
      try {
        await f.operator.createRoute(id, doc.location);
        break;
      } catch (error) {
        if (!isRouteLockError(error, 'StoreUnavailable')) throw error;
        await pause(f, 1000);
      }
    }
    f.stats.routeDeletes.recreated += 1;
    note(f, id, `PUT route: re-created at ${locationKey(doc.location)}`);
  } finally {
    f.deleting.delete(id);
    if (comeBackInMs !== undefined && round < 3) {
      const later = comeBackInMs;
      void pause(f, later)
        .then(() => deleteAndRecreate(f, id, round + 1))
        .catch(harnessError(f, id));
    }
  }
}

/** After some swaps, shortly after, the actor deletes and re-creates the route. */
export function afterSwap(f: Fleet, id: string): void {
  if (f.random() >= DELETE_AFTER_SWAP_SHARE) return;
  void pause(f, between(f.random, 1000, 600_000))
    .then(() => deleteAndRecreate(f, id, 1))
    .catch(harnessError(f, id));
}
