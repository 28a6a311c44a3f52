import type { Container } from '@azure/cosmos';
import type Database from 'better-sqlite3';
import { RouteLockError } from './errors';
import type { Location, LocationDocument } from './lock/document';
import { storeError } from './store/cosmos';
import { openSqlite } from './store/sqlite';

/**
 * The audit ledger (residency evidence for compliance reviews) and the force-release requests it
 * records. Every swap, release, force-release and reclaim appends a record derived from the document
 * version that did it; every force-release step appends one too. Records have deterministic ids, so a
 * change feed delivering a version twice writes one record.
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
  /** The lock instance the request is for (`lockInstance` in shared/lock/rules.ts). */
  lockInstance?: string;
  releasedAt: string | null;
  /** Optimistic concurrency: each save must name the version it read. */
  version: number;
}

export interface AuditStore {
  append(record: AuditRecord): Promise<void>;
  list(resourceId: string, limit: number): Promise<AuditRecord[]>;
  createRequest(request: ForceReleaseRequest): Promise<void>;
  getRequest(id: string): Promise<ForceReleaseRequest | null>;
  /** Saves `request` (its version incremented) only if the stored version is still `request.version`. */
  saveRequest(request: ForceReleaseRequest): Promise<ForceReleaseRequest>;
}

const auditOps = new Set(['swap', 'release', 'forceRelease', 'reclaim']);

/** The audit record a document version calls for, if its write was one the ledger keeps. */
export function auditRecordFor(doc: LocationDocument): AuditRecord | null {
  const change = doc.lastChange;
  const last = doc.lastMigration;
  if (!change || !auditOps.has(change.op) || !last) return null;
  return {
    id: `${doc.id}|${change.op}|${change.at}`,
    kind: 'audit',
    resourceId: doc.id,
    op: change.op as AuditOp,
    at: change.at,
    migrationId: last.migrationId,
    from: last.from,
    to: last.to,
    acquiredAt: last.acquiredAt,
    hardDeleteAt: last.hardDeleteAt,
    writeAt: last.writeAt,
    swappedAt: last.swappedAt,
    releasedAt: last.releasedAt,
    actor: change.actor ?? null,
    reason: change.reason ?? null,
    requestId: change.requestId ?? null,
  };
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

export class SqliteAuditStore implements AuditStore {
  private readonly db: Database.Database;
  private readonly statements;

  constructor(path: string) {
    this.db = openSqlite(path);
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS audit (
        id TEXT PRIMARY KEY,
        resource_id TEXT NOT NULL,
        at TEXT NOT NULL,
        record TEXT NOT NULL
      );
      CREATE INDEX IF NOT EXISTS audit_resource ON audit (resource_id, at);
      CREATE TABLE IF NOT EXISTS force_release_requests (
        id TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        request TEXT NOT NULL
      );
    `);
    this.statements = {
      append: this.db.prepare<[string, string, string, string]>(
        'INSERT OR REPLACE INTO audit (id, resource_id, at, record) VALUES (?, ?, ?, ?)',
      ),
      list: this.db.prepare<[string, number], { record: string }>(
        'SELECT record FROM audit WHERE resource_id = ? ORDER BY at, rowid LIMIT ?',
      ),
      createRequest: this.db.prepare<[string, number, string]>(
        'INSERT INTO force_release_requests (id, version, request) VALUES (?, ?, ?)',
      ),
      getRequest: this.db.prepare<[string], { request: string }>(
        'SELECT request FROM force_release_requests WHERE id = ?',
      ),
      saveRequest: this.db.prepare<[number, string, string, number]>(
        'UPDATE force_release_requests SET version = ?, request = ? WHERE id = ? AND version = ?',
      ),
    };
  }

  async append(record: AuditRecord): Promise<void> {
    this.statements.append.run(record.id, record.resourceId, record.at, JSON.stringify(record));
  }

  async list(resourceId: string, limit: number): Promise<AuditRecord[]> {
    return this.statements.list.all(resourceId, limit).map((r) => JSON.parse(r.record) as AuditRecord);
  }

  async createRequest(request: ForceReleaseRequest): Promise<void> {
    this.statements.createRequest.run(request.id, request.version, JSON.stringify(request));
  }

  async getRequest(id: string): Promise<ForceReleaseRequest | null> {
    const row = this.statements.getRequest.get(id);
    return row ? (JSON.parse(row.request) as ForceReleaseRequest) : null;
  }

  async saveRequest(request: ForceReleaseRequest): Promise<ForceReleaseRequest> {
    const next = { ...request, version: request.version + 1 };
    const result = this.statements.saveRequest.run(
      next.version,
      JSON.stringify(next),
      request.id,
      request.version,
    );
    if (result.changes === 0) {
      throw new RouteLockError(
        'PreconditionFailed',
        `Force-release request ${request.id} changed concurrently; retry.`,
      );
    }
    return next;
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}

/** Azure: container `audit` (partition key `/id`), created by Bicep. */
export class CosmosAuditStore implements AuditStore {
  constructor(private readonly container: Container) {}

  async append(record: AuditRecord): Promise<void> {
    try {
      await this.container.items.upsert(record);
    } catch (error) {
      throw storeError(error, record.resourceId);
    }
  }

  async list(resourceId: string, limit: number): Promise<AuditRecord[]> {
    try {
      const { resources } = await this.container.items
        .query<AuditRecord>(
          {
            query: "SELECT * FROM c WHERE c.kind = 'audit' AND c.resourceId = @resourceId ORDER BY c.at",
            parameters: [{ name: '@resourceId', value: resourceId }],
          },
          { maxItemCount: limit },
        )
        .fetchNext();
      return resources.slice(0, limit).map(strip);
    } catch (error) {
      throw storeError(error, resourceId);
    }
  }

  async createRequest(request: ForceReleaseRequest): Promise<void> {
    try {
      await this.container.items.create(request);
    } catch (error) {
      throw storeError(error, request.resourceId);
    }
  }

  async getRequest(id: string): Promise<ForceReleaseRequest | null> {
    try {
      const { resource } = await this.container.item(id, id).read<ForceReleaseRequest>();
      return resource ? strip(resource) : null;
    } catch (error) {
      const mapped = storeError(error, id);
      if (mapped.code === 'NotFound') return null;
      throw mapped;
    }
  }

  async saveRequest(request: ForceReleaseRequest): Promise<ForceReleaseRequest> {
    const { resource, etag } = await this.container
      .item(request.id, request.id)
      .read<ForceReleaseRequest & { _etag: string }>();
    if (!resource || resource.version !== request.version) {
      throw new RouteLockError(
        'PreconditionFailed',
        `Force-release request ${request.id} changed concurrently; retry.`,
      );
    }
    const next = { ...request, version: request.version + 1 };
    try {
      await this.container
        .item(request.id, request.id)
        .replace(next, { accessCondition: { type: 'IfMatch', condition: etag ?? '' } });
      return next;
    } catch (error) {
      throw storeError(error, request.id);
    }
  }
}

function strip<T extends object>(item: T): T {
  const copy = { ...item } as Record<string, unknown>;
  for (const key of ['_rid', '_self', '_etag', '_attachments', '_ts']) delete copy[key];
  return copy as T;
}
