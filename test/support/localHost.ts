import { type LocalHost, type LocalHostOptions, startLocalHost as start } from '../../local/host';
import { scratchSqlitePath } from './scratch';

/**
 * `startLocalHost` as the tests start it: a host given an environment without `ROUTELOCK_SQLITE_PATH`
 * gets one in a directory of its own, so its state and the token keys kept beside it (even with a store
 * handed in) never land in the checkout's `.routelock/`. Without an environment it reads `process.env`,
 * whose path test/support/hermetic.ts already points at this test file's directory.
 */
export function startLocalHost(options: LocalHostOptions = {}): Promise<LocalHost> {
  if (!options.env) return start(options);
  return start({ ...options, env: { ROUTELOCK_SQLITE_PATH: scratchSqlitePath(), ...options.env } });
}
