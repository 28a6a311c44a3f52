import type Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import type { RouteLockError } from '../../errors';
import type { LocationDocument, StoredDocument } from '../../lock/document';
import { badContinuation, decodeContinuation, encodeContinuation } from '../continuation';
import { changedSinceRead, notFound, routeSubject } from '../errors';
import {
  type ChangeListing,
  type ChangedListOptions,
  type ListOptions,
  type ListPage,
  type LocationStore,
  type ReadOptions,
  countRead,
  newCounters,
} from '../ports/locations';
import { guarded } from './errors';
import { SqliteTables } from './open';

/**
 * The embedded store: one SQLite file (or ":memory:"), WAL, and a fresh random ETag per write.
 * Every mutation is `UPDATE … WHERE id = ? AND etag = ?`, the same compare-and-swap Cosmos DB does.
 * There is one copy, so "nearest" and "writeRegion" reads hit the same row; they are counted apart.
 */
export class SqliteStore extends SqliteTables implements LocationStore, ChangeListing {
  readonly kind = 'sqlite';
  readonly counters = newCounters();
  private readonly statements: ReturnType<SqliteStore['prepare']>;
  private readonly listeners = new Set<ChangeListener>();

  constructor(path: string) {
    super(
      path,
      `CREATE TABLE IF NOT EXISTS locations (
         id TEXT PRIMARY KEY,
         etag TEXT NOT NULL,
         doc TEXT NOT NULL,
         updated_at INTEGER NOT NULL
       );
       CREATE INDEX IF NOT EXISTS locations_updated ON locations (updated_at, id)`,
    );
    this.statements = this.prepare();
  }

  /**
   * The embedded store's change stream: every created or replaced document version, after its write
   * committed, with the etag it was stored under (the embedded host feeds it to the same handler as the
   * Cosmos DB change feed, which keys telemetry on it).
   */
  onChange(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private publish(doc: LocationDocument, etag: string): void {
    for (const listener of this.listeners) {
      try {
        listener(doc, etag);
      } catch {
        // a listener's failure never fails the write that already committed
      }
    }
  }

  /** The underlying database: bulk seeding in the benchmarks, pragma checks in the tests. */
  get database(): Database.Database {
    return this.db;
  }

  private prepare() {
    return {
      read: this.db.prepare<[string], { etag: string; doc: string }>(
        'SELECT etag, doc FROM locations WHERE id = ?',
      ),
      readIfChanged: this.db.prepare<[string, string], { etag: string; doc: string | null }>(
        'SELECT etag, CASE WHEN etag = ? THEN NULL ELSE doc END AS doc FROM locations WHERE id = ?',
      ),
      exists: this.db.prepare<[string], { one: number }>('SELECT 1 AS one FROM locations WHERE id = ?'),
      insert: this.db.prepare<[string, string, string, number]>(
        'INSERT INTO locations (id, etag, doc, updated_at) VALUES (?, ?, ?, ?)',
      ),
      replace: this.db.prepare<[string, string, number, string, string]>(
        'UPDATE locations SET doc = ?, etag = ?, updated_at = ? WHERE id = ? AND etag = ?',
      ),
      delete: this.db.prepare<[string, string]>('DELETE FROM locations WHERE id = ? AND etag = ?'),
      list: this.db.prepare<[number, string, number], { id: string; etag: string; doc: string }>(
        `SELECT id, etag, doc FROM locations
          WHERE (? = 0 OR json_extract(doc, '$.lock') IS NOT NULL) AND id > ?
          ORDER BY id LIMIT ?`,
      ),
      changed: this.db.prepare<
        { since: number; until: number; afterAt: number; afterId: string; limit: number },
        { id: string; etag: string; doc: string; updated_at: number }
      >(
        `SELECT id, etag, doc, updated_at FROM locations
          WHERE updated_at >= @since AND updated_at < @until AND (updated_at, id) > (@afterAt, @afterId)
          ORDER BY updated_at, id LIMIT @limit`,
      ),
    };
  }

  /** One copy, no throttling: a request's `priority` changes nothing here. */
  async read(id: string, { from }: ReadOptions): Promise<StoredDocument> {
    countRead(this.counters, from);
    const row = guarded(routeSubject(id), () => this.statements.read.get(id));
    if (!row) throw notFound(routeSubject(id));
    return { doc: JSON.parse(row.doc) as LocationDocument, etag: row.etag };
  }

  /** `read`, but the unchanged version's document is neither copied out nor parsed. */
  async readIfChanged(
    id: string,
    etag: string,
    { from }: ReadOptions,
  ): Promise<StoredDocument | 'notModified'> {
    countRead(this.counters, from);
    const row = guarded(routeSubject(id), () => this.statements.readIfChanged.get(etag, id));
    if (!row) throw notFound(routeSubject(id));
    if (row.doc === null) return 'notModified';
    return { doc: JSON.parse(row.doc) as LocationDocument, etag: row.etag };
  }

  async create(doc: LocationDocument): Promise<StoredDocument> {
    this.counters.creates += 1;
    const etag = newEtag();
    guarded(routeSubject(doc.id), () =>
      this.statements.insert.run(doc.id, etag, JSON.stringify(doc), Date.now()),
    );
    this.publish(doc, etag);
    return { doc, etag };
  }

  async replace(doc: LocationDocument, ifMatch: string): Promise<StoredDocument> {
    this.counters.replaces += 1;
    const etag = newEtag();
    const result = guarded(routeSubject(doc.id), () =>
      this.statements.replace.run(JSON.stringify(doc), etag, Date.now(), doc.id, ifMatch),
    );
    if (result.changes === 0) throw this.missOrConflict(doc.id);
    this.publish(doc, etag);
    return { doc, etag };
  }

  async delete(id: string, ifMatch: string): Promise<void> {
    this.counters.deletes += 1;
    const result = guarded(routeSubject(id), () => this.statements.delete.run(id, ifMatch));
    if (result.changes === 0) throw this.missOrConflict(id);
  }

  async list({ lockedOnly, limit, continuation }: ListOptions): Promise<ListPage> {
    this.counters.lists += 1;
    const after = continuation === undefined ? '' : decodeContinuation(continuation);
    const rows = guarded(routeSubject('(list)'), () =>
      this.statements.list.all(lockedOnly ? 1 : 0, after, limit + 1),
    );
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      items: page.map((row) => ({ doc: JSON.parse(row.doc) as LocationDocument, etag: row.etag })),
      continuation: rows.length > limit && last ? encodeContinuation(last.id) : null,
    };
  }

  /** Keyset pages on (updated_at, id), served by the index on both. */
  async listChanged({ since, until, limit, continuation }: ChangedListOptions): Promise<ListPage> {
    this.counters.lists += 1;
    const after = continuation === undefined ? { at: since - 1, id: '' } : changedCursor(continuation);
    const rows = guarded(routeSubject('(list)'), () =>
      this.statements.changed.all({ since, until, afterAt: after.at, afterId: after.id, limit: limit + 1 }),
    );
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      items: page.map((row) => ({
        doc: JSON.parse(row.doc) as LocationDocument,
        etag: row.etag,
        storedAt: row.updated_at,
      })),
      continuation: rows.length > limit && last ? encodeContinuation(`${last.updated_at}:${last.id}`) : null,
    };
  }

  override async close(): Promise<void> {
    super.close();
  }

  private missOrConflict(id: string): RouteLockError {
    return this.statements.exists.get(id) ? changedSinceRead(routeSubject(id)) : notFound(routeSubject(id));
  }
}

/** What a listener of the change stream is handed: the version and the etag it was stored under. */
export type ChangeListener = (doc: LocationDocument, etag: string) => void;

function changedCursor(continuation: string): { at: number; id: string } {
  const position = decodeContinuation(continuation);
  const colon = position.indexOf(':');
  const at = Number(position.slice(0, colon));
  if (colon < 1 || !Number.isSafeInteger(at)) throw badContinuation();
  return { at, id: position.slice(colon + 1) };
}

function newEtag(): string {
  return randomBytes(12).toString('base64url');
}
