import type { ChangeOp, LocationDocument } from '../../core/lock/document';
import { versionEventKey } from './lockTelemetry';
import { EVENT_KEY } from './names';
import { END_SEEN_PREFIX } from './seen';

/**
 * The reconciliation's rule (docs/design.md §8), pure: what the change handler recorded as processed
 * (its "seen" keys) against the documents the store says changed in a window. A gap is a change the
 * telemetry did not see: the trigger gave up a batch, the host died between a write and its handler, a
 * version the feed coalesced away took its lock end with it.
 *
 * Two keys per version, both recorded by the handler after the version's telemetry was flushed:
 *  - `version:` for every version it processed, whatever its op;
 *  - `end:` for the version that ended a migration's lock by a swap or a plain release (the ones
 *    `lastMigration` dates). A later version carries that `lastMigration` on, so a swap the feed
 *    coalesced into the next pre-lock is found missing here even though the document's own version was
 *    seen.
 */

/** A document the store listed as changed in the window, with its (bare) version. */
export interface ChangedVersion {
  doc: LocationDocument;
  version: string;
}

export interface TelemetryGapFound {
  resourceId: string;
  /** The version the gap was found on (its TelemetryGap event's key). */
  version: string;
  /** The op the telemetry did not see: the version's own, or the migration end it carries. */
  op: ChangeOp;
  at: string;
  /** `version`: the version itself was never processed; `end`: its lock end's events were never sent. */
  missing: 'version' | 'end';
}

export function versionSeenKey(resourceId: string, version: string): string {
  return `version:${resourceId}:${version}`;
}

export function endSeenKey(resourceId: string, migrationId: string, at: string): string {
  return `${END_SEEN_PREFIX}${resourceId}:${migrationId}:${at}`;
}

/** The end `lastMigration` dates (a swap or a plain release), if any. */
export function migrationEndOf(doc: LocationDocument): { op: 'swap' | 'release'; at: string } | null {
  const last = doc.lastMigration;
  if (!last) return null;
  if (last.outcome === 'swapped' && last.swappedAt) return { op: 'swap', at: last.swappedAt };
  if (last.outcome === 'released' && last.releasedAt) return { op: 'release', at: last.releasedAt };
  return null;
}

/** What the handler records once it has sent a version's telemetry. */
export function seenKeysOf(doc: LocationDocument, version: string): string[] {
  const keys = [versionSeenKey(doc.id, version)];
  const end = migrationEndOf(doc);
  // Only the version that did the end sent its events; a later one merely carries `lastMigration` on.
  if (end && doc.lastChange?.op === end.op && doc.lastChange.at === end.at && doc.lastMigration)
    keys.push(endSeenKey(doc.id, doc.lastMigration.migrationId, end.at));
  return keys;
}

/**
 * The gaps among `changed`: at most one per version (its TelemetryGap key is the version's). A lock end
 * is checked when it is no older than `endsSince` (ISO): the reconciliation's windows overlap, and an end
 * older than that was the document's own last change in an earlier window, checked there.
 */
export function reconcile(
  changed: readonly ChangedVersion[],
  seen: ReadonlySet<string>,
  endsSince: string,
): TelemetryGapFound[] {
  const gaps: TelemetryGapFound[] = [];
  for (const { doc, version } of changed) {
    if (!seen.has(versionSeenKey(doc.id, version))) {
      gaps.push({
        resourceId: doc.id,
        version,
        op: doc.lastChange?.op ?? 'create',
        at: doc.lastChange?.at ?? '',
        missing: 'version',
      });
      continue;
    }
    const end = migrationEndOf(doc);
    if (
      end &&
      doc.lastMigration &&
      Date.parse(end.at) >= Date.parse(endsSince) &&
      !seen.has(endSeenKey(doc.id, doc.lastMigration.migrationId, end.at))
    )
      gaps.push({ resourceId: doc.id, version, op: end.op, at: end.at, missing: 'end' });
  }
  return gaps;
}

/** A gap's event (the contract: eventKey `TelemetryGap:${resourceId}:${version}`). */
export function telemetryGapEvent(gap: TelemetryGapFound) {
  return {
    name: 'TelemetryGap' as const,
    properties: {
      [EVENT_KEY]: versionEventKey('TelemetryGap', gap.resourceId, gap.version),
      resourceId: gap.resourceId,
      op: gap.op,
      at: gap.at,
      missing: gap.missing,
    },
  };
}
