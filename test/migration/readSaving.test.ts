import { runRouteReads } from '../../bench/migration';
import { withoutIfMatch } from '../../testkit/withoutIfMatch';
import { parseConfig } from '../../shared/config';
import { Router } from '../../shared/core/router';
import { resetCounters } from '../../shared/core/store/ports/locations';
import { copiesOnly, virtualRunner } from '../support/migrationHarness';

/**
 * Store reads and writes per migration (workflow version 5), with the orchestrator's If-Match read
 * saving and without it (the same workflow with If-Match stripped from every escalation, renewal, swap
 * and release). `held`: the routes were written through the runner's own router, so it holds their
 * version and the pre-lock decides on it (activities.ts); otherwise another process wrote them (a
 * second router on the same store) and the pre-lock reads the write region. Virtual time, SQLite,
 * production timing. bench/migration.ts prints the same counts.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

async function measure(options: { saving: boolean; participants: number; held: boolean }) {
  const config = parseConfig({
    ROUTELOCK_PARTICIPANTS: JSON.stringify(
      Array.from({ length: options.participants }, (_, i) => ({
        name: `p${i}`,
        url: `https://p${i}.test/migrate`,
      })),
    ),
  });
  // Each participant's bulk copy is one 5-hour job (virtual time); a repeated POST waits for the same job.
  const jobs = new Map<string, number>();
  const h = virtualRunner({
    config,
    http: copiesOnly(async (call) => {
      const key = `${call.url}|${call.body.migrationId}|${call.body.step}|${call.body.attempt}`;
      if (!jobs.has(key))
        jobs.set(key, h.scheduler.now() + (call.body.step === 'bulkCopy' ? 5 * 3600_000 : 1000));
      await h.scheduler.timer(jobs.get(key) as number).promise;
      return { status: 200, body: null };
    }),
  });
  if (!options.saving) Object.assign(h.activities, withoutIfMatch({ ...h.activities }));
  const writer = options.held
    ? h.router
    : new Router({ store: h.store, timing: config.timing, clock: h.clock.now });
  const ids = Array.from({ length: 20 }, (_, i) => `r-${i}`);
  for (const id of ids) await writer.createRoute(id, SOURCE);
  resetCounters(h.store.counters);
  for (const id of ids) h.runner.start({ resourceId: id, target: TARGET });
  await h.settle();
  const c = { ...h.store.counters };
  for (const id of ids)
    expect((await h.store.read(id, { from: 'writeRegion' })).doc.location).toEqual(TARGET);
  const statuses = h.state.recent(ids.length).map((r) => r.status.status);
  expect(statuses).toEqual(ids.map(() => 'Completed'));
  const per = (n: number) => n / ids.length;
  return {
    reads: per(c.nearestReads + c.writeRegionReads),
    writeRegionReads: per(c.writeRegionReads),
    writes: per(c.replaces),
  };
}

test.each([
  // participants, held, with If-Match, without
  [0, false, { reads: 2, writeRegionReads: 1, writes: 4 }, { reads: 5, writeRegionReads: 4, writes: 4 }],
  [0, true, { reads: 1, writeRegionReads: 0, writes: 4 }, { reads: 4, writeRegionReads: 3, writes: 4 }],
  [1, false, { reads: 3, writeRegionReads: 1, writes: 6 }, { reads: 8, writeRegionReads: 6, writes: 6 }],
  [1, true, { reads: 2, writeRegionReads: 0, writes: 6 }, { reads: 7, writeRegionReads: 5, writes: 6 }],
])(
  'version 5: %i participants, version held %s: the reads If-Match and the pre-lock answer make redundant',
  async (participants, held, expectedWith, expectedWithout) => {
    const withSaving = await measure({ saving: true, participants, held });
    const without = await measure({ saving: false, participants, held });
    expect(withSaving).toEqual(expectedWith);
    expect(without).toEqual(expectedWithout);
    expect(withSaving.writes).toBe(without.writes);
    // A lock-only migration: at most 2 location-document reads started alone, 1 when the
    // version is held: the replica read that confirms the swap (workflow/confirm.ts) is the one left.
    if (participants === 0) expect(withSaving.reads).toBeLessThanOrEqual(held ? 1 : 2);
  },
);

test('bench/migration.ts counts: a lock-only migration reads its route 2 times alone, 1 with its version held', async () => {
  const rows = await runRouteReads(3);
  const of = (start: string, version: number) =>
    rows.find((r) => r.start === start && r.version === version) as (typeof rows)[number];
  // version 6 changed only the copy loop, and version 7 with announced locks off takes version 6's
  // steps: a lock-only migration reads as version 5 did
  expect(rows.map((r) => r.version)).toEqual([7, 7, 7, 7]);
  const counts = (r: (typeof rows)[number]) => [
    r.reads,
    r.nearestReads,
    r.writeRegionReads,
    r.writes,
    r.completed,
  ];
  expect(counts(of('alone', 7))).toEqual([2, 1, 1, 4, 3]);
  expect(counts(of('held', 7))).toEqual([1, 1, 0, 4, 3]);
  expect(counts(of('start path', 7))).toEqual([2, 2, 0, 4, 3]);
  expect(counts(of('start path, ETag passed', 7))).toEqual([1, 1, 0, 4, 3]);
});
