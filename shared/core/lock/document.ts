import { RouteLockError } from '../errors';

/** The location document (design §2): routing and lock state in one item per resource. */

/**
 * The newest schema version this library understands and writes (design §2.8). A document of a newer
 * one is read from the fields this version knows and never written.
 */
export const SCHEMA_VERSION = 2;

/**
 * The version a document is written at when it carries nothing a version-1 library would misread: new
 * routes, and every write of a route that never held an announced lock. Kept there so a library without
 * announced locks can still change those routes while both run (design §2.8).
 */
export const LEGACY_SCHEMA_VERSION = 1;

/**
 * The lowest version that describes an announced lock (design §3.7): a version-1 library must not write
 * such a document, since it would grant a write lock without the window its readers rely on.
 */
export const ANNOUNCED_SCHEMA_VERSION = 2;

export interface Location {
  region: string;
  account?: string;
}

/** A resource id routelock accepts (design §4.2): the API refuses any other with 400. */
export const resourceIdPattern = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,254}$/;

export const phases = ['prelock', 'hardDelete', 'write'] as const;
export type Phase = (typeof phases)[number];

interface LockBase {
  /** SHA-256 (hex) of the fencing token. The token itself is never stored. */
  tokenHash: string;
  idempotencyKeyHash?: string;
  /** SHA-256 (hex) of the object id of the principal that took the lock, when callers are authenticated. */
  principalHash?: string;
  migrationId: string;
  owner: string;
  target: Location;
  acquiredAt: string;
  /** acquiredAt + convergence delay: nothing is restricted before this instant. */
  startsAt: string;
  /** The parent (pre-lock) lease. A lock is live while now < expiresAt. */
  expiresAt: string;
  /** Cap on renewing the parent lease. */
  maxExpiresAt: string;
  convergenceDelaySeconds: number;
  /**
   * The announcement lead L (design §3.7): convergence delay + clock skew + safety buffer, fixed when the
   * lock is taken. Present only on an announced lock, whose every tightening is written at least L before
   * it takes effect, so a reader serves its cached copy outside the write window. Absent: every reader
   * follows the read-through rule (design §5.1) from `startsAt`, as before announced locks existed.
   */
  announceLeadSeconds?: number;
}

/** Taken, not yet escalated: no phase lock. An announced lock is never in this phase (it starts as hardDelete). */
export interface PrelockLock extends LockBase {
  phase: 'prelock';
  hardDeleteAt?: never;
  hardDeleteExpiresAt?: never;
  writeAt?: never;
  writeExpiresAt?: never;
  writeWindowAt?: never;
  writeWindowUntil?: never;
}

/**
 * An announced lock's write window (design §5.1): from `writeWindowAt` − skew every reader reads the write
 * region on each resolve, and the write lock may be granted from `writeWindowAt` + skew until
 * `writeWindowUntil` − skew. Both or neither; only on an announced lock.
 */
interface WriteWindow {
  writeWindowAt?: string;
  writeWindowUntil?: string;
}

/** Escalated to the hard-delete lock, or back to it after a write downgrade (which drops the write fields). */
export interface HardDeleteLock extends LockBase, WriteWindow {
  phase: 'hardDelete';
  hardDeleteAt: string;
  /** Stays at least as late as any write lock it held (deletes stay intercepted after a downgrade). */
  hardDeleteExpiresAt: string;
  writeAt?: never;
  writeExpiresAt?: never;
}

/** Escalated to the write lock: the hard-delete lock's fields stay. */
export interface WriteLock extends LockBase, WriteWindow {
  phase: 'write';
  hardDeleteAt: string;
  hardDeleteExpiresAt: string;
  /** When this write-lock attempt was granted: it names the attempt a swap or downgrade belongs to. */
  writeAt: string;
  writeExpiresAt: string;
}

/** The lock, by highest phase held: each phase's fields exist exactly in the phases that write them. */
export type Lock = PrelockLock | HardDeleteLock | WriteLock;

/** Whether `lock` is announced (lock rule 2, design §3.7), so its tightenings are written a lead ahead. */
export function isAnnounced(lock: Lock): boolean {
  return typeof lock.announceLeadSeconds === 'number';
}

export type SecondaryRole = 'pendingTarget' | 'retiredSource';

export interface Secondary {
  location: Location;
  /** Writes and deletes made through this location are refused. */
  role: SecondaryRole;
  writesBlockedUntil: string;
}

export interface LastMigration {
  migrationId: string;
  from: Location;
  to: Location;
  /** How the lock ended: swapped (cut over) or released (aborted, location unchanged). */
  outcome: 'swapped' | 'released' | 'forceReleased' | 'reclaimed';
  acquiredAt: string;
  startsAt: string;
  hardDeleteAt: string | null;
  writeAt: string | null;
  swappedAt: string | null;
  releasedAt: string | null;
  /** Lets a swap or release replayed with the token that completed it get 200 instead of 410. */
  tokenHash: string;
  convergenceDelaySeconds: number;
  /** The ended lock's announcement lead, when it was announced. */
  announceLeadSeconds?: number;
  /** A release's reason (core/lock/rules checkedReleaseReason): why it was aborted. */
  reason?: string;
}

export type ChangeOp =
  | 'create'
  | 'prelock'
  | 'escalate'
  | 'announce'
  | 'renew'
  | 'downgrade'
  | 'swap'
  | 'release'
  | 'forceRelease'
  | 'reclaim';

/**
 * What the write that produced this version did (design §2.6). The change feed may
 * coalesce versions, so telemetry and the audit ledger derive everything from one version alone.
 */
export interface LastChange {
  op: ChangeOp;
  at: string;
  actor?: string;
  reason?: string;
  requestId?: string;
  /** Reclaim: seconds the lock had been expired. */
  ageSeconds?: number;
  /**
   * A downgrade or release of a write lock: the attempt's grant and lease end, so the change feed can
   * report its hold (min(at, writeExpiresAt) − writeAt) though the version no longer carries the lock.
   */
  writeAt?: string;
  writeExpiresAt?: string;
}

export interface LocationDocument {
  id: string;
  /** Which library version's schema wrote it: SCHEMA_VERSION here; a later library may write a higher one. */
  schemaVersion: number;
  location: Location;
  lock: Lock | null;
  secondary: Secondary | null;
  lastMigration: LastMigration | null;
  lastChange?: LastChange;
  /** Set on the synthetic probe's own routes: the probe moves no route it did not create. */
  createdBy?: 'probe';
}

/**
 * ETags are opaque and kept exactly as the store gave them (Cosmos DB quotes its own, some stand-ins do
 * not): the router writes with the stored form only. These three are the one place their quotes are
 * handled, at the edges a caller sees.
 */

/** The ETag a route view or grant shows a caller: without the store's quotes, as on every backend. */
export function bareEtag(etag: string): string {
  return etag.length >= 2 && etag.startsWith('"') && etag.endsWith('"') ? etag.slice(1, -1) : etag;
}

/**
 * Whether a caller's ETag names the stored version `stored`: a caller's copy may have lost or gained the
 * surrounding quotes on its way through HTTP (`If-Match: "…"`, a view's bare `etag`), so one pair of them
 * is not significant.
 */
export function sameEtag(stored: string, given: string): boolean {
  return bareEtag(stored) === bareEtag(given);
}

/** An ETag as an HTTP header carries it (RFC 9110 entity-tag): one pair of quotes. */
export function entityTag(etag: string): string {
  return etag.startsWith('W/"') ? etag : `"${bareEtag(etag)}"`;
}

/** A document as a store returned it, with the ETag that versions it. */
export interface StoredDocument {
  doc: LocationDocument;
  etag: string;
  /** The store's own time of the write (Cosmos `_ts`), when the store reports it: for skew checks. */
  storedAt?: number;
}

/**
 * A listed version as a start carries it to the pre-lock that may decide on it (design §6.7): it
 * is kept on the campaign's member, the migration's input and record, so in the task hub, and carries
 * only what that decision and the write made from it need. `lastChange` goes (who made the last write,
 * its request id and reason: the pre-lock stamps its own), and so do the lock's `idempotencyKeyHash` and
 * `principalHash` (digests of a caller's key and identity, which no view shows): only a replay of that
 * lock reads them, and a copy listed before a migration started cannot hold that migration's lock, whose
 * key derives from a seed made at its start. The token hashes stay (digests of 256-bit secrets): the
 * pre-lock's write keeps `lastMigration` whole. At most a few KiB (fixed fields, a 500-character reason).
 */
export function carriedVersion(stored: StoredDocument): StoredDocument {
  const { lastChange: _change, ...doc } = stored.doc;
  if (!doc.lock) return { doc, etag: stored.etag };
  const { idempotencyKeyHash: _key, principalHash: _principal, ...lock } = doc.lock;
  return { doc: { ...doc, lock }, etag: stored.etag };
}

/** `region`, or `region/account`: how messages, logs and the command line name a location. */
export function describeLocation(location: Location): string {
  return location.account ? `${location.region}/${location.account}` : location.region;
}

export function sameLocation(a: Location, b: Location): boolean {
  return a.region === b.region && (a.account ?? null) === (b.account ?? null);
}

export function newLocationDocument(
  id: string,
  location: Location,
  now?: number,
  createdBy?: 'probe',
): LocationDocument {
  return {
    id,
    schemaVersion: LEGACY_SCHEMA_VERSION,
    location: normalizeLocation(location),
    lock: null,
    secondary: null,
    lastMigration: null,
    ...(createdBy === undefined ? {} : { createdBy }),
    ...(now === undefined ? {} : { lastChange: { op: 'create' as const, at: new Date(now).toISOString() } }),
  };
}

/** Drop an absent account so that equal locations serialize identically. */
export function normalizeLocation(location: Location): Location {
  return location.account === undefined
    ? { region: location.region }
    : { region: location.region, account: location.account };
}

/**
 * Whether this library understands `doc`'s schema: a version from 1 to SCHEMA_VERSION. The one home of
 * "is this version newer than I know"; anything else (a later version, or no version at all) is read
 * from the fields this version knows and never written.
 */
export function knowsSchemaOf(doc: Pick<LocationDocument, 'schemaVersion'>): boolean {
  const version: unknown = doc.schemaVersion;
  return (
    typeof version === 'number' && Number.isInteger(version) && version >= 1 && version <= SCHEMA_VERSION
  );
}

/**
 * Refuse a mutation of a document this library does not understand, before anything is decided or
 * written: a write built from the fields it knows would drop (or contradict) the ones it does not.
 */
export function assertWritableSchema(doc: Pick<LocationDocument, 'id' | 'schemaVersion'>): void {
  if (knowsSchemaOf(doc)) return;
  throw new RouteLockError(
    'UnsupportedSchemaVersion',
    `Route ${doc.id} has schemaVersion ${JSON.stringify(doc.schemaVersion ?? null)}; this library writes version ${SCHEMA_VERSION} and changes no document of a newer one. It still reads and enforces it; upgrade this service to change it.`,
    { resourceId: doc.id },
  );
}
