/**
 * `@routelock/library/sqlite`: the SQLite location store, apart from the main entry because it loads
 * better-sqlite3 (a native module, an optional peer of the library): a Cosmos-only service never
 * imports it. Install better-sqlite3 beside the library to use it.
 */
export { SqliteStore } from './core/store/sqlite/locations';
