import { type LastChange, type LocationDocument, describeLocation } from '../../core/lock/document';
import { phaseExpiresAt } from '../../core/lock/state';
import { isProbeId } from '../probeId';
import { EVENT_KEY, type TelemetryEventName, type TelemetryMetricName } from './names';

/**
 * Lock telemetry derived from one document version alone (docs/design.md §8): the change feed may coalesce
 * versions, so nothing here looks at a previous one. `lastChange` says what the write did; the phase
 * timestamps and `lastMigration` carry the durations. Properties are an allowlist: never a token,
 * its hash, or the idempotency key's hash.
 *
 * Every event carries `eventKey` = `${name}:${resourceId}:${version}` (the version's bare ETag): a batch the
 * change feed delivers twice yields the same keys, so whatever counts them (the workbook's KQL, the
 * embedded host's recorder) counts each once. Durations travel as event measurements for the same
 * reason; the metrics stay for Metrics Explorer, which nothing deduplicates.
 */

/** The dedup key of an event derived from one document version (docs/design.md §8.1). */
export function versionEventKey(name: TelemetryEventName, resourceId: string, version: string): string {
  return `${name}:${resourceId}:${version}`;
}

export interface TelemetryEvent {
  name: TelemetryEventName;
  properties: Record<string, string>;
  measurements?: Record<string, number>;
}

export interface TelemetryMetric {
  name: TelemetryMetricName;
  value: number;
  properties: Record<string, string>;
}

export interface LockTelemetry {
  events: TelemetryEvent[];
  metrics: TelemetryMetric[];
}

const seconds = (from: string | null | undefined, to: string | null | undefined): number | undefined =>
  from && to ? Math.round((Date.parse(to) - Date.parse(from)) / 10) / 100 : undefined;

/**
 * How long a write lock that ended without a swap refused writes: from its grant to the downgrade or
 * release, or to its lease end if that came first (a lapsed write lock refuses nothing).
 */
function writeHoldSeconds(change: LastChange): number | undefined {
  if (!change.writeAt || !change.writeExpiresAt) return undefined;
  const end = Math.min(Date.parse(change.at), Date.parse(change.writeExpiresAt));
  return seconds(change.writeAt, new Date(end).toISOString());
}

const region = (location: { region: string; account?: string } | undefined): string =>
  location ? describeLocation(location) : '';

/**
 * @param declaredConvergenceDelaySeconds the delay the service declares now (its cache tiers and
 *   replication bound); a wait shorter than this, or than the lock's own, is a shortfall. A probe
 *   route (`probe-…`) is judged by its lock's own delay only.
 * @param version the version's bare ETag (Cosmos `_etag`, the SQLite store's etag): the events' key.
 */
export function lockTelemetry(
  doc: LocationDocument,
  declaredConvergenceDelaySeconds: number,
  version: string,
): LockTelemetry {
  const telemetry = unkeyedTelemetry(doc, declaredConvergenceDelaySeconds);
  return {
    events: telemetry.events.map((event) => ({
      ...event,
      properties: { ...event.properties, [EVENT_KEY]: versionEventKey(event.name, doc.id, version) },
    })),
    metrics: telemetry.metrics,
  };
}

function unkeyedTelemetry(doc: LocationDocument, declaredConvergenceDelaySeconds: number): LockTelemetry {
  const change = doc.lastChange;
  const events: TelemetryEvent[] = [];
  const metrics: TelemetryMetric[] = [];
  if (!change) return { events, metrics };
  const base: Record<string, string> = { resourceId: doc.id, op: change.op, at: change.at };

  if ((change.op === 'prelock' || change.op === 'escalate') && doc.lock) {
    events.push({
      name: 'LockAcquired',
      properties: {
        ...base,
        phase: doc.lock.phase,
        migrationId: doc.lock.migrationId,
        target: region(doc.lock.target),
        expiresAt: phaseExpiresAt(doc.lock),
      },
    });
    return { events, metrics };
  }
  if (change.op === 'renew' && doc.lock) {
    // Progress for the stall alert: a long hard-delete copy writes nothing else for hours.
    events.push({
      name: 'LockRenewed',
      properties: {
        ...base,
        phase: doc.lock.phase,
        migrationId: doc.lock.migrationId,
        expiresAt: phaseExpiresAt(doc.lock),
      },
    });
    return { events, metrics };
  }
  if (change.op === 'downgrade' && doc.lock) {
    const hold = writeHoldSeconds(change);
    if (hold !== undefined)
      metrics.push({
        name: 'writeLockSeconds',
        value: hold,
        properties: { ...base, migrationId: doc.lock.migrationId },
      });
    events.push({
      name: 'LockReleased',
      properties: {
        ...base,
        phase: 'write',
        reason: 'downgrade',
        migrationId: doc.lock.migrationId,
        // the hard-delete lock it leaves runs until then (the stall alert's deadline)
        expiresAt: phaseExpiresAt(doc.lock),
      },
      ...(hold === undefined ? {} : { measurements: { writeLockSeconds: hold } }),
    });
    return { events, metrics };
  }

  const last = doc.lastMigration;
  if (!last) return { events, metrics };
  const properties = { ...base, migrationId: last.migrationId, from: region(last.from), to: region(last.to) };
  const reason = { swap: 'swap', release: 'release', forceRelease: 'forceRelease', reclaim: 'reclaim' }[
    change.op as 'swap' | 'release' | 'forceRelease' | 'reclaim'
  ];
  if (!reason) return { events, metrics };
  const convergenceWait = seconds(last.acquiredAt, last.hardDeleteAt);
  // The delay the wait is judged against: the lock's own, or the one declared now if longer. The
  // synthetic probe's route is read by no service's cache: its lock runs on the probe's own timing
  // (one-second convergence) by design, and is judged by that alone.
  const declared = isProbeId(doc.id)
    ? last.convergenceDelaySeconds
    : Math.max(last.convergenceDelaySeconds, declaredConvergenceDelaySeconds);
  const convergence = {
    ...(convergenceWait === undefined ? {} : { convergenceWaitSeconds: convergenceWait }),
    convergenceDelaySeconds: declared,
  };
  // A write lock ended without a swap: released, force-released or reclaimed (the swap's hold is
  // MigrationSwapped's, not counted twice).
  const releasedHold = change.op !== 'swap' ? writeHoldSeconds(change) : undefined;
  if (releasedHold !== undefined) metrics.push({ name: 'writeLockSeconds', value: releasedHold, properties });
  events.push({
    name: 'LockReleased',
    properties: {
      ...properties,
      reason,
      ...(change.actor ? { actor: change.actor } : {}),
      ...(change.reason ? { detail: change.reason } : {}),
    },
    measurements: {
      ...convergence,
      ...(releasedHold === undefined ? {} : { writeLockSeconds: releasedHold }),
    },
  });
  if (change.op === 'forceRelease')
    events.push({ name: 'ForceReleased', properties: { ...properties, actor: change.actor ?? '' } });
  if (change.op === 'reclaim') {
    events.push({
      name: 'OrphanedLockReclaimed',
      properties,
      measurements: { ageSeconds: change.ageSeconds ?? 0 },
    });
  }

  if (convergenceWait !== undefined) {
    metrics.push({ name: 'convergenceWaitSeconds', value: convergenceWait, properties });
    if (convergenceWait < declared) {
      events.push({
        name: 'ConvergenceShortfall',
        properties,
        measurements: { convergenceWaitSeconds: convergenceWait, convergenceDelaySeconds: declared },
      });
    }
  }
  if (change.op === 'swap') {
    const durations: Partial<Record<TelemetryMetricName, number>> = {};
    const metric = (name: TelemetryMetricName, value: number | undefined) => {
      if (value === undefined) return;
      durations[name] = value;
      metrics.push({ name, value, properties });
    };
    metric('writeLockSeconds', seconds(last.writeAt, last.swappedAt));
    metric('hardDeleteSeconds', seconds(last.hardDeleteAt, last.swappedAt));
    metric('migrationSeconds', seconds(last.acquiredAt, last.swappedAt));
    events.push({ name: 'MigrationSwapped', properties, measurements: { ...durations, ...convergence } });
  }
  return { events, metrics };
}
