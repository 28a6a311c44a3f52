import { DEFAULT_NOT_FOUND_TTL_MS, RoutingClient, RoutingServiceError } from '../../shared/core/client';
import { type HostOnClock, SOURCE, T, hostOnManualClock, scriptedServer } from './harness';

/**
 * A short negative cache for 404. A storm of lookups of a missing id costs one request per
 * `notFoundTtlMs`; a route created elsewhere meanwhile is seen at most that long late (safe: a 404
 * allows nothing), and one this client creates is seen at once.
 */

let h: HostOnClock | undefined;
afterEach(async () => {
  await h?.host.close();
  h = undefined;
});

const failure = (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (e: unknown) => e,
  );

test('1,000 lookups of a missing id, concurrent and then one by one within the TTL, cost one request', async () => {
  h = await hostOnManualClock('dev');
  const client = new RoutingClient({ baseUrl: h.api, clock: h.clock.now });
  const errors = await Promise.all(Array.from({ length: 500 }, () => failure(client.resolve('conv-none'))));
  for (let i = 0; i < 500; i += 1) errors.push(await failure(client.resolve('conv-none')));
  expect(
    errors.every((e) => e instanceof RoutingServiceError && e.status === 404 && e.code === 'NotFound'),
  ).toBe(true);
  expect(client.requests).toBe(1);
  expect(DEFAULT_NOT_FOUND_TTL_MS).toBeLessThanOrEqual(5_000); // "a few seconds at most"
});

test('a route created elsewhere is seen at most notFoundTtlMs after the 404; one created here at once', async () => {
  h = await hostOnManualClock('dev');
  const client = new RoutingClient({ baseUrl: h.api, clock: h.clock.now, notFoundTtlMs: 1000 });
  const elsewhere = new RoutingClient({ baseUrl: h.api, clock: h.clock.now });
  expect(await failure(client.resolve('conv-new'))).toMatchObject({ status: 404 });
  await elsewhere.putRoute('conv-new', SOURCE);
  h.clock.set(T + 999);
  expect(await failure(client.resolve('conv-new'))).toMatchObject({ status: 404 }); // remembered
  h.clock.set(T + 1000);
  expect(await client.resolve('conv-new')).toMatchObject({ resourceId: 'conv-new', location: SOURCE });

  expect(await failure(client.resolve('conv-mine'))).toMatchObject({ status: 404 });
  await client.putRoute('conv-mine', SOURCE);
  expect(await client.resolve('conv-mine')).toMatchObject({ resourceId: 'conv-mine' });
});

test('negative control: with notFoundTtlMs 0 every lookup of a missing id is a request', async () => {
  h = await hostOnManualClock('dev');
  const client = new RoutingClient({ baseUrl: h.api, clock: h.clock.now, notFoundTtlMs: 0 });
  for (let i = 0; i < 20; i += 1) await failure(client.resolve('conv-none'));
  expect(client.requests).toBe(20);
});

test('a 404 that is not NotFound (a wrong base URL) is not remembered, and is NotRoutelock', async () => {
  const server = await scriptedServer(() => ({ status: 404, body: { title: 'no such path' } }));
  try {
    const client = new RoutingClient({ baseUrl: server.api });
    for (let i = 0; i < 3; i += 1)
      expect(await failure(client.resolve('conv-1'))).toMatchObject({ status: 404, code: 'NotRoutelock' });
    expect(server.requests()).toBe(3);
    expect(await client.decideFor('conv-1', 'write', SOURCE).catch((e: unknown) => e)).toMatchObject({
      code: 'NotRoutelock',
    });
  } finally {
    await server.close();
  }
});

// A resolve in flight across this client's own putRoute must not cache its 404 after it.
test('a 404 answered across this client’s own putRoute is not cached: the route is seen at once', async () => {
  // A whole route view (the client checks the shape), with an `id` of the test's own.
  const view = {
    id: 'conv-race',
    resourceId: 'conv-race',
    location: SOURCE,
    secondary: null,
    lock: null,
    enforcement: { read: 'allow', write: 'allow', delete: 'allow' },
    etag: 'e1',
  };
  const problem = () =>
    new Response(
      JSON.stringify({
        status: 404,
        code: 'NotFound',
        detail: 'no route',
        instance: '/api/routes/conv-race',
      }),
      {
        status: 404,
        headers: { 'content-type': 'application/problem+json' },
      },
    );
  let answerHeldGet: (() => void) | undefined;
  let gets = 0;
  const client = new RoutingClient({
    baseUrl: 'http://routing.test/api',
    fetch: (_url, init) => {
      if (init?.method === 'PUT') return Promise.resolve(new Response(JSON.stringify(view), { status: 200 }));
      gets += 1;
      if (gets === 1) return new Promise<Response>((answer) => (answerHeldGet = () => answer(problem())));
      return Promise.resolve(
        new Response(JSON.stringify(view), { status: 200, headers: { 'cache-control': 'no-store' } }),
      );
    },
  });
  const before = failure(client.resolve('conv-race'));
  await new Promise((r) => setImmediate(r));
  await client.putRoute('conv-race', SOURCE);
  answerHeldGet?.();
  expect(await before).toMatchObject({ status: 404 });
  // the PUT came after that request left: its 404 is not remembered, and no later resolve joins it
  expect(await client.resolve('conv-race')).toMatchObject({ id: 'conv-race' });
  expect(gets).toBe(2);
});
