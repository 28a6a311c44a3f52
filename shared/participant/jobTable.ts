import { type JobRequest, COPY_STEPS, isLaterJob } from '../core/participantWire';

/**
 * The participant contract's job rules (routelock design §6.5), per resource: pure, each transition takes
 * one resource's record and returns its next record (the shell, `JobBook`, keeps the records by resource
 * and the job-id index; the handler, `createParticipantHandler`, does the I/O: runs the copies, aborts
 * them, answers HTTP). A transition never reads another resource's record, so a POST costs the same with
 * ten resources as with ten million.
 *
 * - A job is (migrationId, migrationAttempt, step, stepAttempt). A repeated POST of a job answers for it
 *   and never starts a second copy; a re-POST of a job that failed starts it again (its next run).
 * - Per resource, the job with the latest (lockAcquiredAt, sequence) is the newest: a newer job supersedes
 *   a running older one (its copy must never be applied), and a POST of a job older than the newest seen
 *   is refused (409). That refusal needs only the newest job's order key, so the record keeps the newest
 *   and, for their polls, the few jobs it outranked, each for `retainOlderMs` and at most MAX_OLDER_JOBS:
 *   a record's size is constant, whatever the resource's history.
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
  /** When its run ended (done or failed), on the shell's clock: the forget retention counts from it. */
  readonly endedAt?: number;
  /** When a newer job outranked it: its retention for polls counts from it. */
  readonly outrankedAt?: number;
}

/** One resource's jobs: all the contract needs of its history. */
export interface ResourceJobs {
  /** The newest job seen: its order key refuses every older POST (409); the only one that can run. */
  readonly newest: Job;
  /** Jobs the newest outranked, the latest first, kept so their polls are answered (409, or 200 if done). */
  readonly older: readonly Job[];
  /** The last few migrations seen for the resource, the latest first: a late end notice of one is known. */
  readonly migrations: readonly string[];
}

/** The most outranked jobs a record keeps: a migration's bulk copy and delta attempts, with room. */
export const MAX_OLDER_JOBS = 8;
/** The most migrations a record remembers for end notices (a notice comes right after its migration). */
export const MAX_MIGRATIONS = 4;

export type PostDecision =
  /** Run the job now (a new job, or a failed job POSTed again); stop the `superseded` ones. */
  | { kind: 'start'; job: Job; superseded: Job[] }
  | { kind: 'running'; job: Job }
  | { kind: 'done'; job: Job }
  /** Older than a job already seen for the resource: 409. */
  | { kind: 'older'; newest: Job }
  /** A step this participant does not run as a job: 404. */
  | { kind: 'notImplemented'; step: string };

/** What a POST's transition needs from the shell: the id a new job gets, the time, the retention. */
export interface PostContext {
  readonly newId: string;
  readonly now: number;
  /** How long an outranked job is kept for its polls (ms). */
  readonly retainOlderMs: number;
  readonly steps?: readonly string[];
}

/** A record's next state (the same object when nothing changed), and what the shell must do. */
export type JobStep<D> = { record: ResourceJobs | undefined; decision: D };

/** The same job: (migrationId, migrationAttempt, step, stepAttempt), the wire's `jobKey`. */
const sameJob = (a: JobRequest, b: JobRequest): boolean =>
  a.migrationId === b.migrationId &&
  a.migrationAttempt === b.migrationAttempt &&
  a.step === b.step &&
  a.stepAttempt === b.stepAttempt;

/** Every job a record holds, the newest first. */
export const jobsOf = (r: ResourceJobs | undefined): readonly Job[] => (r ? [r.newest, ...r.older] : []);

/** A record with one job replaced (by id). */
function withJob(r: ResourceJobs, job: Job): ResourceJobs {
  if (r.newest.id === job.id) return { ...r, newest: job };
  return { ...r, older: r.older.map((j) => (j.id === job.id ? job : j)) };
}

/** Outranked jobs still within their retention, at most MAX_OLDER_JOBS. */
const retained = (older: readonly Job[], now: number, retainOlderMs: number): Job[] =>
  older.filter((j) => now - (j.outrankedAt ?? now) < retainOlderMs).slice(0, MAX_OLDER_JOBS);

/** A job's POST: what to answer, and the resource's record after it. */
export function postJob(
  r: ResourceJobs | undefined,
  request: JobRequest,
  at: PostContext,
): JobStep<PostDecision> {
  if (!(at.steps ?? COPY_STEPS).includes(request.step))
    return { record: r, decision: { kind: 'notImplemented', step: request.step } };
  const known = jobsOf(r).find((j) => sameJob(j.request, request));
  if (r && known) return postKnown(r, known);
  if (r && !isLaterJob(request, r.newest.request))
    return { record: r, decision: { kind: 'older', newest: r.newest } };
  const job: Job = { id: at.newId, request, state: 'running', run: 1 };
  if (!r) return { record: fresh(job), decision: { kind: 'start', job, superseded: [] } };
  const before = r.newest;
  const outranked: Job =
    before.state === 'running'
      ? { ...before, state: 'superseded', supersededBy: job.id, outrankedAt: at.now }
      : { ...before, outrankedAt: at.now };
  const record: ResourceJobs = {
    newest: job,
    older: retained([outranked, ...r.older], at.now, at.retainOlderMs),
    migrations: remember(r.migrations, request.migrationId),
  };
  const superseded = before.state === 'running' ? [outranked] : [];
  return { record, decision: { kind: 'start', job, superseded } };
}

const fresh = (job: Job): ResourceJobs => ({
  newest: job,
  older: [],
  migrations: [job.request.migrationId],
});

const remember = (migrations: readonly string[], id: string): readonly string[] =>
  migrations[0] === id ? migrations : [id, ...migrations.filter((m) => m !== id)].slice(0, MAX_MIGRATIONS);

/** A POST of a job seen before: answered for, or (failed) started again; only the newest is answered for. */
function postKnown(r: ResourceJobs, known: Job): JobStep<PostDecision> {
  if (r.newest.id !== known.id) return { record: r, decision: { kind: 'older', newest: r.newest } };
  if (known.state === 'done') return { record: r, decision: { kind: 'done', job: known } };
  if (known.state === 'running') return { record: r, decision: { kind: 'running', job: known } };
  const { error: _dropped, endedAt: _ended, ...rest } = known;
  const again: Job = { ...rest, state: 'running', run: known.run + 1 };
  return { record: withJob(r, again), decision: { kind: 'start', job: again, superseded: [] } };
}

/** A job by id in its resource's record. */
export const findJob = (r: ResourceJobs | undefined, id: string): Job | undefined =>
  jobsOf(r).find((j) => j.id === id);

/** Whether this run of the job may still apply its copy (it is neither superseded, stopped nor rerun). */
export function mayApply(r: ResourceJobs | undefined, id: string, run: number): boolean {
  const job = findJob(r, id);
  return job?.state === 'running' && job.run === run;
}

/** A run ended: the job is done or failed, unless the run no longer counts (then nothing changes). */
export function finishRun(
  r: ResourceJobs | undefined,
  id: string,
  run: number,
  outcome: { ok: true } | { ok: false; error: string },
  now: number,
): ResourceJobs | undefined {
  const job = findJob(r, id);
  if (!r || !job || !mayApply(r, id, run)) return r;
  const ended: Job = outcome.ok
    ? { ...job, state: 'done', endedAt: now }
    : { ...job, state: 'failed', error: outcome.error, endedAt: now };
  return withJob(r, ended);
}

/** Whether any job of this migration was seen for the resource (an end notice of another is a no-op). */
export function knowsMigration(r: ResourceJobs | undefined, migrationId: string): boolean {
  return r !== undefined && r.migrations.includes(migrationId);
}

/**
 * A migration attempt that ended (a failed or cancelled notice): its running jobs, and those of its
 * earlier attempts, stop and fail, never to land. A later attempt's (a retry's) run on.
 */
export function abandonMigration(
  r: ResourceJobs | undefined,
  migrationId: string,
  migrationAttempt: number,
  now: number,
): JobStep<Job[]> {
  let record = r;
  const stopped: Job[] = [];
  // the oldest first, as they were started
  for (const job of [...jobsOf(r)].reverse()) {
    const q = job.request;
    if (q.migrationId !== migrationId || job.state !== 'running') continue;
    if (q.migrationAttempt > migrationAttempt) continue;
    const failed: Job = { ...job, state: 'failed', error: 'the migration ended', endedAt: now };
    record = withJob(record as ResourceJobs, failed);
    stopped.push(failed);
  }
  return { record, decision: stopped };
}

/**
 * When the resource's newest job ended (undefined while it runs): the shell forgets the whole record a
 * retention after it, since nothing can run and every older POST is as old as a process restart leaves.
 */
export const endedAt = (r: ResourceJobs): number | undefined =>
  r.newest.state === 'running' ? undefined : r.newest.endedAt;

/** A job as a 409 names it. */
export function describeJob(job: Job) {
  const { migrationId, migrationAttempt, step, stepAttempt, sequence } = job.request;
  return { migrationId, migrationAttempt, step, stepAttempt, sequence };
}
