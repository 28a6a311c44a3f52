import { SOURCE, TARGET, failoverMigration } from '../support/failoverMigration';

/**
 * A swap whose answer was lost (SwapUnknown) is judged by the gate between attempts
 * on a write-region read alone. The workflow promises the `completed` notice (a participant deletes the
 * source on it) only once the replication bound has passed and a replica shows the swap.
 */

async function lostAnswer(afterMs: number, env: Record<string, string> = {}) {
  const { clock, store, posts, h } = failoverMigration({
    failoverAfterMs: afterMs,
    env: { ROUTELOCK_REPLICATION_BOUND_SECONDS: '30', ...env },
  });
  const swap = h.activities.swap;
  let committedAt: number | undefined;
  h.activities.swap = async (input) => {
    if (committedAt === undefined) {
      const result = await swap(input);
      if (result.ok) committedAt = clock.now();
      else return result;
    }
    throw new Error('store unavailable: the answer was lost');
  };
  await h.router.createRoute('r-1', SOURCE);
  clock.advance(60_000);
  const { record } = h.runner.start({ resourceId: 'r-1', target: TARGET });
  await h.settle();
  const status = await h.runner.status(record.migrationId);
  clock.advance(60_000);
  const doc = (await store.read('r-1', { from: 'writeRegion' })).doc;
  return { status, doc, posts, committedAt: committedAt!, store };
}

test('a swap whose answer was lost and that stays: Completed, its completed notice once a replica shows it after the bound', async () => {
  // no failover within the test
  const r = await lostAnswer(3_600_000);
  expect(r.status).toMatchObject({ status: 'Completed', attempt: 1 });
  expect(r.doc.location).toEqual(TARGET);
  const completed = r.posts.filter((p) => p.step === 'completed');
  expect(completed).toHaveLength(1);
  expect(completed[0]!.at).toBeGreaterThanOrEqual(r.committedAt + 32_000);
  expect(r.posts.map((p) => p.step)).not.toContain('failed');
});

test('a swap whose answer was lost and that a failover then drops: no completed notice, the route not left at the source', async () => {
  // the failover drops the swap 28 s after it committed: inside a 30 s replication bound
  const { status, doc, posts, committedAt, store } = await lostAnswer(28_000);
  expect(committedAt).toBeDefined();
  expect(store.dropped).toHaveLength(1);
  const completed = posts.filter((p) => p.step === 'completed');
  // a completed notice only for a swap that is there, after its replication bound and buffer
  for (const notice of completed) expect(notice.at).toBeGreaterThanOrEqual(committedAt + 32_000);
  if (status.status === 'Completed') expect(doc.location).toEqual(TARGET);
  if (completed.length > 0) expect(doc.location).toEqual(TARGET);
  // the swap was live a while (writes at the target the source lacks): no notice to drop the target
  expect(posts.map((p) => p.step)).not.toContain('failed');
});

test('the last attempt: a swap whose answer was lost is never Failed with a failed notice while it landed', async () => {
  // one attempt only: no gate between attempts runs
  const r = await lostAnswer(3_600_000, { ROUTELOCK_MIGRATION_ATTEMPTS: '1' });
  expect(r.doc.location).toEqual(TARGET);
  // a failed notice would have the participant drop the target the route now points to
  expect(r.posts.map((p) => p.step)).not.toContain('failed');
  expect(r.status).toMatchObject({ status: 'Completed', attempt: 1 });
  const completed = r.posts.filter((p) => p.step === 'completed');
  expect(completed).toHaveLength(1);
  expect(completed[0]!.at).toBeGreaterThanOrEqual(r.committedAt + 32_000);
});
