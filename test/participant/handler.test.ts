import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TestRoutingClient, states } from '../../shared/core/clientTesting';
import {
  type CleanUpOrder,
  type ParticipantHandler,
  type ParticipantJob,
  type ParticipantOptions,
  ParticipantError,
  ParticipantOptionError,
  createParticipantHandler,
  loopbackCallerOnly,
  nodeListener,
} from '../../shared/participant';
import { poll } from '../support/poll';
import { jobBody } from './conformance';

/**
 * `createParticipantHandler` on node:http (shared/participant/handler.ts), each rule of the contract
 * (docs/design.md §6.5) with a test, driven as routelock drives it: the team's functions are stand-ins
 * that record their calls and end when the test says.
 */

/** The job as routelock sends it (the conformance suite's body), sequence 1 whatever its step. */
const body = (over: Record<string, unknown> = {}) => jobBody('conv-1', { sequence: 1, ...over });

/** A team's copy: runs until the test ends it; records its job and whether its signal aborted. */
interface Run {
  job: ParticipantJob;
  signal: AbortSignal;
  end: (error?: Error) => void;
}

const servers: Server[] = [];
const handlers: ParticipantHandler[] = [];
afterEach(async () => {
  for (const h of handlers.splice(0)) h.close();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => (s.closeAllConnections(), s.close(r)))));
});

async function serve(options: Partial<ParticipantOptions> = {}) {
  const runs: Run[] = [];
  const copy = (job: ParticipantJob, signal: AbortSignal) =>
    new Promise<void>((resolve, reject) => {
      runs.push({ job, signal, end: (error) => (error ? reject(error) : resolve()) });
    });
  const handler = createParticipantHandler({
    bulkCopy: copy,
    deltaCopy: copy,
    authenticate: loopbackCallerOnly(),
    ...options,
  });
  handlers.push(handler);
  const server = createServer(nodeListener(handler));
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const post = async (b: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${url}/migrate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(b),
    });
    return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
  };
  const get = async (location: string, headers: Record<string, string> = {}) => {
    const res = await fetch(location, { headers });
    return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
  };
  return { handler, runs, url, post, get };
}

const tick = () => new Promise((r) => setTimeout(r, 10));

test('a job: 202 with an absolute Location and Retry-After; the poll answers 202 while it runs, 200 once done', async () => {
  const p = await serve({ retryAfterSeconds: 3 });
  const first = await p.post(body());
  expect(first.status).toBe(202);
  expect(first.body).toEqual({ done: false });
  expect(first.headers.get('retry-after')).toBe('3');
  const location = new URL(first.headers.get('location') as string); // absolute: parses without a base
  expect(location.origin).toBe(p.url);
  expect((await p.get(location.href)).status).toBe(202);
  await tick();
  expect(p.runs).toHaveLength(1);
  expect(p.runs[0]?.job).toMatchObject({ migrationId: 'm-1', step: 'bulkCopy', id: 'j-1', run: 1 });
  p.runs[0]?.end();
  await tick();
  expect(await p.get(location.href)).toMatchObject({ status: 200, body: { done: true } });
  expect(p.handler.polls).toBe(2);
});

test('job identity: the same job POSTed again is answered for and never started twice; another stepAttempt is another job', async () => {
  const p = await serve();
  const answers = await Promise.all([1, 2, 3].map(() => p.post(body())));
  expect(new Set(answers.map((a) => a.headers.get('location'))).size).toBe(1);
  await tick();
  expect(p.runs).toHaveLength(1);
  p.runs[0]?.end();
  await tick();
  expect((await p.post(body())).status).toBe(200);
  const delta = await p.post(body({ step: 'deltaCopy', sequence: 2 }));
  expect(delta.headers.get('location')).not.toBe(answers[0]?.headers.get('location'));
  await tick();
  expect(p.runs).toHaveLength(2);
});

test('a failed job: its poll answers 500 with the error; POSTed again, it runs again (run 2)', async () => {
  const p = await serve();
  const first = await p.post(body());
  await tick();
  p.runs[0]?.end(new Error('disk full'));
  await tick();
  expect(await p.get(first.headers.get('location') as string)).toMatchObject({
    status: 500,
    body: { error: 'disk full' },
  });
  const again = await p.post(body());
  expect(again.status).toBe(202);
  expect(again.headers.get('location')).toBe(first.headers.get('location'));
  await tick();
  expect(p.runs.map((r) => r.job.run)).toEqual([1, 2]);
});

test('Prefer: wait=N: a job that ends within N answers 200 to the POST (no poll); past N, 202 after N', async () => {
  const p = await serve();
  const pending = p.post(body(), { prefer: 'wait=2' });
  await tick();
  p.runs[0]?.end();
  expect(await pending).toMatchObject({ status: 200, body: { done: true } });
  const startedAt = Date.now();
  const slow = await p.post(body({ step: 'deltaCopy', sequence: 2 }), { prefer: 'wait=1' });
  expect(slow.status).toBe(202);
  expect(Date.now() - startedAt).toBeGreaterThanOrEqual(900);
  // the poll is held the same way
  const polled = p.get(slow.headers.get('location') as string, { prefer: 'wait=2' });
  await tick();
  p.runs[1]?.end();
  expect((await polled).status).toBe(200);
  expect(p.handler.polls).toBe(1);
});

test('honoursPreferWait: false answers 202 at once', async () => {
  const p = await serve({ honoursPreferWait: false });
  const startedAt = Date.now();
  expect((await p.post(body(), { prefer: 'wait=2' })).status).toBe(202);
  expect(Date.now() - startedAt).toBeLessThan(900);
});

test("supersede: a newer job aborts the older one's signal, its poll answers 409, and a POST of an older job 409", async () => {
  const p = await serve();
  const d1 = await p.post(body({ step: 'deltaCopy', stepAttempt: 1, attempt: 1, sequence: 2 }));
  await tick();
  const d2 = await p.post(body({ step: 'deltaCopy', stepAttempt: 2, attempt: 2, sequence: 3 }));
  await tick();
  expect(p.runs.map((r) => r.signal.aborted)).toEqual([true, false]);
  expect((p.runs[0]?.signal.reason as Error).message).toBe('superseded by j-2');
  // the old copy ending late changes nothing: still superseded
  p.runs[0]?.end();
  await tick();
  expect(await p.get(d1.headers.get('location') as string)).toMatchObject({
    status: 409,
    body: { error: 'superseded', supersededBy: { stepAttempt: 2, sequence: 3 } },
  });
  expect(await p.post(body({ step: 'deltaCopy', stepAttempt: 1, attempt: 1, sequence: 2 }))).toMatchObject({
    status: 409,
    body: { newest: { step: 'deltaCopy', stepAttempt: 2 } },
  });
  p.runs[1]?.end();
  await tick();
  expect((await p.get(d2.headers.get('location') as string)).status).toBe(200);
});

test('steps it does not run: 404 (a copy step it does not know, verify and preflight without functions); a malformed job 400', async () => {
  const p = await serve();
  for (const step of ['swap', 'verify', 'preflight']) expect((await p.post(body({ step }))).status).toBe(404);
  expect((await p.post(body({ sequence: 0 }))).status).toBe(400);
  const raw = await fetch(`${p.url}/migrate`, { method: 'POST', body: '{' });
  expect(raw.status).toBe(400);
  expect((await p.get(`${p.url}/jobs/j-404`)).status).toBe(404);
  expect((await p.get(`${p.url}/elsewhere`)).status).toBe(404);
});

test('verify and preflight: 200 with what the team answers; a JobRefused is a 400, any other error a 500', async () => {
  const p = await serve({
    verify: (job) => {
      if (job.to.region === 'mars') throw new ParticipantError('JobRefused', 'no region mars here');
      if (job.to.region === 'venus') throw new Error('store down');
      return { match: true, sourceCount: 2, targetCount: 2 };
    },
    preflight: (q) => ({ ready: true, resourceId: q.resourceId }),
  });
  expect(await p.post(body({ step: 'verify' }))).toMatchObject({ status: 200, body: { match: true } });
  expect(await p.post(body({ step: 'verify', to: { region: 'mars' } }))).toMatchObject({
    status: 400,
    body: { error: 'no region mars here', code: 'JobRefused' },
  });
  expect((await p.post(body({ step: 'verify', to: { region: 'venus' } }))).status).toBe(500);
  expect(
    await p.post({ step: 'preflight', resourceId: 'c', from: { region: 'a' }, to: { region: 'b' } }),
  ).toMatchObject({
    status: 200,
    body: { ready: true, resourceId: 'c' },
  });
  expect((await p.post({ step: 'preflight' })).status).toBe(400);
  expect(p.runs).toEqual([]);
});

describe('the caller check', () => {
  test('authenticate refusing: 401 with WWW-Authenticate, 403, 503 with Retry-After; nothing runs', async () => {
    const codes = ['CallerUnauthenticated', 'CallerForbidden', 'CallerCheckUnavailable'] as const;
    let next = 0;
    const p = await serve({
      authenticate: () => {
        throw new ParticipantError(codes[next++] as (typeof codes)[number], 'no');
      },
    });
    const [a, b, c] = [await p.post(body()), await p.post(body()), await p.post(body())];
    expect([a.status, b.status, c.status]).toEqual([401, 403, 503]);
    expect(a.headers.get('www-authenticate')).toBe('Bearer');
    expect(c.headers.get('retry-after')).toBe('5');
    expect(a.body).toMatchObject({ code: 'CallerUnauthenticated' });
    await tick();
    expect(p.runs).toEqual([]);
  });

  test('loopbackCallerOnly refuses a peer that is not this machine (403)', () => {
    const check = loopbackCallerOnly();
    const request = { method: 'POST', url: '/migrate', headers: {} };
    expect(() => check({ ...request, remoteAddress: '127.0.0.1' })).not.toThrow();
    expect(() => check({ ...request, remoteAddress: '::ffff:127.0.0.1' })).not.toThrow();
    expect(() => check({ ...request, remoteAddress: '10.0.0.7' })).toThrow(
      expect.objectContaining({ code: 'CallerForbidden', status: 403 }),
    );
    expect(() => check(request)).toThrow(expect.objectContaining({ code: 'CallerForbidden' }));
  });
});

describe('the notice rules', () => {
  const notice = (step: string, over: Record<string, unknown> = {}) => body({ step, sequence: 9, ...over });

  async function copied(state: Parameters<TestRoutingClient['set']>[1]) {
    const routing = new TestRoutingClient({ clockSkewSeconds: 0 });
    routing.set('conv-1', state);
    const orders: CleanUpOrder[] = [];
    const resolved: number[] = [];
    const p = await serve({
      routing: {
        resolve: (id) => (resolved.push(Date.now()), routing.resolve(id)),
        forget: (id) => routing.forget(id),
      },
      onNotice: (order) => void orders.push(order),
    });
    await p.post(body());
    await tick();
    p.runs[0]?.end();
    await tick();
    return { p, orders, resolved };
  }

  test('completed: the source copy is deleted only once cleanUpSourceAfter has passed, after resolving the route', async () => {
    const { p, orders, resolved } = await copied(states.unlocked({ at: 'eastus' }));
    const after = Date.now() + 400;
    const answer = await p.post(notice('completed', { cleanUpSourceAfter: new Date(after).toISOString() }));
    expect(answer).toMatchObject({
      status: 200,
      body: { cleanUp: { state: 'scheduled', region: 'westeurope' } },
    });
    await new Promise((r) => setTimeout(r, 200));
    expect(orders).toEqual([]);
    expect(resolved).toEqual([]);
    await poll(
      async () => orders.length,
      (n) => n === 1,
      3000,
    );
    expect(orders[0]).toEqual({
      migrationId: 'm-1',
      resourceId: 'conv-1',
      step: 'completed',
      region: 'westeurope',
    });
    expect(resolved[0]).toBeGreaterThanOrEqual(after);
    expect([...p.handler.cleanUps.values()][0]).toMatchObject({ state: 'deleted' });
  });

  test.each([
    [
      'the route is at the source after all',
      states.unlocked({ at: 'westeurope' }),
      'westeurope is the live location',
    ],
    [
      'a lock brings it back to the source',
      states.writeLock({ from: 'eastus', to: 'westeurope' }),
      /targets westeurope/,
    ],
    ['there is no route', states.notFound(), 'no route: kept'],
  ])('completed, but %s: kept, never deleted', async (_, state, why) => {
    const { p, orders } = await copied(state);
    await p.post(notice('completed', { cleanUpSourceAfter: new Date().toISOString() }));
    await poll(
      async () => [...p.handler.cleanUps.values()][0]?.state,
      (s) => s !== 'scheduled',
      3000,
    );
    expect([...p.handler.cleanUps.values()][0]).toMatchObject({ state: 'kept', why });
    expect(orders).toEqual([]);
  });

  test('failed: the running copies of the migration are aborted and the target copy deleted now; routelock unreachable is a 503', async () => {
    const { p, orders } = await copied(states.unlocked({ at: 'westeurope' }));
    await p.post(body({ step: 'deltaCopy', sequence: 2 }));
    await tick();
    expect(await p.post(notice('failed', { reason: 'overran' }))).toMatchObject({
      status: 200,
      body: { cleanUp: { state: 'deleted', region: 'eastus' } },
    });
    expect(p.runs[1]?.signal.aborted).toBe(true);
    expect(orders).toEqual([{ migrationId: 'm-1', resourceId: 'conv-1', step: 'failed', region: 'eastus' }]);
    const down = await copied(states.unreachable({ status: 503 }));
    expect((await down.p.post(notice('cancelled'))).status).toBe(503);
    expect(down.orders).toEqual([]);
  });

  test.each([
    [3600, 0],
    [Infinity, 1],
  ])(
    'an ended clean-up is forgotten once forgetEndedAfterSeconds (%s) has passed: %s kept',
    async (forgetEndedAfterSeconds, kept) => {
      let now = Date.now();
      const routing = new TestRoutingClient({ clockSkewSeconds: 0 });
      routing.set('conv-1', states.unlocked({ at: 'westeurope' }));
      const p = await serve({
        routing,
        clock: () => now,
        forgetEndedAfterSeconds,
        onNotice: () => undefined,
      });
      await p.post(body());
      await tick();
      p.runs[0]?.end();
      await tick();
      expect((await p.post(notice('failed', { reason: 'overran' }))).status).toBe(200);
      expect(p.handler.cleanUps.size).toBe(1);
      now += 3601_000;
      await p.post(notice('failed', { migrationId: 'm-other' })); // any notice prunes what has aged out
      expect(p.handler.cleanUps.size).toBe(kept);
    },
  );

  test('a notice of a migration it never copied for: a 200 no-op', async () => {
    const { p, orders } = await copied(states.unlocked({ at: 'westeurope' }));
    expect(await p.post(notice('failed', { migrationId: 'm-other' }))).toMatchObject({
      status: 200,
      body: { ignored: expect.any(String) },
    });
    expect(orders).toEqual([]);
  });
});

test.each<[string, Record<string, unknown>, RegExp]>([
  ['no bulkCopy', { bulkCopy: undefined }, /bulkCopy must be a function/],
  ['no authenticate', { authenticate: undefined }, /authenticate must be a function/],
  ['onNotice without routing', { onNotice: () => undefined }, /routing is required with onNotice/],
  ['an unknown option', { bulkCopyy: () => undefined }, /bulkCopyy is not an option/],
  ['a path without /', { path: 'migrate' }, /path must be a path/],
  ['a negative Retry-After', { retryAfterSeconds: -1 }, /retryAfterSeconds/],
  ['a publicUrl with a path', { publicUrl: 'https://x.example/api' }, /publicUrl must be an origin/],
  ['a negative retention of outranked jobs', { retainOlderJobsSeconds: -1 }, /retainOlderJobsSeconds/],
  ['a forget retention under an hour', { forgetEndedAfterSeconds: 60 }, /forgetEndedAfterSeconds .* 3600/],
  ['a forget retention not whole', { forgetEndedAfterSeconds: 3600.5 }, /forgetEndedAfterSeconds/],
])('options are checked when the handler is built: %s', (_, over, message) => {
  const build = () =>
    createParticipantHandler({
      bulkCopy: async () => undefined,
      deltaCopy: async () => undefined,
      authenticate: () => undefined,
      ...over,
    } as ParticipantOptions);
  expect(build).toThrow(ParticipantOptionError);
  expect(build).toThrow(
    expect.objectContaining({ code: 'InvalidParticipantOption', message: expect.stringMatching(message) }),
  );
});
