import type { LastMigration, Location, LocationDocument } from './lock/document';

/**
 * The audit ledger (residency evidence for compliance reviews) and the force-release requests it
 * records. Every swap, release, force-release and reclaim appends a record derived from the document
 * version that did it; every force-release step appends one too. Records have deterministic ids and the
 * ledger keeps the first append of an id, so the write path and the change feed (a backstop that may
 * deliver a version twice) writing the same record keep one. Where they are kept: the ports
 * core/store/ports/{audit,forceRelease} and their adapters in core/store/{sqlite,cosmos}/.
 */

export type AuditOp =
  | 'swap'
  | 'release'
  | 'forceRelease'
  | 'reclaim'
  | 'forceReleaseRequested'
  | 'forceReleaseApproved'
  | 'forceReleaseExpired';

export interface AuditRecord {
  id: string;
  kind: 'audit';
  resourceId: string;
  op: AuditOp;
  at: string;
  migrationId: string | null;
  from: Location | null;
  to: Location | null;
  acquiredAt: string | null;
  hardDeleteAt: string | null;
  writeAt: string | null;
  swappedAt: string | null;
  releasedAt: string | null;
  /** Who did it: an Entra object id (or ids, comma-separated, for a force-release), never a display name. */
  actor: string | null;
  /** The actor's display name when one was known: for human readers only, never compared. */
  actorName?: string;
  reason: string | null;
  requestId: string | null;
  /**
   * A migration's end (swap, release, force-release, reclaim): the lock phases it had
   * reached, in order, from the version's `lastMigration` (`phasesReachedOf`). Absent on a request's
   * records and on records written before it existed.
   */
  phasesReached?: AuditPhase[];
}

/** A phase a migration's lock reached: `prelock` always, then what its timestamps show. */
export type AuditPhase = 'prelock' | 'hardDelete' | 'write' | 'swapped';

/**
 * The phases `last` shows its lock reached. A write lock given up before the end (a downgrade after a
 * delta overran) leaves no `writeAt` on the lock, so it reads as `hardDelete`: the release's reason
 * says why.
 */
export function phasesReachedOf(last: LastMigration): AuditPhase[] {
  return [
    'prelock',
    ...(last.hardDeleteAt ? (['hardDelete'] as const) : []),
    ...(last.writeAt ? (['write'] as const) : []),
    ...(last.swappedAt ? (['swapped'] as const) : []),
  ];
}

/** A person or service principal: `id` (the Entra object id) is the identity; `name` is for humans. */
export interface Actor {
  id: string;
  name?: string | undefined;
}

/** An actor given as a bare string is an id with no display name. */
export function toActor(actor: Actor | string): Actor {
  return typeof actor === 'string' ? { id: actor } : actor;
}

export interface ForceReleaseRequest {
  id: string;
  kind: 'forceReleaseRequest';
  resourceId: string;
  /** The requester's object id. */
  requestedBy: string;
  /** The requester's display name, when known (human-readable only). */
  requestedByName?: string;
  reason: string;
  requestedAt: string;
  expiresAt: string;
  /** `actor` is the approver's object id; `name` its display name, when known. */
  approvals: { actor: string; name?: string; at: string }[];
  /** `obsolete`: the lock it was opened for went away before the approvals completed. */
  status: 'pending' | 'released' | 'obsolete';
  /** The lock instance the request is for (`lockInstance` in core/lock/rules). */
  lockInstance?: string;
  releasedAt: string | null;
  /** Optimistic concurrency: each save must name the version it read. */
  version: number;
}

const auditOps = new Set(['swap', 'release', 'forceRelease', 'reclaim']);

/**
 * The audit record a document version calls for, if its write was one the ledger keeps: a pure function
 * of that one version (its `lastChange` and `lastMigration`, both set by the same write). The write path
 * appends it right after the write commits (migration/auditTrail); the change feed, the backstop,
 * derives the same record (same id, same content) from the same version.
 */
export function auditRecordFor(doc: LocationDocument): AuditRecord | null {
  const change = doc.lastChange;
  const last = doc.lastMigration;
  if (!change || !auditOps.has(change.op) || !last) return null;
  return migrationEndRecord(doc.id, change.op as AuditOp, change.at, last, {
    actor: change.actor ?? null,
    reason: change.reason ?? null,
    requestId: change.requestId ?? null,
  });
}

/** One record of a migration's end: the one shape both the version's own record and a rebuilt one take. */
function migrationEndRecord(
  resourceId: string,
  op: AuditOp,
  at: string,
  last: LastMigration,
  by: Pick<AuditRecord, 'actor' | 'reason' | 'requestId'>,
): AuditRecord {
  return {
    id: auditRecordId(resourceId, op, at),
    kind: 'audit',
    resourceId,
    op,
    at,
    migrationId: last.migrationId,
    from: last.from,
    to: last.to,
    acquiredAt: last.acquiredAt,
    hardDeleteAt: last.hardDeleteAt,
    writeAt: last.writeAt,
    swappedAt: last.swappedAt,
    releasedAt: last.releasedAt,
    ...by,
    phasesReached: phasesReachedOf(last),
  };
}

function auditRecordId(resourceId: string, op: AuditOp, at: string): string {
  return `${resourceId}|${op}|${at}`;
}

/**
 * What the change feed (the backstop) can recover from one version it is handed, which may have skipped
 * intermediate versions (the feed coalesces: of two versions written between two reads, only the later
 * arrives):
 *  - the version's own record (`auditRecordFor`);
 *  - the record of the migration end it carries in `lastMigration`, when that end was a swap or a plain
 *    release: those writes stamp no actor or request id, and a release's reason is kept in
 *    `lastMigration.reason` as well as `lastChange.reason`, so `lastMigration` alone rebuilds their
 *    record exactly (same id, same content as the write path's). A later prelock, renew or escalate of
 *    the next migration still carries it, so a swap or release version the feed skipped is not lost.
 * It cannot recover a skipped force-release or reclaim (who, why, the request, the lock's age live in
 * `lastChange`, which the next write replaces; their end time is not in `lastMigration`), nor any end
 * older than the last one (a second migration's end replaces `lastMigration`). Those are the write
 * path's to keep. Nothing here is inferred from two versions, so a skipped version never yields a
 * wrong record.
 */
export function auditRecordsRecoverableFrom(doc: LocationDocument): AuditRecord[] {
  const own = auditRecordFor(doc);
  const ended = lastEndRecord(doc);
  if (!ended || ended.id === own?.id) return own ? [own] : [];
  return own ? [own, ended] : [ended];
}

/** The swap or release record `lastMigration` describes, built as `auditRecordFor` built it then. */
function lastEndRecord(doc: LocationDocument): AuditRecord | null {
  const last = doc.lastMigration;
  if (!last) return null;
  const end =
    last.outcome === 'swapped' && last.swappedAt
      ? { op: 'swap' as const, at: last.swappedAt }
      : last.outcome === 'released' && last.releasedAt
        ? { op: 'release' as const, at: last.releasedAt }
        : null;
  if (!end) return null;
  return migrationEndRecord(doc.id, end.op, end.at, last, {
    actor: null,
    reason: end.op === 'release' ? (last.reason ?? null) : null,
    requestId: null,
  });
}

/**
 * Every record a force-release request's document calls for so far: its opening and each approval. Each
 * step of the request appends them all; ids are deterministic and the ledger keeps an id's first append,
 * so a record an earlier step could not write (ledger down) lands with the next step: the backstop of
 * request records, which no change feed watches.
 */
export function requestAuditRecords(request: ForceReleaseRequest, migrationId: string | null): AuditRecord[] {
  const requester: Actor = {
    id: request.requestedBy,
    ...(request.requestedByName ? { name: request.requestedByName } : {}),
  };
  return [
    requestAuditRecord(request, 'forceReleaseRequested', requester, request.requestedAt, migrationId),
    ...request.approvals.map((a) =>
      requestAuditRecord(
        request,
        'forceReleaseApproved',
        { id: a.actor, ...(a.name ? { name: a.name } : {}) },
        a.at,
        migrationId,
      ),
    ),
  ];
}

export function requestAuditRecord(
  request: ForceReleaseRequest,
  op: AuditOp,
  by: Actor | string,
  at: string,
  migrationId: string | null = null,
): AuditRecord {
  const actor = toActor(by);
  return {
    id: `${request.resourceId}|${op}|${request.id}|${actor.id}|${at}`,
    kind: 'audit',
    resourceId: request.resourceId,
    op,
    at,
    migrationId,
    from: null,
    to: null,
    acquiredAt: null,
    hardDeleteAt: null,
    writeAt: null,
    swappedAt: null,
    releasedAt: null,
    actor: actor.id,
    ...(actor.name ? { actorName: actor.name } : {}),
    reason: request.reason,
    requestId: request.id,
  };
}
