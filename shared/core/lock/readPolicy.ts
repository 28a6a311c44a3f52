import type { TimingConfig } from '../settings';
import { type Lock, type LocationDocument, isAnnounced } from './document';
import { deadInWriteRegion, enforcedFrom, windowDeadInWriteRegion, windowOpensAt } from './state';

/**
 * The read decision (design §5.1): when a held copy of a location document may be served from cache,
 * when it must be read through to the write region, and when it is refreshed from the nearest replica.
 * The one home of that decision: the router's read path, Cache-Control (./view) and RoutingClient ask it.
 * Pure functions of (copy, now, timing); instants in epoch ms.
 *
 * Two rules live side by side, chosen by the lock itself:
 * - a legacy lock (no `announceLeadSeconds`): from its start (less the skew margin) every resolve reads
 *   the write region, until the write region shows the lock dead;
 * - an announced lock (lock rule 2, design §3.7): every tightening is written at least the announcement
 *   lead L = D + S + B before it takes effect, so a copy at most one TTL old (and one replica lag) always
 *   shows a tightening before it applies (design §5.1, "Replica reads cannot loosen"). Such a copy is
 *   served to its TTL and refreshed from the nearest replica; only the write window, in which the write
 *   lock is granted on commit, is read through on every resolve. The window is left only on the write
 *   region's word, never on the copy's own timestamps: a replica may lag behind a renewal or an
 *   activation the copy does not show yet.
 */

/** Where a held copy was read: the write region (authoritative at its read's start) or a replica. */
export type Provenance = 'writeRegion' | 'replica';

/** A copy of a document as a cache holds it. */
export interface HeldCopy {
  doc: LocationDocument;
  provenance: Provenance;
  /** When the read that fetched it began: its TTL, Age and write-region judgements count from here. */
  readStartedAt: number;
}

/** What a resolve does with the copy it holds. */
export type ReadAction = { kind: 'serve' } | { kind: 'readThrough' } | { kind: 'refresh' };

/** The timing the read decision reads. */
export type ReadTiming = Pick<TimingConfig, 'clockSkewSeconds' | 'localCacheTtlSeconds'>;

// Shared and frozen: the read path asks on every resolve that is not a plain hit, and allocates nothing.
const SERVE: ReadAction = Object.freeze({ kind: 'serve' });
const READ_THROUGH: ReadAction = Object.freeze({ kind: 'readThrough' });
const REFRESH: ReadAction = Object.freeze({ kind: 'refresh' });

const SECOND = 1000;

/**
 * Whether the read policy treats `lock` as announced. An announced lock is never in phase `prelock` (it
 * starts as `hardDelete`); a document that says otherwise was not written by the rules, and is read by
 * the stricter legacy rule rather than trusted to have announced anything.
 */
export function announcedForReads(lock: Lock): boolean {
  return isAnnounced(lock) && lock.phase !== 'prelock';
}

/**
 * When `copy` stops being servable from cache, whatever its TTL: from then on only the write region's copy
 * will do. +∞: never (served to its TTL); −∞: already.
 * 1. no lock: never;
 * 2. a legacy lock: never if the write region showed it dead, else from its start less the skew;
 * 3. an announced lock the write region showed dead (`state.windowDeadInWriteRegion`): never;
 * 4. an announced lock in phase `write`, in force or lapsed, on any copy not judged by case 3: already
 *    (a replica copy's lapsed write lock may have been renewed since);
 * 5. an announced lock with a write window: from the window's start less the skew;
 * 6. an announced hard-delete lock with no window: never (its start, renewals and end were announced).
 */
export function windowFrom(copy: HeldCopy, skewSeconds: number): number {
  const lock = copy.doc.lock;
  if (!lock) return Number.POSITIVE_INFINITY;
  const fromWriteRegion = copy.provenance === 'writeRegion';
  if (!announcedForReads(lock)) {
    if (fromWriteRegion && deadInWriteRegion(lock, copy.readStartedAt, skewSeconds))
      return Number.POSITIVE_INFINITY;
    return enforcedFrom(lock, skewSeconds);
  }
  if (fromWriteRegion && windowDeadInWriteRegion(lock, copy.readStartedAt, skewSeconds))
    return Number.POSITIVE_INFINITY;
  if (lock.phase === 'write') return Number.NEGATIVE_INFINITY;
  return windowOpensAt(lock, skewSeconds);
}

/**
 * Whether `copy` is within its TTL at `now`: at most the local TTL old, counted from its read's start (the
 * TTL's last millisecond included, as the router's cache always counted it).
 */
export function withinTtl(copy: Pick<HeldCopy, 'readStartedAt'>, now: number, timing: ReadTiming): boolean {
  return now - copy.readStartedAt <= timing.localCacheTtlSeconds * SECOND;
}

/**
 * What a resolve at `now` does with the copy it holds (`undefined`: none):
 * - `serve` it, while it is within its TTL and before its window;
 * - `readThrough`: read the write region (conditional on the held copy's version);
 * - `refresh`: read the nearest replica, and classify the new copy again.
 * An announced copy in its window is read through however old it is: a TTL's end never turns into a
 * replica read there, so a replica can never replace the write region's copy in the window. A legacy
 * copy past its TTL is refreshed first, as the router always has (its cache dropped the copy at its TTL;
 * the refreshed copy is then read through if its lock has started), so legacy locks cost what they did.
 */
export function readAction(copy: HeldCopy | undefined, now: number, timing: ReadTiming): ReadAction {
  if (copy === undefined) return REFRESH;
  const fresh = withinTtl(copy, now, timing);
  const lock = copy.doc.lock;
  if (lock !== null && !announcedForReads(lock) && !fresh) return REFRESH;
  if (now >= windowFrom(copy, timing.clockSkewSeconds)) return READ_THROUGH;
  return fresh ? SERVE : REFRESH;
}

/**
 * The next instant at which a snapshot of `doc`'s enforcement (a served route view's) may become
 * stricter: a lock's start less the skew margin, while it is ahead; +∞ otherwise. Every other
 * tightening of an announced lock is the write window (`windowFrom`); every other change of a started
 * lock's enforcement loosens it (a lease's end), which a stale snapshot only over-enforces.
 */
export function nextTighteningFrom(doc: LocationDocument, now: number, skewSeconds: number): number {
  const lock = doc.lock;
  if (!lock) return Number.POSITIVE_INFINITY;
  const from = enforcedFrom(lock, skewSeconds);
  return now < from ? from : Number.POSITIVE_INFINITY;
}
