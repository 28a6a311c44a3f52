import type { HttpRequest } from '@azure/functions';
import type { AddressInfo } from 'node:net';
import type { EndpointRole } from '../functions/http/auth';
import { functionEndpoints } from '../functions/endpoints';
import { type EndpointDeclaration, bindEndpoint, refusal } from '../functions/http/endpoint';
import { CAMPAIGN_POISON_QUEUE, CAMPAIGN_QUEUE, handleCampaignMessage } from '../functions/campaignQueue';
import { handleMigrationMessage } from '../functions/migrationQueue';
import { PAGE_PATH } from '../functions/pages/statusPage';
import { type Services, composeServices, createCoreServices } from '../functions/services';
import { SqliteAuditLedger } from '../shared/core/store/sqlite/audit';
import { SqliteCampaignRecords } from '../shared/campaign/store/sqlite/campaigns';
import { SqliteForceReleaseRequests } from '../shared/core/store/sqlite/forceRelease';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import { SqliteTelemetry } from '../shared/migration/store/sqlite/telemetry';
import { bareEtag } from '../shared/core/lock/document';
import { changeListingOf } from '../shared/core/store/ports/locations';
import { handleVersions } from '../shared/migration/telemetry/changeHandler';
import {
  type ReconciliationRun,
  reconciliationLoop,
  runReconciliation,
} from '../shared/migration/telemetry/reconciliation';
import { FanOutSink, LogSink, MetricsRecorder } from '../shared/migration/telemetry/sink';
import { Campaigns } from '../shared/campaign/campaigns';
import { InProcessCampaignRunner } from '../shared/campaign/inProcess';
import type { TickDeps } from '../shared/campaign/service';
import { campaignSettings, campaignTick } from '../shared/campaign/tick';
import type { Clock } from '../shared/core/clock';
import { type Config, parseConfig } from '../shared/config';
import { InProcessRunner } from '../shared/migration/inProcess';
import { SqliteMigrationState } from '../shared/migration/store/sqlite/migrations';
import { type Scheduler, realScheduler } from '../shared/migration/scheduler';
import { InProcessMigrationService } from '../shared/migration/inProcessService';
import type { HttpCall, HttpResult } from '../shared/migration/types';
import { migrationSettings } from '../shared/migration/workflow';
import type { Router, RouterOptions } from '../shared/core/router';
import { openStore } from '../shared/stores';
import type { LocationStore } from '../shared/core/store/ports/locations';
import { assertHostAuth, parseHostConfig } from './config';
import { type HostLock, acquireHostLock } from './hostLock';
import { stdoutHostLog } from './log';
import { metricsEndpoints } from './metrics';
import { LocalQueueConsumer, type QueueConsumerOptions } from './queueConsumer';
import { type ExtraRoute, type LogLine, createLocalServer } from './server';

/** The port the host was told to listen on is taken: the message says how to pick another. */
export class PortInUseError extends Error {
  override readonly name = 'PortInUseError';
  constructor(host: string, port: number) {
    super(
      `port ${port} on ${host} is already in use (another routelock host, or another program). Set PORT to a free port, e.g. PORT=${port === 65535 ? 7072 : port + 1} npm start, and point the CLI at it with the same PORT (or ROUTELOCK_URL).`,
    );
  }
}

/** What the embedded host serves: exactly the Functions endpoints, plus its own metrics. */
export const allEndpoints: readonly EndpointDeclaration[] = [...functionEndpoints, ...metricsEndpoints];

/**
 * Pages outside /api, with the app role each needs (checked like the endpoints' roles): `/` sends the
 * browser to the status page (GET /api/status, functions/statusPage.ts), where a link to the host lands.
 */
export const extraRoutes: readonly ExtraRoute[] = [
  {
    path: '/',
    role: 'Ops.Read',
    handle: (_req, res) => {
      res.writeHead(302, { Location: PAGE_PATH, 'Cache-Control': 'no-store', 'Content-Length': '0' });
      res.end();
    },
  },
];

export interface LocalHost {
  url: string;
  config: Config;
  services: Services;
  runner: InProcessRunner;
  /** Ticks each unfinished campaign (its timers on the host's scheduler). */
  campaignRunner: InProcessCampaignRunner;
  state: SqliteMigrationState;
  queue: LocalQueueConsumer | undefined;
  /** The `campaigns` queue's consumer (with AzureWebJobsStorage, as `queue`). */
  campaignQueue: LocalQueueConsumer | undefined;
  /** One telemetry reconciliation run now (the host also runs one every ROUTELOCK_RECONCILE_INTERVAL_SECONDS). */
  reconcileTelemetry(): Promise<ReconciliationRun | undefined>;
  close(): Promise<void>;
}

export interface LocalHostOptions {
  env?: Record<string, string | undefined>;
  /** Where log lines go; defaults to the host's JSON lines on stdout (local/log.ts). */
  log?: LogLine;
  clock?: Clock;
  store?: LocationStore;
  /** Timers of the in-process runner (a virtual scheduler in tests); defaults to real time. */
  scheduler?: Scheduler;
  /** Where the runner keeps migrations and its journal; defaults to the SQLite path. */
  statePath?: string;
  /** How participants are called (tests may intercept); defaults to HTTP with 202 polling. */
  http?: (call: HttpCall) => Promise<HttpResult>;
  /** How the serving router is made: verification plants its seams through it (functions/services.ts). */
  newRouter?: (options: RouterOptions) => Router;
  /** A seam for tests (documented): a shorter queue retry backoff than host.json's, so a retry is seen in seconds. */
  queueRetry?: Pick<QueueConsumerOptions, 'retryAfterSeconds' | 'maxDequeueCount'>;
}

/**
 * The embedded host's defaults: the dev timing profile, and ROUTELOCK_AUTH=none (every caller trusted;
 * loopback only), unless the environment says otherwise.
 */
export function localEnv(env: Record<string, string | undefined>): Record<string, string | undefined> {
  return {
    ...env,
    ROUTELOCK_PROFILE: env.ROUTELOCK_PROFILE?.trim() || 'dev',
    ROUTELOCK_AUTH: env.ROUTELOCK_AUTH?.trim() || 'none',
  };
}

export async function startLocalHost(options: LocalHostOptions = {}): Promise<LocalHost> {
  const env = localEnv(options.env ?? process.env);
  const config = parseConfig(env);
  const hostConfig = parseHostConfig(env);
  assertHostAuth(hostConfig, config.auth);
  // Without a log of the caller's, the host's own: pino on stdout, flushed by close().
  const ownLog = options.log ? undefined : stdoutHostLog();
  const log = options.log ?? ownLog!.log;
  const scheduler = options.scheduler ?? realScheduler;
  const clock = options.clock ?? (() => scheduler.now());

  // An injected store (tests, embedding) keeps the runner's state in memory unless told otherwise.
  const statePath =
    options.statePath ??
    (options.store
      ? ':memory:'
      : config.store.kind === 'sqlite'
        ? config.store.path
        : env.ROUTELOCK_SQLITE_PATH?.trim() || '.routelock/routelock.db');
  // Before anything opens the file: a second host on it would resume (and run) the same migrations.
  const hostLock: HostLock | undefined = statePath === ':memory:' ? undefined : acquireHostLock(statePath);
  try {
    return await startOnLockedState(options, {
      env,
      config,
      hostConfig,
      ownLog,
      log,
      scheduler,
      clock,
      statePath,
      hostLock,
    });
  } catch (error) {
    hostLock?.release();
    throw error;
  }
}

interface Prepared {
  env: Record<string, string | undefined>;
  config: Config;
  hostConfig: ReturnType<typeof parseHostConfig>;
  ownLog: ReturnType<typeof stdoutHostLog> | undefined;
  log: LogLine;
  scheduler: Scheduler;
  clock: Clock;
  statePath: string;
  hostLock: HostLock | undefined;
}

async function startOnLockedState(options: LocalHostOptions, prepared: Prepared): Promise<LocalHost> {
  const { env, config, hostConfig, ownLog, log, scheduler, clock, statePath, hostLock } = prepared;
  const store = options.store ?? (await openStore(config.store));
  const state = new SqliteMigrationState(statePath, clock);
  // Telemetry goes to structured log lines and the recorder behind GET /api/metrics, whose counts and
  // the versions the change handler saw live beside the host's state (they survive a restart).
  const telemetryState = new SqliteTelemetry(statePath);
  const metrics = new MetricsRecorder(telemetryState);
  const sink = new FanOutSink([
    new LogSink((message, fields) => log('information', message, fields)),
    metrics,
  ]);
  const audit = new SqliteAuditLedger(statePath);
  const forceReleaseRequests = new SqliteForceReleaseRequests(statePath);
  const campaignRecords = new SqliteCampaignRecords(statePath);
  const core = await createCoreServices(config, {
    clock,
    store,
    records: state,
    audit,
    forceReleaseRequests,
    campaignRecords,
    sink,
    seen: telemetryState,
    ...(options.newRouter ? { newRouter: options.newRouter } : {}),
  });
  for (const warning of core.warnings) log('warning', warning, {});
  // The runner's activities are the core's own, over the router that serves HTTP: in one process a
  // second router's cache would serve a copy older than the runner's writes (and its read-path check
  // would look at a cache no service reads through).
  const runner = new InProcessRunner({
    activities: core.activities,
    keyring: core.keyring,
    state,
    scheduler,
    settings: migrationSettings(config),
    ...(options.http ? { http: options.http } : {}),
    log: (message, fields) => log('information', message, fields),
    sink,
  });
  const migrations = new InProcessMigrationService(runner, core.router);
  // Campaigns tick in this process too, starting their members through the same migration service.
  const tickDeps: TickDeps = {
    campaigns: core.campaignRecords,
    migrations,
    records: core.records,
    store: core.store,
    router: core.router,
    now: core.clock,
    settings: campaignSettings(config),
    sink,
  };
  const campaignRunner = new InProcessCampaignRunner({
    tick: (campaignId) => campaignTick(tickDeps, campaignId),
    scheduler,
    campaigns: core.campaignRecords,
    log: (message, fields) => log('information', message, fields),
  });
  const campaigns = new Campaigns({
    campaigns: core.campaignRecords,
    router: core.router,
    launcher: campaignRunner,
    now: core.clock,
    maxMigrationAttempts: config.migration.migrationAttempts,
  });
  const services = composeServices(core, {
    bodyActorAllowed: true,
    metrics,
    migrations: () => migrations,
    campaigns: () => campaigns,
  });
  // The embedded store's change stream feeds the same handler as the Cosmos DB change feed in Azure.
  const unsubscribe =
    store instanceof SqliteStore
      ? store.onChange((doc, etag) => {
          handleVersions([{ doc, version: bareEtag(etag) }], {
            sink,
            audit,
            seen: telemetryState,
            declaredConvergenceDelaySeconds: config.timing.convergenceDelaySeconds,
          }).catch((error: unknown) =>
            log('error', 'change handler failed', { error: (error as Error).message }),
          );
        })
      : () => undefined;
  // The reconciliation over the same store; its window is on the wall clock, which dates the store's writes.
  // Only over the SQLite store whose stream the handler hears: over any other every change would be a gap.
  const listing = store instanceof SqliteStore ? changeListingOf(store) : undefined;
  const reconcileTelemetry = async (): Promise<ReconciliationRun | undefined> => {
    if (!listing) return undefined;
    const run = await runReconciliation({
      listing,
      seen: telemetryState,
      sink,
      now: () => Date.now(),
      settings: config.operations.reconciliation,
    });
    if (run.gaps.length > 0) log('warning', `reconciliation: ${run.gaps.length} telemetry gap(s)`, {});
    return run;
  };
  const stopReconciliation = reconciliationLoop(
    reconcileTelemetry,
    config.operations.reconciliation.intervalSeconds,
    (error) => log('error', 'reconciliation failed', { error: (error as Error).message }),
  );

  // The host's endpoints and pages resolve these services, not the Functions entry points' singleton.
  const resolved = Promise.resolve(services);
  const source = () => resolved;
  const check = (role: EndpointRole, request: HttpRequest) => refusal(role, request, source);
  const server = createLocalServer({
    endpoints: allEndpoints.map((declaration) => bindEndpoint(declaration, source)),
    log,
    pages: { routes: extraRoutes, refusal: check },
    refusal: check,
    limits: hostConfig.limits,
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(error.code === 'EADDRINUSE' ? new PortInUseError(hostConfig.host, hostConfig.port) : error),
    );
    server.listen(hostConfig.port, hostConfig.host, () => resolve());
  });
  const resumed = runner.resumeAll();
  if (resumed > 0) log('information', `resumed ${resumed} unfinished migration(s)`, {});
  const resumedCampaigns = await campaignRunner.resumeAll();
  if (resumedCampaigns > 0) log('information', `resumed ${resumedCampaigns} unfinished campaign(s)`, {});

  let queue: LocalQueueConsumer | undefined;
  let campaignQueue: LocalQueueConsumer | undefined;
  const storage = env.AzureWebJobsStorage?.trim();
  if (storage) {
    // The campaigns consumer first: the migrations consumer's first poll stays the last thing a start
    // does (test/migration/queue.test.ts counts on its next poll coming a full interval later).
    campaignQueue = new LocalQueueConsumer({
      connectionString: storage,
      handle: (item, messageId) => handleCampaignMessage(item, messageId, campaigns),
      log,
      queues: { queue: CAMPAIGN_QUEUE, poison: CAMPAIGN_POISON_QUEUE, subject: 'campaign' },
      ...options.queueRetry,
    });
    await campaignQueue.start();
    queue = new LocalQueueConsumer({
      connectionString: storage,
      handle: (item) => handleMigrationMessage(item, migrations),
      log,
      ...options.queueRetry,
    });
    await queue.start();
  }

  const { port } = server.address() as AddressInfo;
  const hostForUrl = hostConfig.host.includes(':') ? `[${hostConfig.host}]` : hostConfig.host;
  const url = `http://${hostForUrl}:${port}`;
  hostLock?.announce(url);
  let closed = false;
  return {
    url,
    config,
    services,
    runner,
    campaignRunner,
    state,
    queue,
    campaignQueue,
    reconcileTelemetry,
    async close() {
      if (closed) return;
      closed = true;
      stopReconciliation();
      campaignRunner.stop();
      const runnerStopped = runner.stop();
      unsubscribe();
      await queue?.stop();
      await campaignQueue?.stop();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      // Every loop that reads the stores has ended before they close: a step under way finishes first.
      await campaignRunner.idle();
      await runnerStopped;
      await store.close();
      state.close();
      audit.close();
      forceReleaseRequests.close();
      campaignRecords.close();
      telemetryState.close();
      hostLock?.release();
      ownLog?.flush();
    },
  };
}
