import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { scratchDir } from '../support/scratch';

/**
 * A Functions app on Cosmos DB never loads better-sqlite3 (a native module: one built for another OS
 * stops every function from loading). Each functions/*.ts entry point is loaded in a fresh Node process,
 * as the worker loads `main`, and the process reports whether better-sqlite3 reached require.cache.
 */

const root = join(__dirname, '../..');
const entryPoints = readdirSync(join(root, 'functions'))
  .filter((f) => f.endsWith('.ts'))
  .map((f) => join(root, 'functions', f));

/** Load every entry point (then run `after`) in a child process; true when better-sqlite3 was loaded. */
function loadsSqlite(env: Record<string, string>, after = ''): boolean {
  const script = `
    (async () => {
      for (const file of ${JSON.stringify(entryPoints)}) require(file);
      ${after}
      const loaded = Object.keys(require.cache).some((k) => /[\\\\/]better-sqlite3[\\\\/]/.test(k));
      process.stdout.write(JSON.stringify({ loaded }));
    })().catch((e) => { console.error(e); process.exit(1); });`;
  const out = execFileSync(process.execPath, ['-r', join(root, 'scripts/ts-register.js'), '-e', script], {
    // (a store opened at the default path lands in a temporary directory, not the checkout)
    cwd: scratchDir('entry-points-'),
    env: { PATH: process.env.PATH ?? '', ...env },
    encoding: 'utf8',
  });
  return (JSON.parse(out) as { loaded: boolean }).loaded;
}

const cosmos = {
  ROUTELOCK_STORE: 'cosmos',
  COSMOS_ENDPOINT: 'https://acct.documents.azure.com:443/',
  COSMOS__accountEndpoint: 'https://acct.documents.azure.com:443/',
};

test('every functions entry point loads without better-sqlite3 when the store is Cosmos DB', () => {
  expect(entryPoints.length).toBeGreaterThan(5);
  expect(loadsSqlite(cosmos)).toBe(false);
}, 60_000);

test('negative control: opening the sqlite store does load it (the check sees the native module)', () => {
  const openSqlite = `
      const { openStores } = require(${JSON.stringify(join(root, 'shared/stores.ts'))});
      await openStores({ kind: 'sqlite', path: ':memory:' });`;
  expect(loadsSqlite({ ROUTELOCK_STORE: 'sqlite' }, openSqlite)).toBe(true);
}, 60_000);
