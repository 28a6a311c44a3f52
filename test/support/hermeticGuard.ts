import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout's `.routelock/`: where `npm start` keeps the dev host's data by default. */
export const checkoutDataDir = join(resolve(__dirname, '../..'), '.routelock');

// Flags kept on the `fs` module, the one object the patches, every test file's realm and jest's own
// process (the global hooks) all share: jest hands each realm a copy of `process`, not `process` itself.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const shared = require('node:fs') as Record<symbol, unknown>;
const OFF = Symbol.for('routelock.hermetic.off');
const EXPECTED = Symbol.for('routelock.hermetic.expected');

/** Whether a path (relative ones against the working directory, as the stores resolve them) is inside it. */
export function insideCheckoutData(path: string | URL | Buffer): boolean {
  const text = path instanceof URL ? fileURLToPath(path) : String(path);
  if (text === ':memory:' || text === '') return false;
  const rel = relative(checkoutDataDir, resolve(text));
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/** The file the global teardown reads: one line per refused access, from every worker. */
export function violationsFile(runDir: string): string {
  return join(runDir, 'violations.txt');
}

export function recordViolation(line: string): void {
  if (shared[EXPECTED] === true) return;
  const runDir = process.env.ROUTELOCK_TEST_RUN_DIR;
  if (runDir) appendFileSync(violationsFile(runDir), `${line.replace(/\n/g, ' ')}\n`);
}

/** Whether the checks are off: only while the global hooks (in jest's own process) look at the checkout. */
export function guardOff(): boolean {
  return shared[OFF] === true;
}

export function withGuardOff<T>(look: () => T): T {
  shared[OFF] = true;
  try {
    return look();
  } finally {
    shared[OFF] = false;
  }
}

/** Run `act` expecting the guard to refuse it: the refusal is not recorded against the run. */
export async function withRefusalExpected<T>(act: () => Promise<T> | T): Promise<T> {
  shared[EXPECTED] = true;
  try {
    return await act();
  } finally {
    shared[EXPECTED] = false;
  }
}

/**
 * What the global teardown fails the run for: every refused access the workers recorded, and a data
 * directory that was absent before the run and is there after it.
 */
export function problemsAfterRun(run: {
  runDir: string;
  dataDir: string;
  before: 'present' | 'absent';
}): string[] {
  const problems: string[] = [];
  const file = violationsFile(run.runDir);
  if (existsSync(file)) problems.push(...new Set(readFileSync(file, 'utf8').split('\n').filter(Boolean)));
  if (run.before === 'absent' && existsSync(run.dataDir)) {
    problems.push(
      `the run left ${run.dataDir} behind (a test, or a process it started, used the default path)`,
    );
  }
  return problems;
}
