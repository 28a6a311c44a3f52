import { RoutingClient, RoutingServiceError } from '../../shared/core/client';
import { Front } from './harness';

/**
 * A hung routing service does not hang the service's requests. `timeoutMs` bounds the
 * whole exchange (headers and body); the timeout is `Unreachable` (status 0, retry after 1 s), saying it
 * timed out. The bounds below only catch a hang; they are not speed checks.
 */

const fronts: Front[] = [];
afterEach(async () => {
  for (const front of fronts.splice(0)) await front.kill();
});

async function hungFront(mode: 'hang' | 'hangBody'): Promise<Front> {
  const front = await Front.start();
  front.mode = mode;
  fronts.push(front);
  return front;
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => 'resolved',
    (error: unknown) => error,
  );
}

test.each(['hang', 'hangBody'] as const)(
  'a server that %s: resolve fails with Unreachable "timed out" after timeoutMs',
  async (mode) => {
    const front = await hungFront(mode);
    const client = new RoutingClient({ baseUrl: front.api, timeoutMs: 200 });
    const started = Date.now();
    const error = await failure(client.resolve('conv-1'));
    const elapsed = Date.now() - started;
    expect(error).toBeInstanceOf(RoutingServiceError);
    expect(error).toMatchObject({ status: 0, code: 'Unreachable', retryAfterSeconds: 1 });
    expect((error as Error).message).toMatch(/timed out after 200 ms/);
    expect(elapsed).toBeGreaterThanOrEqual(190);
    expect(elapsed).toBeLessThan(10_000);
    expect(front.requests).toBe(1);
  },
);

test('a fetch that ignores its abort signal is cut off all the same', async () => {
  const client = new RoutingClient({
    baseUrl: 'http://routing.invalid/api',
    timeoutMs: 100,
    fetch: () => new Promise<Response>(() => undefined),
  });
  expect(await failure(client.resolve('conv-1'))).toMatchObject({ status: 0, code: 'Unreachable' });
});

test('the timeout covers lock calls too, and concurrent resolves share the one timed-out request', async () => {
  const front = await hungFront('hang');
  const client = new RoutingClient({ baseUrl: front.api, timeoutMs: 150 });
  const errors = await Promise.all(Array.from({ length: 50 }, () => failure(client.resolve('conv-1'))));
  expect(errors.every((e) => e instanceof RoutingServiceError && e.code === 'Unreachable')).toBe(true);
  expect(front.requests).toBe(1);
  const prelock = await failure(
    client.prelock('conv-1', { migrationId: 'm', owner: 'o', target: { region: 'x' } }),
  );
  expect(prelock).toMatchObject({ status: 0, code: 'Unreachable' });
  expect((prelock as Error).message).toMatch(/POST \/routes\/conv-1\/prelock timed out/);
});

test('a timeout must be positive', () => {
  expect(() => new RoutingClient({ baseUrl: 'http://x/api', timeoutMs: 0 })).toThrow(RangeError);
});

// The access-token callback runs inside the deadline: started before the timer, a hung credential would
// hang every resolve, and one that threw would surface as a raw error.
test('a hung access-token callback is inside the deadline; a failing one is Unreachable', async () => {
  const hung = new RoutingClient({
    baseUrl: 'http://routing.invalid/api',
    timeoutMs: 100,
    accessToken: () => new Promise<string>(() => undefined),
    fetch: () => Promise.reject(new Error('never reached')),
  });
  const error = await failure(hung.resolve('conv-1'));
  expect(error).toMatchObject({ status: 0, code: 'Unreachable' });
  expect((error as Error).message).toMatch(/timed out after 100 ms/);
  const failing = new RoutingClient({
    baseUrl: 'http://routing.invalid/api',
    accessToken: () => Promise.reject(new Error('no managed identity')),
    fetch: () => Promise.reject(new Error('never reached')),
  });
  const refused = await failure(failing.resolve('conv-1'));
  expect(refused).toBeInstanceOf(RoutingServiceError);
  expect(refused).toMatchObject({ status: 0, code: 'Unreachable' });
  expect((refused as Error).message).toMatch(/No access token.*no managed identity/);
});

test("a gateway's HTTP-date Retry-After is ignored, not NaN", async () => {
  const client = new RoutingClient({
    baseUrl: 'http://routing.invalid/api',
    fetch: () =>
      Promise.resolve(
        new Response('<html>busy</html>', {
          status: 503,
          headers: { 'retry-after': 'Wed, 21 Oct 2026 07:28:00 GMT' },
        }),
      ),
  });
  const error = await failure(client.resolve('conv-1'));
  expect(error).toMatchObject({ status: 503, retryAfterSeconds: undefined });
});
