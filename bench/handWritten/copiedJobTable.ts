import { type JobRequest, isLaterJob, jobKey } from '../../shared/core/participantWire';

/**
 * The participant SDK's first job table, kept as the participant-jobs bench's baseline: one table of every
 * job ever seen, each transition returning a new table with its three Maps copied (`new Map(t.jobs)`), so
 * a POST costs O(every job the process has seen) and the table never shrinks. Only what the bench drives:
 * a new job's POST (superseding a running one) and a run's ending.
 */

type State = 'running' | 'done' | 'failed' | 'superseded';

interface Job {
  readonly id: string;
  readonly request: JobRequest;
  readonly state: State;
  readonly run: number;
  readonly supersededBy?: string;
}

export interface CopiedJobTable {
  readonly jobs: ReadonlyMap<string, Job>;
  readonly byKey: ReadonlyMap<string, string>;
  readonly newest: ReadonlyMap<string, string>;
  readonly next: number;
}

/** A table of `resources` resources built in one go (building it POST by POST would take O(n²)). */
export function copiedTableOf(requests: readonly JobRequest[]): CopiedJobTable {
  const jobs = new Map<string, Job>();
  const byKey = new Map<string, string>();
  const newest = new Map<string, string>();
  requests.forEach((request, i) => {
    const id = `j-${i + 1}`;
    jobs.set(id, { id, request, state: 'running', run: 1 });
    byKey.set(jobKey(request), id);
    newest.set(request.resourceId, id);
  });
  return { jobs, byKey, newest, next: requests.length };
}

/** A POST: the new job's id, or undefined when it is not newer (the table's `postJob`, as it was). */
export function copiedPost(t: CopiedJobTable, request: JobRequest): { table: CopiedJobTable; id?: string } {
  const newestId = t.newest.get(request.resourceId);
  const newest = newestId === undefined ? undefined : t.jobs.get(newestId);
  if (t.byKey.has(jobKey(request))) return { table: t };
  if (newest && !isLaterJob(request, newest.request)) return { table: t };
  const job: Job = { id: `j-${t.next + 1}`, request, state: 'running', run: 1 };
  let table: CopiedJobTable = {
    jobs: new Map(t.jobs).set(job.id, job),
    byKey: new Map(t.byKey).set(jobKey(request), job.id),
    newest: new Map(t.newest).set(request.resourceId, job.id),
    next: t.next + 1,
  };
  if (newest?.state === 'running')
    table = {
      ...table,
      jobs: new Map(table.jobs).set(newest.id, { ...newest, state: 'superseded', supersededBy: job.id }),
    };
  return { table, id: job.id };
}

/** A run ended: done (the table's `finishRun`, as it was). */
export function copiedFinish(t: CopiedJobTable, id: string): CopiedJobTable {
  const job = t.jobs.get(id);
  if (job?.state !== 'running') return t;
  return { ...t, jobs: new Map(t.jobs).set(id, { ...job, state: 'done' }) };
}
