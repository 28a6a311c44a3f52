import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Container } from '@azure/cosmos';
import Database from 'better-sqlite3';
import { RouteLockError } from '../../shared/core/errors';
import type { CampaignRecord, CampaignState } from '../../shared/campaign/types';
import type { CampaignRecords, VersionedCampaign } from '../../shared/campaign/store/ports/campaigns';
import { countsFrom } from '../../shared/campaign/plan';
import { SqliteCampaignRecords } from '../../shared/campaign/store/sqlite/campaigns';
import {
  CosmosCampaignRecords,
  campaignsIndexingPolicy,
  campaignsPartitionKey,
} from '../../shared/campaign/store/cosmos/campaigns';
import type { CosmosTestServer } from '../../testkit/cosmosServer';
import { type ArmTemplate, evaluate, loadArmTemplate, moduleNamed, resourceIn } from '../support/arm';
import { campaignRecord } from '../support/campaignRecord';
import { useCosmosServers } from '../support/cosmosServers';

/**
 * The campaigns port's contract (docs/design.md §6.9), one table of behaviours for every adapter: the
 * campaign record under ETag compare-and-swap, the keyset-paged list, and the member rows (one per
 * campaign and resource, in seq order per state).
 */

const servers = useCosmosServers();
let containers = 0;

/** A fresh container, as Bicep creates `campaigns` (partition key /campaignId, its composite index). */
async function cosmosContainer(server: CosmosTestServer): Promise<Container> {
  const store = await server.connect();
  const container = store.containerNamed(`campaigns${++containers}`);
  await container.database.containers.createIfNotExists({
    id: container.id,
    partitionKey: { paths: [campaignsPartitionKey] },
    indexingPolicy: campaignsIndexingPolicy,
  });
  return container;
}

const backends: [string, () => Promise<CampaignRecords>][] = [
  ['sqlite', async () => new SqliteCampaignRecords(':memory:')],
  ['cosmos (stock)', async () => new CosmosCampaignRecords(await cosmosContainer(servers.stock))],
  ['cosmos (quoted ETags)', async () => new CosmosCampaignRecords(await cosmosContainer(servers.quoted))],
];

async function failure(promise: Promise<unknown>): Promise<RouteLockError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof RouteLockError)) throw new Error(`expected a RouteLockError, got ${String(error)}`);
  return error;
}

/** Seconds after 2026-01-01, as ISO instants (the list's sort key). */
const at = (second: number): string => new Date(Date.UTC(2026, 0, 1, 0, 0, second)).toISOString();

/**
 * The compare-and-swap behaviour, as one check (the test and its negative control share it): a replace
 * on the ETag read lands with a new ETag; one on an ETag from before it is null and changes nothing.
 */
async function staleReplaceIsRefused(campaigns: CampaignRecords, campaignId = 'c-cas'): Promise<void> {
  const { record: first } = await campaigns.create(campaignRecord(campaignId));
  const paused: CampaignRecord = { ...first.record, status: 'Paused', pausedAt: at(5) };
  const second = await campaigns.replace(paused, first.etag);
  expect(second?.record).toEqual(paused);
  expect(second?.etag).not.toBe(first.etag);
  expect(await campaigns.get(campaignId)).toEqual(second);

  // a writer that read before the pause: its write must not land
  const stale = await campaigns.replace({ ...first.record, limits: { maxConcurrent: 99 } }, first.etag);
  expect(stale).toBeNull();
  expect(await campaigns.get(campaignId)).toEqual(second);

  // the ETag is opaque: passed back exactly as received, it works again
  const third = await campaigns.replace({ ...paused, status: 'Running' }, second!.etag);
  expect(third?.record.status).toBe('Running');
}

/** The planted bug: a replace that re-reads and writes on the fresh ETag, a read-modify-write without the check. */
function withoutEtagCheck(campaigns: CampaignRecords): CampaignRecords {
  return Object.assign(Object.create(campaigns) as CampaignRecords, {
    replace: async (record: CampaignRecord) => {
      const fresh = await campaigns.get(record.campaignId);
      return campaigns.replace(record, fresh?.etag ?? '');
    },
  });
}

describe.each(backends)('campaigns contract: %s', (_name, open) => {
  let campaigns: CampaignRecords;
  beforeEach(async () => {
    campaigns = await open();
  });

  describe('the campaign record', () => {
    test('create, get, and a create again answered with the record that stands', async () => {
      const record = campaignRecord('c-1');
      const created = await campaigns.create(record);
      expect(created.created).toBe(true);
      expect(created.record.record).toEqual(record);
      expect(typeof created.record.etag).toBe('string');
      expect(await campaigns.get('c-1')).toEqual(created.record);

      const again = await campaigns.create({ ...record, target: { region: 'westus' } });
      expect(again).toEqual({ created: false, record: created.record });
      expect(await campaigns.get('c-1')).toEqual(created.record);
      expect(await campaigns.get('c-unknown')).toBeNull();
    });

    test('replace on the ETag read: a new ETag; a stale one is null and never overwrites', async () => {
      await staleReplaceIsRefused(campaigns);
    });

    test('of 10 concurrent replaces on one ETag exactly one lands', async () => {
      const { record: first } = await campaigns.create(campaignRecord('c-race'));
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          campaigns.replace({ ...first.record, reserved: i + 1 }, first.etag),
        ),
      );
      const winners = results.filter((r): r is VersionedCampaign => r !== null);
      expect(winners).toHaveLength(1);
      expect(await campaigns.get('c-race')).toEqual(winners[0]);
    });

    test('replace of an unknown campaign is NotFound naming the campaign', async () => {
      const error = await failure(campaigns.replace(campaignRecord('c-none'), 'any-etag'));
      expect(error.code).toBe('NotFound');
      expect(error.message).toBe('No campaign c-none.');
    });
  });

  describe('the list', () => {
    async function seed(): Promise<void> {
      // created out of order; two share an instant (campaignId breaks the tie)
      const rows: [string, number, CampaignState][] = [
        ['c-b', 2, 'Running'],
        ['c-a', 1, 'Completed'],
        ['c-d', 3, 'Paused'],
        ['c-c', 3, 'Running'],
        ['c-e', 4, 'Cancelled'],
      ];
      for (const [id, second, status] of rows)
        await campaigns.create(campaignRecord(id, { createdAt: at(second), status }));
    }

    test('newest first (createdAt, then campaignId, descending), paged by its continuation', async () => {
      await seed();
      const ids: string[][] = [];
      let continuation: string | undefined;
      do {
        const page = await campaigns.list({ limit: 2, continuation });
        ids.push(page.records.map((r) => r.campaignId));
        continuation = page.continuation;
      } while (continuation !== undefined);
      expect(ids).toEqual([['c-e', 'c-d'], ['c-c', 'c-b'], ['c-a']]);
      // a page that ends exactly at the end says so
      expect((await campaigns.list({ limit: 5 })).continuation).toBeUndefined();
    });

    test('a status filter, paged too', async () => {
      await seed();
      const first = await campaigns.list({ status: 'Running', limit: 1 });
      expect(first.records.map((r) => r.campaignId)).toEqual(['c-c']);
      const second = await campaigns.list({ status: 'Running', limit: 1, continuation: first.continuation });
      expect(second.records.map((r) => r.campaignId)).toEqual(['c-b']);
      expect(second.continuation).toBeUndefined();
      expect((await campaigns.list({ status: 'Cancelling', limit: 10 })).records).toEqual([]);
    });

    test.each(['not-a-token', 'W10', Buffer.from('["yesterday","c-1"]').toString('base64url')])(
      'a continuation it did not hand out (%s) is BadRequest',
      async (continuation) => {
        await seed();
        expect((await failure(campaigns.list({ limit: 2, continuation }))).code).toBe('BadRequest');
      },
    );

    test('idsInStates: the campaigns in those states', async () => {
      await seed();
      expect((await campaigns.idsInStates(['Running', 'Paused', 'Cancelling'])).sort()).toEqual([
        'c-b',
        'c-c',
        'c-d',
      ]);
      expect(await campaigns.idsInStates([])).toEqual([]);
    });
  });

  describe('members', () => {
    beforeEach(async () => {
      await campaigns.create(campaignRecord('c-m'));
    });

    test('addMembers keeps a resource once, at its first seq, within a call and across calls', async () => {
      const added = await campaigns.addMembers('c-m', [
        { seq: 0, resourceId: 'r/a' },
        { seq: 1, resourceId: 'r/b' },
        { seq: 2, resourceId: 'r/a' },
      ]);
      expect(added).toBe(2);
      expect(
        await campaigns.addMembers('c-m', [
          { seq: 1000, resourceId: 'r/b' },
          { seq: 1001, resourceId: 'r?c#1' },
        ]),
      ).toBe(1);
      expect(await campaigns.members('c-m', { state: 'pending', limit: 10 })).toEqual([
        { campaignId: 'c-m', seq: 0, resourceId: 'r/a', state: 'pending' },
        { campaignId: 'c-m', seq: 1, resourceId: 'r/b', state: 'pending' },
        { campaignId: 'c-m', seq: 1001, resourceId: 'r?c#1', state: 'pending' },
      ]);
      expect(await campaigns.countMembers('c-m')).toMatchObject({ pending: 3 });
    });

    test('members of one campaign are not another’s', async () => {
      await campaigns.create(campaignRecord('c-other'));
      await campaigns.addMembers('c-m', [{ seq: 0, resourceId: 'r-1' }]);
      expect(await campaigns.addMembers('c-other', [{ seq: 0, resourceId: 'r-1' }])).toBe(1);
      expect(await campaigns.members('c-other', { state: 'pending', limit: 10 })).toHaveLength(1);
    });

    test('resource ids past the Cosmos DB id length stay distinct members', async () => {
      const long = 'r'.repeat(300);
      expect(
        await campaigns.addMembers('c-m', [
          { seq: 0, resourceId: `${long}-a` },
          { seq: 1, resourceId: `${long}-b` },
          { seq: 2, resourceId: `${long}-a` },
        ]),
      ).toBe(2);
      const members = await campaigns.members('c-m', { state: 'pending', limit: 10 });
      expect(members.map((m) => m.resourceId)).toEqual([`${long}-a`, `${long}-b`]);
    });

    test('a full page of 1,000 in one call, 250 of them already members', async () => {
      await campaigns.addMembers(
        'c-m',
        Array.from({ length: 250 }, (_, i) => ({ seq: i, resourceId: `r-${i}` })),
      );
      const page = Array.from({ length: 1000 }, (_, i) => ({ seq: 1000 + i, resourceId: `r-${i}` }));
      const started = performance.now();
      expect(await campaigns.addMembers('c-m', page)).toBe(750);
      const ms = performance.now() - started;
      expect(await campaigns.countMembers('c-m')).toEqual({ pending: 1000 });
      // the earlier seq stands for the 250 already there
      const first = await campaigns.members('c-m', { state: 'pending', limit: 1, afterSeq: 248 });
      expect(first).toEqual([{ campaignId: 'c-m', seq: 249, resourceId: 'r-249', state: 'pending' }]);
      const next = await campaigns.members('c-m', { state: 'pending', limit: 1, afterSeq: 249 });
      expect(next[0]?.seq).toBe(1250);
      process.stdout.write(`addMembers of 1,000 (750 new): ${Math.round(ms)} ms\n`);
    });

    test('members by state in seq order, after afterSeq, at most limit', async () => {
      // added out of seq order: the order is seq's, not insertion's
      const seqs = [5, 3, 1000, 0, 7, 2];
      await campaigns.addMembers(
        'c-m',
        seqs.map((seq) => ({ seq, resourceId: `r-${seq}` })),
      );
      const seqOf = (members: { seq: number }[]): number[] => members.map((m) => m.seq);
      expect(seqOf(await campaigns.members('c-m', { state: 'pending', limit: 3 }))).toEqual([0, 2, 3]);
      expect(seqOf(await campaigns.members('c-m', { state: 'pending', limit: 3, afterSeq: 3 }))).toEqual([
        5, 7, 1000,
      ]);
      expect(await campaigns.members('c-m', { state: 'pending', limit: 3, afterSeq: 1000 })).toEqual([]);
      expect(await campaigns.members('c-m', { state: 'running', limit: 3 })).toEqual([]);
    });

    test('saveMembers updates their state and fields; countMembers counts by state', async () => {
      await campaigns.addMembers(
        'c-m',
        [0, 1, 2, 3].map((seq) => ({ seq, resourceId: `r-${seq}` })),
      );
      const [m0, m1, m2] = await campaigns.members('c-m', { state: 'pending', limit: 3 });
      await campaigns.saveMembers('c-m', [
        { ...m0!, state: 'running', migrationId: 'c-m.0', startedAt: 1000 },
        { ...m1!, state: 'running', migrationId: 'c-m.1', startedAt: 1000 },
        { ...m2!, state: 'skipped', reason: 'No route for resource r-2.' },
      ]);
      expect(await campaigns.members('c-m', { state: 'running', limit: 10 })).toEqual([
        { ...m0!, state: 'running', migrationId: 'c-m.0', startedAt: 1000 },
        { ...m1!, state: 'running', migrationId: 'c-m.1', startedAt: 1000 },
      ]);
      await campaigns.saveMembers('c-m', [{ ...m0!, state: 'completed', endedAt: 2000, writeLockMs: 40 }]);
      const counts = await campaigns.countMembers('c-m');
      expect({ ...countsFrom({}), total: undefined, ...counts }).toEqual({
        ...countsFrom({}),
        total: undefined,
        pending: 1,
        running: 1,
        completed: 1,
        skipped: 1,
      });
      // re-adding a saved member changes nothing
      expect(await campaigns.addMembers('c-m', [{ seq: 9, resourceId: 'r-0' }])).toBe(0);
      expect((await campaigns.members('c-m', { state: 'completed', limit: 1 }))[0]?.writeLockMs).toBe(40);
    });

    test('saveMembers of an unknown member is NotFound naming it and its campaign', async () => {
      const error = await failure(
        campaigns.saveMembers('c-m', [{ campaignId: 'c-m', seq: 0, resourceId: 'r-x', state: 'running' }]),
      );
      expect(error.code).toBe('NotFound');
      expect(error.message).toBe('No campaign member r-x of campaign c-m.');
    });

    test('addMembers to an unknown campaign is NotFound naming the campaign', async () => {
      const error = await failure(campaigns.addMembers('c-none', [{ seq: 0, resourceId: 'r-1' }]));
      expect(error.code).toBe('NotFound');
      expect(error.message).toBe('No campaign c-none.');
      expect(await campaigns.countMembers('c-none')).toEqual({});
    });
  });
});

describe.each(backends)('negative control: %s', (_name, open) => {
  test('a replace without the ETag check lets the stale write land, and the CAS check catches it', async () => {
    const campaigns = withoutEtagCheck(await open());
    await expect(staleReplaceIsRefused(campaigns, 'c-bug')).rejects.toThrow();
    const { record } = (await campaigns.get('c-bug'))!;
    expect(record.limits.maxConcurrent).toBe(99);
  });
});

describe('the members query and its indexes', () => {
  /** A container with the list's composite index and not the members one. */
  async function withoutMembersIndex(server: CosmosTestServer): Promise<Container> {
    const store = await server.connect();
    const container = store.containerNamed(`campaigns${++containers}`);
    await container.database.containers.createIfNotExists({
      id: container.id,
      partitionKey: { paths: [campaignsPartitionKey] },
      indexingPolicy: {
        ...campaignsIndexingPolicy,
        compositeIndexes: campaignsIndexingPolicy.compositeIndexes!.filter(
          (index) => !index.some((path) => path.path === '/seq'),
        ),
      },
    });
    return container;
  }

  test('negative control: without the members composite index the stand-in refuses members()', async () => {
    const campaigns = new CosmosCampaignRecords(await withoutMembersIndex(servers.stock));
    await campaigns.create(campaignRecord('c-noindex'));
    await campaigns.addMembers('c-noindex', [{ seq: 0, resourceId: 'r-0' }]);
    await expect(campaigns.members('c-noindex', { state: 'pending', limit: 1 })).rejects.toThrow();
    // the index given, the same query is served
    const indexed = new CosmosCampaignRecords(await cosmosContainer(servers.stock));
    await indexed.create(campaignRecord('c-index'));
    await indexed.addMembers('c-index', [{ seq: 0, resourceId: 'r-0' }]);
    expect(await indexed.members('c-index', { state: 'pending', limit: 1 })).toHaveLength(1);
  });

  test('SQLite: members() is a range of index campaign_members_state_seq, countMembers reads only it', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'campaigns-plan-')), 'state.db');
    const store = new SqliteCampaignRecords(file);
    // the adapter's own statements, so the plan is the one its queries get
    const { statements } = store as unknown as { statements: Record<string, { source: string }> };
    const db = new Database(file, { readonly: true });
    const plan = (sql: string, ...values: (string | number)[]): string =>
      db
        .prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .all(...values)
        .map((row) => (row as { detail: string }).detail)
        .join('; ');
    try {
      expect(plan(statements.members!.source, 'c', 'pending', -1, 10)).toBe(
        'SEARCH campaign_members USING INDEX campaign_members_state_seq (campaign_id=? AND state=? AND seq>?)',
      );
      // no USE TEMP B-TREE FOR GROUP BY: the index's order is the grouping
      expect(plan(statements.count!.source, 'c')).toBe(
        'SEARCH campaign_members USING COVERING INDEX campaign_members_state_seq (campaign_id=?)',
      );
    } finally {
      db.close();
      store.close();
    }
  });
});

describe('Cosmos DB: a bulk request whose operations come back throttled', () => {
  afterEach(() => servers.quoted.intercept(undefined));

  test('each throttled operation is sent again on its own: none lost, none added twice', async () => {
    const campaigns = new CosmosCampaignRecords(await cosmosContainer(servers.quoted));
    await campaigns.create(campaignRecord('c-429'));
    await campaigns.addMembers('c-429', [{ seq: 0, resourceId: 'r-0' }]);
    let throttled = 0;
    servers.quoted.intercept((request) => {
      if (throttled > 0 || request.headers['x-ms-cosmos-is-batch-request'] === undefined) return undefined;
      throttled += 1;
      // Cosmos DB answers a bulk request per operation; a hot partition throttles them with 429
      const body = Array.from({ length: 5 }, () => ({ statusCode: 429, requestCharge: 0 }));
      return { status: 200, body: body as unknown as Record<string, unknown> };
    });
    const members = Array.from({ length: 5 }, (_, i) => ({ seq: i, resourceId: `r-${i}` }));
    expect(await campaigns.addMembers('c-429', members)).toBe(4);
    expect(throttled).toBe(1);
    expect(await campaigns.countMembers('c-429')).toEqual({ pending: 5 });
  });
});

describe('negative control: Cosmos DB without If-Match on the wire', () => {
  afterEach(() => servers.stock.intercept(undefined));

  test('the stand-in writing unconditionally lets the stale write land; the CAS check catches it', async () => {
    const campaigns = new CosmosCampaignRecords(await cosmosContainer(servers.stock));
    servers.stock.intercept((request) => {
      if (request.method === 'PUT') delete request.headers['if-match'];
    });
    await expect(staleReplaceIsRefused(campaigns, 'c-wire')).rejects.toThrow();
    expect((await campaigns.get('c-wire'))?.record.limits.maxConcurrent).toBe(99);
  });
});

test('Bicep deploys container `campaigns` with partition key /campaignId and campaignsIndexingPolicy', () => {
  const template: ArmTemplate = moduleNamed(loadArmTemplate(`${__dirname}/../..`), 'cosmos').template;
  const containers = resourceIn(template, 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers');
  const names = template.variables?.containerNames as string[];
  const resource = evaluate((containers.properties as { resource: unknown }).resource, {
    template,
    copyIndex: names.indexOf('campaigns'),
  });
  expect(resource).toEqual({
    id: 'campaigns',
    partitionKey: { paths: [campaignsPartitionKey], kind: 'Hash' },
    indexingPolicy: campaignsIndexingPolicy,
  });
  // the others keep /id
  const audit = evaluate((containers.properties as { resource: unknown }).resource, {
    template,
    copyIndex: names.indexOf('audit'),
  }) as { partitionKey: unknown };
  expect(audit.partitionKey).toEqual({ paths: ['/id'], kind: 'Hash' });
});
