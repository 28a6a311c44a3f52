import type { Container } from '@azure/cosmos';
import { parseConfig } from '../../shared/config';
import { RouteLockError } from '../../shared/core/errors';
import { type MigrationRecord, newMigrationRecord } from '../../shared/migration/records';
import type { MigrationState } from '../../shared/migration/types';
import { migrationSettings } from '../../shared/migration/workflow';
import { encodeContinuation } from '../../shared/core/store/continuation';
import {
  CosmosMigrationRecords,
  activeClaimId,
  migrationsIndexingPolicy,
} from '../../shared/migration/store/cosmos/migrations';
import {
  type MigrationRecordQuery,
  type MigrationRecords,
  encodeMigrationCursor,
} from '../../shared/migration/store/ports/migrations';
import { campaignsIndexingPolicy } from '../../shared/campaign/store/cosmos/campaigns';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import type { CosmosTestServer } from '../../testkit/cosmosServer';
import { type ArmTemplate, evaluate, loadArmTemplate, moduleNamed, resourceIn } from '../support/arm';
import { useCosmosServers } from '../support/cosmosServers';

/**
 * The migration records' list (GET /migrations): newest first (createdAt, then migrationId, both
 * descending), filtered in the store, paged with a keyset cursor. The same contract on SQLite and on
 * the Cosmos test server as it ships and issuing quoted ETags; the server, like Cosmos DB, serves a
 * two-property ORDER BY only from a composite index, so the container is created as Bicep creates it.
 */

const servers = useCosmosServers();
let containers = 0;

async function cosmosContainer(
  server: CosmosTestServer,
  indexingPolicy: typeof migrationsIndexingPolicy | null = migrationsIndexingPolicy,
): Promise<Container> {
  const store = await server.connect();
  const container = store.containerNamed(`migrationList${++containers}`);
  await container.database.containers.createIfNotExists({
    id: container.id,
    partitionKey: { paths: ['/id'] },
    ...(indexingPolicy ? { indexingPolicy } : {}),
  });
  return container;
}

const backends: [string, () => Promise<MigrationRecords>][] = [
  ['sqlite', async () => new SqliteMigrationState(':memory:')],
  ['cosmos (stock)', async () => new CosmosMigrationRecords(await cosmosContainer(servers.stock))],
  ['cosmos (quoted ETags)', async () => new CosmosMigrationRecords(await cosmosContainer(servers.quoted))],
];

const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const at = (second: number) => new Date(T0 + second * 1000).toISOString();

function record(
  migrationId: string,
  createdAt: string,
  resourceId = `r-${migrationId}`,
  extra: Partial<MigrationRecord> = {},
): MigrationRecord {
  return {
    ...newMigrationRecord(
      {
        migrationId,
        instanceId: `migrate-${resourceId}`,
        resourceId,
        target: { region: 'eastus' },
        settings: migrationSettings(parseConfig({})),
        lock: { keyId: 'k1', nonce: 'bm9uY2U' },
      },
      createdAt,
    ),
    ...extra,
  };
}

async function end(records: MigrationRecords, r: MigrationRecord, status: MigrationState) {
  await records.saveStatus(r.migrationId, { ...r.status, status }, true);
}

/** Every page of a query, with the continuation of each. */
async function walk(records: MigrationRecords, query: Omit<MigrationRecordQuery, 'continuation'>) {
  const pages: string[][] = [];
  let continuation: string | undefined;
  do {
    const page = await records.list({ ...query, continuation });
    pages.push(page.records.map((r) => r.migrationId));
    continuation = page.continuation;
  } while (continuation !== undefined && pages.length < 100);
  return pages;
}

async function failure(promise: Promise<unknown>): Promise<RouteLockError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof RouteLockError)) throw new Error(`expected a RouteLockError, got ${String(error)}`);
  return error;
}

describe.each(backends)('migration records list: %s', (_name, open) => {
  let records: MigrationRecords;
  beforeEach(async () => {
    records = await open();
  });

  /** 25 records, created a second apart but with ties (m-07/m-08 and m-15/m-16 share a second). */
  async function seed25(): Promise<MigrationRecord[]> {
    const made: MigrationRecord[] = [];
    for (let i = 1; i <= 25; i += 1) {
      const second = i === 8 ? 7 : i === 16 ? 15 : i;
      const id = `m-${String(i).padStart(2, '0')}`;
      const r = record(id, at(second), `r-${i % 3}`);
      await records.create(r);
      made.push(r);
    }
    return made;
  }
  const newestFirst = (made: MigrationRecord[]) =>
    [...made]
      .sort((a, b) =>
        a.createdAt === b.createdAt
          ? b.migrationId.localeCompare(a.migrationId)
          : b.createdAt.localeCompare(a.createdAt),
      )
      .map((r) => r.migrationId);

  test('25 records, limit 10: three pages newest first, no duplicates, no gaps; a record created between pages is not mixed in', async () => {
    const made = await seed25();
    const first = await records.list({ limit: 10 });
    expect(first.records).toHaveLength(10);
    expect(first.continuation).toEqual(expect.any(String));
    // created after the walk began: newer than everything, so it belongs before page 1, not in page 2
    await records.create(record('m-late', at(100)));
    const second = await records.list({ limit: 10, continuation: first.continuation });
    const third = await records.list({ limit: 10, continuation: second.continuation });
    expect(third.continuation).toBeUndefined();
    const ids = [first, second, third].flatMap((p) => p.records.map((r) => r.migrationId));
    expect(ids).toEqual(newestFirst(made));
    expect(new Set(ids).size).toBe(25);
    // ties on createdAt are ordered by migrationId (descending), so the cursor never skips one
    expect(ids.indexOf('m-08')).toBe(ids.indexOf('m-07') - 1);
    // a fresh walk starts with it
    expect((await records.list({ limit: 1 })).records.map((r) => r.migrationId)).toEqual(['m-late']);
  });

  test('a page exactly as long as what is left has no continuation; an empty list is one empty page', async () => {
    expect(await records.list({ limit: 10 })).toEqual({ records: [] });
    await seed25();
    expect((await walk(records, { limit: 5 })).map((p) => p.length)).toEqual([5, 5, 5, 5, 5]);
  });

  test('filters: status, resourceId, campaignId (absent until campaigns exist), together', async () => {
    const made = await seed25();
    for (const r of made.filter((_, i) => i % 4 === 0)) await end(records, r, 'Failed');
    for (const r of made.filter((_, i) => i % 4 === 1)) await end(records, r, 'Completed');
    await records.create(record('m-c1', at(200), 'r-camp', { campaignId: 'camp-1' }));
    const failed = (await walk(records, { limit: 3, states: ['Failed'] })).flat();
    expect(failed).toEqual(newestFirst(made.filter((_, i) => i % 4 === 0)));
    const pending = (await walk(records, { limit: 100, states: ['Pending'] })).flat();
    expect(pending).toEqual(['m-c1', ...newestFirst(made.filter((_, i) => i % 4 >= 2))]);
    const either = (await walk(records, { limit: 4, states: ['Failed', 'Completed'] })).flat();
    expect(either).toEqual(newestFirst(made.filter((_, i) => i % 4 <= 1)));
    const r1 = (await walk(records, { limit: 2, resourceId: 'r-1' })).flat();
    expect(r1).toEqual(newestFirst(made.filter((r) => r.resourceId === 'r-1')));
    const both = (await walk(records, { limit: 100, resourceId: 'r-1', states: ['Failed'] })).flat();
    expect(both).toEqual(newestFirst(made.filter((r, i) => r.resourceId === 'r-1' && i % 4 === 0)));
    expect((await walk(records, { limit: 10, campaignId: 'camp-1' })).flat()).toEqual(['m-c1']);
    expect((await walk(records, { limit: 10, campaignId: 'camp-none' })).flat()).toEqual([]);
    expect((await walk(records, { limit: 10, states: [] })).flat()).toEqual([]);
    // the status a record lists with is the one saved last
    const listed = await records.list({ limit: 1, states: ['Completed'] });
    expect(listed.records[0]?.status.status).toBe('Completed');
  });

  test('a continuation no store handed out is a 400 BadRequest naming the continuation; nothing is read', async () => {
    await seed25();
    const bad = [
      'not base64url!',
      encodeContinuation('not json'),
      encodeContinuation(JSON.stringify({ createdAt: at(1), migrationId: 'm-01' })),
      encodeContinuation(JSON.stringify(['yesterday', 'm-01'])),
      encodeContinuation(JSON.stringify([at(1), ''])),
      encodeContinuation(JSON.stringify([at(1), 7])),
    ];
    for (const continuation of bad) {
      const error = await failure(records.list({ limit: 10, continuation }));
      expect(error.code).toBe('BadRequest');
      expect(error.message).toMatch(/continuation/);
    }
    // a well-formed position is only a starting point in the same list
    const from = encodeMigrationCursor({ createdAt: at(3), migrationId: 'm-03' });
    expect((await records.list({ limit: 10, continuation: from })).records.map((r) => r.migrationId)).toEqual(
      ['m-02', 'm-01'],
    );
  });
});

describe('cosmos: what the list stands on', () => {
  test('the per-resource claims (`active~…`) sharing the container are never listed', async () => {
    const records = new CosmosMigrationRecords(await cosmosContainer(servers.quoted));
    const claimed = await records.createIfNoActive(record('m-1', at(1), 'r-x'));
    expect(claimed.created).toBe(true);
    const page = await records.list({ limit: 10 });
    expect(page.records.map((r) => r.migrationId)).toEqual(['m-1']);
    expect(JSON.stringify(page)).not.toContain(activeClaimId('r-x'));
  });

  test('negative control: without the composite index the list is refused (as Cosmos DB refuses it)', async () => {
    const bare = new CosmosMigrationRecords(await cosmosContainer(servers.stock, null));
    await bare.create(record('m-1', at(1)));
    await bare.create(record('m-2', at(2)));
    const error = await failure(bare.list({ limit: 10 }));
    // the store's refusal (an operator's problem: the deployed policy), not the caller's 400
    expect(error.code).toBe('StoreRejected');
  });

  test('Bicep deploys container `migrations` with exactly migrationsIndexingPolicy (and `campaigns` its own), no other', () => {
    const template: ArmTemplate = moduleNamed(loadArmTemplate(`${__dirname}/../..`), 'cosmos').template;
    const containers = resourceIn(template, 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers');
    const names = template.variables?.containerNames as string[];
    const policies = names.map((name, copyIndex) => {
      const resource = evaluate((containers.properties as { resource: unknown }).resource, {
        template,
        copyIndex,
      }) as { id: string; indexingPolicy?: unknown };
      expect(resource.id).toBe(name);
      return [name, resource.indexingPolicy];
    });
    expect(Object.fromEntries(policies)).toEqual({
      locations: undefined,
      leases: undefined,
      audit: undefined,
      migrations: migrationsIndexingPolicy,
      campaigns: campaignsIndexingPolicy,
    });
  });
});

describe('sqlite: each filter is an index range scan, never a sort of the table', () => {
  const state = new SqliteMigrationState(':memory:');
  const cursor = encodeMigrationCursor({ createdAt: at(3), migrationId: 'm-03' });
  test.each<[string, MigrationRecordQuery, RegExp]>([
    ['no filter', { limit: 10 }, /migrations_newest/],
    ['after a cursor', { limit: 10, continuation: cursor }, /migrations_newest/],
    ['status', { limit: 10, states: ['Failed'], continuation: cursor }, /migrations_state_newest/],
    ['resourceId', { limit: 10, resourceId: 'r-1', continuation: cursor }, /migrations_resource_newest/],
    ['campaignId', { limit: 10, campaignId: 'c-1' }, /migrations_campaign_newest/],
  ])('%s', (_name, query, index) => {
    const plan = state.explainList(query).join('\n');
    expect(plan).toMatch(index);
    expect(plan).not.toMatch(/TEMP B-TREE/);
  });
});
