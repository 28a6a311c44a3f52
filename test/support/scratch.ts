import { type Config, parseConfig } from '../../shared/config';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A fresh directory inside this test file's own temporary directory (test/support/hermetic.ts), removed
 * with the run's. Everything a test stores goes here, never into the checkout.
 */
export function scratchDir(prefix = 'scratch-'): string {
  return mkdtempSync(join(process.env.ROUTELOCK_TEST_FILE_DIR ?? tmpdir(), prefix));
}

/** A SQLite path of its own (its token keys are kept beside it): for `ROUTELOCK_SQLITE_PATH`. */
export function scratchSqlitePath(): string {
  return join(scratchDir('db-'), 'routelock.db');
}

/**
 * `parseConfig(env)` with the SQLite database and the token key file in a directory of its own, unless
 * `env` names them: the configuration a test builds services from (on either store).
 */
export function scratchConfig(env: Record<string, string> = {}): Config {
  const dir = scratchDir('data-');
  return parseConfig({
    ROUTELOCK_SQLITE_PATH: join(dir, 'routelock.db'),
    ROUTELOCK_TOKEN_KEY_FILE: join(dir, 'token-keys.json'),
    ...env,
  });
}
