import type { RouteView } from '../core/lock/view';
import { type EndNoticeRequest, type EndStep, mayDeleteCopy } from '../core/participantWire';
import type { CleanUpOrder, RouteReader } from './options';

/**
 * The end notices' clean-ups (routelock design §6.11) as the handler keeps them: after `completed` the
 * source's copy goes once `cleanUpSourceAfter` has passed, never before; after `failed` or `cancelled` the
 * target's partial copy at once. Either only if the route, resolved afresh, is not at that region and no
 * lock is bringing it there: never live data on a notice's word.
 */

/** One clean-up a notice asked for, and what became of it. */
export interface CleanUp {
  migrationId: string;
  resourceId: string;
  step: EndStep;
  /** The region whose copy it is about: the source after `completed`, the target otherwise. */
  region: string;
  /** When it may run (epoch ms): `cleanUpSourceAfter`, or the notice's arrival. */
  notBefore: number;
  state: 'scheduled' | 'deleted' | 'kept';
  /** Why a copy was kept (the route there, a lock bringing it there, no route). */
  why?: string;
  at?: number;
}

/** One clean-up per attempt that ended: a retry (same migrationId, a later attempt) gets its own. */
export const cleanUpKey = (n: EndNoticeRequest) =>
  JSON.stringify([n.migrationId, n.migrationAttempt, n.resourceId]);

export function newCleanUp(notice: EndNoticeRequest, now: number): CleanUp {
  const { migrationId, resourceId, step } = notice;
  return step === 'completed'
    ? {
        migrationId,
        resourceId,
        step,
        region: notice.from.region,
        notBefore: notice.cleanUpSourceAfter as number,
        state: 'scheduled',
      }
    : { migrationId, resourceId, step, region: notice.to.region, notBefore: now, state: 'scheduled' };
}

/** The route afresh: null when there is none (404), 'unreachable' when routelock cannot be asked. */
async function freshView(routing: RouteReader, id: string): Promise<RouteView | null | 'unreachable'> {
  routing.forget(id);
  try {
    return await routing.resolve(id);
  } catch (error) {
    return (error as { status?: unknown }).status === 404 ? null : 'unreachable';
  }
}

/**
 * Run a clean-up now: the route resolved afresh, then the team's delete if the rules allow it. 'retry'
 * when routelock cannot be reached or the delete failed (the caller tries again later).
 */
export async function runCleanUp(
  cleanUp: CleanUp,
  routing: RouteReader,
  remove: (order: CleanUpOrder, signal: AbortSignal) => Promise<void> | void,
  signal: AbortSignal,
  now: () => number,
): Promise<CleanUp | 'retry'> {
  const view = await freshView(routing, cleanUp.resourceId);
  if (view === 'unreachable') return 'retry';
  const verdict = mayDeleteCopy(view, cleanUp.region);
  if (!verdict.ok) return { ...cleanUp, state: 'kept', why: verdict.why, at: now() };
  const { migrationId, resourceId, step, region } = cleanUp;
  try {
    await remove({ migrationId, resourceId, step, region }, signal);
  } catch {
    return 'retry';
  }
  return { ...cleanUp, state: 'deleted', at: now() };
}
