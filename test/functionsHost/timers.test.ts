import type { AuditRecord } from '../../shared/core/audit';
import { bareEtag } from '../../shared/core/lock/document';
import { SqliteAuditLedger } from '../../shared/core/store/sqlite/audit';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { SqliteTelemetry } from '../../shared/migration/store/sqlite/telemetry';
import { seenKeysOf } from '../../shared/migration/telemetry/reconcile';
import { poll } from '../support/poll';
import { type FunctionsHost, explained, history, json, startHost, watchMigration } from './host';

/**
 * The timer-triggered functions on the real timer extension (hosts/webjobs through `npm run
 * start:functions`), their schedules cut to seconds, each shown by what it does, beside what it must
 * leave alone:
 *  - orphanSweeper reclaims a lock whose lease ran out (a `reclaim` in the ledger); a live lock stays;
 *  - purgeHistory (the sweep's schedule) purges a finished migration's Durable history, its status still
 *    read from the records; a running one's history stays;
 *  - syntheticProbe moves `probe-westeurope` between its two accounts, once per run;
 *  - telemetryReconciliation counts each changed document whose version the change handler did not
 *    record as a gap, and not one it did. It is registered with the change-feed trigger only (the same
 *    connection setting, functions/telemetryReconciliation.ts), so the host gets a Cosmos DB endpoint it
 *    never calls: the trigger is not served here, and the store stays SQLite. Nothing records a version
 *    here unless the test does, as the change handler would.
 * One host for the file, the four side by side.
 */

jest.setTimeout(120_000);

const FROM = { region: 'westeurope' };
const TO = { region: 'eastus' };
const PROBE_ROUTE = 'probe-westeurope';

describe('the timer-triggered functions on the real timer extension', () => {
  let host: FunctionsHost;

  beforeAll(async () => {
    host = await startHost({
      ROUTELOCK_SWEEP_SCHEDULE: '*/3 * * * * *',
      ROUTELOCK_PROBE_SCHEDULE: '*/5 * * * * *',
      ROUTELOCK_PROBE_REGION: 'westeurope',
      ROUTELOCK_RECONCILE_SCHEDULE: '*/4 * * * * *',
      // a change is checked at the first run after it, not a grace later
      ROUTELOCK_RECONCILE_GRACE_SECONDS: '0',
      COSMOS__accountEndpoint: 'https://127.0.0.1:1/',
    });
    // load the SQLite adapters' native module now: once one of the tests running side by side has
    // ended, jest refuses a module's first require in the others
    new SqliteTelemetry(host.dataPath).close();
    process.stdout.write(`functionsHost/timers: host listening after ${host.startedMs} ms\n`);
  }, 620_000);

  afterAll(async () => {
    await host?.stop();
  });

  async function route(id: string) {
    const put = await json(`${host.api}/routes/${id}`, {
      method: 'PUT',
      body: JSON.stringify({ location: FROM }),
    });
    expect(put.status).toBe(201);
  }

  const post = (path: string, body: unknown) =>
    json(`${host.api}${path}`, { method: 'POST', body: JSON.stringify(body) });

  /** The route's records in the ledger (none while the route does not exist). */
  const audit = async (id: string) =>
    ((await json(`${host.api}/routes/${id}/audit`)).body.items ?? []) as AuditRecord[];

  /** The app's log lines of one timer function that arrived after `from` (epoch ms). */
  const logged = (fn: string, from: number) =>
    host
      .lines()
      .filter((l) => l.at > from && l.text.startsWith(`[${fn}:`))
      .map((l) => l.text);

  /** Wait until `fn` has logged `count` more lines: that many runs of it ended since now. */
  const runsOf = (fn: string, count: number) => {
    const from = Date.now();
    return poll(
      () => logged(fn, from),
      (lines) => lines.length >= count,
      60_000,
    );
  };

  test.concurrent('orphanSweeper reclaims a lock whose lease ran out, and leaves a live one', async () => {
    const stamp = Date.now();
    const [orphan, live] = [`orphan-${stamp}`, `live-${stamp}`];
    for (const id of [orphan, live]) {
      await route(id);
      const prelock = await post(`/routes/${id}/prelock`, {
        migrationId: `hand-${id}`,
        owner: 'me',
        target: TO,
      });
      expect(prelock.status).toBe(200);
    }
    // the orphan's holder is gone and its lease over: the version a lease's end leaves in the store
    const store = new SqliteStore(host.dataPath);
    try {
      const { doc, etag } = await store.read(orphan, { from: 'writeRegion' });
      await poll(
        () => Date.now(),
        (now) => now > Date.parse(String(doc.lock?.acquiredAt)),
      );
      await store.replace({ ...doc, lock: { ...doc.lock!, expiresAt: new Date().toISOString() } }, etag);
    } finally {
      await store.close();
    }
    const reclaims = await poll(
      () => audit(orphan),
      (items) => items.length > 0,
      30_000,
    );
    expect(reclaims.map((r) => [r.op, r.migrationId])).toEqual([['reclaim', `hand-${orphan}`]]);
    expect((await json(`${host.api}/routes/${orphan}`)).body).toMatchObject({ location: FROM, lock: null });
    // two more sweeps: the live lock is still held, and nothing was reclaimed of it
    await runsOf('orphanSweeper', 2);
    expect(await audit(live)).toEqual([]);
    expect((await json(`${host.api}/routes/${live}`)).body.lock).toMatchObject({
      migrationId: `hand-${live}`,
    });
  });

  test.concurrent(
    "purgeHistory purges a finished migration's history and keeps a running one's",
    async () => {
      const stamp = Date.now();
      const [done, waiting] = [`purged-${stamp}`, `kept-${stamp}`];
      await route(done);
      await route(waiting);
      const start = async (body: Record<string, unknown>) => {
        const started = await post('/migrations', body);
        expect(started.status).toBe(202);
        return { migrationId: String(started.body.migrationId), instanceId: String(started.body.instanceId) };
      };
      // lock-only (no participants here): a few seconds to Completed
      const finished = await start({ resourceId: done, target: TO });
      // its window opens in ten minutes: it stays Running for the whole test
      const running = await start({
        resourceId: waiting,
        target: TO,
        window: { notBefore: new Date(Date.now() + 600_000).toISOString() },
      });
      await explained(
        host,
        () => [finished.instanceId, running.instanceId],
        async () => {
          expect((await watchMigration(host, finished.migrationId)).body.status).toBe('Completed');
          const gone = await poll(
            () => history(host, finished.instanceId),
            (answer) => answer.startsWith('404 '),
            30_000,
          );
          expect(gone).toMatch(/^404 /);
          // the records keep its story once the task hub has none
          expect((await watchMigration(host, finished.migrationId)).body).toMatchObject({
            status: 'Completed',
            phase: 'swapped',
          });
          await runsOf('purgeHistory', 2);
          // 202: the Durable HTTP API's answer for an instance still running
          const kept = await history(host, running.instanceId);
          expect(kept).toMatch(/^202 /);
          expect(kept).toMatch(/"runtimeStatus":"Running"/);
          expect(
            logged('purgeHistory', 0).some((l) => /purge: [1-9]\d* finished orchestration/.test(l)),
          ).toBe(true);
        },
      );
      expect((await post(`/migrations/${encodeURIComponent(running.migrationId)}/cancel`, {})).status).toBe(
        200,
      );
    },
  );

  test.concurrent('syntheticProbe moves its route between its two accounts at each run', async () => {
    // two swaps by two runs of the schedule (one is already the proof it ran; two, that it repeats), read
    // from the ledger in the store: the API refuses the probe's ids to callers
    const ledger = new SqliteAuditLedger(host.dataPath);
    let swaps: AuditRecord[];
    try {
      swaps = await poll(
        async () => (await ledger.list(PROBE_ROUTE, 100)).filter((r) => r.op === 'swap'),
        (items) => items.length >= 2,
        60_000,
      );
    } finally {
      ledger.close();
    }
    expect(new Set(swaps.map((r) => r.migrationId)).size).toBe(swaps.length);
    for (const [i, swap] of swaps.entries()) {
      expect(swap.from?.region).toBe('westeurope');
      expect(swap.to?.account).not.toBe(swap.from?.account);
      if (i > 0) expect(swap.from).toEqual(swaps[i - 1]?.to);
    }
    expect(logged('syntheticProbe', 0).filter((l) => /FAILED/.test(l))).toEqual([]);
  });

  test.concurrent(
    'telemetryReconciliation reports an unrecorded version as a gap, a recorded one not',
    async () => {
      const stamp = Date.now();
      const [recorded, unrecorded] = [`recorded-${stamp}`, `unrecorded-${stamp}`];
      await route(recorded);
      await route(unrecorded);
      /** Each run's counts, from its result line, for runs that ended after `from`. */
      const results = (from: number) =>
        logged('telemetryReconciliation', from)
          .map((l) => /: (\d+) version\(s\) checked, (\d+) gap\(s\)/.exec(l))
          .filter((m) => m !== null)
          .map((m) => ({ checked: Number(m[1]), gaps: Number(m[2]) }));
      // nothing recorded yet: every document changed in the window is a gap, both of these included
      const before = Date.now();
      await runsOf('telemetryReconciliation', 1);
      expect(results(before).every((r) => r.checked === r.gaps && r.checked >= 2)).toBe(true);
      // the change handler's record of one of them, as it writes it once the version's telemetry is sent
      const store = new SqliteStore(host.dataPath);
      const seen = new SqliteTelemetry(host.dataPath);
      try {
        const { doc, etag } = await store.read(recorded, { from: 'writeRegion' });
        await seen.record(recorded, seenKeysOf(doc, bareEtag(etag)));
      } finally {
        await store.close();
        seen.close();
      }
      // a run that started after the record (a run in flight may have read before it): one gap fewer than
      // documents checked, whatever else changed meanwhile
      const after = Date.now();
      await runsOf('telemetryReconciliation', 2);
      const runs = results(after).slice(1);
      expect(runs.length).toBeGreaterThan(0);
      for (const run of runs) expect(run.checked - run.gaps).toBe(1);
    },
  );
});
