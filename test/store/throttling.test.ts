import { RouteLockError } from '../../shared/core/errors';
import { newLocationDocument } from '../../shared/core/lock/document';
import { maxStoreRetryAfterSeconds, storeError } from '../../shared/core/store/cosmos/common';
import { type CosmosTestServer, startCosmosServer, throttled } from '../../testkit/cosmosServer';
import { call, handlerServices } from '../support/handlers';

/**
 * Cosmos DB's 429 says how long to wait (`x-ms-retry-after-ms`). The SDK waits that long between its own
 * few retries; when they run out, the router's 503 `StoreUnavailable` carries it on as `Retry-After`,
 * in whole seconds (rounded up, at least 1, at most maxStoreRetryAfterSeconds).
 */

let quoted: CosmosTestServer;
beforeAll(async () => {
  quoted = await startCosmosServer({ quotedEtags: true });
});
afterAll(async () => {
  await quoted.close();
});
afterEach(() => quoted.intercept(undefined));

test.each([
  ['the SDK field', { statusCode: 429, retryAfterInMs: 4200 }, 5],
  ['the header alone', { code: 429, headers: { 'x-ms-retry-after-ms': '1500' } }, 2],
  ['a few ms', { code: 429, retryAfterInMs: 3 }, 1],
  ['zero', { code: 429, retryAfterInMs: 0 }, 1],
  ['ten minutes: capped', { code: 429, retryAfterInMs: 600_000 }, maxStoreRetryAfterSeconds],
  ['nothing said', { code: 429 }, 1],
  ['a header that is no number', { code: 429, headers: { 'x-ms-retry-after-ms': 'soon' } }, 1],
])('a 429 with %s %j: Retry-After %i s', (_name, raw, seconds) => {
  const mapped = storeError(Object.assign(new Error('sdk'), raw), 'r-1');
  expect(mapped).toMatchObject({ code: 'StoreUnavailable', retryAfterSeconds: seconds });
});

/** Every item request throttled with `retryAfterMs` (or no header); counts what the SDK sent. */
function throttleItems(retryAfterMs: number | undefined): { requests: number } {
  const seen = { requests: 0 };
  quoted.intercept((req) => {
    if (!req.path.includes('/docs')) return;
    seen.requests += 1;
    if (retryAfterMs !== undefined) return throttled(retryAfterMs);
    const answer = throttled(0);
    delete answer.headers?.['x-ms-retry-after-ms'];
    return answer;
  });
  return seen;
}

test('the service asks for 1001 ms: the SDK waits it between its 3 retries, then GET answers 503 with Retry-After: 2', async () => {
  await handlerServices({}, await quoted.connect());
  const seen = throttleItems(1001);
  const started = Date.now();
  const got = await call('getRoute', { params: { id: 'hot-1' } });
  const elapsed = Date.now() - started;
  expect(got.status).toBe(503);
  expect(got.body).toMatchObject({ code: 'StoreUnavailable', retryAfterSeconds: 2 });
  expect(got.headers.get('retry-after')).toBe('2');
  expect(seen.requests).toBe(4); // the first try and the SDK's 3 retries (maxRetryAttemptCount)
  expect(elapsed).toBeGreaterThanOrEqual(3 * 1001 - 50);
});

test('negative control: a 429 without the header gets the 1 s default', async () => {
  const store = await quoted.connect();
  const seen = throttleItems(undefined);
  const error = await store.read('hot-2', { from: 'nearest' }).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(RouteLockError);
  expect(error).toMatchObject({ code: 'StoreUnavailable', retryAfterSeconds: 1 });
  expect(seen.requests).toBe(4);
});

test('a write throttled with 2500 ms: the conditional replace surfaces StoreUnavailable, Retry-After 3', async () => {
  const store = await quoted.connect();
  const created = await store.create(newLocationDocument('hot-3', { region: 'westeurope' }));
  const seen = throttleItems(2500);
  const error = await store.replace(created.doc, created.etag).catch((e: unknown) => e);
  expect(error).toMatchObject({ code: 'StoreUnavailable', retryAfterSeconds: 3 });
  // the SDK stops once its waits reach maxWaitTimeInSeconds (5 s): two retries of 2.5 s
  expect(seen.requests).toBe(3);
});
