import type { Location } from '../../shared/core/lock/document';
import type { RouteView } from '../../shared/core/lock/view';
import type { EndStep } from '../../shared/migration/types';

/**
 * The end notices (docs/design.md §6.11) as the message store keeps them: pure rules, no timers and no I/O
 * (service.ts schedules and deletes). Whatever a notice says, a region's copy is deleted only when the
 * route, resolved afresh, is not there and no lock is bringing it there: never live data.
 */

export const END_STEPS: readonly EndStep[] = ['completed', 'failed', 'cancelled'];

export interface EndNoticeRequest {
  migrationId: string;
  resourceId: string;
  from: Location;
  to: Location;
  step: EndStep;
  /** The attempt that ended (a retry keeps the migrationId and numbers its attempts on); 1 if absent. */
  migrationAttempt: number;
  /** `completed`: epoch ms after which the source's copy may go. */
  cleanUpSourceAfter?: number;
  reason?: string;
}

export const isEndStep = (step: unknown): step is EndStep => END_STEPS.includes(step as EndStep);

const location = (v: unknown): v is Location =>
  typeof v === 'object' && v !== null && typeof (v as { region?: unknown }).region === 'string';

export function parseEndNotice(
  value: unknown,
): { ok: true; notice: EndNoticeRequest } | { ok: false; error: string } {
  if (typeof value !== 'object' || value === null) return { ok: false, error: 'expected a JSON object' };
  const v = value as Record<string, unknown>;
  for (const field of ['migrationId', 'resourceId'] as const)
    if (typeof v[field] !== 'string' || v[field] === '')
      return { ok: false, error: `${field}: expected a string` };
  if (!isEndStep(v.step)) return { ok: false, error: `step: expected one of ${END_STEPS.join(', ')}` };
  if (!location(v.from) || !location(v.to)) return { ok: false, error: 'from, to: expected {region, …}' };
  const attempt = v.migrationAttempt ?? 1;
  if (typeof attempt !== 'number' || !Number.isSafeInteger(attempt) || attempt < 1)
    return { ok: false, error: 'migrationAttempt: expected a whole number ≥ 1' };
  const notice: EndNoticeRequest = {
    migrationId: v.migrationId as string,
    resourceId: v.resourceId as string,
    from: v.from,
    to: v.to,
    step: v.step,
    migrationAttempt: attempt,
  };
  if (v.step === 'completed') {
    const at = typeof v.cleanUpSourceAfter === 'string' ? Date.parse(v.cleanUpSourceAfter) : Number.NaN;
    if (Number.isNaN(at)) return { ok: false, error: 'cleanUpSourceAfter: expected an ISO time' };
    notice.cleanUpSourceAfter = at;
  }
  if (typeof v.reason === 'string') notice.reason = v.reason.slice(0, 200);
  return { ok: true, notice };
}

/**
 * Whether a region's copy of a resource may be deleted, on the route as resolved now (null: no route):
 * not while the route is there, nor while a lock is bringing the resource there. No route: keep (a
 * deleted route may be re-created at that very region).
 */
export function mayDeleteCopy(
  view: RouteView | null,
  region: string,
): { ok: true } | { ok: false; why: string } {
  if (!view) return { ok: false, why: 'no route: kept' };
  if (view.location.region === region) return { ok: false, why: `${region} is the live location` };
  if (view.lock && view.lock.target.region === region)
    return { ok: false, why: `a lock (${view.lock.migrationId}) targets ${region}` };
  return { ok: true };
}
