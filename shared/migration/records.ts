import type { Container } from '@azure/cosmos';
import type Database from 'better-sqlite3';
import { RouteLockError } from '../errors';
import type { Location } from '../lock/document';
import { storeError } from '../store/cosmos';
import { openSqlite } from '../store/sqlite';
import { type MigrationInput, type MigrationStatus, pendingStatus } from './types';

/**
 * Migration records: migrationId → the instance that runs it, its input and its latest status. The
 * embedded host keeps them (and its runner's journal) in SQLite; in Azure they live in Cosmos DB
 * container `migrations`, next to the routes, so `GET /migrations/{id}` can find a migration's
 * instance and still answer after that instance id is reused by a later migration of the resource.
 */

export interface MigrationRecord {
  migrationId: string;
  instanceId: string;
  resourceId: string;
  target: Location;
  createdAt: string;
  input: MigrationInput;
  status: MigrationStatus;
  /** True once the status is terminal. */
  done: boolean;
}

export function newMigrationRecord(input: MigrationInput, createdAt: string): MigrationRecord {
  return {
    migrationId: input.migrationId,
    instanceId: input.instanceId,
    resourceId: input.resourceId,
    target: input.target,
    createdAt,
    input,
    status: pendingStatus(input),
    done: false,
  };
}

export interface MigrationRecords {
  /** Create the record; false when one with this id exists already (a repeated start). */
  create(record: MigrationRecord): Promise<boolean>;
  get(migrationId: string): Promise<MigrationRecord | null>;
  saveStatus(migrationId: string, status: MigrationStatus, done: boolean): Promise<void>;
}

/** One journaled step result of the in-process runner. */
export type JournalEntry = { value: unknown } | { error: { message: string; code?: string } };

export class SqliteMigrationState implements MigrationRecords {
  private readonly db: Database.Database;
  private readonly statements;

  constructor(path: string) {
    this.db = openSqlite(path);
    this.db.exec(`
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
      CREATE TABLE IF NOT EXISTS migration_journal (
        migration_id TEXT NOT NULL,
        key TEXT NOT NULL,
        entry TEXT NOT NULL,
        PRIMARY KEY (migration_id, key)
      );
    `);
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
    return this.createSync(record);
  }

  /**
   * Create a record unless the resource already has an unfinished migration: one atomic step, so two
   * concurrent starts for one resource can never both win. Returns the record that stands.
   */
  createUnlessActive(record: MigrationRecord): { record: MigrationRecord; created: boolean } {
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

  private createSync(record: MigrationRecord): boolean {
    const now = Date.now();
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
    return this.getSync(migrationId);
  }

  private getSync(migrationId: string): MigrationRecord | null {
    const row = this.statements.get.get(migrationId);
    return row ? (JSON.parse(row.record) as MigrationRecord) : null;
  }

  async saveStatus(migrationId: string, status: MigrationStatus, done: boolean): Promise<void> {
    const record = this.getSync(migrationId);
    if (!record) throw new RouteLockError('NotFound', `No migration ${migrationId}.`);
    this.statements.update.run(
      JSON.stringify({ ...record, status, done }),
      done ? 1 : 0,
      Date.now(),
      migrationId,
    );
    if (done) {
      this.statements.dropJournal.run(migrationId);
      // secure_delete zeroes the journal's pages; the checkpoint also empties the WAL that still holds
      // their earlier versions, so a finished migration's steps leave no copy on disk.
      this.db.pragma('wal_checkpoint(TRUNCATE)');
    }
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

  close(): void {
    if (this.db.open) this.db.close();
  }
}

/** Azure: records in Cosmos DB container `migrations` (partition key `/id`, created by Bicep). */
export class CosmosMigrationRecords implements MigrationRecords {
  constructor(private readonly container: Container) {}

  async create(record: MigrationRecord): Promise<boolean> {
    try {
      await this.container.items.create({ id: record.migrationId, ...record });
      return true;
    } catch (error) {
      const mapped = storeError(error, record.migrationId);
      if (mapped.code === 'AlreadyExists') return false;
      throw mapped;
    }
  }

  async get(migrationId: string): Promise<MigrationRecord | null> {
    try {
      const { resource } = await this.container
        .item(migrationId, migrationId)
        .read<Record<string, unknown>>();
      if (!resource) return null;
      const record: Record<string, unknown> = { ...resource };
      for (const key of ['id', '_rid', '_self', '_etag', '_attachments', '_ts']) delete record[key];
      return record as unknown as MigrationRecord;
    } catch (error) {
      const mapped = storeError(error, migrationId);
      if (mapped.code === 'NotFound') return null;
      throw mapped;
    }
  }

  async saveStatus(migrationId: string, status: MigrationStatus, done: boolean): Promise<void> {
    const record = await this.get(migrationId);
    if (!record) throw new RouteLockError('NotFound', `No migration ${migrationId}.`);
    try {
      await this.container.items.upsert({ id: migrationId, ...record, status, done });
    } catch (error) {
      throw storeError(error, migrationId);
    }
  }
}
