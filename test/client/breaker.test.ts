import type { IncomingMessage } from 'node:http';
import { RoutingClient, RoutingServiceError } from '../../shared/core/client';
import { ManualClock } from '../../testkit/clock';
import { SOURCE, T, scriptedServer } from './harness';

/**
 * The client against a hung routing service, on a scripted node:http server that can hang (never answer)
 * or answer, counting the requests that reach it. The breaker's time is a manual clock (the backoff);
 * only `timeoutMs` runs on real time, kept short.
 * - After `breakerFailures` timeouts in a row the breaker opens: calls are answered at once under the
 *   outage policy and no request reaches the server until the backoff ends; then one probe goes, and
 *   concurrent callers do not all probe.
 * - A call's `signal` rejects that call at once (`Aborted`), and aborts the request only when no other
 *   call still waits for it.
 * - No view is cached longer than `maxCacheSeconds`, whatever max-age the server sends.
 */

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

const failure = (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (e: unknown) => e,
  );
const outcome = (p: Promise<unknown>) => p.catch((e: unknown) => e);

const view = (resourceId: string) => ({
  resourceId,
  location: SOURCE,
  secondary: null,
  lock: null,
  enforcement: { read: 'allow', write: 'allow', delete: 'allow' },
  etag: 'e1',
});

/** A server that hangs while `hung`, else answers a view with `cacheControl`; sockets closed are counted. */
async function hangingServer(cacheControl = 'no-store') {
  const state = { hung: true, socketsClosed: 0, release: () => undefined as void };
  const server = await scriptedServer(
    (req) => ({
      status: 200,
      headers: { 'cache-control': cacheControl },
      body: view(decodeURIComponent((req.url ?? '').split('/').pop() ?? '')),
    }),
    (req: IncomingMessage) => {
      req.socket.once('close', () => (state.socketsClosed += 1));
      if (!state.hung) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const before = state.release;
        state.release = () => (before(), resolve());
      });
    },
  );
  closers.push(server.close);
  return { ...server, state };
}

const breaker = { breakerFailures: 3, breakerBackoffMs: 10_000, breakerJitter: 0 } as const;

describe('the circuit breaker', () => {
  test('opens after breakerFailures timeouts in a row; while open no request is sent and decideFor answers unavailable', async () => {
    const server = await hangingServer();
    const clock = new ManualClock(T);
    const client = new RoutingClient({ baseUrl: server.api, clock: clock.now, timeoutMs: 100, ...breaker });
    for (const id of ['conv-1', 'conv-2']) {
      expect(await failure(client.resolve(id))).toMatchObject({ status: 0, code: 'Unreachable' });
      expect(client.breakerState()).toMatchObject({ kind: 'closed' });
    }
    expect(await failure(client.resolve('conv-3'))).toMatchObject({ code: 'Unreachable' });
    expect(client.breakerState()).toEqual({ kind: 'open', opens: 1, until: T + 10_000 });
    expect(client.requests).toBe(3);
    // A request aborted by its timeout may not have reached the server's handler: count what did.
    await new Promise((r) => setTimeout(r, 50));
    const reached = server.requests();

    clock.set(T + 2_500);
    const decisions = await Promise.all(
      Array.from({ length: 20 }, (_, i) => client.decideFor(`conv-${i}`, 'write', SOURCE)),
    );
    for (const { decision } of decisions)
      expect(decision).toEqual({ kind: 'unavailable', retryAfterSeconds: 8 });
    const refused = await failure(client.resolve('conv-1'));
    expect(refused).toBeInstanceOf(RoutingServiceError);
    expect(refused).toMatchObject({ status: 0, code: 'BreakerOpen', retryAfterSeconds: 8 });
    await new Promise((r) => setTimeout(r, 50));
    expect(server.requests()).toBe(reached);
    expect(client.requests).toBe(3);
  });

  test('after the backoff one probe goes, the others are refused while it is out, and its answer closes it', async () => {
    const server = await hangingServer();
    const clock = new ManualClock(T);
    const client = new RoutingClient({ baseUrl: server.api, clock: clock.now, timeoutMs: 100, ...breaker });
    for (const id of ['a', 'b', 'c']) await failure(client.resolve(id));
    expect(client.breakerState().kind).toBe('open');

    server.state.hung = false;
    clock.set(T + 10_000);
    const calls = ['p', 'q', 'r', 's', 't'].map((id) => outcome(client.resolve(id)));
    expect(client.breakerState()).toEqual({ kind: 'halfOpen', opens: 1, since: T + 10_000 });
    const [probe, ...others] = await Promise.all(calls);
    expect(probe).toMatchObject({ resourceId: 'p' });
    for (const other of others) expect(other).toMatchObject({ code: 'BreakerOpen' });
    expect(client.requests).toBe(4);
    expect(client.breakerState()).toEqual({ kind: 'closed', failures: 0 });
    expect(await client.resolve('u')).toMatchObject({ resourceId: 'u' });
  });

  test('a probe that times out reopens it for twice the backoff', async () => {
    const server = await hangingServer();
    const clock = new ManualClock(T);
    const client = new RoutingClient({ baseUrl: server.api, clock: clock.now, timeoutMs: 100, ...breaker });
    for (const id of ['a', 'b', 'c']) await failure(client.resolve(id));
    clock.set(T + 10_000);
    expect(await failure(client.resolve('d'))).toMatchObject({ code: 'Unreachable' });
    expect(client.breakerState()).toEqual({ kind: 'open', opens: 2, until: T + 30_000 });
    expect(client.requests).toBe(4);
  });

  test("under serveStaleReads an open breaker serves the last view's reads without a request", async () => {
    const server = await hangingServer('private, max-age=1');
    server.state.hung = false;
    const clock = new ManualClock(T);
    const client = new RoutingClient({
      baseUrl: server.api,
      clock: clock.now,
      timeoutMs: 100,
      whenUnreachable: 'serveStaleReads',
      ...breaker,
    });
    await client.resolve('conv-s');
    server.state.hung = true;
    clock.set(T + 1_000);
    for (let i = 0; i < 3; i += 1) expect((await client.resolve('conv-s')).stale?.code).toBe('Unreachable');
    expect(client.breakerState().kind).toBe('open');
    const served = await client.resolve('conv-s');
    expect(served.stale?.code).toBe('BreakerOpen');
    expect(served.enforcement).toMatchObject({ read: 'allow', write: 'deny', delete: 'deny' });
    expect(client.requests).toBe(4);
  });

  test('an HTTP answer is not a failure: 503s in a row never open it', async () => {
    const server = await scriptedServer(() => ({ status: 503, raw: '<html>busy</html>' }));
    closers.push(server.close);
    const client = new RoutingClient({ baseUrl: server.api, ...breaker, breakerFailures: 1 });
    for (let i = 0; i < 5; i += 1)
      expect((await client.decideFor(`conv-${i}`, 'read', SOURCE)).decision.kind).toBe('unavailable');
    expect(client.breakerState()).toEqual({ kind: 'closed', failures: 0 });
    expect(server.requests()).toBe(5);
  });

  test('breakerFailures 0: it never opens', async () => {
    const server = await hangingServer();
    const client = new RoutingClient({ baseUrl: server.api, timeoutMs: 50, breakerFailures: 0 });
    for (let i = 0; i < 4; i += 1) await failure(client.resolve(`conv-${i}`));
    expect(client.breakerState().kind).toBe('closed');
    expect(server.requests()).toBe(4);
  });
});

describe('a per-call signal', () => {
  test('an aborted resolve rejects at once with Aborted, and its request is aborted', async () => {
    const server = await hangingServer();
    const client = new RoutingClient({ baseUrl: server.api, timeoutMs: 60_000 });
    const controller = new AbortController();
    const call = failure(client.resolve('conv-1', { signal: controller.signal }));
    await until(() => server.requests() === 1);
    controller.abort();
    const error = await call; // a request that still waited would hang to the test's timeout
    expect(error).toBeInstanceOf(RoutingServiceError);
    expect(error).toMatchObject({ status: 0, code: 'Aborted' });
    await until(() => server.state.socketsClosed === 1);
    expect(client.breakerState()).toEqual({ kind: 'closed', failures: 0 }); // not a failure of the host
  });

  test('an already aborted signal sends nothing; decideFor throws Aborted rather than deciding', async () => {
    const server = await hangingServer();
    const client = new RoutingClient({ baseUrl: server.api, timeoutMs: 60_000 });
    const signal = AbortSignal.abort();
    expect(await failure(client.resolve('conv-1', { signal }))).toMatchObject({ code: 'Aborted' });
    expect(await failure(client.decideFor('conv-1', 'read', SOURCE, { signal }))).toMatchObject({
      code: 'Aborted',
    });
    expect(server.requests()).toBe(0);
  });

  test('a deadline (AbortSignal.timeout) ends the call, not the client timeout', async () => {
    const server = await hangingServer();
    const client = new RoutingClient({ baseUrl: server.api, timeoutMs: 60_000 });
    const error = await failure(client.resolve('conv-1', { signal: AbortSignal.timeout(50) }));
    expect(error).toMatchObject({ code: 'Aborted' });
    expect((error as Error).message).toMatch(/aborted/);
  });

  test('a shared request is not aborted by one caller while another still waits for it', async () => {
    const server = await hangingServer();
    const client = new RoutingClient({ baseUrl: server.api, timeoutMs: 60_000 });
    const first = new AbortController();
    const second = new AbortController();
    const leaving = failure(client.resolve('conv-1', { signal: first.signal }));
    const staying = failure(client.resolve('conv-1', { signal: second.signal }));
    const plain = client.resolve('conv-1');
    await until(() => server.requests() === 1);
    first.abort();
    expect(await leaving).toMatchObject({ code: 'Aborted' });
    second.abort(); // the plain call still waits: the request goes on
    await new Promise((r) => setTimeout(r, 50));
    expect(server.state.socketsClosed).toBe(0);
    server.state.release();
    expect(await plain).toMatchObject({ resourceId: 'conv-1' });
    expect(await staying).toMatchObject({ code: 'Aborted' });
    expect(server.requests()).toBe(1);
    expect(client.joined).toBe(2);
  });

  test('once every caller of a shared request has aborted, the request is aborted and a new call sends its own', async () => {
    const server = await hangingServer();
    const client = new RoutingClient({ baseUrl: server.api, timeoutMs: 60_000 });
    const a = new AbortController();
    const b = new AbortController();
    const calls = [a, b].map((c) => failure(client.resolve('conv-1', { signal: c.signal })));
    await until(() => server.requests() === 1);
    a.abort();
    b.abort();
    for (const error of await Promise.all(calls)) expect(error).toMatchObject({ code: 'Aborted' });
    await until(() => server.state.socketsClosed === 1);
    server.state.hung = false;
    expect(await client.resolve('conv-1')).toMatchObject({ resourceId: 'conv-1' });
    expect(server.requests()).toBe(2);
  });
});

describe('maxCacheSeconds', () => {
  test('a view is cached at most maxCacheSeconds, whatever max-age arrives', async () => {
    const server = await hangingServer('private, max-age=3600');
    server.state.hung = false;
    const clock = new ManualClock(T);
    const client = new RoutingClient({ baseUrl: server.api, clock: clock.now, maxCacheSeconds: 2 });
    await client.resolve('conv-1');
    clock.set(T + 1_999);
    await client.resolve('conv-1');
    expect(server.requests()).toBe(1);
    clock.set(T + 2_000);
    await client.resolve('conv-1');
    expect(server.requests()).toBe(2);
  });

  test('by default at most 60 s (the production local tier)', async () => {
    const server = await hangingServer('private, max-age=3600');
    server.state.hung = false;
    const clock = new ManualClock(T);
    const client = new RoutingClient({ baseUrl: server.api, clock: clock.now });
    await client.resolve('conv-1');
    clock.set(T + 59_999);
    await client.resolve('conv-1');
    expect(server.requests()).toBe(1);
    clock.set(T + 60_000);
    await client.resolve('conv-1');
    expect(server.requests()).toBe(2);
  });
});

async function until(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`not so after 5 s: ${condition.toString()}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
