import { type ClientMetrics, RoutingClient, RoutingServiceError } from '../../shared/core/client';
import { Front, type HostOnClock, SOURCE, T, TARGET, hostOnManualClock } from './harness';

/**
 * Refresh ahead against the embedded host (dev profile: views cached 2 s, so the last fifth is the last
 * 400 ms): a hit late in a view's life refreshes it in the background, and the request that would have
 * found it expired is served from the cache instead of waiting. The rules around it: a started lock is
 * fetched by every request as before, a failed refresh keeps the view only until it expires (then the
 * outage policy), the breaker counts it, one refresh per view, and no request, no refresh.
 */

let h: HostOnClock | undefined;
let front: Front | undefined;
afterEach(async () => {
  await front?.kill();
  await h?.host.close();
  h = undefined;
  front = undefined;
});

/** Counts of the client's metrics hooks, and a wait for the background requests to end. */
function counting() {
  const counts = { hits: 0, misses: 0, ahead: 0, requests: 0, background: 0, errors: [] as string[] };
  const metrics: ClientMetrics = {
    cacheHit: () => (counts.hits += 1),
    cacheMiss: () => (counts.misses += 1),
    refreshAhead: () => (counts.ahead += 1),
    request: (r) => {
      counts.requests += 1;
      if (r.background) counts.background += 1;
    },
    error: (code) => counts.errors.push(code),
  };
  const settled = async (background: number) => {
    for (let i = 0; i < 200 && counts.background < background; i += 1)
      await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 10)); // the answer cached after its request ended
    expect(counts.background).toBe(background);
  };
  return { counts, metrics, settled };
}

test('a hit in the last fifth refreshes the view in the background: the request at its expiry does not wait', async () => {
  h = await hostOnManualClock('dev');
  const { counts, metrics, settled } = counting();
  const client = new RoutingClient({ baseUrl: h.api, clock: h.clock.now, metrics });
  await client.putRoute('conv-1', SOURCE);
  await client.resolve('conv-1'); // fetched at T
  expect(counts).toMatchObject({ misses: 1, requests: 2 }); // the PUT and the GET
  h.clock.set(T + 1_000);
  await client.resolve('conv-1');
  expect(counts).toMatchObject({ hits: 1, ahead: 0, requests: 2 }); // fresh: nothing more
  h.clock.set(T + 1_700);
  await client.resolve('conv-1'); // served at once, and refreshed behind it
  expect(counts).toMatchObject({ hits: 2, ahead: 1 });
  await settled(1);
  h.clock.set(T + 2_100); // the first view has expired: the refreshed one answers
  for (let i = 0; i < 50; i += 1) await client.resolve('conv-1');
  expect(counts).toMatchObject({ hits: 52, misses: 1, ahead: 1, requests: 3 });
});

test('negative control: with refreshAheadShare 0 the request at the expiry waits for the fetch', async () => {
  h = await hostOnManualClock('dev');
  const { counts, metrics } = counting();
  const client = new RoutingClient({ baseUrl: h.api, clock: h.clock.now, metrics, refreshAheadShare: 0 });
  await client.putRoute('conv-1', SOURCE);
  await client.resolve('conv-1');
  h.clock.set(T + 1_700);
  await client.resolve('conv-1');
  h.clock.set(T + 2_100);
  await client.resolve('conv-1');
  expect(counts).toMatchObject({ hits: 1, misses: 2, ahead: 0, background: 0, requests: 3 });
});

test('a started lock is fetched by every request, as before: nothing is refreshed ahead', async () => {
  h = await hostOnManualClock('dev');
  const { counts, metrics } = counting();
  const client = new RoutingClient({ baseUrl: h.api, clock: h.clock.now, metrics, clockSkewSeconds: 0 });
  await client.putRoute('conv-1', SOURCE);
  const grant = await client.prelock('conv-1', { migrationId: 'm-1', owner: 'test', target: TARGET });
  h.clock.set(Date.parse(grant.startsAt) + 1);
  const before = counts.requests;
  for (let i = 0; i < 5; i += 1) {
    const view = await client.resolve('conv-1');
    expect(view.lock).not.toBeNull();
  }
  expect(counts.requests - before).toBe(5);
  expect(counts).toMatchObject({ ahead: 0, background: 0 });
});

test('a failed refresh keeps the view until it expires, then the outage policy applies; the breaker counts it', async () => {
  h = await hostOnManualClock('dev');
  front = await Front.start(h.api);
  const { counts, metrics, settled } = counting();
  const client = new RoutingClient({ baseUrl: front.api, clock: h.clock.now, metrics, breakerFailures: 1 });
  await client.putRoute('conv-1', SOURCE);
  await client.resolve('conv-1');
  await front.kill(); // the host is gone: the connection is refused
  h.clock.set(T + 1_700);
  expect(await client.resolve('conv-1')).toMatchObject({ location: SOURCE });
  await settled(1);
  expect(client.breakerState().kind).toBe('open'); // the background failure opened it
  expect(counts.errors).toEqual(['Unreachable']);
  h.clock.set(T + 1_900);
  for (let i = 0; i < 20; i += 1) expect(await client.resolve('conv-1')).toMatchObject({ location: SOURCE });
  expect(counts).toMatchObject({ ahead: 1, background: 1 }); // one refresh per view, not one per hit
  h.clock.set(T + 2_000);
  const error = await client.resolve('conv-1').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(RoutingServiceError);
  expect(error).toMatchObject({ code: 'BreakerOpen' }); // whenUnreachable 'fail': the outage surfaces
});

test('an id nobody asks for is not refreshed: refresh ahead is started by requests only', async () => {
  h = await hostOnManualClock('dev');
  const { counts, metrics } = counting();
  const client = new RoutingClient({ baseUrl: h.api, clock: h.clock.now, metrics });
  await client.putRoute('conv-1', SOURCE);
  await client.resolve('conv-1');
  for (const at of [1_700, 1_900, 5_000, 60_000]) {
    h.clock.set(T + at);
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(counts).toMatchObject({ ahead: 0, background: 0, requests: 2 });
});

test('a resolve that finds the view expired while its refresh is out joins it instead of sending another', async () => {
  h = await hostOnManualClock('dev');
  const { counts, metrics, settled } = counting();
  const client = new RoutingClient({ baseUrl: h.api, clock: h.clock.now, metrics });
  await client.putRoute('conv-1', SOURCE);
  await client.resolve('conv-1');
  h.clock.set(T + 1_999);
  await client.resolve('conv-1'); // starts the refresh, once this request has been answered
  await new Promise((r) => setImmediate(r));
  h.clock.set(T + 2_000); // expired before the refresh came back
  await client.resolve('conv-1');
  await settled(1);
  expect(counts).toMatchObject({ ahead: 1, misses: 2, requests: 3 });
  expect(client.joined).toBe(1);
});

test('GET /api/routes/{id} with Cache-Control: no-cache revalidates the server’s copy: a whole TTL, Age 0', async () => {
  h = await hostOnManualClock('dev');
  const client = new RoutingClient({ baseUrl: h.api, clock: h.clock.now });
  await client.putRoute('conv-1', SOURCE);
  await fetch(`${h.api}/routes/conv-1`); // the server's cache holds it from T
  h.clock.set(T + 1_700);
  const cached = await fetch(`${h.api}/routes/conv-1`);
  expect([cached.headers.get('cache-control'), cached.headers.get('age')]).toEqual([
    'private, max-age=0',
    '1',
  ]);
  const revalidated = await fetch(`${h.api}/routes/conv-1`, { headers: { 'cache-control': 'no-cache' } });
  expect([revalidated.headers.get('cache-control'), revalidated.headers.get('age')]).toEqual([
    'private, max-age=2',
    '0',
  ]);
});
