/**
 * Every test file runs in its own temporary directory and never sees the checkout's `.routelock/`, the
 * dev host's data (jest `setupFiles`: it runs before each test file, in that file's module registry).
 *
 * - Whatever reads the process environment (the Functions entry points' `getConfig()`, a child started
 *   with `process.env`) gets a `ROUTELOCK_SQLITE_PATH` in a fresh directory of this file's own, so its
 *   database and the token keys beside it live there.
 * - Any open of a path inside the checkout's `.routelock/`, through `fs` or better-sqlite3, is refused
 *   (the error names the path) and recorded for the global teardown, which fails the run: a store built
 *   from `parseConfig({})` without a path is caught whether or not a dev host's data exists there.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkoutDataDir, guardOff, insideCheckoutData, recordViolation } from './hermeticGuard';

// `fs` is the process's one core module (jest does not sandbox it): patched once per worker. Taken with
// require, not `import * as`, whose interop would hand over a copy of it.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const fs = require('node:fs') as typeof import('node:fs');

const runDir = process.env.ROUTELOCK_TEST_RUN_DIR ?? tmpdir();
const fileDir = mkdtempSync(join(runDir, 'file-'));
process.env.ROUTELOCK_TEST_FILE_DIR = fileDir;
process.env.ROUTELOCK_SQLITE_PATH = join(fileDir, 'routelock.db');
delete process.env.ROUTELOCK_TOKEN_KEY_FILE;

type CurrentTest = () => { testPath?: string; currentTestName?: string } | undefined;
const CURRENT = Symbol.for('routelock.hermetic.currentTest');
// The patches below outlive this file (a worker runs many): they ask the file now running who it is.
(fs as unknown as Record<symbol, CurrentTest>)[CURRENT] = () =>
  (
    globalThis as { expect?: { getState(): { testPath?: string; currentTestName?: string } } }
  ).expect?.getState();

function refuse(operation: string, path: string): never {
  const message = `hermetic test: ${operation} ${path} reaches the checkout's ${checkoutDataDir} (the dev host's data); give the test a path in its temporary directory (test/support/scratch.ts)`;
  const state = (fs as unknown as Record<symbol, CurrentTest | undefined>)[CURRENT]?.();
  recordViolation(`${state?.testPath ?? '?'} › ${state?.currentTestName ?? '(outside a test)'}: ${message}`);
  throw new Error(message);
}

type AnyFn = (...args: unknown[]) => unknown;
const PATCHED = Symbol.for('routelock.hermetic.patched');

/** Wrap `target[name]` so that its path arguments (the first `paths` of them) are checked first. */
function guard(target: Record<string, unknown>, name: string, paths: number): void {
  const original = target[name] as AnyFn | undefined;
  if (typeof original !== 'function' || (original as unknown as Record<symbol, boolean>)[PATCHED]) return;
  const wrapped = function (this: unknown, ...args: unknown[]) {
    if (!guardOff())
      for (let i = 0; i < paths; i++) {
        const p = args[i];
        if ((typeof p === 'string' || p instanceof URL || Buffer.isBuffer(p)) && insideCheckoutData(p)) {
          refuse(name, String(p));
        }
      }
    return original.apply(this, args);
  };
  Object.defineProperty(wrapped, PATCHED, { value: true });
  Object.defineProperties(wrapped, Object.getOwnPropertyDescriptors(original));
  target[name] = wrapped;
}

const syncAndCallback = [
  'open',
  'readFile',
  'writeFile',
  'appendFile',
  'mkdir',
  'stat',
  'lstat',
  'access',
  'exists',
  'readdir',
  'rm',
  'rmdir',
  'unlink',
  'chmod',
  'truncate',
  'createReadStream',
  'createWriteStream',
  'opendir',
];
const fsTable = fs as unknown as Record<string, unknown>;
for (const name of syncAndCallback) {
  guard(fsTable, name, 1);
  guard(fsTable, `${name}Sync`, 1);
}
for (const name of ['rename', 'link', 'copyFile', 'symlink', 'cp']) {
  guard(fsTable, name, 2);
  guard(fsTable, `${name}Sync`, 2);
}
const promises = fs.promises as unknown as Record<string, unknown>;
for (const name of [...syncAndCallback, 'rename', 'link', 'copyFile', 'cp']) guard(promises, name, 2);

// better-sqlite3 opens its file natively, past `fs`: its constructor is checked too.
jest.mock('better-sqlite3', () => {
  const Actual = jest.requireActual<AnyFn & { prototype: object }>('better-sqlite3');
  function Database(this: unknown, filename?: unknown, options?: unknown) {
    if (typeof filename === 'string' && insideCheckoutData(filename)) refuse('better-sqlite3 open', filename);
    return new (Actual as unknown as new (...a: unknown[]) => object)(filename, options);
  }
  Database.prototype = Actual.prototype;
  Object.setPrototypeOf(Database, Actual);
  return Database;
});
