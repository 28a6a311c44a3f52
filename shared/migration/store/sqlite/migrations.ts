import { type Clock, systemClock } from '../../../core/clock';
import type { MigrationRecord } from '../../records';
import type { MigrationStatus } from '../../types';
import { migrationRecordSubject, notFound } from '../../../core/store/errors';
import {
  type ActiveClaim,
  type JournalEntry,
  type MigrationRecordPage,
  type MigrationRecordQuery,
  type MigrationRecords,
  decodeMigrationCursor,
  encodeMigrationCursor,
} from '../ports/migrations';
import { guarded } from '../../../core/store/sqlite/errors';
import { SqliteTables } from '../../../core/store/sqlite/open';

/**
 * The list's sort key and filters, read from the record itself (so a database from before the list
 * needs no new columns); its indexes are on these very expressions, which SQLite matches textually.
 */
const createdAt = "json_extract(record, '$.createdAt')";
const state = "json_extract(record, '$.status.status')";
const campaignId = "json_extract(record, '$.campaignId')";

type Value = string | number;

/** The list's statement: its filters, the keyset after the previous page, newest first. */
function listStatement(query: MigrationRecordQuery): { sql: string; values: Value[] } {
  const where: string[] = [];
  const values: Value[] = [];
  if (query.states !== undefined) {
    where.push(`${state} IN (${query.states.map(() => '?').join(', ') || 'NULL'})`);
    values.push(...query.states);
  }
  if (query.resourceId !== undefined) {
    where.push('resource_id = ?');
    values.push(query.resourceId);
  }
  if (query.campaignId !== undefined) {
    where.push(`${campaignId} = ?`);
    values.push(query.campaignId);
  }
  if (query.continuation !== undefined) {
    const after = decodeMigrationCursor(query.continuation);
    where.push(`(${createdAt}, migration_id) < (?, ?)`);
    values.push(after.createdAt, after.migrationId);
  }
  values.push(query.limit + 1);
  const filter = where.length > 0 ? `WHERE ${where.join(' AND ')} ` : '';
  return {
    sql: `SELECT record FROM migrations ${filter}ORDER BY ${createdAt} DESC, migration_id DESC LIMIT ?`,
    values,
  };
}

/**
 * The embedded host's migration records and its in-process runner's journal (tables `migrations` and
 * `migration_journal`). The journal of a finished migration is dropped and the WAL checkpointed.
 */
export class SqliteMigrationState extends SqliteTables implements MigrationRecords {
  private readonly statements;

  /** `clock` stamps rows (ordering `recent`): the host's own, so a host on virtual time orders by it. */
  constructor(
    path: string,
    private readonly clock: Clock = systemClock,
  ) {
    super(
      path,
      `
      CREATE TABLE IF NOT EXISTS migrations (
        migration_id TEXT PRIMARY KEY,
        resource_id TEXT NOT NULL,
        record TEXT NOT NULL,
        done INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      );
      CREATE INDEX IF NOT EXISTS migrations_active ON migrations (resource_id, done);
      CREATE INDEX IF NOT EXISTS migrations_recent ON migrations (updated_at);
      CREATE INDEX IF NOT EXISTS migrations_newest ON migrations (${createdAt}, migration_id);
      CREATE INDEX IF NOT EXISTS migrations_resource_newest
        ON migrations (resource_id, ${createdAt}, migration_id);
      CREATE INDEX IF NOT EXISTS migrations_state_newest ON migrations (${state}, ${createdAt}, migration_id);
      CREATE INDEX IF NOT EXISTS migrations_campaign_newest ON migrations (${campaignId}, ${createdAt}, migration_id)
        WHERE ${campaignId} IS NOT NULL;
      CREATE TABLE IF NOT EXISTS migration_journal (
        migration_id TEXT NOT NULL,
        key TEXT NOT NULL,
        entry TEXT NOT NULL,
        PRIMARY KEY (migration_id, key)
      );
    `,
    );
    this.statements = {
      insert: this.db.prepare<[string, string, string, number, number, number]>(
        `INSERT INTO migrations (migration_id, resource_id, record, done, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (migration_id) DO NOTHING`,
      ),
      get: this.db.prepare<[string], { record: string }>(
        'SELECT record FROM migrations WHERE migration_id = ?',
      ),
      update: this.db.prepare<[string, number, number, string]>(
        'UPDATE migrations SET record = ?, done = ?, updated_at = ? WHERE migration_id = ?',
      ),
      active: this.db.prepare<[string], { record: string }>(
        'SELECT record FROM migrations WHERE resource_id = ? AND done = 0 ORDER BY created_at DESC, rowid DESC LIMIT 1',
      ),
      unfinished: this.db.prepare<[], { record: string }>(
        'SELECT record FROM migrations WHERE done = 0 ORDER BY created_at, rowid',
      ),
      recent: this.db.prepare<[number], { record: string }>(
        'SELECT record FROM migrations ORDER BY updated_at DESC, rowid DESC LIMIT ?',
      ),
      journal: this.db.prepare<[string], { key: string; entry: string }>(
        'SELECT key, entry FROM migration_journal WHERE migration_id = ?',
      ),
      append: this.db.prepare<[string, string, string]>(
        'INSERT OR REPLACE INTO migration_journal (migration_id, key, entry) VALUES (?, ?, ?)',
      ),
      dropJournal: this.db.prepare<[string]>('DELETE FROM migration_journal WHERE migration_id = ?'),
    };
  }

  async create(record: MigrationRecord): Promise<boolean> {
    return guarded(migrationRecordSubject(record.migrationId), () => this.createSync(record));
  }

  async createIfNoActive(record: MigrationRecord): Promise<ActiveClaim> {
    return guarded(migrationRecordSubject(record.migrationId), () => this.createUnlessActive(record));
  }

  /**
   * Create a record unless the resource already has an unfinished migration (here the claim is the
   * unfinished row itself: `done = 1` releases it): one atomic step, so two
   * concurrent starts for one resource can never both win. Returns the record that stands.
   */
  createUnlessActive(record: MigrationRecord): ActiveClaim {
    return this.db
      .transaction(() => {
        const existing = this.getSync(record.migrationId);
        if (existing) return { record: existing, created: false };
        const active = this.activeFor(record.resourceId);
        if (active) return { record: active, created: false };
        this.createSync(record);
        return { record, created: true };
      })
      .immediate();
  }

  async reopenIfNoActive(record: MigrationRecord): Promise<ActiveClaim> {
    return guarded(migrationRecordSubject(record.migrationId), () => this.reopenUnlessActive(record));
  }

  /** One transaction, as createUnlessActive: an ended Failed record reopened only with no other unfinished. */
  reopenUnlessActive(record: MigrationRecord): ActiveClaim {
    return this.db
      .transaction(() => {
        const existing = this.getSync(record.migrationId);
        if (!existing) throw notFound(migrationRecordSubject(record.migrationId));
        if (!existing.done || existing.status.status !== 'Failed')
          return { record: existing, created: false };
        const active = this.activeFor(record.resourceId);
        if (active) return { record: active, created: false };
        this.statements.update.run(JSON.stringify(record), 0, this.clock(), record.migrationId);
        // the reopened run starts from an empty journal (nothing of the ended run may replay into it)
        this.statements.dropJournal.run(record.migrationId);
        return { record, created: true };
      })
      .immediate();
  }

  private createSync(record: MigrationRecord): boolean {
    const now = this.clock();
    const result = this.statements.insert.run(
      record.migrationId,
      record.resourceId,
      JSON.stringify(record),
      record.done ? 1 : 0,
      now,
      now,
    );
    return result.changes === 1;
  }

  async get(migrationId: string): Promise<MigrationRecord | null> {
    return guarded(migrationRecordSubject(migrationId), () => this.getSync(migrationId));
  }

  private getSync(migrationId: string): MigrationRecord | null {
    const row = this.statements.get.get(migrationId);
    return row ? (JSON.parse(row.record) as MigrationRecord) : null;
  }

  async saveStatus(migrationId: string, status: MigrationStatus, done: boolean): Promise<void> {
    guarded(migrationRecordSubject(migrationId), () => this.saveStatusSync(migrationId, status, done));
  }

  async amendUnfinished(migrationId: string, patch: Partial<MigrationStatus>): Promise<void> {
    // one synchronous read and write: nothing of this process runs in between
    guarded(migrationRecordSubject(migrationId), () => {
      const record = this.getSync(migrationId);
      if (!record) throw notFound(migrationRecordSubject(migrationId));
      if (record.done) return;
      this.statements.update.run(
        JSON.stringify({ ...record, status: { ...record.status, ...patch } }),
        0,
        this.clock(),
        migrationId,
      );
    });
  }

  private saveStatusSync(migrationId: string, status: MigrationStatus, done: boolean): void {
    const record = this.getSync(migrationId);
    if (!record) throw notFound(migrationRecordSubject(migrationId));
    this.statements.update.run(
      JSON.stringify({ ...record, status, done }),
      done ? 1 : 0,
      this.clock(),
      migrationId,
    );
    if (done) {
      this.statements.dropJournal.run(migrationId);
      // secure_delete zeroes the journal's pages; the checkpoint also empties the WAL that still holds
      // their earlier versions, so a finished migration's steps leave no copy on disk.
      this.db.pragma('wal_checkpoint(TRUNCATE)');
    }
  }

  async list(query: MigrationRecordQuery): Promise<MigrationRecordPage> {
    return guarded(migrationRecordSubject('(list)'), () => this.listSync(query));
  }

  /** One indexed range scan of `limit + 1` rows: the extra row only says whether another page follows. */
  listSync(query: MigrationRecordQuery): MigrationRecordPage {
    const { sql, values } = listStatement(query);
    const rows = this.db.prepare<Value[], { record: string }>(sql).all(...values);
    const records = rows.slice(0, query.limit).map((row) => JSON.parse(row.record) as MigrationRecord);
    const last = records.at(-1);
    return rows.length > query.limit && last
      ? { records, continuation: encodeMigrationCursor(last) }
      : { records };
  }

  /** The query plan of a list query: for tests, which index serves it (and that nothing is sorted). */
  explainList(query: MigrationRecordQuery): string[] {
    const { sql, values } = listStatement(query);
    return this.db
      .prepare<Value[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`)
      .all(...values)
      .map((row) => row.detail);
  }

  activeFor(resourceId: string): MigrationRecord | null {
    const row = this.statements.active.get(resourceId);
    return row ? (JSON.parse(row.record) as MigrationRecord) : null;
  }

  unfinished(): MigrationRecord[] {
    return this.statements.unfinished.all().map((row) => JSON.parse(row.record) as MigrationRecord);
  }

  recent(limit: number): MigrationRecord[] {
    return this.statements.recent.all(limit).map((row) => JSON.parse(row.record) as MigrationRecord);
  }

  journal(migrationId: string): Map<string, JournalEntry> {
    return new Map(
      this.statements.journal.all(migrationId).map((row) => [row.key, JSON.parse(row.entry) as JournalEntry]),
    );
  }

  append(migrationId: string, key: string, entry: JournalEntry): void {
    this.statements.append.run(migrationId, key, JSON.stringify(entry));
  }

  /**
   * Journal `entry` only while the migration is unfinished, in one transaction with the check: a note
   * such as a cancel request must never outlive a migration that ended meanwhile (its journal is dropped
   * when it ends, and a later retry would replay the stale note). False when the record is done.
   */
  appendIfUnfinished(migrationId: string, key: string, entry: JournalEntry): boolean {
    return this.db
      .transaction(() => {
        const record = this.getSync(migrationId);
        if (!record || record.done) return false;
        this.statements.append.run(migrationId, key, JSON.stringify(entry));
        return true;
      })
      .immediate();
  }
}
