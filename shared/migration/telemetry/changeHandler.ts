import { createHash } from 'node:crypto';
import { auditRecordsRecoverableFrom } from '../../core/audit';
import type { AuditLedger } from '../../core/store/ports/audit';
import { type LocationDocument, bareEtag } from '../../core/lock/document';
import { lockTelemetry } from './lockTelemetry';
import { seenKeysOf } from './reconcile';
import type { SeenVersions } from './seen';
import { type TelemetrySink, send } from './sink';

/**
 * One handler for every change stream: the Cosmos DB change feed trigger in Azure, the SQLite store's
 * own stream on the embedded host. Each document version yields its telemetry (every event keyed on the
 * version: a batch delivered twice yields the same keys) and the audit records it can vouch for. For the
 * ledger this is the backstop: the write path (shared/migration/auditTrail.ts) appends each record as its write
 * commits, and this fills any gap it left (the ledger was down, the process died in between). Appending a
 * record already kept changes nothing, so a batch delivered twice adds none; a coalesced batch (versions
 * skipped) yields only what `auditRecordsRecoverableFrom` can rebuild from one version (see there for what
 * that cannot be). A failed append throws, so the trigger's retry policy runs the batch again. The sink
 * is flushed before the versions are recorded as seen (shared/migration/telemetry/seen.ts, what the reconciliation
 * compares the documents against), so a version is never marked seen with its telemetry still buffered;
 * a failed record throws too, and the batch's second run sends the same keys again.
 */
export interface ChangeHandlerDeps {
  sink: TelemetrySink;
  audit?: AuditLedger | undefined;
  /** Where processed versions are recorded for the reconciliation; absent, nothing is. */
  seen?: SeenVersions | undefined;
  declaredConvergenceDelaySeconds: number;
  /** The clock (ms) for the change feed's lag; absent, no lag metric. */
  now?: (() => number) | undefined;
}

/** A document version as a change stream hands it over. */
export interface DocumentVersion {
  doc: LocationDocument;
  /** Its bare ETag: Cosmos `_etag`, the SQLite store's etag. */
  version: string;
  /** The store's time of the write in seconds (Cosmos `_ts`), when the stream carries it. */
  storedAtSeconds?: number | undefined;
}

export interface HandledBatch {
  events: number;
  metrics: number;
  audited: number;
  skipped: number;
  /** now − the newest `_ts` processed, seconds (null: no clock, or no item carried `_ts`). */
  lagSeconds: number | null;
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

/**
 * A change feed item as a version: its `_etag` (always there on the Cosmos DB feed) and `_ts`. An item
 * without an `_etag` (a caller handing in bare documents) is versioned by a digest of its content, so the
 * same content still yields the same keys.
 */
export function changeFeedVersion(item: unknown): DocumentVersion | null {
  if (!isLocationDocument(item)) return null;
  const system = item as LocationDocument & { _etag?: unknown; _ts?: unknown };
  const version =
    typeof system._etag === 'string' && system._etag
      ? bareEtag(system._etag)
      : `sha256-${createHash('sha256').update(JSON.stringify(item, withoutHashes)).digest('hex').slice(0, 24)}`;
  return {
    doc: item,
    version,
    ...(typeof system._ts === 'number' ? { storedAtSeconds: system._ts } : {}),
  };
}

/** The digest leaves the credential hashes out: nothing in telemetry is derived from them. */
const credentialHashes = new Set(['tokenHash', 'idempotencyKeyHash', 'principalHash']);
function withoutHashes(key: string, value: unknown): unknown {
  return credentialHashes.has(key) ? undefined : value;
}

/** The Cosmos DB change feed's batch (raw items). */
export async function handleDocumentVersions(
  items: unknown[],
  deps: ChangeHandlerDeps,
): Promise<HandledBatch> {
  const versions: DocumentVersion[] = [];
  for (const item of items) {
    const version = changeFeedVersion(item);
    if (version) versions.push(version);
  }
  const handled = await handleVersions(versions, deps);
  return { ...handled, skipped: items.length - versions.length };
}

/** Versions already typed (the SQLite store's stream passes each with its etag). */
export async function handleVersions(
  versions: DocumentVersion[],
  deps: ChangeHandlerDeps,
): Promise<HandledBatch> {
  let events = 0;
  let metrics = 0;
  let audited = 0;
  // The lag goes out before anything can fail: a batch the trigger keeps retrying (the ledger down) is
  // exactly when it must keep rising, not fall silent.
  let newestStoredAt: number | undefined;
  for (const { storedAtSeconds } of versions)
    if (storedAtSeconds !== undefined) newestStoredAt = Math.max(newestStoredAt ?? 0, storedAtSeconds);
  // `_ts` is whole seconds: a tenth is all the precision the lag has.
  const lagSeconds =
    deps.now && newestStoredAt !== undefined
      ? Math.round(Math.max(0, deps.now() / 1000 - newestStoredAt) * 10) / 10
      : null;
  if (lagSeconds !== null)
    deps.sink.metric({ name: 'changeFeedLagSeconds', value: lagSeconds, properties: {} });
  const seenKeys = new Map<string, string[]>();
  try {
    for (const { doc, version } of versions) {
      const telemetry = lockTelemetry(doc, deps.declaredConvergenceDelaySeconds, version);
      send(deps.sink, telemetry);
      events += telemetry.events.length;
      metrics += telemetry.metrics.length;
      for (const record of deps.audit ? auditRecordsRecoverableFrom(doc) : []) {
        await deps.audit?.append(record);
        audited += 1;
      }
      seenKeys.set(doc.id, [...(seenKeys.get(doc.id) ?? []), ...seenKeysOf(doc, version)]);
    }
  } catch (error) {
    // what was sent (the lag above all) goes out; the batch still fails and is retried, nothing marked seen
    await deps.sink.flush().catch(() => undefined);
    throw error;
  }
  await deps.sink.flush();
  for (const [resourceId, keys] of seenKeys) await deps.seen?.record(resourceId, keys);
  return { events, metrics, audited, skipped: 0, lagSeconds };
}
