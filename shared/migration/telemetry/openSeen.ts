import type { StoreConfig } from '../../core/settings';
import { CosmosStore } from '../../core/store/cosmos/locations';
import { CosmosSeenVersions } from '../store/cosmos/telemetry';
import type { LocationStore } from '../../core/store/ports/locations';
import type { SeenVersions } from './seen';

/**
 * Where the change handler's seen versions are kept, beside the audit ledger of the configured backend:
 * the `audit` container on Cosmos DB, the SQLite file otherwise (loaded only then: a Functions app on
 * Cosmos DB must not load the native module).
 */
export async function openSeenVersions(config: StoreConfig, locations: LocationStore): Promise<SeenVersions> {
  if (locations instanceof CosmosStore && config.kind === 'cosmos')
    return new CosmosSeenVersions(locations.containerNamed(config.auditContainer));
  const { SqliteTelemetry } = await import('../store/sqlite/telemetry');
  return new SqliteTelemetry(config.kind === 'sqlite' ? config.path : ':memory:');
}
