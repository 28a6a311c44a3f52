import type { StoreConfig } from './core/settings';
import { CosmosAuditLedger } from './core/store/cosmos/audit';
import {
  CosmosCampaignRecords,
  campaignsIndexingPolicy,
  campaignsPartitionKey,
} from './campaign/store/cosmos/campaigns';
import { CosmosForceReleaseRequests } from './core/store/cosmos/forceRelease';
import { CosmosStore } from './core/store/cosmos/locations';
import { CosmosMigrationRecords, migrationsIndexingPolicy } from './migration/store/cosmos/migrations';
import type { AuditLedger } from './core/store/ports/audit';
import type { CampaignRecords } from './campaign/store/ports/campaigns';
import type { ForceReleaseRequests } from './core/store/ports/forceRelease';
import type { LocationStore } from './core/store/ports/locations';
import type { MigrationRecords } from './migration/store/ports/migrations';

// The SQLite adapters are imported inside the sqlite branches only: they load better-sqlite3, a native
// module, and a Functions app on Cosmos DB must not load it (one built for another OS stops every
// function from loading).

/** Everything routelock persists, one port each. */
export interface Stores {
  locations: LocationStore;
  migrations: MigrationRecords;
  audit: AuditLedger;
  forceReleaseRequests: ForceReleaseRequests;
  campaigns: CampaignRecords;
}

/** Open the location store the configuration names. */
export async function openStore(config: StoreConfig): Promise<LocationStore> {
  if (config.kind === 'sqlite') {
    const { SqliteStore } = await import('./core/store/sqlite/locations');
    return new SqliteStore(config.path);
  }
  return CosmosStore.connect({
    endpoint: config.endpoint,
    key: config.key,
    disableTlsVerify: config.disableTlsVerify,
    database: config.database,
    container: config.container,
    extraContainers: [config.migrationsContainer, config.auditContainer, config.campaignsContainer],
    indexingPolicies: {
      [config.migrationsContainer]: migrationsIndexingPolicy,
      [config.campaignsContainer]: campaignsIndexingPolicy,
    },
    partitionKeys: { [config.campaignsContainer]: campaignsPartitionKey },
    preferredRegion: config.preferredRegion,
  });
}

/**
 * Open all the stores of the configured backend; a store in `given` is used as it is and nothing is
 * opened in its place. With Cosmos DB (a cosmos configuration and its CosmosStore) the others are
 * containers of the same database, the force-release requests beside the ledger; otherwise they are
 * SQLite tables at the configured path (":memory:" when the locations given are not the configured
 * Cosmos DB store).
 */
export async function openStores(config: StoreConfig, given: Partial<Stores> = {}): Promise<Stores> {
  const locations = given.locations ?? (await openStore(config));
  if (locations instanceof CosmosStore && config.kind === 'cosmos') {
    return {
      locations,
      migrations:
        given.migrations ?? new CosmosMigrationRecords(locations.containerNamed(config.migrationsContainer)),
      audit: given.audit ?? new CosmosAuditLedger(locations.containerNamed(config.auditContainer)),
      forceReleaseRequests:
        given.forceReleaseRequests ??
        new CosmosForceReleaseRequests(locations.containerNamed(config.auditContainer)),
      campaigns:
        given.campaigns ?? new CosmosCampaignRecords(locations.containerNamed(config.campaignsContainer)),
    };
  }
  const path = config.kind === 'sqlite' ? config.path : ':memory:';
  const [
    { SqliteMigrationState },
    { SqliteAuditLedger },
    { SqliteForceReleaseRequests },
    { SqliteCampaignRecords },
  ] = await Promise.all([
    import('./migration/store/sqlite/migrations'),
    import('./core/store/sqlite/audit'),
    import('./core/store/sqlite/forceRelease'),
    import('./campaign/store/sqlite/campaigns'),
  ]);
  return {
    locations,
    migrations: given.migrations ?? new SqliteMigrationState(path),
    audit: given.audit ?? new SqliteAuditLedger(path),
    forceReleaseRequests: given.forceReleaseRequests ?? new SqliteForceReleaseRequests(path),
    campaigns: given.campaigns ?? new SqliteCampaignRecords(path),
  };
}
