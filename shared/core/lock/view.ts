import type { TimingConfig } from '../settings';
import { retryAfterFromMs } from '../errors';
import {
  type Location,
  type Lock,
  type LocationDocument,
  type Phase,
  type Secondary,
  type StoredDocument,
  bareEtag,
  isAnnounced,
  normalizeLocation,
} from './document';
import {
  enforcedFrom,
  hardDeleteInForce,
  hasStarted,
  instantMs,
  liveLock,
  phaseExpiresAt,
  secondaryInForce,
  writeLockInForce,
} from './state';
import { type Provenance, announcedForReads, nextTighteningFrom, windowFrom } from './readPolicy';

/**
 * What callers see (design §4): the route view with its enforcement decision and Cache-Control,
 * and the lock grant. Neither ever carries the token, its hash, or the idempotency key's hash.
 */

export type Operation = 'read' | 'write' | 'delete';

export interface Enforcement {
  read: 'allow';
  write: 'allow' | 'deny';
  delete: 'allow' | 'tombstone' | 'deny';
  /** Present whenever something is denied. */
  retryAfterSeconds?: number;
}

export interface LockView {
  migrationId: string;
  phase: Phase;
  target: Location;
  startsAt: string;
  expiresAt: string;
  hardDeleteExpiresAt?: string;
  writeExpiresAt?: string;
  /**
   * An announced lock (design §3.7): every tightening of it is announced a lead ahead, so a copy of this
   * view may be served until its next announced instant. Absent on a legacy lock.
   */
  announced?: true;
  /** An announced lock's write window: from this instant less the skew margin, read it through. */
  writeWindowAt?: string;
}

export interface RouteView {
  resourceId: string;
  location: Location;
  secondary: Secondary | null;
  lock: LockView | null;
  enforcement: Enforcement;
  etag: string;
}

export interface LockGrant {
  /** Only a pre-lock grant carries the token. */
  token?: string;
  migrationId: string;
  phase: Phase;
  startsAt: string;
  expiresAt: string;
  maxExpiresAt: string;
  phaseExpiresAt: string;
  convergenceDelaySeconds: number;
  /** The document's own phase timestamps (a migration's timeline copies them). */
  acquiredAt: string;
  hardDeleteAt?: string;
  writeAt?: string;
  /** An announced lock's lead (seconds): each tightening of it is written at least this long ahead. */
  announceLeadSeconds?: number;
  /** The announced write window: the write lock may be granted from its start plus the skew margin… */
  writeWindowAt?: string;
  /** …until its end less the skew margin. */
  writeWindowUntil?: string;
  etag: string;
}

const ms = instantMs;

/**
 * The timing a view is built from: all a route view, its enforcement and its Cache-Control read of the
 * settings, so a caller without the whole TimingConfig (the client's test double) builds views with the
 * same code as the server.
 */
export type ViewTiming = Pick<
  TimingConfig,
  'clockSkewSeconds' | 'retryAfterMaxSeconds' | 'localCacheTtlSeconds'
>;

/** The answer for an unlocked route: shared and frozen, so the hot path allocates nothing. */
const ALLOW_ALL: Enforcement = Object.freeze({ read: 'allow', write: 'allow', delete: 'allow' });

export function enforcement(doc: LocationDocument, now: number, cfg: ViewTiming): Enforcement {
  if (doc.lock === null) return ALLOW_ALL;
  const lock = liveLock(doc, now);
  // Nothing is restricted before startsAt, whatever the phase claims — counted from startsAt less the
  // skew margin, so a clock that is behind still enforces once the holder may act (startsAt + skew).
  // Phase ends are enforced at face value: the holder already stops a margin early (see ./state).
  if (!lock || !hasStarted(lock, now, cfg.clockSkewSeconds)) return ALLOW_ALL;
  if (lock.phase === 'write' && writeLockInForce(lock, now)) {
    const retryAfterSeconds = Math.min(
      retryAfterFromMs(ms(lock.writeExpiresAt) - now),
      cfg.retryAfterMaxSeconds,
    );
    return { read: 'allow', write: 'deny', delete: 'deny', retryAfterSeconds };
  }
  if (hardDeleteInForce(lock, now)) return { read: 'allow', write: 'allow', delete: 'tombstone' };
  return ALLOW_ALL;
}

export function lockView(lock: Lock): LockView {
  return {
    migrationId: lock.migrationId,
    phase: lock.phase,
    target: normalizeLocation(lock.target),
    startsAt: lock.startsAt,
    expiresAt: lock.expiresAt,
    ...(lock.hardDeleteExpiresAt === undefined ? {} : { hardDeleteExpiresAt: lock.hardDeleteExpiresAt }),
    ...(lock.writeExpiresAt === undefined ? {} : { writeExpiresAt: lock.writeExpiresAt }),
    ...(isAnnounced(lock) ? { announced: true as const } : {}),
    ...(lock.writeWindowAt === undefined ? {} : { writeWindowAt: lock.writeWindowAt }),
  };
}

export function routeView(stored: StoredDocument, now: number, cfg: ViewTiming): RouteView {
  const { doc } = stored;
  const lock = liveLock(doc, now);
  const secondary = secondaryInForce(doc, now);
  // Only the fields this version knows: a newer schema's additions never reach a view (design §2.8).
  return {
    resourceId: doc.id,
    location: normalizeLocation(doc.location),
    secondary: secondary && {
      location: normalizeLocation(secondary.location),
      role: secondary.role,
      writesBlockedUntil: secondary.writesBlockedUntil,
    },
    lock: lock ? lockView(lock) : null,
    enforcement: enforcement(doc, now, cfg),
    etag: bareEtag(stored.etag),
  };
}

/**
 * Cache-Control for a route view. A plain HTTP cache must never hold a document past the moment it must
 * be read through (design §5.3):
 * - a legacy lock: `no-store` once a live lock has started (within the clock-skew margin), otherwise what
 *   is left of the local tier's TTL, clamped to the time left before a pending lock starts;
 * - an announced lock (lock/readPolicy): `no-store` only in its window (the write window, or a write lock
 *   the write region has not shown dead); otherwise what is left of the TTL, clamped to the window's start
 *   and to the next instant the view's enforcement, a snapshot, may tighten (the lock's start).
 *
 * `heldMs`: how long the serving tier's cache has held this copy (0 for a copy read from the store for
 * this request). A cache downstream is in series with that tier, and the convergence delay counts the
 * local TTL once, so max-age is never more than the TTL less the time held (whole seconds, rounded down).
 * `provenance`: where the serving tier read the copy; a replica (the default) is never taken for the
 * write region's word that a write lock or window is dead.
 */
export function cacheControl(
  doc: LocationDocument,
  now: number,
  cfg: ViewTiming,
  heldMs = 0,
  provenance: Provenance = 'replica',
): string {
  const ttl = Math.max(0, Math.floor((cfg.localCacheTtlSeconds * 1000 - Math.max(0, heldMs)) / 1000));
  if (doc.lock !== null && announcedForReads(doc.lock)) {
    const skew = cfg.clockSkewSeconds;
    const window = windowFrom({ doc, provenance, readStartedAt: now - Math.max(0, heldMs) }, skew);
    if (now >= window) return 'no-store';
    const until = Math.min(window, nextTighteningFrom(doc, now, skew));
    return `private, max-age=${Math.max(0, Math.min(ttl, Math.floor((until - now) / 1000)))}`;
  }
  const lock = liveLock(doc, now);
  if (!lock) return `private, max-age=${ttl}`;
  if (hasStarted(lock, now, cfg.clockSkewSeconds)) return 'no-store';
  const untilStart = Math.floor((enforcedFrom(lock, cfg.clockSkewSeconds) - now) / 1000);
  return `private, max-age=${Math.max(0, Math.min(ttl, untilStart))}`;
}

/** The caching headers of a served route view: `Cache-Control`, and `Age` in whole seconds. */
export interface CacheHeaders {
  cacheControl: string;
  /**
   * Seconds the serving tier has held the copy (RFC 9111 §5.1), rounded down; 0 for a copy just read
   * from the store. A downstream cache's freshness is then max-age − Age (RFC 9111 §4.2.3): on top of
   * the max-age already shortened by the same time, so a cache that honours Age stays well inside the
   * TTL, and one that ignores it still within it.
   */
  ageSeconds: number;
}

/**
 * Cache-Control and Age for a copy the serving tier has held for `heldMs`, read from `provenance` (see
 * `cacheControl`).
 */
export function cacheHeaders(
  doc: LocationDocument,
  now: number,
  cfg: TimingConfig,
  heldMs = 0,
  provenance: Provenance = 'replica',
): CacheHeaders {
  return {
    cacheControl: cacheControl(doc, now, cfg, heldMs, provenance),
    ageSeconds: Math.floor(Math.max(0, heldMs) / 1000),
  };
}

export function lockGrant(stored: StoredDocument, token?: string): LockGrant {
  const lock = stored.doc.lock;
  if (!lock) throw new Error(`lockGrant called on ${stored.doc.id} without a lock`);
  return {
    ...(token === undefined ? {} : { token }),
    migrationId: lock.migrationId,
    phase: lock.phase,
    startsAt: lock.startsAt,
    expiresAt: lock.expiresAt,
    maxExpiresAt: lock.maxExpiresAt,
    phaseExpiresAt: phaseExpiresAt(lock),
    convergenceDelaySeconds: lock.convergenceDelaySeconds,
    acquiredAt: lock.acquiredAt,
    ...(lock.hardDeleteAt === undefined ? {} : { hardDeleteAt: lock.hardDeleteAt }),
    ...(lock.writeAt === undefined ? {} : { writeAt: lock.writeAt }),
    ...(lock.announceLeadSeconds === undefined ? {} : { announceLeadSeconds: lock.announceLeadSeconds }),
    ...(lock.writeWindowAt === undefined ? {} : { writeWindowAt: lock.writeWindowAt }),
    ...(lock.writeWindowUntil === undefined ? {} : { writeWindowUntil: lock.writeWindowUntil }),
    etag: bareEtag(stored.etag),
  };
}
