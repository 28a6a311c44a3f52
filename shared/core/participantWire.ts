import type { Location } from './lock/document';
import type { RouteView } from './lock/view';

/**
 * The participant contract's wire (routelock design §6.5): what travels between routelock's orchestrator
 * and a participant, with one home low enough for both sides. routelock's orchestrator builds
 * requests of these shapes and sends `Prefer: wait`; a participant (`@routelock/participant`, the example)
 * parses them here. Pure: no I/O, no clock.
 */

export type CopyStep = 'bulkCopy' | 'deltaCopy';
/** How a migration ended, as its participants are told (routelock design §6.11). */
export type EndStep = 'completed' | 'failed' | 'cancelled';
/** Every step a participant is asked: the copies, `verify`, and the end notices. */
export type ParticipantStep = CopyStep | 'verify' | EndStep;

export const COPY_STEPS: readonly CopyStep[] = ['bulkCopy', 'deltaCopy'];
export const END_STEPS: readonly EndStep[] = ['completed', 'failed', 'cancelled'];
export const isEndStep = (step: unknown): step is EndStep => END_STEPS.includes(step as EndStep);
export const isCopyStep = (step: unknown): step is CopyStep => COPY_STEPS.includes(step as CopyStep);

/** A job's POST body, as routelock sends it. */
export interface ParticipantRequest {
  migrationId: string;
  resourceId: string;
  from: Location;
  to: Location;
  step: ParticipantStep;
  /**
   * Which run of the step this is (1 for the bulk copy; the write-lock attempt for the delta): the
   * alias of `stepAttempt`, kept for participants that key jobs by (migrationId, step, attempt).
   */
  attempt: number;
  /** The job is (migrationId, migrationAttempt, step, stepAttempt) (routelock design §6.5). */
  migrationAttempt?: number;
  stepAttempt?: number;
  /** Increases with every new job of the migration: with `lockAcquiredAt`, orders jobs of a resource. */
  sequence?: number;
  lockAcquiredAt?: string;
  /** `completed` only: when the source's copy may be deleted (the swap plus the retired-source window). */
  cleanUpSourceAfter?: string;
  /** `failed` / `cancelled`: why; the target's partial copy may be dropped. */
  reason?: string;
}

/** A participant's 200 answer to `verify` (the body); anything else is a protocol error. */
export interface VerifyAnswer {
  match: boolean;
  sourceCount: number;
  targetCount: number;
  digest?: string;
  detail?: string;
}

/**
 * A job as a participant reads it: every field present. An old caller (no migrationAttempt / stepAttempt /
 * sequence / lockAcquiredAt) is migrationAttempt 1, stepAttempt = attempt, sequence = attempt; without
 * lockAcquiredAt a job cannot be ordered against another migration's.
 */
export interface JobRequest {
  migrationId: string;
  resourceId: string;
  from: Location;
  to: Location;
  step: string;
  migrationAttempt: number;
  stepAttempt: number;
  sequence: number;
  /** The migration's lock acquiredAt, epoch ms; undefined for an old caller. */
  lockAcquiredAt: number | undefined;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; error: string };

/** The job's identity: (migrationId, migrationAttempt, step, stepAttempt). */
export function jobKey(r: JobRequest): string {
  return JSON.stringify([r.migrationId, r.migrationAttempt, r.step, r.stepAttempt]);
}

/** Whether `a` is later than `b` in the contract's order; unorderable (an old caller) counts as later. */
export function isLaterJob(a: JobRequest, b: JobRequest): boolean {
  if (a.lockAcquiredAt === undefined || b.lockAcquiredAt === undefined) return true;
  if (a.lockAcquiredAt !== b.lockAcquiredAt) return a.lockAcquiredAt > b.lockAcquiredAt;
  return a.sequence > b.sequence;
}

const positive = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 1;
const isLocation = (v: unknown): v is Location =>
  typeof v === 'object' && v !== null && typeof (v as { region?: unknown }).region === 'string';

/** The fields every request names: ids and both locations. */
function common(value: unknown): Parsed<Record<string, unknown>> {
  if (typeof value !== 'object' || value === null) return { ok: false, error: 'expected a JSON object' };
  const v = value as Record<string, unknown>;
  for (const field of ['migrationId', 'resourceId', 'step'] as const)
    if (typeof v[field] !== 'string' || v[field] === '')
      return { ok: false, error: `${field}: expected a string` };
  if (!isLocation(v.from) || !isLocation(v.to)) return { ok: false, error: 'from, to: expected {region, …}' };
  return { ok: true, value: v };
}

/** Read a job's POST body; a malformed one is a 400 (routelock fails the attempt at once). */
export function parseJobRequest(value: unknown): Parsed<JobRequest> {
  const base = common(value);
  if (!base.ok) return base;
  const v = base.value;
  for (const field of ['migrationAttempt', 'stepAttempt', 'attempt', 'sequence'] as const)
    if (v[field] !== undefined && !positive(v[field]))
      return { ok: false, error: `${field}: expected an integer ≥ 1` };
  let lockAcquiredAt: number | undefined;
  if (v.lockAcquiredAt !== undefined) {
    lockAcquiredAt = typeof v.lockAcquiredAt === 'string' ? Date.parse(v.lockAcquiredAt) : Number.NaN;
    if (Number.isNaN(lockAcquiredAt)) return { ok: false, error: 'lockAcquiredAt: expected an ISO time' };
  }
  const stepAttempt = (v.stepAttempt ?? v.attempt ?? 1) as number;
  if (v.stepAttempt !== undefined && v.attempt !== undefined && v.attempt !== v.stepAttempt)
    return { ok: false, error: 'attempt must equal stepAttempt' };
  return {
    ok: true,
    value: {
      migrationId: v.migrationId as string,
      resourceId: v.resourceId as string,
      from: v.from as Location,
      to: v.to as Location,
      step: v.step as string,
      migrationAttempt: (v.migrationAttempt ?? 1) as number,
      stepAttempt,
      sequence: (v.sequence ?? stepAttempt) as number,
      lockAcquiredAt,
    },
  };
}

/** An end notice as a participant reads it. */
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

/**
 * Read an end notice. Instants are parsed, never compared as text: on the Durable engine an instant that
 * passed through the history loses its trailing zeros (the participants' guide).
 */
export function parseEndNotice(value: unknown): Parsed<EndNoticeRequest> {
  const base = common(value);
  if (!base.ok) return base;
  const v = base.value;
  if (!isEndStep(v.step)) return { ok: false, error: `step: expected one of ${END_STEPS.join(', ')}` };
  const attempt = v.migrationAttempt ?? 1;
  if (typeof attempt !== 'number' || !Number.isSafeInteger(attempt) || attempt < 1)
    return { ok: false, error: 'migrationAttempt: expected a whole number ≥ 1' };
  const notice: EndNoticeRequest = {
    migrationId: v.migrationId as string,
    resourceId: v.resourceId as string,
    from: v.from as Location,
    to: v.to as Location,
    step: v.step,
    migrationAttempt: attempt,
  };
  if (v.step === 'completed') {
    const at = typeof v.cleanUpSourceAfter === 'string' ? Date.parse(v.cleanUpSourceAfter) : Number.NaN;
    if (Number.isNaN(at)) return { ok: false, error: 'cleanUpSourceAfter: expected an ISO time' };
    notice.cleanUpSourceAfter = at;
  }
  if (typeof v.reason === 'string') notice.reason = v.reason.slice(0, 200);
  return { ok: true, value: notice };
}

/** A dry run's question (no lock, so no job): the ids and both locations. */
export interface PreflightQuestion {
  migrationId?: string;
  resourceId: string;
  from: Location;
  to: Location;
}

export function parsePreflight(value: unknown): Parsed<PreflightQuestion> {
  const { migrationId, resourceId, from, to } = (value ?? {}) as Record<string, unknown>;
  if (typeof resourceId !== 'string' || !isLocation(from) || !isLocation(to))
    return { ok: false, error: 'preflight needs resourceId, from.region and to.region' };
  return {
    ok: true,
    value: { ...(typeof migrationId === 'string' ? { migrationId } : {}), resourceId, from, to },
  };
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

/**
 * The `wait` preference of a request's Prefer header(s), as a participant reads it (RFC 7240:
 * comma-separated preferences, names case-insensitive, a value of delta-seconds, possibly quoted;
 * the first `wait` counts). Undefined when absent or malformed.
 */
export function parsePreferWait(header: string | readonly string[] | null | undefined): number | undefined {
  const values =
    header === null || header === undefined ? [] : typeof header === 'string' ? [header] : header;
  for (const value of values)
    for (const preference of value.split(',')) {
      const [token = ''] = preference.split(';');
      const match = /^\s*wait\s*=\s*"?(\d{1,9})"?\s*$/i.exec(token);
      if (match) return Number(match[1]);
      if (/^\s*wait\s*(=|$)/i.test(token)) return undefined;
    }
  return undefined;
}
