import { type JobRequest, COPY_STEPS, isLaterJob, jobKey } from '../core/participantWire';

/**
 * The participant contract's job rules (routelock design §6.5) as a table and its transitions: pure, each
 * transition returns the next table (the handler, `createParticipantHandler`, does the I/O: runs the copies, aborts them,
 * answers HTTP).
 *
 * - A job is (migrationId, migrationAttempt, step, stepAttempt). A repeated POST of a job answers for it
 *   and never starts a second copy; a re-POST of a job that failed starts it again (its next run).
 * - Per resource, the job with the latest (lockAcquiredAt, sequence) is the newest: a newer job supersedes
 *   a running older one (its copy must never be applied), and a POST of a job older than the newest seen
 *   is refused (409).
 * - Without lockAcquiredAt (an old caller) a job cannot be ordered against another migration's, so a job
 *   not seen before counts as the newest on arrival (never 409).
 */

export type JobState = 'running' | 'done' | 'failed' | 'superseded';

export interface Job {
  /** Opaque, for the poll URL. */
  readonly id: string;
  readonly request: JobRequest;
  readonly state: JobState;
  /** Which run of the job this is: a failed job POSTed again runs again. */
  readonly run: number;
  readonly error?: string;
  /** The id of the job that superseded it. */
  readonly supersededBy?: string;
}

export interface JobTable {
  readonly jobs: ReadonlyMap<string, Job>;
  /** jobKey → id. */
  readonly byKey: ReadonlyMap<string, string>;
  /** resourceId → the id of the newest job seen for it. */
  readonly newest: ReadonlyMap<string, string>;
  readonly next: number;
}

export const emptyJobTable: JobTable = { jobs: new Map(), byKey: new Map(), newest: new Map(), next: 0 };

export type PostDecision =
  /** Run the job now (a new job, or a failed job POSTed again); stop the `superseded` ones. */
  | { kind: 'start'; job: Job; superseded: Job[] }
  | { kind: 'running'; job: Job }
  | { kind: 'done'; job: Job }
  /** Older than a job already seen for the resource: 409. */
  | { kind: 'older'; newest: Job }
  /** A step this participant does not run as a job: 404. */
  | { kind: 'notImplemented'; step: string };

type Step<D> = { table: JobTable; decision: D };

const withJob = (t: JobTable, job: Job): JobTable => ({ ...t, jobs: new Map(t.jobs).set(job.id, job) });

/** A job's POST: what to answer, and the table after it. */
export function postJob(
  t: JobTable,
  request: JobRequest,
  steps: readonly string[] = COPY_STEPS,
): Step<PostDecision> {
  if (!steps.includes(request.step))
    return { table: t, decision: { kind: 'notImplemented', step: request.step } };
  const newestId = t.newest.get(request.resourceId);
  const newest = newestId === undefined ? undefined : t.jobs.get(newestId);
  const knownId = t.byKey.get(jobKey(request));
  const known = knownId === undefined ? undefined : t.jobs.get(knownId);
  if (known) return postKnown(t, known, newest as Job);
  if (newest && !isLaterJob(request, newest.request))
    return { table: t, decision: { kind: 'older', newest } };
  const job: Job = { id: `j-${t.next + 1}`, request, state: 'running', run: 1 };
  let table: JobTable = {
    jobs: new Map(t.jobs).set(job.id, job),
    byKey: new Map(t.byKey).set(jobKey(request), job.id),
    newest: new Map(t.newest).set(request.resourceId, job.id),
    next: t.next + 1,
  };
  const superseded: Job[] = [];
  if (newest?.state === 'running') {
    const stopped: Job = { ...newest, state: 'superseded', supersededBy: job.id };
    table = withJob(table, stopped);
    superseded.push(stopped);
  }
  return { table, decision: { kind: 'start', job, superseded } };
}

/** A POST of a job seen before: answered for, or (failed) started again; only the newest is answered for. */
function postKnown(t: JobTable, known: Job, newest: Job): Step<PostDecision> {
  if (newest.id !== known.id) return { table: t, decision: { kind: 'older', newest } };
  if (known.state === 'done') return { table: t, decision: { kind: 'done', job: known } };
  if (known.state === 'running') return { table: t, decision: { kind: 'running', job: known } };
  const { error: _dropped, ...rest } = known;
  const again: Job = { ...rest, state: 'running', run: known.run + 1 };
  return { table: withJob(t, again), decision: { kind: 'start', job: again, superseded: [] } };
}

/** Whether this run of the job may still apply its copy (it is neither superseded, stopped nor rerun). */
export function mayApply(t: JobTable, id: string, run: number): boolean {
  const job = t.jobs.get(id);
  return job?.state === 'running' && job.run === run;
}

/** A run ended: the job is done or failed, unless the run no longer counts (then nothing changes). */
export function finishRun(
  t: JobTable,
  id: string,
  run: number,
  outcome: { ok: true } | { ok: false; error: string },
): JobTable {
  const job = t.jobs.get(id);
  if (!job || !mayApply(t, id, run)) return t;
  return withJob(
    t,
    outcome.ok ? { ...job, state: 'done' } : { ...job, state: 'failed', error: outcome.error },
  );
}

/** Whether any job of this migration for this resource was seen (an end notice of another is a no-op). */
export function knowsMigration(t: JobTable, migrationId: string, resourceId: string): boolean {
  for (const job of t.jobs.values())
    if (job.request.migrationId === migrationId && job.request.resourceId === resourceId) return true;
  return false;
}

/**
 * A migration attempt that ended (a failed or cancelled notice): its running jobs, and those of its
 * earlier attempts, stop and fail, never to land. A later attempt's (a retry's) run on.
 */
export function abandonMigration(
  t: JobTable,
  migrationId: string,
  resourceId: string,
  migrationAttempt: number,
): Step<Job[]> {
  let table = t;
  const stopped: Job[] = [];
  for (const job of t.jobs.values()) {
    const r = job.request;
    if (r.migrationId !== migrationId || r.resourceId !== resourceId || job.state !== 'running') continue;
    if (r.migrationAttempt > migrationAttempt) continue;
    const failed: Job = { ...job, state: 'failed', error: 'the migration ended' };
    table = withJob(table, failed);
    stopped.push(failed);
  }
  return { table, decision: stopped };
}

/** A job as a 409 names it. */
export function describeJob(job: Job) {
  const { migrationId, migrationAttempt, step, stepAttempt, sequence } = job.request;
  return { migrationId, migrationAttempt, step, stepAttempt, sequence };
}
