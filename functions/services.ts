import type { InvocationContext } from '@azure/functions';
import * as df from 'durable-functions';
import { type Clock, systemClock } from '../shared/clock';
import { type Config, getConfig } from '../shared/config';
import { ForceReleaseService } from '../shared/forceRelease';
import { type Activities, createActivities } from '../shared/migration/activities';
import type { MigrationService } from '../shared/migration/service';
import type { MigrationStatus } from '../shared/migration/types';
import { migrationSettings } from '../shared/migration/workflow';
import { type TokenKeyring, openTokenKeyring } from '../shared/security/tokenKeys';
import { Router, type RouterOptions } from '../shared/router';
import { CosmosStore } from '../shared/store/cosmos/locations';
import { openStores } from '../shared/store/open';
import type { AuditLedger } from '../shared/store/ports/audit';
import type { ForceReleaseRequests } from '../shared/store/ports/forceRelease';
import type { LocationStore } from '../shared/store/ports/locations';
import type { MigrationRecords } from '../shared/store/ports/migrations';
import {
  type MetricsRecorder,
  type TelemetrySink,
  applicationInsightsSink,
  nullSink,
} from '../shared/telemetry/sink';
import { DurableMigrationService } from './durable/service';
import { type Authenticator, createAuthenticator } from './http/auth';

/**
 * The composition root: configuration, store, router, migration records, audit ledger, telemetry,
 * built once per process. In Azure the first invocation builds them; the embedded host and the tests
 * hand in their own with `useServices`.
 */
export interface Services {
  config: Config;
  store: LocationStore;
  /**
   * The process's one router: the HTTP read path, the activities (and their read-path check),
   * force-release and the sweeper all go through it, so its cache never holds a copy older than a write
   * made in this process. The probe's own routers tell it of their writes (`onWrite` → `forget`).
   */
  router: Router;
  clock: Clock;
  records: MigrationRecords;
  activities: Activities;
  /** The workflow's token key ring (never serialized: its toJSON lists key ids only). */
  keyring: TokenKeyring;
  audit: AuditLedger;
  forceRelease: ForceReleaseService;
  sink: TelemetrySink;
  /** Startup findings worth an operator's attention (e.g. a dedicated-gateway endpoint). */
  warnings: string[];
  /**
   * Operator endpoints accept an `actor` body field: only under ROUTELOCK_AUTH=none on the embedded
   * host; everywhere else the identity is the authenticated caller's object id.
   */
  bodyActorAllowed: boolean;
  /** Who the caller is (ROUTELOCK_AUTH); `handle()` checks each endpoint's app role with it. */
  authenticator: Authenticator;
  /** The embedded host's in-memory metrics (`GET /api/metrics`); in Azure, Application Insights has them. */
  metrics?: MetricsRecorder;
  /** The embedded host's recent migrations (`GET /api/migrations`, the status page). */
  recentMigrations?: (limit: number) => MigrationStatus[];
  /** Who runs migrations for this invocation: Durable Functions in Azure, the in-process runner locally. */
  migrations: (context: InvocationContext) => MigrationService;
}

let current: Promise<Services> | undefined;

export interface ServiceOverrides {
  clock?: Clock;
  store?: LocationStore;
  records?: MigrationRecords;
  audit?: AuditLedger;
  forceReleaseRequests?: ForceReleaseRequests;
  sink?: TelemetrySink;
  bodyActorAllowed?: boolean;
  metrics?: MetricsRecorder;
  recentMigrations?: (limit: number) => MigrationStatus[];
  migrations?: (context: InvocationContext) => MigrationService;
  keyring?: TokenKeyring;
  /** Verification only: a planted Cache-Control/Age builder for the serving router (see RouterOptions). */
  routerOptions?: Pick<RouterOptions, 'cacheHeaders'>;
}

/**
 * Guards on the Cosmos account (DESIGN §2 assumes one write region): with several, ETag
 * compare-and-swap is not linearizable across regions, so lock mutations are refused outright.
 */
export function accountGuards(
  store: LocationStore,
  endpoint: string | undefined,
): { unsafe?: string; warnings: string[] } {
  const warnings: string[] = [];
  let unsafe: string | undefined;
  if (store instanceof CosmosStore) {
    if (store.account.multipleWriteLocations) {
      unsafe =
        'the Cosmos DB account has more than one write region; ETag compare-and-swap is not linearizable across write regions. Use a single write region.';
    }
  }
  if (endpoint && /\.sqlx\.cosmos\.azure\.com/i.test(endpoint)) {
    warnings.push(
      'COSMOS_ENDPOINT is a dedicated-gateway (integrated cache) endpoint: its cached reads can be stale beyond the replication bound. Point the router at the account endpoint.',
    );
  }
  if (unsafe) warnings.push(`lock mutations disabled: ${unsafe}`);
  return { ...(unsafe ? { unsafe } : {}), warnings };
}

export async function createServices(config: Config, overrides: ServiceOverrides = {}): Promise<Services> {
  const clock = overrides.clock ?? systemClock;
  const {
    locations: store,
    migrations: records,
    audit,
    forceReleaseRequests,
  } = await openStores(config.store, {
    locations: overrides.store,
    migrations: overrides.records,
    audit: overrides.audit,
    forceReleaseRequests: overrides.forceReleaseRequests,
  });
  const guards = accountGuards(store, config.store.kind === 'cosmos' ? config.store.endpoint : undefined);
  const sink = overrides.sink ?? (await applicationInsightsSink(process.env)) ?? nullSink;
  const router = new Router({
    store,
    timing: config.timing,
    clock,
    allowedRegions: config.regions.allowed,
    unsafeForLocks: guards.unsafe,
    onClockSkew: (resourceId, skewSeconds) =>
      sink.event({ name: 'ClockSkewHigh', properties: { resourceId }, measurements: { skewSeconds } }),
    ...overrides.routerOptions,
  });
  const settings = migrationSettings(config);
  const keyring = overrides.keyring ?? openTokenKeyring(config.security.tokenKeys);
  return {
    config,
    store,
    router,
    clock,
    records,
    activities: createActivities(router, config.timing, { keyring, records }),
    keyring,
    audit,
    forceRelease: new ForceReleaseService(router, audit, forceReleaseRequests, clock),
    sink,
    warnings: guards.warnings,
    bodyActorAllowed: (overrides.bodyActorAllowed ?? false) && config.auth.mode === 'none',
    authenticator: createAuthenticator(config.auth),
    ...(overrides.metrics ? { metrics: overrides.metrics } : {}),
    ...(overrides.recentMigrations ? { recentMigrations: overrides.recentMigrations } : {}),
    migrations:
      overrides.migrations ??
      ((context) =>
        new DurableMigrationService(df.getClient(context), records, router, settings, clock, keyring)),
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
