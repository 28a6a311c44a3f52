import Database from 'better-sqlite3';

/**
 * Every SQLite statement a process runs, counted by kind and by what it touches: a read is a
 * statement's `get`, `all` or `iterate`, a write its `run`, each call counted once (a batch written in
 * one transaction counts each of its statements; transaction control is not counted). Installed by patching better-sqlite3's Statement
 * prototype in the process that owns the stores (the campaign benchmark's host, or the virtual-time
 * harness): the adapters themselves are untouched, and the count covers every store they keep in
 * SQLite — the routing documents, the migration records and journal, the campaign record and members.
 */

export type StoreGroup = 'routes' | 'migrations' | 'journal' | 'campaigns' | 'audit' | 'other';
export type SqliteCounts = Record<StoreGroup, { reads: number; writes: number }>;

const empty = (): SqliteCounts => ({
  routes: { reads: 0, writes: 0 },
  migrations: { reads: 0, writes: 0 },
  journal: { reads: 0, writes: 0 },
  campaigns: { reads: 0, writes: 0 },
  audit: { reads: 0, writes: 0 },
  other: { reads: 0, writes: 0 },
});

let counts: SqliteCounts = empty();
let installed = false;
const groupOf = new WeakMap<object, StoreGroup | 'control'>();

/**
 * Which store a statement belongs to, from the first table its SQL names. Transaction control (BEGIN,
 * COMMIT, SAVEPOINT: better-sqlite3's `transaction()` runs them) and pragmas are neither.
 */
function group(source: string): StoreGroup | 'control' {
  if (/^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE|PRAGMA)\b/i.test(source)) return 'control';
  const table = /\b(?:FROM|INTO|UPDATE|JOIN)\s+["`]?(\w+)/i.exec(source)?.[1]?.toLowerCase() ?? '';
  if (table.startsWith('location')) return 'routes';
  if (table.startsWith('campaign')) return 'campaigns';
  if (table === 'migration_journal') return 'journal';
  if (table.startsWith('migration')) return 'migrations';
  if (table === 'audit') return 'audit';
  return 'other';
}

export function installSqliteCounts(): void {
  if (installed) return;
  installed = true;
  const probe = new Database(':memory:');
  const prototype = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<
    'run' | 'get' | 'all' | 'iterate',
    (...args: unknown[]) => unknown
  >;
  probe.close();
  for (const method of ['run', 'get', 'all', 'iterate'] as const) {
    const original = prototype[method];
    const kind = method === 'run' ? 'writes' : 'reads';
    prototype[method] = function counted(this: { source: string }, ...args: unknown[]) {
      let g = groupOf.get(this);
      if (g === undefined) groupOf.set(this, (g = group(this.source)));
      if (g !== 'control') counts[g][kind] += 1;
      return original.apply(this, args);
    };
  }
}

export function sqliteCounts(): SqliteCounts {
  return JSON.parse(JSON.stringify(counts)) as SqliteCounts;
}

export function resetSqliteCounts(): void {
  counts = empty();
}

/** What a campaign's members cost: each group's reads and writes divided by `members`. */
export function perMember(c: SqliteCounts, members: number) {
  const round = (n: number) => Math.round((n / members) * 100) / 100;
  const groups = Object.entries(c) as [StoreGroup, { reads: number; writes: number }][];
  const reads = groups.reduce((a, [, v]) => a + v.reads, 0);
  const writes = groups.reduce((a, [, v]) => a + v.writes, 0);
  return {
    reads: round(reads),
    writes: round(writes),
    ...Object.fromEntries(groups.map(([k, v]) => [k, { reads: round(v.reads), writes: round(v.writes) }])),
  } as { reads: number; writes: number } & SqliteCounts;
}
