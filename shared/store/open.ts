import type { StoreConfig } from '../config';
import { CosmosStore } from './cosmos';
import type { LocationStore } from './port';
import { SqliteStore } from './sqlite';

/** Open the store the configuration names. */
export async function openStore(config: StoreConfig): Promise<LocationStore> {
  if (config.kind === 'sqlite') return new SqliteStore(config.path);
  return CosmosStore.connect({
    endpoint: config.endpoint,
    key: config.key,
    disableTlsVerify: config.disableTlsVerify,
    database: config.database,
    container: config.container,
    extraContainers: [config.migrationsContainer, config.auditContainer],
    preferredRegion: config.preferredRegion,
  });
}
