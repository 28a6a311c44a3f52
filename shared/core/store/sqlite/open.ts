import Database from 'better-sqlite3';
import { checkPrivateFile, ensurePrivateFile } from '../../security/privateFiles';

/**
 * The one way routelock opens a SQLite database (every embedded store goes through it): the file and
 * its folder private, the parent folder created, deleted rows overwritten, WAL, and NORMAL sync (which
 * in WAL mode survives a killed process, the only crash the embedded host must survive).
 */
export function openSqlite(path: string): Database.Database {
  if (path !== ':memory:') {
    // Ours and owner-only before SQLite opens it (its -wal and -shm files take the database file's mode),
    // in a folder nobody else can write: another user's planted file is refused, not adopted.
    ensurePrivateFile(path);
    for (const suffix of ['-wal', '-shm']) checkPrivateFile(path + suffix, { tighten: true });
  }
  const db = new Database(path);
  // Deleted rows (finished migrations' journals, released locks) are overwritten, not left in free pages.
  db.pragma('secure_delete = ON');
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  return db;
}

/** What every SQLite adapter starts from: its database opened by openSqlite, its tables in place. */
export abstract class SqliteTables {
  protected readonly db: Database.Database;

  protected constructor(
    readonly path: string,
    schema: string,
  ) {
    this.db = openSqlite(path);
    this.db.exec(schema);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
