import {
  type LastChange,
  type LastMigration,
  type Lock,
  type LocationDocument,
  describeLocation,
} from '../../core/lock/document';
import { phaseExpiresAt } from '../../core/lock/state';
import { isProbeId } from '../probeId';
import { EVENT_KEY, type TelemetryEventName, type TelemetryMetricName } from './names';

/**
 * Lock telemetry derived from one document version alone (design §8): the change feed may coalesce
 * versions, so nothing here looks at a previous one. `lastChange` says what the write did; the phase
 * timestamps and `lastMigration` carry the durations. Properties are an allowlist: never a token,
 * its hash, or the idempotency key's hash.
 *
 * Every event carries `eventKey` = `${name}:${resourceId}:${version}` (the version's bare ETag): a batch the
 * change feed delivers twice yields the same keys, so whatever counts them (the workbook's KQL, the
 * embedded host's recorder) counts each once. Durations travel as event measurements for the same
 * reason; the metrics stay for Metrics Explorer, which nothing deduplicates.
 */

/** The dedup key of an event derived from one document version (design §8.1). */
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

const noTelemetry = (): LockTelemetry => ({ events: [], metrics: [] });

/** The parts in order: their events one after another, their metrics likewise. */
const joined = (...parts: LockTelemetry[]): LockTelemetry => ({
  events: parts.flatMap((part) => part.events),
  metrics: parts.flatMap((part) => part.metrics),
});

function unkeyedTelemetry(doc: LocationDocument, declaredConvergenceDelaySeconds: number): LockTelemetry {
  const change = doc.lastChange;
  if (!change) return noTelemetry();
  const base: Record<string, string> = { resourceId: doc.id, op: change.op, at: change.at };
  const held = doc.lock ? whileLocked(doc.lock, change, base) : undefined;
  return held ?? lockEnded(doc, change, base, declaredConvergenceDelaySeconds);
}

/** A write that leaves a lock on the route: acquired, renewed, or downgraded. Anything else is not one. */
function whileLocked(
  lock: Lock,
  change: LastChange,
  base: Record<string, string>,
): LockTelemetry | undefined {
  const held = { ...base, phase: lock.phase, migrationId: lock.migrationId };
  if (change.op === 'prelock' || change.op === 'escalate') {
    const properties = { ...held, target: region(lock.target), expiresAt: phaseExpiresAt(lock) };
    return { events: [{ name: 'LockAcquired', properties }], metrics: [] };
  }
  if (change.op === 'announce') {
    // Progress too: the write lock follows once the window opens, the lead after this write.
    const properties = {
      ...held,
      phase: 'write',
      windowAt: lock.writeWindowAt ?? '',
      windowUntil: lock.writeWindowUntil ?? '',
    };
    return { events: [{ name: 'LockAnnounced', properties }], metrics: [] };
  }
  if (change.op === 'renew') {
    // Progress for the stall alert: a long hard-delete copy writes nothing else for hours.
    const properties = { ...held, expiresAt: phaseExpiresAt(lock) };
    return { events: [{ name: 'LockRenewed', properties }], metrics: [] };
  }
  if (change.op === 'downgrade') return downgraded(lock, change, base);
  return undefined;
}

/** The write lock let go for the hard-delete lock: how long it refused writes, and the release. */
function downgraded(lock: Lock, change: LastChange, base: Record<string, string>): LockTelemetry {
  const hold = writeHoldSeconds(change);
  const metrics: TelemetryMetric[] =
    hold === undefined
      ? []
      : [{ name: 'writeLockSeconds', value: hold, properties: { ...base, migrationId: lock.migrationId } }];
  const released: TelemetryEvent = {
    name: 'LockReleased',
    properties: {
      ...base,
      phase: 'write',
      reason: 'downgrade',
      migrationId: lock.migrationId,
      // the hard-delete lock it leaves runs until then (the stall alert's deadline)
      expiresAt: phaseExpiresAt(lock),
    },
    ...(hold === undefined ? {} : { measurements: { writeLockSeconds: hold } }),
  };
  return { events: [released], metrics };
}

type EndOp = 'swap' | 'release' | 'forceRelease' | 'reclaim';
const endReasons: Record<EndOp, string> = {
  swap: 'swap',
  release: 'release',
  forceRelease: 'forceRelease',
  reclaim: 'reclaim',
};

/** The migration's convergence wait, and the delay it is judged against. */
interface Convergence {
  convergenceWaitSeconds?: number;
  convergenceDelaySeconds: number;
}

/** A write that ended the lock (swap, release, force-release, reclaim), told from `lastMigration`. */
function lockEnded(
  doc: LocationDocument,
  change: LastChange,
  base: Record<string, string>,
  declaredConvergenceDelaySeconds: number,
): LockTelemetry {
  const last = doc.lastMigration;
  const reason = endReasons[change.op as EndOp];
  if (!last || !reason) return noTelemetry();
  const properties = { ...base, migrationId: last.migrationId, from: region(last.from), to: region(last.to) };
  const convergenceWait = seconds(last.acquiredAt, last.hardDeleteAt);
  // The delay the wait is judged against: the lock's own, or the one declared now if longer. The
  // synthetic probe's route is read by no service's cache: its lock runs on the probe's own timing
  // (one-second convergence) by design, and is judged by that alone.
  const declared = isProbeId(doc.id)
    ? last.convergenceDelaySeconds
    : Math.max(last.convergenceDelaySeconds, declaredConvergenceDelaySeconds);
  const convergence: Convergence = {
    ...(convergenceWait === undefined ? {} : { convergenceWaitSeconds: convergenceWait }),
    convergenceDelaySeconds: declared,
  };
  return joined(
    released(change, reason, properties, convergence),
    converged(convergence, properties),
    change.op === 'swap' ? swapped(last, properties, convergence) : noTelemetry(),
  );
}

/** LockReleased (with the write lock's hold when it ended without a swap), and what kind of end it was. */
function released(
  change: LastChange,
  reason: string,
  properties: Record<string, string>,
  convergence: Convergence,
): LockTelemetry {
  // A write lock ended without a swap: released, force-released or reclaimed (the swap's hold is
  // MigrationSwapped's, not counted twice).
  const hold = change.op !== 'swap' ? writeHoldSeconds(change) : undefined;
  const releasedEvent: TelemetryEvent = {
    name: 'LockReleased',
    properties: {
      ...properties,
      reason,
      ...(change.actor ? { actor: change.actor } : {}),
      ...(change.reason ? { detail: change.reason } : {}),
    },
    measurements: { ...convergence, ...(hold === undefined ? {} : { writeLockSeconds: hold }) },
  };
  return {
    events: [releasedEvent, ...endingEvents(change, properties)],
    metrics: hold === undefined ? [] : [{ name: 'writeLockSeconds', value: hold, properties }],
  };
}

/** What an end other than a swap or a release adds: who forced it, or how old the reclaimed lock was. */
function endingEvents(change: LastChange, properties: Record<string, string>): TelemetryEvent[] {
  if (change.op === 'forceRelease')
    return [{ name: 'ForceReleased', properties: { ...properties, actor: change.actor ?? '' } }];
  if (change.op === 'reclaim')
    return [
      { name: 'OrphanedLockReclaimed', properties, measurements: { ageSeconds: change.ageSeconds ?? 0 } },
    ];
  return [];
}

/** The convergence wait as a metric, and a shortfall when it was shorter than the delay it owed. */
function converged(convergence: Convergence, properties: Record<string, string>): LockTelemetry {
  const { convergenceWaitSeconds: wait, convergenceDelaySeconds: declared } = convergence;
  if (wait === undefined) return noTelemetry();
  const shortfall: TelemetryEvent[] =
    wait < declared
      ? [
          {
            name: 'ConvergenceShortfall',
            properties,
            measurements: { convergenceWaitSeconds: wait, convergenceDelaySeconds: declared },
          },
        ]
      : [];
  return { events: shortfall, metrics: [{ name: 'convergenceWaitSeconds', value: wait, properties }] };
}

/** MigrationSwapped with the migration's durations, each also a metric. */
function swapped(
  last: LastMigration,
  properties: Record<string, string>,
  convergence: Convergence,
): LockTelemetry {
  const durations: [TelemetryMetricName, number | undefined][] = [
    ['writeLockSeconds', seconds(last.writeAt, last.swappedAt)],
    ['hardDeleteSeconds', seconds(last.hardDeleteAt, last.swappedAt)],
    ['migrationSeconds', seconds(last.acquiredAt, last.swappedAt)],
  ];
  const known = durations.filter((d): d is [TelemetryMetricName, number] => d[1] !== undefined);
  return {
    events: [
      {
        name: 'MigrationSwapped',
        properties,
        measurements: { ...Object.fromEntries(known), ...convergence },
      },
    ],
    metrics: known.map(([name, value]) => ({ name, value, properties })),
  };
}
