import { API_VERSION, RoutingClient, RoutingServiceError } from '../../shared/core/client';
import { API_VERSION_HEADER } from '../../shared/core/apiVersion';
import { Front, type HostOnClock, SOURCE, hostOnManualClock, scriptedServer } from './harness';

/**
 * A wrong base URL fails loudly. `ready()` checks at start-up that the base URL reaches routelock's
 * health endpoint and that the API version it reports is one this client speaks; and a 404 that is not
 * a route's own problem is `NotRoutelock`, never the decision `notFound` (which would refuse every
 * request of the service with no error anywhere).
 */

let h: HostOnClock | undefined;
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await h?.host.close();
  h = undefined;
  for (const close of closers.splice(0)) await close();
});

const failure = (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (e: unknown) => e,
  );

test('against the embedded host: ready() reports the API version and the store', async () => {
  h = await hostOnManualClock('dev');
  const client = new RoutingClient({ baseUrl: h.api, clock: h.clock.now });
  expect(await client.ready()).toEqual({ apiVersion: API_VERSION, store: 'sqlite' });
  // a missing route is still routelock's own 404: the decision notFound
  expect(await client.decideFor('conv-none', 'read', SOURCE)).toMatchObject({
    decision: { kind: 'notFound' },
  });
  expect(await failure(client.resolve('conv-none'))).toMatchObject({ status: 404, code: 'NotFound' });
});

test('a base URL without /api: ready() rejects NotRoutelock, and so does every resolve (never notFound)', async () => {
  h = await hostOnManualClock('dev');
  const client = new RoutingClient({ baseUrl: h.host.url, clock: h.clock.now });
  const notReady = await failure(client.ready());
  expect(notReady).toBeInstanceOf(RoutingServiceError);
  expect(notReady).toMatchObject({ status: 404, code: 'NotRoutelock' });
  expect((notReady as Error).message).toMatch(/base URL ends in \/api/);
  await new RoutingClient({ baseUrl: h.api }).putRoute('conv-1', SOURCE);
  expect(await failure(client.resolve('conv-1'))).toMatchObject({ status: 404, code: 'NotRoutelock' });
  expect(await failure(client.decideFor('conv-1', 'write', SOURCE))).toMatchObject({ code: 'NotRoutelock' });
});

test('a path under /api that is no endpoint (a stray prefix) is NotRoutelock too', async () => {
  h = await hostOnManualClock('dev');
  const client = new RoutingClient({ baseUrl: `${h.api}/v2`, clock: h.clock.now });
  expect(await failure(client.ready())).toMatchObject({ code: 'NotRoutelock' });
  expect(await failure(client.decideFor('conv-1', 'read', SOURCE))).toMatchObject({ code: 'NotRoutelock' });
});

test('an unreachable host: ready() rejects Unreachable (status 0)', async () => {
  const front = await Front.start();
  const api = front.api;
  await front.kill(); // the port is closed: every connection is refused
  const error = await failure(new RoutingClient({ baseUrl: api, timeoutMs: 1_000 }).ready());
  expect(error).toBeInstanceOf(RoutingServiceError);
  expect(error).toMatchObject({ status: 0, code: 'Unreachable' });
});

test.each([
  [
    'an HTML 404 page',
    { status: 404, headers: { 'content-type': 'text/html' }, raw: '<html>Not Found</html>' },
  ],
  ['a 404 with no body', { status: 404, raw: '' }],
  [
    'a 404 problem that is not routelock’s',
    { status: 404, body: { code: 'NotFound', detail: 'no such page' } },
  ],
  [
    'a 200 that is some other service',
    { status: 200, headers: { 'content-type': 'text/html' }, raw: '<html>welcome</html>' },
  ],
])('%s: NotRoutelock from ready() and from a resolve', async (_n, answer) => {
  const server = await scriptedServer(() => answer);
  closers.push(server.close);
  const client = new RoutingClient({ baseUrl: server.api });
  expect(await failure(client.ready())).toMatchObject({ code: 'NotRoutelock' });
  const resolved = await failure(client.decideFor('conv-1', 'read', SOURCE));
  expect(resolved).toBeInstanceOf(RoutingServiceError);
  expect((resolved as RoutingServiceError).code).toBe(
    answer.status === 404 ? 'NotRoutelock' : 'InvalidResponse',
  );
});

test.each([
  ['no version', {}, /reports API version \(none\)/],
  [
    'a version from the future',
    { [API_VERSION_HEADER]: String(API_VERSION + 1) },
    /reports API version "2"; this client supports 1/,
  ],
  ['a version that is not a number', { [API_VERSION_HEADER]: 'v1' }, /"v1"/],
])('a routelock health check with %s: IncompatibleServer', async (_n, headers, message) => {
  const server = await scriptedServer(() => ({
    status: 200,
    headers,
    body: { status: 'ok', store: 'cosmos' },
  }));
  closers.push(server.close);
  const error = await failure(new RoutingClient({ baseUrl: server.api }).ready());
  expect(error).toBeInstanceOf(RoutingServiceError);
  expect(error).toMatchObject({ code: 'IncompatibleServer' });
  expect((error as Error).message).toMatch(message);
});

test('the control: the same health check with the supported version is ready', async () => {
  const server = await scriptedServer(() => ({
    status: 200,
    headers: { [API_VERSION_HEADER]: String(API_VERSION) },
    body: { status: 'ok', store: 'cosmos' },
  }));
  closers.push(server.close);
  expect(await new RoutingClient({ baseUrl: server.api }).ready()).toEqual({
    apiVersion: 1,
    store: 'cosmos',
  });
});
