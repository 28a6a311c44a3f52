import { withoutIfMatch } from '../../testkit/withoutIfMatch';
import { parseConfig } from '../../shared/config';
import { resetCounters } from '../../shared/store/ports/locations';
import { copiesOnly, virtualRunner } from '../support/migrationHarness';

/**
 * Store reads and writes per migration, with the orchestrator's If-Match read saving and without it
 * (the same workflow with If-Match stripped from every activity). Virtual time, SQLite, production timing.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

async function measure(saving: boolean, participants: number) {
  const config = parseConfig({
    ROUTELOCK_PARTICIPANTS: JSON.stringify(
      Array.from({ length: participants }, (_, i) => ({ name: `p${i}`, url: `https://p${i}.test/migrate` })),
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
  if (!saving) Object.assign(h.activities, withoutIfMatch({ ...h.activities }));
  const ids = Array.from({ length: 20 }, (_, i) => `r-${i}`);
  for (const id of ids) await h.router.createRoute(id, SOURCE);
  resetCounters(h.store.counters);
  for (const id of ids) h.runner.start({ resourceId: id, target: TARGET });
  await h.settle();
  for (const id of ids)
    expect((await h.store.read(id, { from: 'writeRegion' })).doc.location).toEqual(TARGET);
  const c = h.store.counters;
  const per = (n: number) => n / ids.length - 0; // the check above read each document once
  return {
    reads: per(c.nearestReads + c.writeRegionReads) - 1,
    writeRegionReads: per(c.writeRegionReads) - 1,
    writes: per(c.replaces),
  };
}

test.each([
  // participants, with If-Match, without
  [0, { reads: 4, writeRegionReads: 3, writes: 4 }, { reads: 7, writeRegionReads: 6, writes: 4 }],
  [1, { reads: 4, writeRegionReads: 3, writes: 6 }, { reads: 9, writeRegionReads: 8, writes: 6 }],
])(
  'If-Match saves the reads it makes redundant (%i participants)',
  async (participants, expectedWith, expectedWithout) => {
    const withSaving = await measure(true, participants);
    const without = await measure(false, participants);
    expect(withSaving).toEqual(expectedWith);
    expect(without).toEqual(expectedWithout);
    expect(withSaving.writes).toBe(without.writes);
    expect(withSaving.reads).toBeLessThan(without.reads);
    // Every mutation after the pre-lock names the version it holds: only the pre-lock, the re-read and
    // the read-path confirmation (a started lock: nearest, then the write region) read the store.
    expect(withSaving.writeRegionReads).toBe(3);
    expect(withSaving.reads).toBe(4);
  },
);
