import { type LocationDocument, isAnnounced } from '../../shared/core/lock/document';
import { type Fleet, harnessError, note, truthOrNull } from './state';
import type { WriteRegionReadKind } from './types';

/**
 * The services' write-region reads on the request path, each classified by what the write region shows
 * at the instant it begins (true time): the announced read rule's goal is none outside a write window but
 * the cases design note §4 lists. A read of a route holding an announced lock outside them is `unexplained`,
 * counted and noted in the route's trail (a violation kind `reads` is reserved for it once every such read
 * is explained); a read of a route with no lock is counted (`noLock`).
 */

/** A lock, or an announced lock's write window, that is on the document: its write lock or its window. */
const holdsWindow = (doc: LocationDocument | null): boolean => {
  const lock = doc?.lock;
  if (!lock) return false;
  return !isAnnounced(lock) || lock.phase === 'write' || lock.writeWindowAt !== undefined;
};

/**
 * After each committed version: when a lock, write lock or window left the write region. A replica up to
 * R behind may still show it, and a reader refreshing from that replica reads through once more.
 */
export function noteWindowEnd(f: Fleet, before: LocationDocument, after: LocationDocument | null): void {
  if (holdsWindow(before) && !holdsWindow(after)) f.windowEndedAt.set(before.id, f.clock.now());
}

/** Classify one write-region read a service's tier begins now (`oldReader`: the legacy-policy service). */
export function countWriteRegionRead(f: Fleet, id: string, oldReader: boolean): void {
  const at = f.clock.now();
  void truthOrNull(f, id)
    .then((doc) => {
      const kind = oldReader ? 'oldReader' : classify(f, id, doc, at);
      f.stats.writeRegionReads[kind] += 1;
      // Reported, not a violation yet: the quick seed shows a few (an announced window's re-announcement
      // after a downgrade, read a little past R after the window left); see the trail of the first.
      if (kind === 'unexplained' && !READ_PATH_CONTROLS.has(f.control))
        note(f, id, `a write-region read outside the write window: ${describe(doc)}`);
    })
    .catch(harnessError(f, id));
}

/** The controls that break the read path on purpose: their extra reads are not this check's to report. */
const READ_PATH_CONTROLS: ReadonlySet<string> = new Set([
  'noReadThrough',
  'leaveOnOwnTimestamps',
  'replicaInWindow',
  'servedPastTtl',
  'noSkewMargins',
]);

function classify(f: Fleet, id: string, doc: LocationDocument | null, at: number): WriteRegionReadKind {
  const skewMs = f.timing.clockSkewSeconds * 1000;
  const lock = doc?.lock;
  if (lock && !isAnnounced(lock)) return 'legacyLock';
  if (lock && (lock.phase === 'write' || lock.writeWindowAt !== undefined)) {
    const end =
      lock.phase === 'write'
        ? Date.parse(lock.writeExpiresAt ?? '')
        : Date.parse(lock.writeWindowUntil ?? '');
    const opens = lock.phase === 'write' ? -Infinity : Date.parse(lock.writeWindowAt ?? '') - 2 * skewMs;
    // Readers leave on the write region's word that it is dead: its end and twice the skew (and a read's own).
    if (at >= end + 3 * skewMs) return 'deadWindow';
    if (at >= opens) return 'inWindow';
  }
  const ended = f.windowEndedAt.get(id);
  if (ended !== undefined && at - ended <= f.timing.replicationBoundSeconds * 1000 + 2 * skewMs)
    return 'afterWindow';
  // No lock on the write region: a confirmation of a copy (a client's revalidation, a read joined by a
  // hot burst) the rule makes of any route; reported, not a read the announced rule could have spared.
  return lock ? 'unexplained' : 'noLock';
}

function describe(doc: LocationDocument | null): string {
  const lock = doc?.lock;
  if (!lock) return doc ? 'no lock' : 'no route';
  return `${lock.migrationId} ${lock.phase} from ${lock.startsAt}${lock.writeWindowAt ? `, window ${lock.writeWindowAt}–${lock.writeWindowUntil}` : ''}`;
}
