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
 * and a resource whose newest job ended longer than `forgetEndedAfterMs` ago is forgotten whole. The
 * resources that ended are kept in the order they ended (a Map's insertion order), so forgetting reads
 * only the front of that order, a few per call: never a scan of the table.
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

/** Forgotten per call at most: amortised, each ending is forgotten once, and each call makes at most one. */
const FORGET_PER_CALL = 4;

export class JobBook {
  private readonly records = new Map<string, ResourceJobs>();
  /** job id → its resource. */
  private readonly resourceOf = new Map<string, string>();
  /** resource → when its newest job ended, in the order they ended. */
  private readonly ended = new Map<string, number>();
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
    this.ended.delete(resourceId);
    if (after === undefined) {
      this.records.delete(resourceId);
      return;
    }
    this.records.set(resourceId, after);
    const at = endedAt(after);
    if (at !== undefined) this.ended.set(resourceId, at);
  }

  /** Forget the resources whose newest job ended a retention ago: a few, from the front of the endings. */
  private forgetEnded(now: number): void {
    if (!Number.isFinite(this.options.forgetEndedAfterMs)) return;
    let forgotten = 0;
    for (const [resourceId, at] of this.ended) {
      if (forgotten === FORGET_PER_CALL || now - at < this.options.forgetEndedAfterMs) return;
      this.apply(resourceId, this.records.get(resourceId), undefined);
      forgotten += 1;
    }
  }
}
