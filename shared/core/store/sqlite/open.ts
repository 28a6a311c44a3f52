import type BetterSqlite3 from 'better-sqlite3';
import { requireOptional } from '../../optionalDependency';
import { checkPrivateFile, ensurePrivateFile } from '../../security/privateFiles';

/** What a service that opens a SQLite store without better-sqlite3 installed is told. */
export const missingSqliteMessage =
  'The SQLite store (@routelock/library/sqlite, or ROUTELOCK_STORE=sqlite) needs better-sqlite3, which is ' +
  'not installed. Install it beside @routelock/library: npm install better-sqlite3. It is an optional peer ' +
  'because it is a native module: a service on the Cosmos DB store never installs or loads it.';

// Loaded with this module, as a static import would be, but a missing better-sqlite3 (an optional peer of
// @routelock/library) says what to install instead of giving Node's resolver stack.
const Database = requireOptional(
  'better-sqlite3',
  missingSqliteMessage,
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the load the guard catches must happen inside it
  () => require('better-sqlite3') as typeof BetterSqlite3,
);

/**
 * The one way routelock opens a SQLite database (every embedded store goes through it): the file and
 * its folder private, the parent folder created, deleted rows overwritten, WAL, and NORMAL sync (which
 * in WAL mode survives a killed process, the only crash the embedded host must survive).
 */
export function openSqlite(path: string): BetterSqlite3.Database {
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
  protected readonly db: BetterSqlite3.Database;

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
