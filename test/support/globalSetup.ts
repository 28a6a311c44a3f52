import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkoutDataDir, withGuardOff } from './hermeticGuard';

/**
 * One temporary directory for the run (each test file makes its own inside it, test/support/hermetic.ts),
 * and what the checkout's `.routelock/` looked like before it: a run that finds none leaves none.
 */
export default function globalSetup(): void {
  const runDir = mkdtempSync(join(tmpdir(), 'routelock-jest-'));
  // Workers start after this and inherit it.
  process.env.ROUTELOCK_TEST_RUN_DIR = runDir;
  process.env.ROUTELOCK_TEST_CHECKOUT_DATA = withGuardOff(() => existsSync(checkoutDataDir))
    ? 'present'
    : 'absent';
}
