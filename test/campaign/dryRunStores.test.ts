import type { Container } from '@azure/cosmos';
import { parseConfig } from '../../shared/config';
import { type CampaignPreflightDeps, runCampaignPreflight } from '../../shared/campaign/preflight';
import type { CampaignRequest } from '../../shared/campaign/types';
import { newMigrationInput, newMigrationRecord } from '../../shared/migration/records';
import { migrationSettings } from '../../shared/migration/workflow';
import { Router } from '../../shared/core/router';
import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import {
  CosmosCampaignRecords,
  campaignsIndexingPolicy,
  campaignsPartitionKey,
} from '../../shared/campaign/store/cosmos/campaigns';
import {
  CosmosMigrationRecords,
  migrationsIndexingPolicy,
} from '../../shared/migration/store/cosmos/migrations';
import type { CampaignRecords } from '../../shared/campaign/store/ports/campaigns';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import type { MigrationRecords } from '../../shared/migration/store/ports/migrations';
import { SqliteCampaignRecords } from '../../shared/campaign/store/sqlite/campaigns';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import { ManualClock } from '../../testkit/clock';
import type { CosmosTestServer } from '../../testkit/cosmosServer';
import { campaignRecord } from '../support/campaignRecord';
import { useCosmosServers } from '../support/cosmosServers';

/**
 * The campaign dry run at the service level on each store (docs/design.md §6.2): SQLite and the Cosmos
 * stand-in (routes, migration records and campaign records alike). It reads, and writes nothing: no campaign
 * record, no member, no migration record, no route change, a repeat with the same campaignId included. The
 * negative control plants a dry run that does write, and the same comparison catches it.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const config = parseConfig({ ROUTELOCK_PROFILE: 'dev' });
const servers = useCosmosServers();
let containers = 0;

interface Stores {
  store: LocationStore;
  records: MigrationRecords;
  campaigns: CampaignRecords;
}

/** A fresh container, as Bicep creates it (its partition key and indexing policy). */
async function cosmosContainer(
  server: CosmosTestServer,
  name: string,
  campaigns = false,
): Promise<Container> {
  const store = await server.connect();
  const container = store.containerNamed(`${name}${++containers}`);
  await container.database.containers.createIfNotExists({
    id: container.id,
    partitionKey: { paths: [campaigns ? campaignsPartitionKey : '/id'] },
    indexingPolicy: campaigns ? campaignsIndexingPolicy : migrationsIndexingPolicy,
  });
  return container;
}

const backends: [string, () => Promise<Stores>][] = [
  [
    'sqlite',
    async () => ({
      store: new SqliteStore(':memory:'),
      records: new SqliteMigrationState(':memory:'),
      campaigns: new SqliteCampaignRecords(':memory:'),
    }),
  ],
  [
    'cosmos',
    async () => ({
      store: await servers.stock.connect(),
      records: new CosmosMigrationRecords(await cosmosContainer(servers.stock, 'records')),
      campaigns: new CosmosCampaignRecords(await cosmosContainer(servers.stock, 'campaigns', true)),
    }),
  ],
];

describe.each(backends)('%s', (_name, open) => {
  let stores: Stores;
  let deps: CampaignPreflightDeps;
  let clock: ManualClock;

  beforeEach(async () => {
    stores = await open();
    clock = new ManualClock();
    const router = new Router({ store: stores.store, timing: config.timing, clock: clock.now });
    for (const id of ['s-1', 's-2', 's-3']) await router.createRoute(id, SOURCE);
    await router.createRoute('s-there', TARGET);
    const input = newMigrationInput({
      migrationId: 'm-s-3',
      instanceId: 'migrate-s-3',
      resourceId: 's-3',
      target: TARGET,
      settings: migrationSettings(config),
      lock: TokenKeyring.ephemeral().newSeed(),
    });
    expect(await stores.records.create(newMigrationRecord(input, new Date(clock.now()).toISOString()))).toBe(
      true,
    );
    deps = {
      router,
      records: stores.records,
      store: stores.store,
      campaigns: stores.campaigns,
      timing: config.timing,
      settings: migrationSettings(config),
      maxMigrationAttempts: config.migration.migrationAttempts,
      now: clock.now,
    };
  });

  async function snapshot() {
    return {
      routes: (await stores.store.list({ lockedOnly: false, limit: 100 })).items,
      records: (await stores.records.list({ limit: 100 })).records,
      campaign: await stores.campaigns.get('c-same'),
      campaigns: (await stores.campaigns.list({ limit: 100 })).records,
      members: await stores.campaigns.countMembers('c-same'),
      writes: (({ creates, replaces, deletes }) => ({ creates, replaces, deletes }))(stores.store.counters),
    };
  }

  const byIds: CampaignRequest = {
    campaignId: 'c-same',
    target: TARGET,
    resources: ['s-1', 's-2', 's-3', 's-gone'],
  };
  const byRegion: CampaignRequest = { campaignId: 'c-same', target: TARGET, from: { region: 'westeurope' } };

  test('ids and a from selection: the same counts, nothing written, twice over', async () => {
    const before = await snapshot();
    const ids = await runCampaignPreflight(deps, byIds);
    expect(ids).toMatchObject({
      ok: true,
      resourceCount: 4,
      wouldStart: 2,
      skipped: { count: 2, byReason: { noMigrationRunning: 1, routeExists: 1 } },
    });
    const region = await runCampaignPreflight(deps, byRegion);
    expect(region).toMatchObject({
      ok: true,
      resourceCount: 3,
      wouldStart: 2,
      skipped: { count: 1, byReason: { noMigrationRunning: 1 } },
    });
    expect(await runCampaignPreflight(deps, byIds)).toEqual(ids);
    expect(await runCampaignPreflight(deps, byRegion)).toEqual(region);
    expect(await snapshot()).toEqual(before);
  });

  test('negative control: a dry run that creates the campaign is caught by the same comparison', async () => {
    const before = await snapshot();
    const writing = async (request: CampaignRequest) => {
      const report = await runCampaignPreflight(deps, request);
      const at = new Date(clock.now()).toISOString();
      await stores.campaigns.create(
        campaignRecord('c-same', {
          target: TARGET,
          limits: report.limits,
          createdAt: at,
          createdBy: 'a planted bug',
        }),
      );
      return report;
    };
    await writing(byIds);
    expect(await snapshot()).not.toEqual(before);
    // and the next dry run of that id sees the campaign standing
    const after = await runCampaignPreflight(deps, byIds);
    expect(after.checks.find((c) => c.check === 'campaignIdFree')?.ok).toBe(false);
  });
});
