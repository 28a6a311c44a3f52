import { auditRecordFor } from '../audit';
import type { AuditLedger } from '../store/ports/audit';
import type { LocationDocument } from '../lock/document';
import { lockTelemetry } from './lockTelemetry';
import { type TelemetrySink, send } from './sink';

/**
 * One handler for every change stream: the Cosmos DB change feed trigger in Azure, the SQLite store's
 * own stream on the embedded host. Each document version yields its telemetry and, for a swap,
 * release, force-release or reclaim, its audit record. The sink is flushed before it returns, so an
 * invocation never ends with telemetry still buffered.
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
    const record = deps.audit ? auditRecordFor(item) : null;
    if (record && deps.audit) {
      await deps.audit.append(record);
      audited += 1;
    }
  }
  await deps.sink.flush();
  return { events, metrics, audited, skipped };
}
