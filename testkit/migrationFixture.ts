import { activityNames } from '../functions/migrationOrchestrator';
import { activityFunctionName } from '../functions/durable/runOnDurable';
import type { Config } from '../shared/config';
import type { Location } from '../shared/core/lock/document';
import { type Activities, createActivities } from '../shared/migration/activities';
import { newMigrationInput, newMigrationRecord } from '../shared/migration/records';
import type { ActivityName, MigrationInput } from '../shared/migration/types';
import { migrationSettings } from '../shared/migration/workflow';
import { Router } from '../shared/core/router';
import { type LockSeed, TokenKeyring } from '../shared/core/security/tokenKeys';
import type { LocationStore } from '../shared/core/store/ports/locations';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import { SqliteMigrationState } from '../shared/migration/store/sqlite/migrations';
import { ManualClock } from './clock';

/** One migration ready to drive through the Durable executor: its route, record, input and activities. */
export interface MigrationFixture<S extends LocationStore = LocationStore> {
  clock: ManualClock;
  store: S;
  router: Router;
  records: SqliteMigrationState;
  keyring: TokenKeyring;
  activities: Activities;
  input: MigrationInput;
  /**
   * Run the activity behind Durable function `fn` at virtual time `now`, as the Durable host would;
   * `before` sees the activity's name first (a test's fault injection).
   */
  runActivity(
    fn: string,
    activityInput: unknown,
    now: number,
    before?: (name: ActivityName) => void,
  ): Promise<unknown>;
}

export async function migrationFixture<S extends LocationStore = SqliteStore>(options: {
  config: Config;
  start: number;
  source: Location;
  target: Location;
  store?: S;
  /** A fixed key ring and seed make a run reproducible (recorded Durable histories); default: fresh. */
  keyring?: TokenKeyring;
  seed?: LockSeed;
}): Promise<MigrationFixture<S>> {
  const { config, start, source, target } = options;
  const clock = new ManualClock(start);
  const store = options.store ?? (new SqliteStore(':memory:') as LocationStore as S);
  const router = new Router({ store, timing: config.timing, clock: clock.now });
  const records = new SqliteMigrationState(':memory:');
  const keyring = options.keyring ?? TokenKeyring.ephemeral();
  const activities = createActivities(router, config.timing, { keyring, records });
  await router.createRoute('conv-1', source);
  // Built as the starters build it (the version new migrations run, the participants' scope).
  const input: MigrationInput = newMigrationInput({
    migrationId: 'm-1',
    instanceId: 'migrate-conv-1',
    resourceId: 'conv-1',
    target,
    settings: migrationSettings(config),
    lock: options.seed ?? keyring.newSeed(),
  });
  await records.create(newMigrationRecord(input, new Date(start).toISOString()));
  const activityByFunction = new Map(
    activityNames.map((n) => [activityFunctionName(n), n] as [string, ActivityName]),
  );
  const runActivity: MigrationFixture<S>['runActivity'] = (fn, activityInput, now, before) => {
    clock.set(now);
    const name = activityByFunction.get(fn);
    if (!name) throw new Error(`unknown activity ${fn}`);
    before?.(name);
    return (activities[name] as (i: unknown) => Promise<unknown>)(activityInput);
  };
  return { clock, store, router, records, keyring, activities, input, runActivity };
}
