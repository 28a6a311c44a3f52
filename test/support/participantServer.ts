import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A fake migration participant (docs/design.md §6.5): `POST /migrate {migrationId, resourceId, from, to,
 * step, migrationAttempt, stepAttempt, attempt, sequence, lockAcquiredAt}`. A job is (migrationId,
 * migrationAttempt, step, stepAttempt); a repeated POST answers for the same job; a POST of a job older
 * (lockAcquiredAt, sequence) than one seen for the resource answers 409. It holds data per location and
 * resource: a job that finishes copies the resource's items from `from` to `to`, so a test can see
 * whether the target got the source's data.
 *
 * Behaviour per step is programmable: every status of the contract, 202 with a relative, absolute or no
 * Location, polls, Retry-After, a job gone at its first poll, an answer that hangs past the timeout.
 */
export type StepBehaviour =
  /** 200 {done:true} at once (the job copies). */
  | { kind: 'ok' }
  /**
   * Answer `status` with `body` (default `{"error":"no"}`) and Retry-After; for the first `times`
   * requests only (then as `ok`), or always. Answering 200 this way copies nothing (`{done:false}`).
   */
  | { kind: 'status'; status: number; body?: string; retryAfter?: number; times?: number }
  /**
   * 202 (+ Location: relative by default, absolute, or none) and Retry-After; each poll answers 202
   * until `polls` polls were made, then 200 and the job copies. `goneAtFirstPoll`: the first poll of a
   * job answers 404 and forgets it (the job must be POSTed again).
   */
  | {
      kind: 'poll';
      polls: number;
      location?: 'relative' | 'absolute' | 'none';
      retryAfter?: number;
      goneAtFirstPoll?: boolean;
    }
  | { kind: 'slow'; ms: number; onlyFirstJob?: boolean }
  | { kind: 'hold' }
  /** Answer nothing for `ms` (past the caller's timeout), then 200; for the first `times` requests only. */
  | { kind: 'hang'; ms: number; times?: number };

export interface ParticipantRequestSeen {
  method: string;
  path: string;
  step?: string;
  migrationId?: string;
  authorization?: string;
  /** The POST's body, as sent. */
  body?: Record<string, unknown>;
  /** What it answered. */
  status?: number;
}

export interface ParticipantServer {
  url: string;
  /** Every request, with its Authorization header when it carried one. */
  requests: ParticipantRequestSeen[];
  /**
   * `verify` answers 404 (not implemented) until given a behaviour; then it compares honestly. The end
   * notices (`completed`, `failed`, `cancelled`) answer 200 and never copy.
   */
  behave(step: 'bulkCopy' | 'deltaCopy' | 'verify' | EndStep, behaviour: StepBehaviour): void;
  release(): void;
  /** The participant's data for a resource at a location (region/account). */
  seed(at: object, resourceId: string, items: string[]): void;
  dataAt(at: object, resourceId: string): string[];
  close(): Promise<void>;
}

export interface ParticipantOptions {
  /** Answer 401 to any request (POST or poll) whose Authorization is not exactly `Bearer <this>`. */
  requireBearer?: string;
  /**
   * A planted bug: the delta copy of these step attempts leaves out the
   * source's last item.
   */
  deltaDropsLastItem?: (stepAttempt: number) => boolean;
}

interface Job {
  id: number;
  step: string;
  polls: number;
  readyAt: number;
  gone: boolean;
  resourceId: string;
  from: object;
  to: object;
  stepAttempt: number;
}

interface JobBody {
  migrationId?: string;
  resourceId?: string;
  from?: object;
  to?: object;
  step?: string;
  attempt?: number;
  migrationAttempt?: number;
  stepAttempt?: number;
  sequence?: number;
  lockAcquiredAt?: string;
}

type EndStep = 'completed' | 'failed' | 'cancelled';
const endSteps: ReadonlySet<string> = new Set<EndStep>(['completed', 'failed', 'cancelled']);

export async function startParticipant(options: ParticipantOptions = {}): Promise<ParticipantServer> {
  const behaviours: Record<string, StepBehaviour> = {
    bulkCopy: { kind: 'ok' },
    deltaCopy: { kind: 'ok' },
    verify: { kind: 'status', status: 404, body: '{"error":"verify is not implemented"}' },
    completed: { kind: 'ok' },
    failed: { kind: 'ok' },
    cancelled: { kind: 'ok' },
  };
  const answered: Record<string, number> = { bulkCopy: 0, deltaCopy: 0, verify: 0 };
  const jobs = new Map<string, Job>();
  const byId = new Map<number, Job>();
  const newest = new Map<string, { acquiredAt: string; sequence: number }>();
  const data = new Map<string, string[]>();
  // canonical: the same location whatever order its fields were written in
  const dataKey = (at: object, resourceId: string) =>
    `${JSON.stringify(Object.entries(at).sort(([a], [b]) => a.localeCompare(b)))}|${resourceId}`;
  const copy = (job: { resourceId: string; from: object; to: object; step: string; stepAttempt: number }) => {
    if (endSteps.has(job.step)) return; // a notice copies nothing
    let items = data.get(dataKey(job.from, job.resourceId)) ?? [];
    if (job.step === 'deltaCopy' && options.deltaDropsLastItem?.(job.stepAttempt)) items = items.slice(0, -1);
    const target = data.get(dataKey(job.to, job.resourceId)) ?? [];
    data.set(dataKey(job.to, job.resourceId), [...new Set([...target, ...items])]);
  };
  /** verify, honestly: the same items at the source and the target (counts and a digest of each). */
  const verifyAnswer = (job: { resourceId: string; from: object; to: object }) => {
    const source = [...new Set(data.get(dataKey(job.from, job.resourceId)) ?? [])].sort();
    const target = [...new Set(data.get(dataKey(job.to, job.resourceId)) ?? [])].sort();
    const missing = source.filter((i) => !target.includes(i));
    return JSON.stringify({
      match: missing.length === 0 && source.length === target.length,
      sourceCount: source.length,
      targetCount: target.length,
      digest: source.join(','),
      ...(missing.length > 0 ? { detail: `missing at the target: ${missing.join(', ')}` } : {}),
    });
  };
  const requests: ParticipantServer['requests'] = [];
  let held = true;
  let slowJobs = 0;
  let nextId = 1;
  let port = 0;
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const path = req.url ?? '/';
      const authorization = req.headers.authorization;
      const seen: ParticipantRequestSeen = {
        method: req.method ?? 'POST',
        path,
        ...(authorization === undefined ? {} : { authorization }),
      };
      requests.push(seen);
      const answer = (status: number, headers: Record<string, string> = {}, body = '') => {
        seen.status = status;
        res.writeHead(status, headers).end(body);
      };
      const done = () => answer(200, { 'content-type': 'application/json' }, '{"done":true}');
      // a job that finishes: a copy copies, verify compares
      const finish = (job: Parameters<typeof copy>[0]) => {
        if (job.step === 'verify')
          return answer(200, { 'content-type': 'application/json' }, verifyAnswer(job));
        copy(job);
        done();
      };
      if (options.requireBearer !== undefined && authorization !== `Bearer ${options.requireBearer}`)
        return void answer(401, { 'WWW-Authenticate': 'Bearer' });
      if (req.method === 'GET' && path.startsWith('/jobs/')) {
        const job = byId.get(Number(path.slice('/jobs/'.length)));
        if (!job || job.gone) return void answer(404);
        const behaviour = behaviours[job.step] as StepBehaviour;
        if (behaviour.kind === 'poll' && behaviour.goneAtFirstPoll && !goneOnce.has(job.step)) {
          goneOnce.add(job.step);
          job.gone = true;
          for (const [key, j] of jobs) if (j === job) jobs.delete(key);
          return void answer(404);
        }
        const finished = behaviour.kind === 'hold' ? !held : job.polls <= 0 && Date.now() >= job.readyAt;
        job.polls -= 1;
        if (finished) return void finish(job);
        const retryAfter = behaviour.kind === 'poll' ? (behaviour.retryAfter ?? 1) : 1;
        // the Location again: version 1's pollers (callHttp's, the old in-process one) stop without it
        return void answer(202, { Location: path, 'Retry-After': String(retryAfter) });
      }
      const body = JSON.parse(raw || '{}') as JobBody;
      seen.body = body as Record<string, unknown>;
      if (body.step) seen.step = body.step;
      if (body.migrationId) seen.migrationId = body.migrationId;
      const step = body.step ?? 'bulkCopy';
      const behaviour = behaviours[step] as StepBehaviour;
      const resourceId = body.resourceId ?? '';
      const stepAttempt = body.stepAttempt ?? body.attempt ?? 1;
      const job = { resourceId, from: body.from ?? {}, to: body.to ?? {}, step, stepAttempt };
      // Ordering (v2 bodies): a job older than one seen for the resource is refused.
      if (body.lockAcquiredAt !== undefined && body.sequence !== undefined) {
        const latest = newest.get(resourceId);
        const order = (a: { acquiredAt: string; sequence: number }) => [Date.parse(a.acquiredAt), a.sequence];
        const mine = { acquiredAt: body.lockAcquiredAt, sequence: body.sequence };
        if (latest) {
          const [la, ls] = order(latest) as [number, number];
          const [ma, ms] = order(mine) as [number, number];
          if (ma < la || (ma === la && ms < ls))
            return void answer(409, { 'content-type': 'application/json' }, '{"error":"superseded"}');
        }
        newest.set(resourceId, mine);
      }
      const count = (answered[step] = (answered[step] ?? 0) + 1);
      if (behaviour.kind === 'status' && (behaviour.times === undefined || count <= behaviour.times)) {
        return void answer(
          behaviour.status,
          behaviour.retryAfter === undefined ? {} : { 'Retry-After': String(behaviour.retryAfter) },
          behaviour.body ?? '{"error":"no"}',
        );
      }
      if (behaviour.kind === 'hang' && (behaviour.times === undefined || count <= behaviour.times)) {
        return void setTimeout(() => {
          if (!res.writableEnded && !res.destroyed) finish(job);
        }, behaviour.ms);
      }
      if (behaviour.kind === 'ok' || behaviour.kind === 'status' || behaviour.kind === 'hang')
        return void finish(job);
      const key = `${body.migrationId}|${body.migrationAttempt ?? 1}|${step}|${body.stepAttempt ?? body.attempt ?? 1}`;
      let existing = jobs.get(key);
      if (!existing) {
        const slow = behaviour.kind === 'slow' && (!behaviour.onlyFirstJob || slowJobs++ === 0);
        existing = {
          id: nextId++,
          polls: behaviour.kind === 'poll' ? behaviour.polls : 0,
          readyAt: slow && behaviour.kind === 'slow' ? Date.now() + behaviour.ms : 0,
          gone: false,
          ...job,
        };
        jobs.set(key, existing);
        byId.set(existing.id, existing);
      }
      const where = behaviour.kind === 'poll' ? (behaviour.location ?? 'relative') : 'relative';
      const retryAfter = behaviour.kind === 'poll' ? (behaviour.retryAfter ?? 1) : 1;
      const location: Record<string, string> =
        where === 'none'
          ? {}
          : {
              Location:
                where === 'absolute'
                  ? `http://127.0.0.1:${port}/jobs/${existing.id}`
                  : `/jobs/${existing.id}`,
            };
      answer(202, { ...location, 'Retry-After': String(retryAfter) });
    });
  });
  // steps whose first job was lost (goneAtFirstPoll: once per behaviour)
  const goneOnce = new Set<string>();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/migrate`,
    requests,
    behave(step, behaviour) {
      behaviours[step] = behaviour;
      answered[step] = 0;
      goneOnce.delete(step);
      // a new behaviour for a step starts new jobs
      for (const [key, job] of [...jobs]) if (job.step === step) jobs.delete(key);
    },
    release() {
      held = false;
    },
    seed(at, resourceId, items) {
      data.set(dataKey(at, resourceId), [...items]);
    },
    dataAt: (at, resourceId) => [...(data.get(dataKey(at, resourceId)) ?? [])],
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
