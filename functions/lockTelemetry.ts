import { type InvocationContext, app } from '@azure/functions';
import { handleDocumentVersions } from '../shared/telemetry/changeHandler';
import { inFunctionsHost } from './http/endpoint';
import { type Services, onServices } from './services';

/**
 * Cosmos DB change feed on `locations` → lock telemetry (Application Insights) and the audit ledger.
 * The lease container `leases` is created by Bicep: under a managed identity the data-plane role cannot
 * create containers, so `createLeaseContainerIfNotExists` stays false. Connection `COSMOS` is
 * identity-based (`COSMOS__accountEndpoint`, `COSMOS__credential`, `COSMOS__clientId`).
 */
export async function lockTelemetryHandler(
  documents: unknown[],
  context: InvocationContext,
  { sink, audit, config }: Pick<Services, 'sink' | 'audit' | 'config'>,
): Promise<void> {
  const result = await handleDocumentVersions(documents, {
    sink,
    audit,
    declaredConvergenceDelaySeconds: config.timing.convergenceDelaySeconds,
  });
  context.log(
    `change feed: ${documents.length} version(s), ${result.events} event(s), ${result.metrics} metric(s), ${result.audited} audited`,
  );
}

if (inFunctionsHost()) {
  app.cosmosDB('lockTelemetry', {
    connection: 'COSMOS',
    databaseName: '%COSMOS_DATABASE%',
    containerName: '%COSMOS_CONTAINER%',
    leaseContainerName: 'leases',
    createLeaseContainerIfNotExists: false,
    handler: onServices(lockTelemetryHandler),
  });
}
