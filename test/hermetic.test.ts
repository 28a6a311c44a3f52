import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { createServices } from '../functions/services';
import { getConfig, parseConfig } from '../shared/config';
import { openTokenKeyring } from '../shared/core/security/tokenKeys';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import {
  checkoutDataDir,
  insideCheckoutData,
  problemsAfterRun,
  violationsFile,
  withGuardOff,
  withRefusalExpected,
} from './support/hermeticGuard';

// What the checkout's .routelock/ looked like before: a dev host beside the run may own one.
const before = withGuardOff(() => existsSync(checkoutDataDir));
afterEach(() => expect(withGuardOff(() => existsSync(checkoutDataDir))).toBe(before));

test('this file has a temporary directory of its own, and the environment points the default store there', () => {
  const own = process.env.ROUTELOCK_TEST_FILE_DIR!;
  expect(own).toBeDefined();
  expect(relative(tmpdir(), own).startsWith('..')).toBe(false);
  expect(insideCheckoutData(own)).toBe(false);
  const config = getConfig();
  expect(config.store).toMatchObject({ kind: 'sqlite', path: join(own, 'routelock.db') });
  expect(config.security.tokenKeys).toEqual({ kind: 'file', path: join(own, 'token-keys.json') });
});

test('services built from parseConfig({}) are refused before they touch the checkout', async () => {
  await expect(
    withRefusalExpected(() => createServices(parseConfig({}), { store: new SqliteStore(':memory:') })),
  ).rejects.toThrow(/hermetic test: .*\.routelock/);
});

test('the default token key file and database are refused whether or not they exist', async () => {
  await expect(
    withRefusalExpected(() => openTokenKeyring({ kind: 'file', path: '.routelock/token-keys.json' })),
  ).rejects.toThrow(/hermetic test/);
  await expect(withRefusalExpected(() => new SqliteStore('.routelock/routelock.db'))).rejects.toThrow(
    /hermetic test/,
  );
  await expect(
    withRefusalExpected(() => readFileSync(join(checkoutDataDir, 'routelock.db'))),
  ).rejects.toThrow(/hermetic test/);
  // the control: the same calls on a path of the test's own go through
  const own = join(process.env.ROUTELOCK_TEST_FILE_DIR!, 'control');
  mkdirSync(own);
  expect(new SqliteStore(join(own, 'routelock.db'))).toBeInstanceOf(SqliteStore);
  expect(insideCheckoutData('.routelock')).toBe(true);
  expect(insideCheckoutData('.routelocked/x.db')).toBe(false);
});

describe('the global teardown', () => {
  let runDir: string;
  let dataDir: string;
  beforeEach(() => {
    runDir = mkdtempSync(join(process.env.ROUTELOCK_TEST_FILE_DIR!, 'run-'));
    dataDir = join(runDir, '.routelock');
  });
  afterEach(() => rmSync(runDir, { recursive: true, force: true }));

  test('passes a run that touched nothing', () => {
    expect(problemsAfterRun({ runDir, dataDir, before: 'absent' })).toEqual([]);
    mkdirSync(dataDir);
    expect(problemsAfterRun({ runDir, dataDir, before: 'present' })).toEqual([]);
  });

  test('fails a run that left a .routelock/ behind', () => {
    mkdirSync(dataDir);
    expect(problemsAfterRun({ runDir, dataDir, before: 'absent' })).toEqual([
      expect.stringContaining(`left ${dataDir} behind`),
    ]);
  });

  test('fails a run in which a worker was refused, even if the code swallowed the error', () => {
    writeFileSync(violationsFile(runDir), 'a.test.ts › x: hermetic test: open .routelock/routelock.db\n');
    expect(problemsAfterRun({ runDir, dataDir, before: 'present' })).toEqual([
      expect.stringContaining('.routelock/routelock.db'),
    ]);
  });
});
