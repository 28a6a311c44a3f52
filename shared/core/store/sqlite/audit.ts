import type { AuditRecord } from '../../audit';
import { auditEntrySubject } from '../errors';
import type { AuditLedger } from '../ports/audit';
import { guarded } from './errors';
import { SqliteTables } from './open';

/** The embedded host's audit ledger: table `audit`, a record's id its primary key. */
export class SqliteAuditLedger extends SqliteTables implements AuditLedger {
  private readonly statements;

  constructor(path: string) {
    super(
      path,
      `
      CREATE TABLE IF NOT EXISTS audit (
        id TEXT PRIMARY KEY,
        resource_id TEXT NOT NULL,
        at TEXT NOT NULL,
        record TEXT NOT NULL
      );
      CREATE INDEX IF NOT EXISTS audit_resource ON audit (resource_id, at);
    `,
    );
    this.statements = {
      append: this.db.prepare<[string, string, string, string]>(
        // First append of an id wins (append-only): a replay leaves the row, and its place in `list`, alone.
        'INSERT INTO audit (id, resource_id, at, record) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING',
      ),
      list: this.db.prepare<[string, number], { record: string }>(
        'SELECT record FROM audit WHERE resource_id = ? ORDER BY at, rowid LIMIT ?',
      ),
    };
  }

  async append(record: AuditRecord): Promise<void> {
    guarded(auditEntrySubject(record.id, record.resourceId), () =>
      this.statements.append.run(record.id, record.resourceId, record.at, JSON.stringify(record)),
    );
  }

  async list(resourceId: string, limit: number): Promise<AuditRecord[]> {
    const rows = guarded(auditEntrySubject('(list)', resourceId), () =>
      this.statements.list.all(resourceId, limit),
    );
    return rows.map((row) => JSON.parse(row.record) as AuditRecord);
  }
}
