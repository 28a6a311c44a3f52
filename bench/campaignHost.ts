import { startLocalHost } from '../local/host';
import { resetCounters } from '../shared/core/store/ports/locations';
import { installSqliteCounts, resetSqliteCounts, sqliteCounts } from './sqliteCounts';

/**
 * The embedded host as the campaign benchmark runs it, in a process of its own
 * (`node … bench/campaignHost.ts <sqlite file>`, spawned with an IPC channel): the real host on the
 * dev timing profile over the SQLite file the benchmark seeded. Prints `READY <url>` once listening.
 *
 * The host serves no store counters, so this process counts them and answers them over IPC (never
 * over HTTP: the API is the host's own): the routing store's port counters, every SQLite statement
 * (bench/sqliteCounts.ts), and its own CPU time. `{reset: true}` zeroes the counts first.
 */

installSqliteCounts();
const path = process.argv[2] ?? ':memory:';

async function main(): Promise<void> {
  const host = await startLocalHost({
    env: { PORT: '0', ROUTELOCK_SQLITE_PATH: path, ROUTELOCK_PROFILE: 'dev', ROUTELOCK_AUTH: 'none' },
    log: () => undefined,
  });
  const store = host.services.store;
  process.on('message', (message: { reset?: boolean; close?: boolean }) => {
    if (message.close) {
      void host.close().then(() => process.exit(0));
      return;
    }
    if (message.reset) {
      resetCounters(store.counters);
      resetSqliteCounts();
    }
    process.send?.({
      store: { ...store.counters },
      sqlite: sqliteCounts(),
      cpu: process.cpuUsage(),
      activeMigrations: host.runner.activeCount,
    });
  });
  process.stdout.write(`READY ${host.url}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
