import { RoutingClient, RoutingServiceError } from '../../shared/core/client';
import { ManualClock } from '../../testkit/clock';
import { SOURCE, T, scriptedServer } from './harness';

/**
 * What the client does with each kind of answer, against a node:http server that sends it:
 * - a 2xx body of the wrong shape (or not JSON) is `InvalidResponse`, refused where it arrives, never a
 *   TypeError from inside `decide`, and never cached;
 * - 429 is `Throttled` with its Retry-After, and 500 is an outage: `decideFor` answers `unavailable`, and
 *   under `serveStaleReads` reads are served from the last view, as when routelock cannot be reached.
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

const view = {
  resourceId: 'conv-1',
  location: SOURCE,
  secondary: null,
  lock: null,
  enforcement: { read: 'allow', write: 'allow', delete: 'allow' },
  etag: 'e1',
};

type Answer = { status: number; headers?: Record<string, string>; body?: unknown; raw?: string };

async function serving(answer: () => Answer) {
  const server = await scriptedServer(answer);
  closers.push(server.close);
  return server;
}

const malformed: [string, Answer][] = [
  ['an array', { status: 200, body: [view] }],
  ['a view without its enforcement', { status: 200, body: { ...view, enforcement: undefined } }],
  ['a lock that is a string', { status: 200, body: { ...view, lock: 'write' } }],
  ['a location without a region', { status: 200, body: { ...view, location: { account: 'x' } } }],
  [
    'an unknown verdict',
    { status: 200, body: { ...view, enforcement: { ...view.enforcement, write: 'maybe' } } },
  ],
  ['null', { status: 200, raw: 'null' }],
  ['an empty body', { status: 200, raw: '' }],
  ['broken JSON', { status: 200, raw: '{"resourceId":' }],
  ['an HTML page', { status: 200, headers: { 'content-type': 'text/html' }, raw: '<html>hello</html>' }],
];

test.each(malformed)(
  'a 200 with %s: InvalidResponse from resolve and decideFor, nothing cached',
  async (_n, answer) => {
    const server = await serving(() => ({ headers: { 'cache-control': 'max-age=60' }, ...answer }));
    const client = new RoutingClient({ baseUrl: server.api });
    for (let i = 0; i < 2; i += 1) {
      const error = await failure(client.resolve('conv-1'));
      expect(error).toBeInstanceOf(RoutingServiceError);
      expect(error).toMatchObject({ status: 200, code: 'InvalidResponse' });
    }
    expect(await failure(client.decideFor('conv-1', 'write', SOURCE))).toMatchObject({
      code: 'InvalidResponse',
    });
    expect(server.requests()).toBe(3);
  },
);

test('a well-formed view passes (the control): the same server, the whole view', async () => {
  const server = await serving(() => ({ status: 200, body: { ...view, addedByANewerServer: true } }));
  const client = new RoutingClient({ baseUrl: server.api });
  expect(await client.decideFor('conv-1', 'write', SOURCE)).toMatchObject({ decision: { kind: 'allow' } });
});

test('a lock call answered with something that is not a grant is InvalidResponse', async () => {
  const server = await serving(() => ({ status: 200, body: { etag: 'x' } }));
  const client = new RoutingClient({ baseUrl: server.api });
  const error = await failure(client.prelock('conv-1', { migrationId: 'm', owner: 'o', target: SOURCE }));
  expect(error).toMatchObject({ status: 200, code: 'InvalidResponse' });
  expect((error as Error).message).toMatch(
    /POST \/routes\/conv-1\/prelock answered 200 with JSON of the wrong shape/,
  );
});

test('429: Throttled with its Retry-After; decideFor answers unavailable with that wait', async () => {
  const server = await serving(() => ({
    status: 429,
    headers: { 'retry-after': '7' },
    body: { status: 429, title: 'Too many requests' },
  }));
  const client = new RoutingClient({ baseUrl: server.api });
  const error = await failure(client.resolve('conv-1'));
  expect(error).toBeInstanceOf(RoutingServiceError);
  expect(error).toMatchObject({ status: 429, code: 'Throttled', retryAfterSeconds: 7 });
  expect(await client.decideFor('conv-1', 'write', SOURCE)).toEqual({
    decision: { kind: 'unavailable', retryAfterSeconds: 7 },
    view: null,
    resolvedAt: null,
  });
});

test('429 without Retry-After: Throttled, come back in 1 s', async () => {
  const server = await serving(() => ({ status: 429, raw: '' }));
  const client = new RoutingClient({ baseUrl: server.api });
  expect(await failure(client.resolve('conv-1'))).toMatchObject({ code: 'Throttled', retryAfterSeconds: 1 });
});

test('500: an outage; decideFor answers unavailable rather than throwing', async () => {
  const server = await serving(() => ({
    status: 500,
    headers: { 'content-type': 'application/problem+json' },
    body: { status: 500, code: 'InternalError', detail: 'The server failed to handle the request.' },
  }));
  const client = new RoutingClient({ baseUrl: server.api });
  expect(await failure(client.resolve('conv-1'))).toMatchObject({ status: 500, code: 'InternalError' });
  expect(await client.decideFor('conv-1', 'read', SOURCE)).toMatchObject({
    decision: { kind: 'unavailable', retryAfterSeconds: 1 },
  });
});

test.each([
  ['500', { status: 500, raw: '<html>boom</html>', headers: { 'content-type': 'text/html' } }],
  ['429', { status: 429, raw: '', headers: { 'retry-after': '3' } }],
])("%s under 'serveStaleReads': reads from the last view, writes unavailable", async (_s, failing) => {
  let answer: Answer = { status: 200, headers: { 'cache-control': 'max-age=1' }, body: view };
  const server = await serving(() => answer);
  const clock = new ManualClock(T);
  const client = new RoutingClient({
    baseUrl: server.api,
    clock: clock.now,
    whenUnreachable: 'serveStaleReads',
  });
  await client.resolve('conv-1');
  answer = failing;
  clock.advance(2_000); // past its freshness
  const read = await client.decideFor('conv-1', 'read', SOURCE);
  expect(read.decision).toEqual({ kind: 'allow' });
  expect(read.view?.stale).toMatchObject({ freshUntil: T + 1_000 });
  expect((await client.decideFor('conv-1', 'write', SOURCE)).decision).toMatchObject({ kind: 'unavailable' });
  // negative control: the default policy serves nothing stale
  const failing2 = new RoutingClient({ baseUrl: server.api, clock: clock.now });
  expect((await failing2.decideFor('conv-1', 'read', SOURCE)).decision).toMatchObject({
    kind: 'unavailable',
  });
});
