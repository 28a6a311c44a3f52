import { type ExponentialBackoffRetryOptions, type InvocationContext, app } from '@azure/functions';
import { handleDocumentVersions } from '../shared/migration/telemetry/changeHandler';
import { changeFeedRetry } from '../shared/migration/telemetry/changeFeedRetry';
import { inFunctionsHost } from './http/endpoint';
import { type Services, onServices } from './services';

/**
 * Cosmos DB change feed on `locations` → lock telemetry (Application Insights) and the audit ledger's
 * backstop: the write path appends each record as its write commits (shared/migration/auditTrail.ts); this fills
 * the records it had to leave (the ledger down), idempotently (the ledger keeps an id's first append).
 * The lease container `leases` is created by Bicep: under a managed identity the data-plane role cannot
 * create containers, so `createLeaseContainerIfNotExists` stays false. Connection `COSMOS` is
 * identity-based (`COSMOS__accountEndpoint`, `COSMOS__credential`, `COSMOS__clientId`).
 *
 * Each event is keyed on its version's `_etag` (a redelivered batch yields the same keys), each processed
 * version is recorded as seen for the reconciliation (functions/telemetryReconciliation.ts), and each
 * batch reports `changeFeedLagSeconds`: now − the newest `_ts` it carried.
 */
export async function lockTelemetryHandler(
  documents: unknown[],
  context: InvocationContext,
  { sink, audit, seen, config, clock }: Pick<Services, 'sink' | 'audit' | 'seen' | 'config' | 'clock'>,
): Promise<void> {
  const result = await handleDocumentVersions(documents, {
    sink,
    audit,
    seen,
    declaredConvergenceDelaySeconds: config.timing.convergenceDelaySeconds,
    now: clock,
  });
  context.log(
    `change feed: ${documents.length} version(s), ${result.events} event(s), ${result.metrics} metric(s), ${result.audited} audited, lag ${result.lagSeconds ?? '?'} s`,
  );
}

/**
 * The retry policy (shared/migration/telemetry/changeFeedRetry.ts, where the reconciliation's grace is checked
 * against its horizon): a failed batch is retried with backoff from 5 s to 5 min, 10 times, then given up.
 * The handler tolerates a batch seen twice.
 */
export const lockTelemetryRetry: ExponentialBackoffRetryOptions = changeFeedRetry;

/**
 * Whether the trigger's identity-based connection `COSMOS` is configured: `COSMOS__accountEndpoint`
 * (or a `COSMOS` connection string) set and not empty. The sample settings leave it empty, so
 * `func start` on SQLite registers no change-feed trigger instead of one with an empty endpoint.
 */
export function changeFeedConfigured(env: Record<string, string | undefined>): boolean {
  return Boolean(env.COSMOS__accountEndpoint?.trim() || env.COSMOS?.trim());
}

/** Register the change-feed trigger when its connection is configured; returns whether it did. */
export function registerLockTelemetry(
  register: typeof app.cosmosDB = app.cosmosDB,
  env: Record<string, string | undefined> = process.env,
): boolean {
  if (!changeFeedConfigured(env)) return false;
  register('lockTelemetry', {
    connection: 'COSMOS',
    databaseName: '%COSMOS_DATABASE%',
    containerName: '%COSMOS_CONTAINER%',
    leaseContainerName: 'leases',
    createLeaseContainerIfNotExists: false,
    retry: lockTelemetryRetry,
    handler: onServices(lockTelemetryHandler),
  });
  return true;
}

if (inFunctionsHost()) registerLockTelemetry();
