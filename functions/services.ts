import type { InvocationContext } from '@azure/functions';
import * as df from 'durable-functions';
import { AuditTrail, AuditedLocationStore } from '../shared/migration/auditTrail';
import { Campaigns } from '../shared/campaign/campaigns';
import type { CampaignService } from '../shared/campaign/service';
import { type Clock, systemClock } from '../shared/core/clock';
import { type Config, getConfig } from '../shared/config';
import { ForceReleaseService } from '../shared/core/forceRelease';
import { type Activities, createActivities } from '../shared/migration/activities';
import type { MigrationService } from '../shared/migration/service';
import { migrationSettings } from '../shared/migration/workflow';
import { type TokenKeyring, openTokenKeyring } from '../shared/core/security/tokenKeys';
import { Router, type RouterOptions } from '../shared/core/router';
import { observeStoreThrottling } from '../shared/core/store/cosmos/common';
import { CosmosStore } from '../shared/core/store/cosmos/locations';
import { recordStoreThrottled } from '../shared/migration/telemetry/decisions';
import { openStores } from '../shared/stores';
import type { AuditLedger } from '../shared/core/store/ports/audit';
import type { CampaignRecords } from '../shared/campaign/store/ports/campaigns';
import type { ForceReleaseRequests } from '../shared/core/store/ports/forceRelease';
import type { LocationStore } from '../shared/core/store/ports/locations';
import type { MigrationRecords } from '../shared/migration/store/ports/migrations';
import {
  type MetricsRecorder,
  type TelemetrySink,
  applicationInsightsSink,
  nullSink,
} from '../shared/migration/telemetry/sink';
import { openSeenVersions } from '../shared/migration/telemetry/openSeen';
import type { SeenVersions } from '../shared/migration/telemetry/seen';
import { DurableCampaignLauncher } from './durable/campaigns';
import { DurableMigrationService } from './durable/service';
import { type Authenticator, createAuthenticator } from './http/auth';

/**
 * What every host builds the same way, once per process (`createCoreServices`): configuration, store,
 * router, migration records, audit ledger, telemetry.
 */
export interface CoreServices {
  readonly config: Config;
  readonly store: LocationStore;
  /**
   * The process's one router: the HTTP read path, the activities (and their read-path check),
   * force-release and the sweeper all go through it, so its cache never holds a copy older than a write
   * made in this process. The probe's own routers tell it of their writes (`onWrite` → `forget`).
   */
  readonly router: Router;
  readonly clock: Clock;
  readonly records: MigrationRecords;
  /** The migration activities, over `router`: Durable activities in Azure, the in-process runner locally. */
  readonly activities: Activities;
  /** The workflow's token key ring (never serialized: its toJSON lists key ids only). */
  readonly keyring: TokenKeyring;
  readonly audit: AuditLedger;
  readonly forceRelease: ForceReleaseService;
  /** Campaigns and their members (docs/design.md §6.9). */
  readonly campaignRecords: CampaignRecords;
  readonly sink: TelemetrySink;
  /** What the change handler processed, for the telemetry reconciliation (docs/design.md §8). */
  readonly seen: SeenVersions;
  /** Startup findings worth an operator's attention (e.g. a dedicated-gateway endpoint). */
  readonly warnings: readonly string[];
  /** Who the caller is (ROUTELOCK_AUTH); `handle()` checks each endpoint's app role with it. */
  readonly authenticator: Authenticator;
}

/** What a host adds to the core when it composes its services: who runs migrations, its own views. */
export interface HostServices {
  /**
   * Operator endpoints accept an `actor` body field: only under ROUTELOCK_AUTH=none on the embedded
   * host; everywhere else the identity is the authenticated caller's object id.
   */
  readonly bodyActorAllowed: boolean;
  /** The embedded host's in-memory metrics (`GET /api/metrics`); in Azure, Application Insights has them. */
  readonly metrics?: MetricsRecorder;
  /** Who runs migrations for this invocation: Durable Functions in Azure, the in-process runner locally. */
  readonly migrations: (context: InvocationContext) => MigrationService;
  /** Who runs campaigns for this invocation: a Durable orchestration in Azure, the in-process loop locally. */
  readonly campaigns: (context: InvocationContext) => CampaignService;
}

/**
 * The composition root: the core plus the host's parts, composed once and never changed afterwards.
 * Handlers declare the part they use (`Pick<Services, ...>`).
 */
export interface Services extends CoreServices, HostServices {}

/** What a caller (a host, a test) may hand in instead of what the configuration would build. */
export interface CoreOverrides {
  clock?: Clock;
  store?: LocationStore;
  records?: MigrationRecords;
  audit?: AuditLedger;
  forceReleaseRequests?: ForceReleaseRequests;
  campaignRecords?: CampaignRecords;
  sink?: TelemetrySink;
  seen?: SeenVersions;
  keyring?: TokenKeyring;
  /**
   * How the serving router is made (default: `new Router`). Verification hands in testkit/router.ts's
   * maker, to plant what its negative controls must catch; the seams themselves are not RouterOptions.
   */
  newRouter?: (options: RouterOptions) => Router;
}

/** The Functions host's composition, with the host parts a test may replace. */
export interface ServiceOverrides extends CoreOverrides, Partial<HostServices> {}

/**
 * Guards on the Cosmos account (docs/design.md §2.1 assumes one write region): with several, ETag
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

/** Build what every host shares, once: the one router, and every service over it. */
export async function createCoreServices(
  config: Config,
  overrides: CoreOverrides = {},
): Promise<CoreServices> {
  const clock = overrides.clock ?? systemClock;
  const {
    locations,
    migrations: records,
    audit,
    forceReleaseRequests,
    campaigns: campaignRecords,
  } = await openStores(config.store, {
    locations: overrides.store,
    migrations: overrides.records,
    audit: overrides.audit,
    forceReleaseRequests: overrides.forceReleaseRequests,
    campaigns: overrides.campaignRecords,
  });
  const guards = accountGuards(locations, config.store.kind === 'cosmos' ? config.store.endpoint : undefined);
  const sink = overrides.sink ?? (await applicationInsightsSink(process.env)) ?? nullSink;
  // Cosmos DB throttling that reached an adapter, counted for the workbook and the throttling alert.
  if (config.store.kind === 'cosmos') observeStoreThrottling((about) => recordStoreThrottled(sink, about));
  // Audit on the write path: every router over `store` appends a committed version's record; the change
  // feed (lockTelemetry) is the backstop. `audit` itself stays the plain ledger (reads, the backstop).
  const trail = new AuditTrail({ ledger: audit, sink });
  const store = new AuditedLocationStore(locations, trail);
  const router = (overrides.newRouter ?? ((options: RouterOptions) => new Router(options)))({
    store,
    timing: config.timing,
    clock,
    allowedRegions: config.regions.allowed,
    unsafeForLocks: guards.unsafe,
    onClockSkew: (resourceId, skewSeconds) =>
      sink.event({ name: 'ClockSkewHigh', properties: { resourceId }, measurements: { skewSeconds } }),
  });
  const keyring = overrides.keyring ?? openTokenKeyring(config.security.tokenKeys);
  const seen = overrides.seen ?? (await openSeenVersions(config.store, locations));
  return Object.freeze({
    config,
    store,
    router,
    clock,
    records,
    activities: createActivities(router, config.timing, { keyring, records, sink }),
    keyring,
    audit,
    forceRelease: new ForceReleaseService(router, trail.asLedger(), forceReleaseRequests, clock),
    campaignRecords,
    sink,
    seen,
    warnings: Object.freeze([...guards.warnings]),
    authenticator: createAuthenticator(config.auth),
  });
}

/** A host's services: the core and the host's own parts, composed once (frozen: nothing is added later). */
export function composeServices(core: CoreServices, host: HostServices): Services {
  const { bodyActorAllowed, metrics, migrations, campaigns } = host;
  return Object.freeze({
    ...core,
    bodyActorAllowed: bodyActorAllowed && core.config.auth.mode === 'none',
    ...(metrics ? { metrics } : {}),
    migrations,
    campaigns,
  });
}

/** The Functions host's migrations: Durable Functions, through the invocation's Durable client. */
function durableMigrations(core: CoreServices): (context: InvocationContext) => MigrationService {
  const settings = migrationSettings(core.config);
  return (context) =>
    new DurableMigrationService(
      df.getClient(context),
      core.records,
      core.router,
      settings,
      core.clock,
      core.keyring,
      core.sink,
    );
}

/** The Functions host's campaigns: the one CampaignService, its runner a Durable orchestration. */
function durableCampaigns(core: CoreServices): (context: InvocationContext) => CampaignService {
  return (context) =>
    new Campaigns({
      campaigns: core.campaignRecords,
      router: core.router,
      launcher: new DurableCampaignLauncher(df.getClient(context)),
      now: core.clock,
      maxMigrationAttempts: core.config.migration.migrationAttempts,
    });
}

/** The Functions host's services (tests hand in overrides of the parts they fake). */
export async function createServices(config: Config, overrides: ServiceOverrides = {}): Promise<Services> {
  const { bodyActorAllowed, metrics, migrations, campaigns, ...coreOverrides } = overrides;
  const core = await createCoreServices(config, coreOverrides);
  return composeServices(core, {
    bodyActorAllowed: bodyActorAllowed ?? false,
    ...(metrics ? { metrics } : {}),
    migrations: migrations ?? durableMigrations(core),
    campaigns: campaigns ?? durableCampaigns(core),
  });
}

let current: Promise<Services> | undefined;

/**
 * The Functions entry points' services: created on the first invocation, then the same for the process.
 * Nothing sets it from outside: the embedded host and the tests bind their endpoints and triggers to
 * services of their own.
 */
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

/**
 * A trigger's handler as the Functions host calls it, `(input, context)`, its services resolved on each
 * invocation. The handler itself declares the part it uses and takes it as a third argument.
 */
export function onServices<I, R>(
  handler: (input: I, context: InvocationContext, services: Services) => Promise<R>,
): (input: I, context: InvocationContext) => Promise<R> {
  return async (input, context) => handler(input, context, await services());
}
