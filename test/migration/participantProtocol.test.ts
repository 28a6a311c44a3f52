import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AccessToken, TokenCredential } from '@azure/identity';
import { requestParticipant } from '../../shared/migration/participantHttp';
import { newMigrationRecord } from '../../shared/migration/records';
import {
  type HttpCall,
  type MigrationStatus,
  type ParticipantCall,
  WORKFLOW_VERSION,
} from '../../shared/migration/types';
import type { Escalated } from '../../shared/migration/workflow';
import { participantJob } from '../../shared/migration/workflow/copy';
import { plantParticipantBug } from '../../testkit/plantedBugs';
import { virtualRunner } from '../support/migrationHarness';
import { type ParticipantServer, type StepBehaviour, startParticipant } from '../support/participantServer';

/**
 * The participant protocol end to end: the in-process runner (virtual time) calls real participant
 * servers through the real `callParticipant` activity, one rule per test (docs/design.md §6.5).
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const ITEMS = ['msg-1', 'msg-2', 'msg-3'];

const servers: ParticipantServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

interface Seen {
  participant: string;
  step: string;
  method: 'POST' | 'GET';
  at: number;
  status?: number;
  body?: unknown;
}

/** Virtual time that waits for real requests: no timer fires while one is in flight. */
async function settle(h: ReturnType<typeof virtualRunner>, inFlight: () => number): Promise<void> {
  for (let guard = 0; h.runner.activeCount > 0; guard += 1) {
    if (guard > 200_000) throw new Error('the migration did not settle');
    for (let i = 0; i < 8; i += 1) await new Promise<void>((r) => setImmediate(r));
    if (inFlight() > 0) {
      await new Promise<void>((r) => setTimeout(r, 2));
      continue;
    }
    if (h.runner.activeCount === 0) break;
    await h.scheduler.runUntilIdle({ settleTurns: 0, maxTimers: 1 });
  }
}

async function migrate(
  behaviours: Partial<Record<'bulkCopy' | 'deltaCopy', StepBehaviour>>[],
  options: {
    env?: Record<string, string>;
    plant?: boolean;
    credential?: TokenCredential;
    audience?: string;
  } = {},
) {
  const parts: ParticipantServer[] = [];
  for (const b of behaviours) {
    const server = await startParticipant();
    servers.push(server);
    parts.push(server);
    for (const [step, behaviour] of Object.entries(b))
      server.behave(step as 'bulkCopy' | 'deltaCopy', behaviour);
    server.seed(SOURCE, 'r-1', ITEMS);
  }
  const h = virtualRunner({
    http: null,
    ...(options.credential ? { participantHttp: { credential: options.credential } } : {}),
    env: {
      ROUTELOCK_PARTICIPANTS: JSON.stringify(
        parts.map((s, i) => ({
          name: `p${i + 1}`,
          url: s.url,
          ...(options.audience ? { audience: options.audience } : {}),
        })),
      ),
      ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: '1',
      // the contract within one attempt (a retry with a fresh lock: test/migration/attempts.test.ts)
      ROUTELOCK_MIGRATION_ATTEMPTS: '1',
      ...options.env,
    },
  });
  if (options.plant) plantParticipantBug(h.activities, 'anyTwoHundredIsDone');
  const seen: Seen[] = [];
  let inFlight = 0;
  const call = h.activities.callParticipant;
  const stepOf = new Map<string, string>(); // poll Location → its job's step
  h.activities.callParticipant = async (input: ParticipantCall) => {
    const step = input.method === 'POST' ? input.body.step : (stepOf.get(input.url) ?? '?');
    // the end notices have their own tests (notices.test.ts)
    if (isEndNotice(step)) return call(input);
    const entry: Seen = { participant: input.participant, step, method: input.method, at: h.clock.now() };
    seen.push(entry);
    inFlight += 1;
    try {
      const result = await call(input);
      if (result.ok && result.value.location) stepOf.set(result.value.location, step);
      if (result.ok) Object.assign(entry, { status: result.value.status, body: result.value.body });
      return result;
    } finally {
      inFlight -= 1;
    }
  };
  const renewals: number[] = [];
  const renew = h.activities.renew;
  h.activities.renew = async (input) => {
    renewals.push(h.clock.now());
    return renew(input);
  };
  await h.router.createRoute('r-1', SOURCE);
  const { record } = h.runner.start({ resourceId: 'r-1', target: TARGET });
  await settle(h, () => inFlight);
  const status: MigrationStatus = await h.runner.status(record.migrationId);
  const doc = (await h.store.read('r-1', { from: 'writeRegion' })).doc;
  return { h, status, doc, parts, seen, renewals };
}

const isEndNotice = (step: string) => ['completed', 'failed', 'cancelled'].includes(step);

const posts = (seen: Seen[], participant = 'p1') =>
  seen.filter((s) => s.participant === participant && s.method === 'POST');
const polls = (seen: Seen[], participant = 'p1') =>
  seen.filter((s) => s.participant === participant && s.method === 'GET');
const bulkOf = (seen: Seen[]) => seen.filter((s) => s.step === 'bulkCopy');

describe('answers that complete', () => {
  test('200: done at once, one POST per step; the target has the data', async () => {
    const r = await migrate([{}]);
    expect(r.status.status).toBe('Completed');
    expect(r.doc).toMatchObject({ location: TARGET, lock: null });
    // bulkCopy, deltaCopy, and verify, which this participant does not implement (404)
    expect(r.seen.map((s) => `${s.method} ${s.status}`)).toEqual(['POST 200', 'POST 200', 'POST 404']);
    expect(r.status.verifications).toEqual([expect.objectContaining({ outcome: 'notImplemented' })]);
    expect(r.parts[0]!.dataAt(TARGET, 'r-1')).toEqual(ITEMS);
  });

  test('request bodies: migrationAttempt 1, stepAttempt (= attempt), sequence per new job, lockAcquiredAt', async () => {
    const r = await migrate([{}]);
    const bodies = r.parts[0]!.requests.map((q) => q.body).filter((b) => !isEndNotice(String(b?.step)));
    const acquiredAt = r.doc.lastMigration!.acquiredAt;
    expect(bodies).toEqual([
      expect.objectContaining({
        step: 'bulkCopy',
        migrationAttempt: 1,
        stepAttempt: 1,
        attempt: 1,
        sequence: 1,
        lockAcquiredAt: acquiredAt,
      }),
      expect.objectContaining({
        step: 'deltaCopy',
        migrationAttempt: 1,
        stepAttempt: 1,
        attempt: 1,
        sequence: 2,
        lockAcquiredAt: acquiredAt,
      }),
      expect.objectContaining({
        step: 'verify',
        migrationAttempt: 1,
        stepAttempt: 1,
        attempt: 1,
        sequence: 3,
        lockAcquiredAt: acquiredAt,
      }),
    ]);
    expect(bodies[0]).toMatchObject({ migrationId: 'm-1', resourceId: 'r-1', from: SOURCE, to: TARGET });
  });

  test('202 + relative Location: polled with GET until 200, waits 1, 2, 4 s (Retry-After 1, pollMin 1 s)', async () => {
    const r = await migrate([{ bulkCopy: { kind: 'poll', polls: 3 } }]);
    expect(r.status.status).toBe('Completed');
    const bulk = bulkOf(r.seen);
    expect(bulk.map((s) => `${s.method} ${s.status}`)).toEqual([
      'POST 202',
      'GET 202',
      'GET 202',
      'GET 202',
      'GET 200',
    ]);
    const gaps = bulk.slice(1).map((s, i) => (s.at - bulk[i]!.at) / 1000);
    expect(gaps).toEqual([1, 2, 4, 8]);
    expect(r.parts[0]!.requests.filter((q) => q.method === 'GET').map((q) => q.path)).toEqual(
      Array(4).fill('/jobs/1'),
    );
    expect(r.parts[0]!.dataAt(TARGET, 'r-1')).toEqual(ITEMS);
  });

  test('202 + absolute Location and Retry-After 10: each poll waits max(Retry-After, backoff), capped at pollMax', async () => {
    const r = await migrate(
      [{ bulkCopy: { kind: 'poll', polls: 2, location: 'absolute', retryAfter: 10 } }],
      {
        env: { ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS: '8' },
      },
    );
    expect(r.status.status).toBe('Completed');
    const bulk = posts(r.seen).slice(0, 1).concat(polls(r.seen));
    expect(bulk.slice(1).map((s, i) => (s.at - bulk[i]!.at) / 1000)).toEqual([8, 8, 8]);
  });

  test('429 + Retry-After: retried after max(Retry-After, retryInterval × 2^(n−1)), then done', async () => {
    const r = await migrate([{ bulkCopy: { kind: 'status', status: 429, retryAfter: 7, times: 2 } }]);
    expect(r.status.status).toBe('Completed');
    const bulk = posts(r.seen).slice(0, 3);
    expect(bulk.map((s) => s.status)).toEqual([429, 429, 200]);
    // production: ROUTELOCK_RETRY_INTERVAL_SECONDS 5 → max(7, 5) then max(7, 10)
    expect(bulk.slice(1).map((s, i) => (s.at - bulk[i]!.at) / 1000)).toEqual([7, 10]);
  });

  test('a hang past ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS is status 0 (transient): the same job is POSTed again', async () => {
    const r = await migrate([{ bulkCopy: { kind: 'hang', ms: 1500, times: 1 } }]);
    expect(r.status.status).toBe('Completed');
    const bulk = posts(r.seen).slice(0, 2);
    expect(bulk.map((s) => s.status)).toEqual([0, 200]);
    expect(bulk[0]!.body).toBe('no answer within 1 s');
  });

  test('404 to a poll: the job is gone, POSTed again (a transient retry), then polled to 200', async () => {
    const r = await migrate([{ bulkCopy: { kind: 'poll', polls: 1, goneAtFirstPoll: true } }]);
    expect(r.status.status).toBe('Completed');
    const bulk = bulkOf(r.seen);
    expect(bulk.map((s) => `${s.method} ${s.status}`)).toEqual([
      'POST 202',
      'GET 404',
      'POST 202',
      'GET 202',
      'GET 200',
    ]);
  });
});

describe('answers that fail the attempt, the route left at the source', () => {
  test.each<[string, StepBehaviour, RegExp, number]>([
    [
      '202 without Location',
      { kind: 'poll', polls: 0, location: 'none' },
      /answered 202 to bulkCopy \(attempt 1\): protocol error: 202 without a Location/,
      1,
    ],
    ['201', { kind: 'status', status: 201 }, /answered 201 to bulkCopy \(attempt 1\): protocol error/, 1],
    ['204', { kind: 'status', status: 204 }, /answered 204 to bulkCopy \(attempt 1\): protocol error/, 1],
    [
      '200 {done:false}',
      { kind: 'status', status: 200, body: '{"done":false}' },
      /answered 200 to bulkCopy \(attempt 1\): protocol error: 200 with \{"done": false\}/,
      1,
    ],
    [
      '302 (not followed)',
      { kind: 'status', status: 302 },
      /answered 302 to bulkCopy \(attempt 1\): protocol error/,
      1,
    ],
    [
      '404 (required step)',
      { kind: 'status', status: 404 },
      /answered 404 to bulkCopy \(attempt 1\): the participant does not implement this step/,
      1,
    ],
    ['409', { kind: 'status', status: 409 }, /answered 409 to bulkCopy \(attempt 1\): \{"error":"no"\}/, 1],
    ['422', { kind: 'status', status: 422 }, /answered 422 to bulkCopy \(attempt 1\)/, 1],
    [
      '503, every time',
      { kind: 'status', status: 503 },
      /answered 503 to bulkCopy \(attempt 1\): 5 times in a row/,
      5,
    ],
  ])('%s', async (_name, behaviour, reason, requests) => {
    const r = await migrate([{ bulkCopy: behaviour }]);
    expect(r.status).toMatchObject({ status: 'Failed', phase: 'released' });
    expect(r.status.error).toMatch(reason);
    expect(r.doc).toMatchObject({ location: SOURCE, lock: null });
    expect(r.seen).toHaveLength(requests);
    expect(r.parts[0]!.dataAt(SOURCE, 'r-1')).toEqual(ITEMS);
  });

  test('an older job than one the participant saw (409) fails the attempt at once', async () => {
    const server = await startParticipant();
    servers.push(server);
    // the participant already saw a newer job of r-1 (a later lock)
    await fetch(server.url, {
      method: 'POST',
      body: JSON.stringify({
        resourceId: 'r-1',
        step: 'bulkCopy',
        lockAcquiredAt: '2100-01-01T00:00:00Z',
        sequence: 1,
      }),
    });
    const h = virtualRunner({
      http: null,
      env: {
        ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p1', url: server.url }]),
        ROUTELOCK_MIGRATION_ATTEMPTS: '1',
      },
    });
    await h.router.createRoute('r-1', SOURCE);
    const { record } = h.runner.start({ resourceId: 'r-1', target: TARGET });
    await settle(h, () => 0);
    const status = await h.runner.status(record.migrationId);
    expect(status.error).toMatch(/answered 409 to bulkCopy \(attempt 1\): \{"error":"superseded"\}/);
  });
});

describe('negative control: an "any 2xx is done" rule loses data', () => {
  const noLocation: StepBehaviour = { kind: 'poll', polls: 0, location: 'none' };
  test('planted: a 202 without Location counts as done, the route swaps to a target without the data', async () => {
    const r = await migrate([{ bulkCopy: noLocation, deltaCopy: noLocation }], { plant: true });
    expect(r.status.status).toBe('Completed');
    expect(r.doc.location).toEqual(TARGET);
    expect(r.parts[0]!.dataAt(SOURCE, 'r-1')).toEqual(ITEMS);
    expect(r.parts[0]!.dataAt(TARGET, 'r-1')).toEqual([]); // data loss
  });
  test('real: the same participant fails the migration with the reason; the route stays at the source', async () => {
    const r = await migrate([{ bulkCopy: noLocation, deltaCopy: noLocation }]);
    expect(r.status).toMatchObject({ status: 'Failed', phase: 'released' });
    expect(r.status.error).toMatch(
      /participant p1 answered 202 to bulkCopy \(attempt 1\): protocol error: 202 without a Location/,
    );
    expect(r.doc).toMatchObject({ location: SOURCE, lock: null });
  });
});

test('two participants answering 202: polls on both, a renewal of the hard-delete lock in between, Completed', async () => {
  // dev profile: a 120 s hard-delete lease, renewed every 40 s; polls back off 1, 2, 4 … 30 s
  const r = await migrate(
    [
      { bulkCopy: { kind: 'poll', polls: 6 }, deltaCopy: { kind: 'poll', polls: 1 } },
      { bulkCopy: { kind: 'poll', polls: 3 } },
    ],
    { env: { ROUTELOCK_PROFILE: 'dev' } },
  );
  expect(r.status.status).toBe('Completed');
  expect(r.doc.location).toEqual(TARGET);
  for (const p of r.parts) expect(p.dataAt(TARGET, 'r-1')).toEqual(ITEMS);
  const bulk = bulkOf(r.seen);
  expect(posts(bulk, 'p1')).toHaveLength(1);
  expect(posts(bulk, 'p2')).toHaveLength(1);
  expect(polls(bulk, 'p1')).toHaveLength(7);
  expect(polls(bulk, 'p2')).toHaveLength(4);
  // the hard-delete lock renewed while both were being polled (every 40 s: at +40 s and +80 s)
  const [first, last] = [bulk[0]!.at, bulk.at(-1)!.at];
  expect(r.renewals.filter((at) => at > first && at < last)).toHaveLength(2);
  // measured: 19 callParticipant activities (4 copy POSTs + 13 polls + 2 verify POSTs), 2 renewals
  expect({
    activityCalls: r.seen.length,
    polls: polls(r.seen, 'p1').length + polls(r.seen, 'p2').length,
  }).toEqual({
    activityCalls: 19,
    polls: 13,
  });
});

describe('the callParticipant request itself', () => {
  class FakeCredential implements TokenCredential {
    scopes: string[] = [];
    async getToken(scopes: string | string[]): Promise<AccessToken | null> {
      this.scopes.push(...[scopes].flat());
      return { token: 'tok-1', expiresOnTimestamp: Date.now() + 3_600_000 };
    }
  }
  const job = {
    migrationId: 'm-1',
    resourceId: 'r-1',
    from: SOURCE,
    to: TARGET,
    step: 'bulkCopy' as const,
    attempt: 1,
  };

  test('the bearer token goes to the participant origin only; a poll URL on another origin is never requested', async () => {
    const a = await startParticipant();
    const b = await startParticipant();
    servers.push(a, b);
    a.behave('bulkCopy', { kind: 'poll', polls: 1 });
    const credential = new FakeCredential();
    const base = { participant: 'p', participantUrl: a.url, audience: 'api://p', timeoutSeconds: 5 };
    const posted = await requestParticipant({ ...base, method: 'POST', body: job }, { credential });
    expect(posted).toMatchObject({
      status: 202,
      location: `${new URL(a.url).origin}/jobs/1`,
      retryAfterSeconds: 1,
    });
    await requestParticipant({ ...base, method: 'GET', url: posted.location! }, { credential });
    const elsewhere = await requestParticipant(
      { ...base, method: 'GET', url: `${new URL(b.url).origin}/jobs/1` },
      { credential },
    );
    expect(elsewhere).toMatchObject({
      status: 0,
      body: expect.stringMatching(/refused: a poll URL on another origin/),
    });
    expect(a.requests.map((q) => q.authorization)).toEqual(['Bearer tok-1', 'Bearer tok-1']);
    expect(b.requests).toEqual([]);
    expect(credential.scopes).toEqual(['api://p/.default']);
  });

  test('only the first 4 KiB of an answer are read: a participant answering megabytes is cut, not buffered', async () => {
    const big = await new Promise<{ url: string; close: () => Promise<void>; sent: () => number }>(
      (resolve) => {
        let sent = 0;
        const server = createServer((_req, res) => {
          res.writeHead(500, { 'content-type': 'text/plain' });
          const chunk = Buffer.alloc(64 * 1024, 'x');
          // keep writing until the client hangs up (at most 64 MiB)
          const pump = () => {
            while (sent < 64 * 1024 * 1024 && res.write(chunk)) sent += chunk.length;
            if (sent >= 64 * 1024 * 1024) res.end();
          };
          res.on('drain', pump);
          res.on('close', () => res.destroy());
          pump();
        });
        server.listen(0, '127.0.0.1', () => {
          const { port } = server.address() as AddressInfo;
          resolve({
            url: `http://127.0.0.1:${port}/migrate`,
            sent: () => sent,
            close: () =>
              new Promise((done) => {
                server.closeAllConnections();
                server.close(() => done());
              }),
          });
        });
      },
    );
    try {
      const answer = await requestParticipant({
        participant: 'p',
        participantUrl: big.url,
        timeoutSeconds: 5,
        method: 'POST',
        body: job,
      });
      expect(answer.status).toBe(500);
      expect(String(answer.body)).toHaveLength(4097); // 4096 bytes and the … mark
      expect(String(answer.body).endsWith('…')).toBe(true);
      expect(big.sent()).toBeLessThan(16 * 1024 * 1024); // it stopped reading long before the end
    } finally {
      await big.close();
    }
  });

  test('a token that does not come within the timeout is no answer (status 0), like a slow participant', async () => {
    const a = await startParticipant();
    servers.push(a);
    const hanging: TokenCredential = { getToken: () => new Promise<AccessToken | null>(() => undefined) };
    const answer = await requestParticipant(
      {
        participant: 'p',
        participantUrl: a.url,
        audience: 'api://slow',
        timeoutSeconds: 1,
        method: 'POST',
        body: job,
      },
      { credential: hanging },
    );
    expect(answer).toMatchObject({
      status: 0,
      body: expect.stringMatching(/no token for audience api:\/\/slow/),
    });
    expect(a.requests).toEqual([]);
  });

  test('no redirect is followed; a refused connection is status 0 with the reason; nothing secret in the answer', async () => {
    const a = await startParticipant();
    servers.push(a);
    a.behave('bulkCopy', { kind: 'status', status: 307 });
    const base = { participant: 'p', participantUrl: a.url, timeoutSeconds: 5 };
    expect(await requestParticipant({ ...base, method: 'POST', body: job })).toMatchObject({ status: 307 });
    expect(a.requests).toHaveLength(1);
    const refused = await requestParticipant({
      ...base,
      participantUrl: 'http://127.0.0.1:9/migrate',
      method: 'POST',
      body: job,
    });
    expect(refused.status).toBe(0);
    expect(String(refused.body)).toMatch(/fetch failed/);
  });
});

describe('versions', () => {
  test('new migrations start with WORKFLOW_VERSION; a journal of a version this code does not replay ends Failed, running nothing', async () => {
    const calls: HttpCall[] = [];
    const h = virtualRunner({
      env: { ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p1', url: 'https://p1.test/migrate' }]) },
      http: async (call) => {
        calls.push(call);
        // a participant without verify: 404, not implemented
        return call.body.step === 'verify' ? { status: 404, body: null } : { status: 200, body: null };
      },
    });
    await h.router.createRoute('r-1', SOURCE);
    await h.router.createRoute('r-2', SOURCE);
    const started = h.runner.start({ resourceId: 'r-1', target: TARGET });
    expect(started.record.input.workflowVersion).toBe(WORKFLOW_VERSION);
    // a migration a version-1 host started (its input has no workflowVersion), found by this one
    const { workflowVersion: _v, ...v1 } = {
      ...started.record.input,
      migrationId: 'm-old',
      instanceId: 'i-old',
      resourceId: 'r-2',
    };
    h.state.createUnlessActive(newMigrationRecord(v1, new Date(h.clock.now()).toISOString()));
    expect(h.runner.resumeAll()).toBe(1);
    await h.settle();
    const old = await h.runner.status('m-old');
    expect(old.status).toBe('Failed');
    expect(old.error).toMatch(/workflow version 1 \(none recorded\) is not replayed by this deployment/);
    expect(calls.filter((c) => c.body.migrationId === 'm-old')).toEqual([]);
    expect((await h.runner.status(started.record.migrationId)).status).toBe('Completed');
    const jobs = calls.filter((c) => c.body.migrationId !== 'm-old' && !isEndNotice(c.body.step));
    expect(jobs.map((c) => c.body.sequence)).toEqual([1, 2, 3]);
  });

  test('sequence: the bulk copy 1, delta attempt n 2n; stepAttempt = attempt', () => {
    const state = {
      input: { migrationId: 'm', resourceId: 'r', target: TARGET, settings: { deltaAttempts: 3 } },
      from: SOURCE,
      grant: { acquiredAt: '2026-01-01T00:00:00.000Z' },
    } as unknown as Escalated;
    const job = (copy: 'bulkCopy' | 'deltaCopy', attempt: number) =>
      participantJob(state, { copy, attempt, phase: 'write', leaseSeconds: 1 });
    expect(
      [job('bulkCopy', 1), job('deltaCopy', 1), job('deltaCopy', 2), job('deltaCopy', 3)].map((b) => [
        b.sequence,
        b.stepAttempt,
        b.attempt,
      ]),
    ).toEqual([
      [1, 1, 1],
      [2, 1, 1],
      [4, 2, 2],
      [6, 3, 3],
    ]);
  });
});
