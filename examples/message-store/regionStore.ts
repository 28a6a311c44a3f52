import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * One region's copy of the message store: conversation messages in one SQLite file. A delete during the
 * hard-delete lock becomes a tombstone (deleted = 1) so the bulk copy carries it to the target.
 */
export interface MessageRow {
  conversationId: string;
  messageId: string;
  text: string;
  deleted: boolean;
  updatedAt: number;
}

export class RegionStore {
  private readonly db: Database.Database;
  private readonly statements;

  constructor(
    readonly region: string,
    path: string,
  ) {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    this.db.exec(`CREATE TABLE IF NOT EXISTS messages (
      conversation_id TEXT NOT NULL,
      message_id TEXT NOT NULL,
      text TEXT NOT NULL,
      deleted INTEGER NOT NULL DEFAULT 0,
      updated_at INTEGER NOT NULL,
      PRIMARY KEY (conversation_id, message_id)
    )`);
    this.statements = {
      put: this.db.prepare<[string, string, string, number]>(
        `INSERT INTO messages (conversation_id, message_id, text, deleted, updated_at) VALUES (?, ?, ?, 0, ?)
         ON CONFLICT (conversation_id, message_id) DO UPDATE SET text = excluded.text, deleted = 0, updated_at = excluded.updated_at`,
      ),
      tombstone: this.db.prepare<[number, string, string]>(
        'UPDATE messages SET deleted = 1, updated_at = ? WHERE conversation_id = ? AND message_id = ?',
      ),
      remove: this.db.prepare<[string, string]>(
        'DELETE FROM messages WHERE conversation_id = ? AND message_id = ?',
      ),
      list: this.db.prepare<
        [string],
        { message_id: string; text: string; deleted: number; updated_at: number }
      >(
        'SELECT message_id, text, deleted, updated_at FROM messages WHERE conversation_id = ? ORDER BY message_id',
      ),
      upsert: this.db.prepare<[string, string, string, number, number]>(
        `INSERT INTO messages (conversation_id, message_id, text, deleted, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (conversation_id, message_id) DO UPDATE SET text = excluded.text, deleted = excluded.deleted, updated_at = excluded.updated_at`,
      ),
      purge: this.db.prepare<[string]>('DELETE FROM messages WHERE conversation_id = ?'),
      conversations: this.db.prepare<[], { conversation_id: string }>(
        'SELECT DISTINCT conversation_id FROM messages',
      ),
    };
  }

  put(conversationId: string, messageId: string, text: string, now: number): void {
    this.statements.put.run(conversationId, messageId, text, now);
  }

  tombstone(conversationId: string, messageId: string, now: number): void {
    this.statements.tombstone.run(now, conversationId, messageId);
  }

  remove(conversationId: string, messageId: string): void {
    this.statements.remove.run(conversationId, messageId);
  }

  list(conversationId: string): MessageRow[] {
    return this.statements.list.all(conversationId).map((r) => ({
      conversationId,
      messageId: r.message_id,
      text: r.text,
      deleted: r.deleted === 1,
      updatedAt: r.updated_at,
    }));
  }

  /** Copy a conversation from another region, tombstones included; a tombstone is applied here as a delete. */
  copyFrom(source: RegionStore, conversationId: string): number {
    const rows = source.list(conversationId);
    this.db.transaction(() => {
      for (const row of rows) {
        if (row.deleted) this.statements.remove.run(conversationId, row.messageId);
        else this.statements.upsert.run(conversationId, row.messageId, row.text, 0, row.updatedAt);
      }
    })();
    return rows.length;
  }

  purge(conversationId: string): void {
    this.statements.purge.run(conversationId);
  }

  conversations(): string[] {
    return this.statements.conversations.all().map((r) => r.conversation_id);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
