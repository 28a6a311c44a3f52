import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A fake migration participant (docs/design.md §6): `POST /migrate {migrationId, resourceId, from, to, step}`.
 * Each (migration, step) is one job; a repeated POST answers for the same job, as the contract asks.
 * Behaviour per step is programmable: answer at once, poll (202 + Location) until the job is done,
 * fail, or hold until the test releases it.
 */
export type StepBehaviour =
  | { kind: 'ok' }
  | { kind: 'status'; status: number }
  | { kind: 'poll'; polls: number }
  | { kind: 'slow'; ms: number; onlyFirstJob?: boolean }
  | { kind: 'hold' };

export interface ParticipantServer {
  url: string;
  /** Every request, with its Authorization header when it carried one. */
  requests: { method: string; path: string; step?: string; migrationId?: string; authorization?: string }[];
  behave(step: 'bulkCopy' | 'deltaCopy', behaviour: StepBehaviour): void;
  release(): void;
  close(): Promise<void>;
}

export interface ParticipantOptions {
  /** Answer 401 to any request (POST or poll) whose Authorization is not exactly `Bearer <this>`. */
  requireBearer?: string;
}

export async function startParticipant(options: ParticipantOptions = {}): Promise<ParticipantServer> {
  const behaviours: Record<string, StepBehaviour> = { bulkCopy: { kind: 'ok' }, deltaCopy: { kind: 'ok' } };
  const jobs = new Map<string, { polls: number; readyAt: number }>();
  const requests: ParticipantServer['requests'] = [];
  let held = true;
  let slowJobs = 0;
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const path = req.url ?? '/';
      const authorization = req.headers.authorization;
      const seen = authorization === undefined ? {} : { authorization };
      if (options.requireBearer !== undefined && authorization !== `Bearer ${options.requireBearer}`) {
        requests.push({ method: req.method ?? 'POST', path, ...seen });
        return void res.writeHead(401, { 'WWW-Authenticate': 'Bearer' }).end();
      }
      if (req.method === 'GET' && path.startsWith('/jobs/')) {
        const key = decodeURIComponent(path.slice('/jobs/'.length));
        requests.push({ method: 'GET', path, ...seen });
        const job = jobs.get(key);
        if (!job) return void res.writeHead(404).end();
        const step = key.split('|')[1] as string;
        const behaviour = behaviours[step] as StepBehaviour;
        const done = behaviour.kind === 'hold' ? !held : job.polls <= 0 && Date.now() >= job.readyAt;
        job.polls -= 1;
        if (done) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"done":true}');
        return void res.writeHead(202, { Location: path, 'Retry-After': '1' }).end();
      }
      const request = JSON.parse(body || '{}') as { step?: string; migrationId?: string; attempt?: number };
      requests.push({
        method: req.method ?? 'POST',
        path,
        ...(request.step ? { step: request.step } : {}),
        ...(request.migrationId ? { migrationId: request.migrationId } : {}),
        ...seen,
      });
      const step = request.step ?? 'bulkCopy';
      const behaviour = behaviours[step] as StepBehaviour;
      const key = `${request.migrationId}|${step}|${request.attempt ?? 1}`;
      if (behaviour.kind === 'status') return void res.writeHead(behaviour.status).end('{"error":"no"}');
      if (behaviour.kind === 'ok') return void res.writeHead(200).end('{"done":true}');
      if (!jobs.has(key)) {
        const slow = behaviour.kind === 'slow' && (!behaviour.onlyFirstJob || slowJobs++ === 0);
        jobs.set(key, {
          polls: behaviour.kind === 'poll' ? behaviour.polls : 0,
          readyAt: slow && behaviour.kind === 'slow' ? Date.now() + behaviour.ms : 0,
        });
      }
      res.writeHead(202, { Location: `/jobs/${encodeURIComponent(key)}`, 'Retry-After': '1' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/migrate`,
    requests,
    behave(step, behaviour) {
      behaviours[step] = behaviour;
      // a new behaviour for a step starts new jobs
      for (const key of [...jobs.keys()]) if (key.split('|')[1] === step) jobs.delete(key);
    },
    release() {
      held = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
