import { auditRecordsRecoverableFrom } from '../audit';
import type { AuditLedger } from '../store/ports/audit';
import type { LocationDocument } from '../lock/document';
import { lockTelemetry } from './lockTelemetry';
import { type TelemetrySink, send } from './sink';

/**
 * One handler for every change stream: the Cosmos DB change feed trigger in Azure, the SQLite store's
 * own stream on the embedded host. Each document version yields its telemetry and the audit records
 * it can vouch for. For the ledger this is the backstop: the write path (shared/auditTrail.ts) appends
 * each record as its write commits, and this fills any gap it left (the ledger was down, the process
 * died in between). Appending a record already kept changes nothing, so a batch delivered twice adds
 * none; a coalesced batch (versions skipped) yields only what `auditRecordsRecoverableFrom` can rebuild
 * from one version (see there for what that cannot be). A failed append throws, so the trigger's retry
 * policy runs the batch again. The sink is flushed before it returns, so an invocation never ends with
 * telemetry still buffered.
 */
export interface ChangeHandlerDeps {
  sink: TelemetrySink;
  audit?: AuditLedger | undefined;
  declaredConvergenceDelaySeconds: number;
}

export function isLocationDocument(value: unknown): value is LocationDocument {
  const doc = value as Partial<LocationDocument> | null;
  return (
    typeof doc === 'object' &&
    doc !== null &&
    typeof doc.id === 'string' &&
    typeof doc.location === 'object' &&
    doc.location !== null &&
    'lock' in doc
  );
}

export async function handleDocumentVersions(
  items: unknown[],
  deps: ChangeHandlerDeps,
): Promise<{ events: number; metrics: number; audited: number; skipped: number }> {
  let events = 0;
  let metrics = 0;
  let audited = 0;
  let skipped = 0;
  for (const item of items) {
    if (!isLocationDocument(item)) {
      skipped += 1;
      continue;
    }
    const telemetry = lockTelemetry(item, deps.declaredConvergenceDelaySeconds);
    send(deps.sink, telemetry);
    events += telemetry.events.length;
    metrics += telemetry.metrics.length;
    for (const record of deps.audit ? auditRecordsRecoverableFrom(item) : []) {
      await deps.audit?.append(record);
      audited += 1;
    }
  }
  await deps.sink.flush();
  return { events, metrics, audited, skipped };
}
