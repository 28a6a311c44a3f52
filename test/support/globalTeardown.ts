import { rmSync } from 'node:fs';
import { checkoutDataDir, problemsAfterRun, withGuardOff } from './hermeticGuard';

/**
 * Fails the run when a test reached the checkout's `.routelock/`: an access refused in a worker (recorded
 * even if the code under test swallowed the error), or a `.routelock/` that appeared during the run (a
 * child process that wrote the default path, which no in-process check sees).
 */
export default function globalTeardown(): void {
  const runDir = process.env.ROUTELOCK_TEST_RUN_DIR;
  if (!runDir) return;
  const problems = withGuardOff(() =>
    problemsAfterRun({
      runDir,
      dataDir: checkoutDataDir,
      before: process.env.ROUTELOCK_TEST_CHECKOUT_DATA === 'present' ? 'present' : 'absent',
    }),
  );
  if (!process.env.ROUTELOCK_TEST_KEEP_TMP)
    withGuardOff(() => rmSync(runDir, { recursive: true, force: true }));
  if (problems.length > 0) {
    throw new Error(`tests are not hermetic (${problems.length}):\n${problems.join('\n')}`);
  }
}
