import { problemFromError } from '../../functions/http/problem';
import { parseConfig } from '../../shared/config';
import { RouteLockError } from '../../shared/core/errors';
import { newLocationDocument } from '../../shared/core/lock/document';
import { createActivities } from '../../shared/migration/activities';
import { Router } from '../../shared/core/router';
import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import { storeError } from '../../shared/core/store/cosmos/common';
import type { CosmosStore } from '../../shared/core/store/cosmos/locations';
import type { LocationStore, ReadFrom } from '../../shared/core/store/ports/locations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { type CosmosTestServer, startCosmosServer } from '../../testkit/cosmosServer';
import { call, handlerServices } from '../support/handlers';

/**
 * Store failures are classified, not all "unavailable": a caller's bad continuation token is their 400;
 * a store that refuses us (401/403, other 4xx) is StoreRejected, a 500 nobody should retry; only
 * throttling, timeouts and 5xx stay StoreUnavailable (503, Retry-After). The SDK's text never reaches a
 * caller: it stays on the error's `cause`.
 */

/** What @vercel/cosmosdb-server answers for a tampered continuation: a 400 with its own crash text. */
const SDK_TEXT = 'Cannot read properties of undefined';
const TAMPERED = '{"range":{"min":"","max":"FF"}}';
/** Continuations travel base64url-wrapped: a well-wrapped tampered one reaches the store itself. */
const WRAPPED_TAMPERED = Buffer.from(TAMPERED, 'utf8').toString('base64url');

let cosmos: CosmosTestServer;
beforeAll(async () => {
  cosmos = await startCosmosServer();
});
afterAll(async () => {
  await cosmos.close();
});

async function seeded<T extends LocationStore>(store: T): Promise<T> {
  for (const id of ['a-1', 'a-2', 'a-3'])
    await store.create(newLocationDocument(id, { region: 'westeurope' }));
  return store;
}

describe.each([
  // Cosmos DB's own tokens are JSON: wrapped well but tampered with, the store itself refuses it.
  ['cosmos', async (): Promise<LocationStore> => seeded(await cosmos.connect()), [WRAPPED_TAMPERED, 'e30']],
  // SQLite's token is the last id: any id is a valid cursor, but only a canonical encoding of one.
  ['sqlite', async (): Promise<LocationStore> => seeded(new SqliteStore(':memory:')), ['YS0x=', 'YS0x.']],
] as const)('GET /api/routes?continuation=… on %s', (_name, open, storeSpecific) => {
  test('a continuation the store handed out pages on; a tampered one is a 400 problem without SDK text', async () => {
    const store = await open();
    await handlerServices({ ROUTELOCK_AUTH: 'none' }, store);
    const first = await call('listRoutes', { query: 'limit=1' });
    expect(first.status).toBe(200);
    const { continuation } = first.body as { continuation: string };
    expect(continuation).toEqual(expect.any(String));
    const second = await call('listRoutes', {
      query: `limit=1&continuation=${encodeURIComponent(continuation)}`,
    });
    expect(second.status).toBe(200);
    expect((second.body as { items: { resourceId: string }[] }).items.map((i) => i.resourceId)).toEqual([
      'a-2',
    ]);

    for (const bad of [...storeSpecific, TAMPERED, '%%', 'bm90LWFuLWlk!', 'garbage', '']) {
      const res = await call('listRoutes', { query: `limit=1&continuation=${encodeURIComponent(bad)}` });
      expect({ bad, status: res.status }).toEqual({ bad, status: 400 });
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(res.body).toMatchObject({ code: 'BadRequest', detail: expect.stringMatching(/continuation/) });
      expect(res.text).not.toContain(SDK_TEXT);
      expect(res.headers.get('retry-after')).toBeNull();
    }
  });
});

test("cosmos: the SDK's text about a tampered continuation is kept on the error's cause only", async () => {
  const store = (await cosmos.connect()) as CosmosStore;
  const error = await store
    .list({ lockedOnly: false, limit: 1, continuation: WRAPPED_TAMPERED })
    .catch((e: unknown) => e);
  expect(error).toBeInstanceOf(RouteLockError);
  expect(error).toMatchObject({ code: 'BadRequest', retryAfterSeconds: undefined });
  expect((error as Error).message).not.toContain(SDK_TEXT);
  expect(String(((error as Error).cause as Error).message)).toContain(SDK_TEXT);
});

describe('storeError: the mapping of SDK failures', () => {
  const sdk = (
    raw: Record<string, unknown>,
    message = 'Request blocked by Auth routelock: principal lacks RBAC',
  ) => Object.assign(new Error(message), raw);

  test.each([
    [{ code: 401 }],
    [{ code: 403 }],
    [{ statusCode: 403, retryAfterInMs: 5000 }],
    [{ code: 400 }], // our own request refused, not a caller's token
    [{ code: 413 }],
  ])('%j is StoreRejected: not StoreUnavailable, no retry-after, a fixed message', (raw) => {
    const mapped = storeError(sdk(raw), 'r-1');
    expect(mapped.code).toBe('StoreRejected');
    expect(mapped.code).not.toBe('StoreUnavailable');
    expect(mapped.retryAfterSeconds).toBeUndefined();
    expect(mapped.message).toBe('The routing store refused the request.');
    expect((mapped.cause as Error).message).toContain('principal lacks RBAC');

    const response = problemFromError(mapped, '/api/routes/r-1');
    expect(response.status).toBe(500);
    expect((response.headers as Record<string, string>)['Retry-After']).toBeUndefined();
    const body = JSON.parse(response.body as string) as Record<string, unknown>;
    expect(body).toMatchObject({ code: 'StoreRejected', title: 'The routing store refused the request' });
    expect(body.retryAfterSeconds).toBeUndefined();
    expect(response.body).not.toContain('RBAC');
  });

  test.each([
    [{ statusCode: 429, retryAfterInMs: 2500 }, 3],
    [{ code: 503 }, 1],
    [{ code: 408 }, 1],
    [{ code: 410 }, 1],
    [{ code: 449 }, 1],
    [{ code: 'ECONNRESET' }, 1],
    [{ code: 'TimeoutError' }, 1],
  ])('%j stays StoreUnavailable (retriable), and its message carries no SDK text', (raw, retryAfter) => {
    const mapped = storeError(sdk(raw, 'socket hang up at 10.0.0.7 (secret detail)'), 'r-1');
    expect(mapped).toMatchObject({ code: 'StoreUnavailable', retryAfterSeconds: retryAfter });
    expect(mapped.message).not.toMatch(/hang up|secret|10\.0\.0\.7/);
    const response = problemFromError(mapped);
    expect(response.status).toBe(503);
    expect((response.headers as Record<string, string>)['Retry-After']).toBe(String(retryAfter));
  });

  test('a 400 (or an unparsable token) is BadRequest only when the caller gave a continuation', () => {
    expect(storeError(sdk({ code: 400 }), '(list)', { continuation: 'x' }).code).toBe('BadRequest');
    expect(storeError(new SyntaxError('Unexpected token'), '(list)', { continuation: 'x' }).code).toBe(
      'BadRequest',
    );
    expect(storeError(new SyntaxError('Unexpected token'), '(list)').code).toBe('StoreUnavailable');
    // a transport failure while paging is still the store's outage, not the caller's token
    expect(storeError(sdk({ code: 'ECONNRESET' }), '(list)', { continuation: 'x' }).code).toBe(
      'StoreUnavailable',
    );
    expect(storeError(sdk({ code: 403 }), '(list)', { continuation: 'x' }).code).toBe('StoreRejected');
  });
});

/** A store whose every call is refused the way Cosmos DB refuses a principal without a data role. */
class RefusingStore extends SqliteStore {
  calls = 0;
  override async read(_id: string, _options: { from: ReadFrom }): Promise<never> {
    this.calls += 1;
    throw storeError(Object.assign(new Error('Forbidden: no RBAC data role'), { code: 403 }), 'r-1');
  }
  /** Read-throughs are refused too. */
  override readIfChanged(id: string, _etag: string, options: { from: ReadFrom }): Promise<never> {
    return this.read(id, options);
  }
}

test('a migration step refused by the store is a value the workflow sees, not a failure to retry', async () => {
  const config = parseConfig({});
  const store = new RefusingStore(':memory:');
  const router = new Router({ store, timing: config.timing, clock: () => Date.UTC(2026, 0, 1) });
  const activities = createActivities(router, config.timing, { keyring: TokenKeyring.ephemeral() });
  const result = await activities.readRoute({ resourceId: 'r-1', from: 'writeRegion' });
  // Only a thrown error meets the runners' retry policy; a StoreRejected comes back as a value.
  expect(result).toMatchObject({ ok: false, code: 'StoreRejected' });
  expect(JSON.stringify(result)).not.toContain('RBAC');
  expect(store.calls).toBeGreaterThan(0);
});
