import type { Location } from '../../shared/core/lock/document';

/**
 * The participant contract's job rules (docs/design.md §6.5), as a participant keeps them: pure
 * bookkeeping, no timers and no I/O (service.ts runs the copies and answers HTTP).
 *
 * - A job is (migrationId, migrationAttempt, step, stepAttempt). A repeated POST of a job answers for it
 *   and never starts a second copy; a re-POST of a job that failed starts it again.
 * - Per resource, the job with the latest (lockAcquiredAt, sequence) is the newest: a new newer job
 *   supersedes a running older one (its copy must never be applied), and a POST of a job older than the
 *   newest seen is refused (409).
 * - Old callers (no migrationAttempt / stepAttempt / sequence / lockAcquiredAt): migrationAttempt 1,
 *   stepAttempt = attempt, sequence = attempt. Without lockAcquiredAt a job cannot be ordered against
 *   another migration's, so a job not seen before counts as the newest on arrival (never 409).
 */

export const COPY_STEPS = ['bulkCopy', 'deltaCopy'] as const;
export type CopyStepName = (typeof COPY_STEPS)[number];

export interface CopyJobRequest {
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

export type JobState = 'running' | 'done' | 'failed' | 'superseded';

export interface CopyJob {
  /** Opaque, for the poll URL. */
  readonly id: string;
  readonly request: CopyJobRequest;
  state: JobState;
  /** Which run of the job this is: a failed job POSTed again runs again. */
  run: number;
  error?: string;
  supersededBy?: CopyJob;
}

export type PostDecision =
  /** Run the copy now (a new job, or a failed job POSTed again); stop the `superseded` ones. */
  | { kind: 'start'; job: CopyJob; superseded: CopyJob[] }
  | { kind: 'running'; job: CopyJob }
  | { kind: 'done'; job: CopyJob }
  /** Older than a job already seen for the resource: 409. */
  | { kind: 'older'; newest: CopyJob }
  /** A step this participant does not implement: 404. */
  | { kind: 'notImplemented'; step: string };

/** The job's identity: (migrationId, migrationAttempt, step, stepAttempt). */
export function jobKey(r: CopyJobRequest): string {
  return JSON.stringify([r.migrationId, r.migrationAttempt, r.step, r.stepAttempt]);
}

/** Whether `a` is later than `b` in the contract's order; unorderable (an old caller) counts as later. */
function isLater(a: CopyJobRequest, b: CopyJobRequest): boolean {
  if (a.lockAcquiredAt === undefined || b.lockAcquiredAt === undefined) return true;
  if (a.lockAcquiredAt !== b.lockAcquiredAt) return a.lockAcquiredAt > b.lockAcquiredAt;
  return a.sequence > b.sequence;
}

const positive = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 1;
const location = (v: unknown): v is Location =>
  typeof v === 'object' && v !== null && typeof (v as { region?: unknown }).region === 'string';

/** Read a POST body; a malformed one is a 400 (the caller fails the attempt at once). */
export function parseJobRequest(
  value: unknown,
): { ok: true; request: CopyJobRequest } | { ok: false; error: string } {
  if (typeof value !== 'object' || value === null) return { ok: false, error: 'expected a JSON object' };
  const v = value as Record<string, unknown>;
  for (const field of ['migrationId', 'resourceId', 'step'] as const)
    if (typeof v[field] !== 'string' || v[field] === '')
      return { ok: false, error: `${field}: expected a string` };
  if (!location(v.from) || !location(v.to)) return { ok: false, error: 'from, to: expected {region, …}' };
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
    request: {
      migrationId: v.migrationId as string,
      resourceId: v.resourceId as string,
      from: v.from,
      to: v.to,
      step: v.step as string,
      migrationAttempt: (v.migrationAttempt ?? 1) as number,
      stepAttempt,
      sequence: (v.sequence ?? stepAttempt) as number,
      lockAcquiredAt,
    },
  };
}

export class CopyJobs {
  private readonly byKey = new Map<string, CopyJob>();
  private readonly byId = new Map<string, CopyJob>();
  /** Per resource, the newest job seen. */
  private readonly newest = new Map<string, CopyJob>();
  private next = 0;

  post(request: CopyJobRequest): PostDecision {
    if (!(COPY_STEPS as readonly string[]).includes(request.step))
      return { kind: 'notImplemented', step: request.step };
    const newest = this.newest.get(request.resourceId);
    const known = this.byKey.get(jobKey(request));
    if (known) {
      // Only the newest job of a resource is answered for; any other known job has been outranked.
      if (newest !== known) return { kind: 'older', newest: newest as CopyJob };
      if (known.state === 'done') return { kind: 'done', job: known };
      if (known.state === 'running') return { kind: 'running', job: known };
      // failed: start it again
      known.state = 'running';
      known.run += 1;
      delete known.error;
      return { kind: 'start', job: known, superseded: [] };
    }
    if (newest && !isLater(request, newest.request)) return { kind: 'older', newest };
    const job: CopyJob = { id: `j-${++this.next}`, request, state: 'running', run: 1 };
    this.byKey.set(jobKey(request), job);
    this.byId.set(job.id, job);
    this.newest.set(request.resourceId, job);
    const superseded: CopyJob[] = [];
    if (newest?.state === 'running') {
      newest.state = 'superseded';
      newest.supersededBy = job;
      superseded.push(newest);
    }
    return { kind: 'start', job, superseded };
  }

  get(id: string): CopyJob | undefined {
    return this.byId.get(id);
  }

  /** Whether any job of this migration for this resource was seen (an end notice of another is a no-op). */
  knows(migrationId: string, resourceId: string): boolean {
    for (const job of this.byId.values())
      if (job.request.migrationId === migrationId && job.request.resourceId === resourceId) return true;
    return false;
  }

  /**
   * A migration attempt that ended (a failed or cancelled notice): its running jobs, and those of its
   * earlier attempts, stop and fail, never to land. A later attempt's (a retry's) run on.
   */
  abandon(migrationId: string, resourceId: string, migrationAttempt: number): CopyJob[] {
    const stopped: CopyJob[] = [];
    for (const job of this.byId.values()) {
      const r = job.request;
      if (r.migrationId !== migrationId || r.resourceId !== resourceId || job.state !== 'running') continue;
      if (r.migrationAttempt > migrationAttempt) continue;
      job.state = 'failed';
      job.error = 'the migration ended';
      stopped.push(job);
    }
    return stopped;
  }

  /** Whether this run of the job may still apply its copy (it is neither superseded nor rerun). */
  mayApply(job: CopyJob, run: number): boolean {
    return job.state === 'running' && job.run === run;
  }

  finish(job: CopyJob, run: number, outcome: { ok: true } | { ok: false; error: string }): void {
    if (!this.mayApply(job, run)) return;
    if (outcome.ok) job.state = 'done';
    else {
      job.state = 'failed';
      job.error = outcome.error;
    }
  }
}
