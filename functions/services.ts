import type { InvocationContext } from '@azure/functions';
import * as df from 'durable-functions';
import { type Clock, systemClock } from '../shared/clock';
import { type Config, getConfig } from '../shared/config';
import { type Activities, createActivities } from '../shared/migration/activities';
import {
  CosmosMigrationRecords,
  type MigrationRecords,
  SqliteMigrationState,
} from '../shared/migration/records';
import type { MigrationService } from '../shared/migration/service';
import { migrationSettings } from '../shared/migration/workflow';
import { Router } from '../shared/router';
import { CosmosStore } from '../shared/store/cosmos';
import { openStore } from '../shared/store/open';
import type { LocationStore } from '../shared/store/port';
import { DurableMigrationService } from './durable/service';

/**
 * The composition root: configuration, store, router, migration records and activities, built once
 * per process. In Azure the first invocation builds them; the embedded host and the tests hand in
 * their own with `useServices`.
 */
export interface Services {
  config: Config;
  store: LocationStore;
  router: Router;
  clock: Clock;
  records: MigrationRecords;
  activities: Activities;
  /** Who runs migrations for this invocation: Durable Functions in Azure, the in-process runner locally. */
  migrations: (context: InvocationContext) => MigrationService;
}

let current: Promise<Services> | undefined;

export interface ServiceOverrides {
  clock?: Clock;
  store?: LocationStore;
  records?: MigrationRecords;
  migrations?: (context: InvocationContext) => MigrationService;
}

function defaultRecords(config: Config, store: LocationStore): MigrationRecords {
  if (store instanceof CosmosStore && config.store.kind === 'cosmos') {
    return new CosmosMigrationRecords(store.containerNamed(config.store.migrationsContainer));
  }
  return new SqliteMigrationState(config.store.kind === 'sqlite' ? config.store.path : ':memory:');
}

export async function createServices(config: Config, overrides: ServiceOverrides = {}): Promise<Services> {
  const clock = overrides.clock ?? systemClock;
  const store = overrides.store ?? (await openStore(config.store));
  const router = new Router({ store, timing: config.timing, clock });
  const records = overrides.records ?? defaultRecords(config, store);
  const settings = migrationSettings(config);
  return {
    config,
    store,
    router,
    clock,
    records,
    activities: createActivities(router, config.timing, records),
    migrations:
      overrides.migrations ??
      ((context) => new DurableMigrationService(df.getClient(context), records, router, settings, clock)),
  };
}

export function services(): Promise<Services> {
  if (!current) {
    const starting = Promise.resolve().then(() => createServices(getConfig()));
    // A failed start (store unreachable) is retried by the next request rather than cached forever.
    starting.catch(() => {
      if (current === starting) current = undefined;
    });
    current = starting;
  }
  return current;
}

export function useServices(value: Services): void {
  current = Promise.resolve(value);
}
