import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RouteLockError } from '../../shared/core/errors';
import { newLocationDocument } from '../../shared/core/lock/document';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { useCosmosServers } from '../support/cosmosServers';
import { codeOf } from '../support/errorCode';

/**
 * One contract, two adapters: what the router relies on from any store. The Cosmos adapter runs
 * against @vercel/cosmosdb-server (the Cosmos wire protocol, with real ETags and 412s), twice: as it
 * ships (bare ETags) and issuing ETags in quotes as Cosmos DB does (testkit/cosmosServer.ts).
 */

const servers = useCosmosServers();
const dirs: string[] = [];

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const adapters: [string, () => Promise<LocationStore>][] = [
  ['sqlite (:memory:)', async () => new SqliteStore(':memory:')],
  [
    'sqlite (file, WAL)',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'routelock-contract-'));
      dirs.push(dir);
      return new SqliteStore(join(dir, 'routes.db'));
    },
  ],
  ['cosmos (@vercel/cosmosdb-server)', async () => servers.stock.connect()],
  ['cosmos (@vercel/cosmosdb-server, quoted ETags)', async () => servers.quoted.connect()],
];

describe.each(adapters)('store contract: %s', (_name, open) => {
  let store: LocationStore;
  beforeEach(async () => {
    store = await open();
  });
  afterEach(async () => {
    await store.close();
  });

  const doc = (id: string, region = 'westeurope') => newLocationDocument(id, { region, account: 'acct01' });

  test('create then read from either side returns the document and its ETag', async () => {
    const created = await store.create(doc('r-1'));
    expect(created.etag).toEqual(expect.any(String));
    for (const from of ['nearest', 'writeRegion'] as const) {
      const read = await store.read('r-1', { from });
      expect(read).toEqual({ doc: doc('r-1'), etag: created.etag });
    }
  });

  test('read of a missing document is NotFound', async () => {
    expect(await codeOf(store.read('missing', { from: 'nearest' }))).toBe('NotFound');
    expect(await codeOf(store.read('missing', { from: 'writeRegion' }))).toBe('NotFound');
  });

  test('create of an existing id is AlreadyExists and changes nothing', async () => {
    const first = await store.create(doc('r-2'));
    expect(await codeOf(store.create(doc('r-2', 'eastus')))).toBe('AlreadyExists');
    expect(await store.read('r-2', { from: 'writeRegion' })).toEqual({ doc: doc('r-2'), etag: first.etag });
  });

  test('replace with the current ETag writes and issues a new ETag; with an old one it is 412', async () => {
    const first = await store.create(doc('r-3'));
    const moved = doc('r-3', 'eastus');
    const second = await store.replace(moved, first.etag);
    expect(second.etag).not.toBe(first.etag);
    expect((await store.read('r-3', { from: 'writeRegion' })).doc.location.region).toBe('eastus');
    expect(await codeOf(store.replace(doc('r-3', 'northeurope'), first.etag))).toBe('PreconditionFailed');
    expect(await store.read('r-3', { from: 'writeRegion' })).toEqual({ doc: moved, etag: second.etag });
  });

  test('replace of a missing document is NotFound', async () => {
    expect(await codeOf(store.replace(doc('nope'), 'whatever'))).toBe('NotFound');
  });

  test('delete is conditional on the ETag', async () => {
    const first = await store.create(doc('r-4'));
    expect(await codeOf(store.delete('r-4', 'stale-etag'))).toBe('PreconditionFailed');
    await store.delete('r-4', first.etag);
    expect(await codeOf(store.read('r-4', { from: 'writeRegion' }))).toBe('NotFound');
    expect(await codeOf(store.delete('r-4', first.etag))).toBe('NotFound');
  });

  test('20 racing replaces with the same ETag: exactly one wins, 19 get 412', async () => {
    const first = await store.create(doc('r-race'));
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => codeOf(store.replace(doc('r-race', `region-${i}`), first.etag))),
    );
    expect(results.filter((r) => r === 'ok')).toHaveLength(1);
    expect(results.filter((r) => r === 'PreconditionFailed')).toHaveLength(19);
    const winner = results.indexOf('ok');
    expect((await store.read('r-race', { from: 'writeRegion' })).doc.location.region).toBe(
      `region-${winner}`,
    );
  });

  test('counts reads by kind, and writes', async () => {
    const created = await store.create(doc('r-5'));
    await store.read('r-5', { from: 'nearest' });
    await store.read('r-5', { from: 'nearest' });
    await store.read('r-5', { from: 'writeRegion' });
    await store.replace(doc('r-5', 'eastus'), created.etag);
    expect(store.counters).toEqual({
      nearestReads: 2,
      writeRegionReads: 1,
      creates: 1,
      replaces: 1,
      deletes: 0,
      lists: 0,
    });
  });

  test('list pages through every document, or only those carrying lock state', async () => {
    for (let i = 0; i < 7; i += 1) await store.create(doc(`list-${i}`));
    const locked = doc('list-3');
    const current = await store.read('list-3', { from: 'writeRegion' });
    await store.replace(
      {
        ...locked,
        lock: {
          tokenHash: 'h',
          migrationId: 'm',
          owner: 'o',
          target: { region: 'eastus' },
          phase: 'prelock',
          acquiredAt: '2026-01-01T00:00:00.000Z',
          startsAt: '2026-01-01T00:00:00.000Z',
          expiresAt: '2026-01-01T00:00:00.000Z',
          maxExpiresAt: '2026-01-01T00:00:00.000Z',
          convergenceDelaySeconds: 1,
        },
      },
      current.etag,
    );
    const ids: string[] = [];
    let continuation: string | undefined;
    let pages = 0;
    do {
      const page = await store.list({ lockedOnly: false, limit: 3, continuation });
      expect(page.items.length).toBeLessThanOrEqual(3);
      ids.push(...page.items.map((i) => i.doc.id));
      continuation = page.continuation ?? undefined;
      pages += 1;
    } while (continuation && pages < 10);
    expect(ids.sort()).toEqual(Array.from({ length: 7 }, (_, i) => `list-${i}`));
    const lockedPage = await store.list({ lockedOnly: true, limit: 10 });
    expect(lockedPage.items.map((i) => i.doc.id)).toEqual(['list-3']);
    expect(lockedPage.items[0]!.etag).toEqual(expect.any(String));
  });

  test('ids with the characters the API allows round-trip', async () => {
    const id = 'A9._:@-tenant:conv@42';
    await store.create(doc(id));
    expect((await store.read(id, { from: 'nearest' })).doc.id).toBe(id);
  });
});

describe('sqlite specifics', () => {
  test('a file store keeps its documents across a reopen', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'routelock-reopen-'));
    dirs.push(dir);
    const path = join(dir, 'nested', 'routes.db');
    const first = new SqliteStore(path);
    const created = await first.create(newLocationDocument('keep', { region: 'westeurope' }));
    await first.close();
    const second = new SqliteStore(path);
    expect(await second.read('keep', { from: 'writeRegion' })).toEqual({
      doc: newLocationDocument('keep', { region: 'westeurope' }),
      etag: created.etag,
    });
    expect(second.database.pragma('journal_mode', { simple: true })).toBe('wal');
    await second.close();
  });

  test('a closed database is StoreUnavailable, not a crash', async () => {
    const store = new SqliteStore(':memory:');
    await store.close();
    expect(await codeOf(store.read('x', { from: 'nearest' }))).toBe('StoreUnavailable');
  });
});

describe('cosmos specifics', () => {
  test('an unreachable account is StoreUnavailable with a retry-after', async () => {
    const { CosmosStore } = await import('../../shared/core/store/cosmos/locations');
    const error = await CosmosStore.connect({
      endpoint: 'https://127.0.0.1:1',
      key: servers.stock.key,
      disableTlsVerify: true,
      database: 'routelock',
      container: 'locations',
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RouteLockError);
    expect(error).toMatchObject({ code: 'StoreUnavailable', retryAfterSeconds: expect.any(Number) });
  });

  test('the account description names the write region (what "writeRegion" reads are pinned to)', async () => {
    const store = await servers.stock.connect();
    expect(store.account.writeRegion).toEqual(expect.any(String));
    expect(store.account.multipleWriteLocations).toBe(false);
  });

  test.each([
    [{ statusCode: 429, retryAfterInMs: 2500 }, 'StoreUnavailable', 3],
    [{ code: 503 }, 'StoreUnavailable', 1],
    [{ code: 408 }, 'StoreUnavailable', 1],
    [{ code: 'ECONNRESET', message: 'socket hang up' }, 'StoreUnavailable', 1],
    [{ code: 412 }, 'PreconditionFailed', undefined],
    [{ code: 409 }, 'AlreadyExists', undefined],
    [{ code: 404 }, 'NotFound', undefined],
  ])('SDK error %j maps to %s', async (raw, code, retryAfterSeconds) => {
    const { storeError } = await import('../../shared/core/store/cosmos/common');
    const mapped = storeError(Object.assign(new Error('sdk'), raw), 'r-1');
    expect(mapped.code).toBe(code);
    expect(mapped.retryAfterSeconds).toBe(retryAfterSeconds);
  });
});
