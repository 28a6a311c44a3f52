import { SOURCE, TARGET, failoverMigration } from '../support/failoverMigration';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { ManualClock } from '../../testkit/clock';
import { LaggingStore } from '../../testkit/laggingStore';
import { plantUnconfirmedSwap } from '../../testkit/plantedBugs';
import { virtualRunner } from '../support/migrationHarness';

/**
 * The swap confirmed durable (version 4): a write-region failover that drops the swap it
 * acknowledged (testkit/failoverStore.ts) is noticed by the replica read after the replication bound;
 * the migration re-drives (swaps again under the same write lock, or starts a fresh attempt) and ends
 * Completed with the route at the target, the `completed` notice only after that. Negative control:
 * with confirmation switched off, the same fault ends Completed with the route back at the source.
 */

async function migrate(env: Record<string, string>, options: { plant?: boolean } = {}) {
  // the failover comes 1 s after the swap: inside the replication window
  const { clock, store, posts, h } = failoverMigration({
    failoverAfterMs: 1000,
    env: { ROUTELOCK_REPLICATION_BOUND_SECONDS: '5', ...env },
  });
  if (options.plant) plantUnconfirmedSwap(h.activities);
  const swaps: { at: number; writeAt: string | undefined; ok: boolean }[] = [];
  const swap = h.activities.swap;
  h.activities.swap = async (input) => {
    const result = await swap(input);
    swaps.push({ at: clock.now(), writeAt: input.writeAt, ok: result.ok });
    return result;
  };
  await h.router.createRoute('r-1', SOURCE);
  const { record } = h.runner.start({ resourceId: 'r-1', target: TARGET });
  await h.settle();
  const status = await h.runner.status(record.migrationId);
  const doc = (await store.read('r-1', { from: 'writeRegion' })).doc;
  return { h, store, status, doc, posts, swaps };
}

test('the write lock still holds: the swap lost is noticed on the replica and made again; completed after that', async () => {
  const r = await migrate({});
  expect(r.store.dropped).toHaveLength(1);
  expect(r.status).toMatchObject({ status: 'Completed', attempt: 1 });
  expect(r.doc).toMatchObject({ location: TARGET, lock: null });
  // two swaps, the same write-lock attempt; the second after the failover
  expect(r.swaps).toHaveLength(2);
  expect(r.swaps[1]!.writeAt).toBe(r.swaps[0]!.writeAt);
  expect(r.swaps[1]!.at).toBeGreaterThanOrEqual(r.store.dropped[0]!.at);
  expect(Date.parse(r.status.timeline.swappedAt as string)).toBe(r.swaps[1]!.at);
  // one completed notice, once the second swap was confirmed (its replication bound passed)
  const notices = r.posts.filter((p) => p.step === 'completed');
  expect(notices).toHaveLength(1);
  expect(notices[0]!.at).toBeGreaterThanOrEqual(r.swaps[1]!.at + 7000);
  expect(notices[0]!.body.cleanUpSourceAfter).toBe(r.doc.secondary!.writesBlockedUntil);
  expect(r.posts.map((p) => p.step)).not.toContain('failed');
});

test('the write lock gone too: the attempt fails SwapLost, a fresh attempt swaps again; completed after that', async () => {
  // the write lease (10 s) ends before the confirmation read (12 s after the swap)
  const r = await migrate({
    ROUTELOCK_WRITE_LEASE_SECONDS: '10',
    ROUTELOCK_WRITE_BUDGET_SECONDS: '10',
    ROUTELOCK_REPLICATION_BOUND_SECONDS: '10',
  });
  expect(r.store.dropped).toHaveLength(1);
  expect(r.status).toMatchObject({ status: 'Completed', attempt: 2 });
  expect(r.status.attempts![0]).toMatchObject({ attempt: 1, outcome: 'Failed' });
  expect(r.status.attempts![0]!.reason).toMatch(/the swap is gone/);
  expect(r.doc).toMatchObject({ location: TARGET, lock: null });
  // attempt 1's swap; its swap again refused (the write lock had lapsed); attempt 2's, its own lock
  expect(r.swaps.map((s) => s.ok)).toEqual([true, false, true]);
  expect(r.status.attempts![0]!.reason).toMatch(/swap again: InvalidTransition/);
  const landed = r.swaps.filter((s) => s.ok);
  expect(landed).toHaveLength(2);
  expect(landed[1]!.writeAt).not.toBe(landed[0]!.writeAt);
  const notices = r.posts.filter((p) => ['completed', 'failed', 'cancelled'].includes(p.step));
  expect(notices.map((p) => [p.step, p.body.migrationAttempt])).toEqual([['completed', 2]]);
  // attempt 2 copied again before its swap
  expect(r.posts.filter((p) => p.step === 'bulkCopy').map((p) => p.body.migrationAttempt)).toEqual([1, 2]);
});

test('negative control: confirmation switched off, the same failover ends Completed with the route back at the source', async () => {
  const r = await migrate({}, { plant: true });
  expect(r.store.dropped).toHaveLength(1);
  expect(r.status.status).toBe('Completed');
  expect(r.swaps).toHaveLength(1);
  // the lie: Completed, and the participant told to clean up a source the route still points to
  expect(r.doc.location).toEqual(SOURCE);
  expect(r.posts.filter((p) => p.step === 'completed')).toHaveLength(1);
});

test('replication behind: the replica shows the swap only later; read again, Completed, no second swap', async () => {
  const clock = new ManualClock(Date.UTC(2026, 4, 1));
  // every replica read 9 s behind: the confirmation's first read (7 s after the swap) misses it
  const store = new LaggingStore(new SqliteStore(':memory:'), clock.now, () => 9000);
  const h = virtualRunner({
    clock,
    store,
    env: {
      ROUTELOCK_PROFILE: 'dev',
      ROUTELOCK_REPLICATION_BOUND_SECONDS: '5',
      ROUTELOCK_SAFETY_BUFFER_SECONDS: '2',
    },
  });
  const reads: { from: string; at: number }[] = [];
  const readRoute = h.activities.readRoute;
  h.activities.readRoute = (input) => {
    reads.push({ from: input.from, at: clock.now() });
    return readRoute(input);
  };
  let swaps = 0;
  const swap = h.activities.swap;
  h.activities.swap = (input) => ((swaps += 1), swap(input));
  await h.router.createRoute('r-1', SOURCE);
  clock.advance(10_000); // the route on every replica
  const { record } = h.runner.start({ resourceId: 'r-1', target: TARGET });
  await h.settle();
  const status = await h.runner.status(record.migrationId);
  expect(status).toMatchObject({ status: 'Completed', attempt: 1 });
  expect(swaps).toBe(1);
  const swappedAt = Date.parse(status.timeline.swappedAt!);
  // replica, write region (at the target: behind), then after 1 s and 2 s again: the third replica read shows it
  expect(reads.filter((r) => r.at > swappedAt).map((r) => [r.from, (r.at - swappedAt) / 1000])).toEqual([
    ['replica', 7],
    ['writeRegion', 7],
    ['replica', 8],
    ['writeRegion', 8],
    ['replica', 10],
  ]);
});
