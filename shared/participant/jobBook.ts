import type { JobRequest } from '../core/participantWire';
import {
  type Job,
  type PostDecision,
  type ResourceJobs,
  abandonMigration,
  endedAt,
  findJob,
  finishRun,
  jobsOf,
  knowsMigration,
  mayApply,
  postJob,
} from './jobTable';

/**
 * The job table's shell: one record per resource (`ResourceJobs`, whose transitions are the pure rules of
 * ./jobTable) and the index from job id to resource, so a poll finds its job in O(1). Each request reads
 * one record, runs its transition and applies the result: one `set` or `delete` of the record, and of the
 * index only the ids that entered or left it (a record holds at most 1 + MAX_OLDER_JOBS jobs).
 *
 * Memory is bounded by the resources, not the jobs: a record's outranked jobs go after their retention,
 * and a resource whose newest job ended longer than `forgetEndedAfterMs` ago is forgotten whole. Each
 * resource has one entry in a queue of "look again after": forgetting reads only the queue's front, a few
 * entries per call, never a scan of the table. An entry that comes due for a resource still running, or
 * that ended since, goes to the back with the later time (a queue, not a Map moved on each request: a
 * Map's delete-and-append leaves holes its iteration from the front would walk).
 */

export interface JobBookOptions {
  /** How long a job a newer one outranked is kept for its polls (ms). */
  retainOlderMs: number;
  /** Forget a resource this long after its newest job ended (ms); Infinity keeps every resource. */
  forgetEndedAfterMs: number;
  clock: () => number;
  /** The steps run as jobs (default: the copies). */
  steps?: readonly string[];
}

/**
 * Queue entries read per POST at most: an entry comes due once per retention per resource, so a few per
 * POST keep up with any participant POSTed more often than its resources / 8 per retention; a slower one
 * forgets later, never wrongly.
 */
const DUE_PER_CALL = 8;

export class JobBook {
  private readonly records = new Map<string, ResourceJobs>();
  /** job id → its resource. */
  private readonly resourceOf = new Map<string, string>();
  /** One entry per resource: look at it again once `at` is a retention ago; read from `head`. */
  private due: { resourceId: string; at: number }[] = [];
  private head = 0;
  private minted = 0;

  constructor(private readonly options: JobBookOptions) {}

  /** How many resources and jobs it holds. */
  get size(): { resources: number; jobs: number } {
    return { resources: this.records.size, jobs: this.resourceOf.size };
  }

  /** A resource's record (for tests and dashboards). */
  record(resourceId: string): ResourceJobs | undefined {
    return this.records.get(resourceId);
  }

  job(id: string): Job | undefined {
    const resourceId = this.resourceOf.get(id);
    return resourceId === undefined ? undefined : findJob(this.records.get(resourceId), id);
  }

  post(request: JobRequest): PostDecision {
    const now = this.options.clock();
    this.forgetEnded(now);
    const before = this.records.get(request.resourceId);
    const newId = `j-${this.minted + 1}`;
    const { record, decision } = postJob(before, request, {
      newId,
      now,
      retainOlderMs: this.options.retainOlderMs,
      steps: this.options.steps,
    });
    if (decision.kind === 'start' && decision.job.id === newId) this.minted += 1;
    this.apply(request.resourceId, before, record);
    return decision;
  }

  mayApply(id: string, run: number): boolean {
    const resourceId = this.resourceOf.get(id);
    return resourceId !== undefined && mayApply(this.records.get(resourceId), id, run);
  }

  /** A run ended (a run that no longer counts changes nothing). */
  finish(id: string, run: number, outcome: { ok: true } | { ok: false; error: string }): void {
    const resourceId = this.resourceOf.get(id);
    if (resourceId === undefined) return;
    const before = this.records.get(resourceId);
    this.apply(resourceId, before, finishRun(before, id, run, outcome, this.options.clock()));
  }

  knowsMigration(migrationId: string, resourceId: string): boolean {
    return knowsMigration(this.records.get(resourceId), migrationId);
  }

  /** A migration attempt ended: its running jobs (and its earlier attempts') fail; they are returned to stop. */
  abandon(migrationId: string, resourceId: string, migrationAttempt: number): Job[] {
    const before = this.records.get(resourceId);
    const { record, decision } = abandonMigration(
      before,
      migrationId,
      migrationAttempt,
      this.options.clock(),
    );
    this.apply(resourceId, before, record);
    return decision;
  }

  /** Apply a transition's record: the record, the ids that entered or left it, its place in the endings. */
  private apply(resourceId: string, before: ResourceJobs | undefined, after: ResourceJobs | undefined): void {
    if (after === before) return;
    const [was, is] = [jobsOf(before), jobsOf(after)];
    for (const job of was) if (!is.some((j) => j.id === job.id)) this.resourceOf.delete(job.id);
    for (const job of is) if (!was.some((j) => j.id === job.id)) this.resourceOf.set(job.id, resourceId);
    if (after === undefined) {
      this.records.delete(resourceId);
      return;
    }
    this.records.set(resourceId, after);
    if (before === undefined && Number.isFinite(this.options.forgetEndedAfterMs))
      this.due.push({ resourceId, at: this.options.clock() });
  }

  /** Forget the resources whose newest job ended a retention ago: a few due entries per call. */
  private forgetEnded(now: number): void {
    const retention = this.options.forgetEndedAfterMs;
    for (let read = 0; read < DUE_PER_CALL && this.head < this.due.length; read += 1) {
      const { resourceId, at } = this.due[this.head] as { resourceId: string; at: number };
      if (now - at < retention) break;
      this.head += 1;
      const record = this.records.get(resourceId);
      if (record === undefined) continue;
      const ended = endedAt(record);
      if (ended !== undefined && now - ended >= retention) this.apply(resourceId, record, undefined);
      else this.due.push({ resourceId, at: ended ?? now });
    }
    // the read part goes once it is half the queue: each entry is moved at most once, O(1) amortised
    if (this.head > 1024 && this.head * 2 > this.due.length) {
      this.due = this.due.slice(this.head);
      this.head = 0;
    }
  }
}
