import type { JobRequest } from '../../shared/core/participantWire';
import { type ParticipantHttpRequest, JobBook, createParticipantHandler } from '../../shared/participant';
import { MAX_OLDER_JOBS } from '../../shared/participant/jobTable';

/**
 * The job table's shell (shared/participant/jobBook.ts): a POST touches only its resource's record, so
 * its work is the same whatever the table holds, and memory follows the resources, not the jobs. Work
 * is counted (Map operations and Map iterator steps during one POST), never timed: `npm run bench --
 * --only participant-jobs` gives the speed.
 */

const LOCK = Date.parse('2026-12-01T10:00:00Z');
const HOUR = 3600_000;
const request = (resourceId: string, over: Partial<JobRequest> = {}): JobRequest => ({
  migrationId: 'm-1',
  resourceId,
  from: { region: 'westeurope' },
  to: { region: 'eastus' },
  step: 'bulkCopy',
  migrationAttempt: 1,
  stepAttempt: 1,
  sequence: 1,
  lockAcquiredAt: LOCK,
  ...over,
});
const delta = (resourceId: string, n: number) =>
  request(resourceId, { step: 'deltaCopy', stepAttempt: n, sequence: 2 * n });

function book(now = { t: LOCK }) {
  return new JobBook({ retainOlderMs: HOUR, forgetEndedAfterMs: 24 * HOUR, clock: () => now.t });
}

/** A book holding `resources` resources, each with a finished bulk copy and a running delta. */
function filled(resources: number, now = { t: LOCK }): JobBook {
  const b = book(now);
  for (let i = 0; i < resources; i += 1) {
    const d = b.post(request(`r-${i}`));
    if (d.kind === 'start') b.finish(d.job.id, d.job.run, { ok: true });
    b.post(delta(`r-${i}`, 1));
  }
  return b;
}

/** Map operations and Map iterator steps made while `run` runs. */
function countMapWork(run: () => void): number {
  const iteratorProto = Object.getPrototypeOf(new Map()[Symbol.iterator]()) as { next: () => unknown };
  const spies = [
    jest.spyOn(Map.prototype, 'get'),
    jest.spyOn(Map.prototype, 'set'),
    jest.spyOn(Map.prototype, 'delete'),
    jest.spyOn(Map.prototype, 'has'),
    jest.spyOn(iteratorProto, 'next'),
  ];
  try {
    run();
    return spies.reduce((sum, s) => sum + s.mock.calls.length, 0);
  } finally {
    for (const s of spies) s.mockRestore();
  }
}

test('a POST does the same work with 1,000 resources as with 100,000: it touches one record', () => {
  const work = [1000, 100_000].map((size) => {
    const b = filled(size);
    // each kind of POST: a new resource, a re-POST, a superseding job, an older job (409)
    return [
      countMapWork(() => b.post(request('new'))),
      countMapWork(() => b.post(delta('r-7', 1))),
      countMapWork(() => b.post(delta('r-7', 2))),
      countMapWork(() => b.post(delta('r-7', 1))),
      countMapWork(() => b.job('j-3')),
    ];
  });
  expect(work[1]).toEqual(work[0]);
  for (const n of work[0] as number[]) expect(n).toBeLessThan(40);
});

test('memory follows the resources: a record holds at most 1 + MAX_OLDER_JOBS jobs, the index the same', () => {
  const now = { t: LOCK };
  const b = book(now);
  for (let n = 1; n <= 100; n += 1) b.post(delta('conv-1', n));
  expect(b.size).toEqual({ resources: 1, jobs: 1 + MAX_OLDER_JOBS });
  // a dropped job is gone from the index too: its poll finds nothing, its re-POST is still older (409)
  expect(b.job('j-1')).toBeUndefined();
  expect(b.post(delta('conv-1', 1)).kind).toBe('older');
  // past the retention, the next job's record keeps only the one it outranked
  now.t += HOUR;
  b.post(delta('conv-1', 101));
  expect(b.size).toEqual({ resources: 1, jobs: 2 });
});

test('a resource whose newest job ended a day ago is forgotten, a few per POST, oldest ending first', () => {
  const now = { t: LOCK };
  const b = book(now);
  // r-0 … r-11 copy and end one after the other; r-12, r-13 still run; r-0 runs again (its ending is later)
  const started = [...Array(14).keys()].map((i) => b.post(request(`r-${i}`)));
  started.slice(0, 12).forEach((d) => {
    if (d.kind === 'start') b.finish(d.job.id, d.job.run, { ok: true });
    now.t += 1000;
  });
  b.post(delta('r-0', 1));
  expect(b.size.resources).toBe(14);
  now.t += 24 * HOUR;
  const gone = () => [...Array(14).keys()].filter((i) => b.record(`r-${i}`) === undefined);
  b.post(request('other'));
  // eight entries come due: r-0 runs again (back of the queue with its later time), r-1 … r-7 go
  expect(gone()).toEqual([1, 2, 3, 4, 5, 6, 7]);
  b.post(request('another'));
  expect(gone()).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
  expect(b.size).toEqual({ resources: 5, jobs: 6 });
  // what forgetting costs: r-1's bulk copy POSTed again starts again, as after a restart of the process
  expect(b.post(request('r-1')).kind).toBe('start');
});

test('forgetEndedAfterMs Infinity keeps every resource', () => {
  const now = { t: LOCK };
  const b = new JobBook({ retainOlderMs: HOUR, forgetEndedAfterMs: Infinity, clock: () => now.t });
  const d = b.post(request('r-1'));
  if (d.kind === 'start') b.finish(d.job.id, d.job.run, { ok: true });
  now.t += 1000 * 24 * HOUR;
  b.post(request('r-2'));
  expect(b.post(request('r-1')).kind).toBe('done');
});

describe('the handler keeps the retentions', () => {
  const now = { t: LOCK };
  const participant = createParticipantHandler({
    bulkCopy: () => new Promise(() => undefined),
    deltaCopy: () => new Promise(() => undefined),
    authenticate: () => undefined,
    clock: () => now.t,
    retainOlderJobsSeconds: 60,
  });
  afterAll(() => participant.close());
  /** A delta job as routelock sends it (the instant as text). */
  const wire = (n: number) => ({ ...delta('conv-1', n), lockAcquiredAt: new Date(LOCK).toISOString() });
  const call = (r: Partial<ParticipantHttpRequest>) =>
    participant.answer({ method: 'POST', url: '/migrate', headers: {}, origin: 'http://p.example', ...r });

  test("a superseded job's poll: 409 within retainOlderJobsSeconds, then 404, and its re-POST 409", async () => {
    expect((await call({ body: wire(1) })).status).toBe(202);
    expect((await call({ body: wire(2) })).status).toBe(202);
    expect((await call({ method: 'GET', url: '/jobs/j-1' })).status).toBe(409);
    now.t += 60_000;
    expect((await call({ body: wire(3) })).status).toBe(202);
    expect((await call({ method: 'GET', url: '/jobs/j-1' })).status).toBe(404);
    expect((await call({ body: wire(1) })).status).toBe(409);
  });
});
