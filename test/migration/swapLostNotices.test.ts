import { SOURCE, TARGET, failoverMigration } from '../support/failoverMigration';

/**
 * A swap a failover dropped (SwapLost) was live for a while: clients routed to
 * the target wrote there, writes the source does not hold. A `failed` notice then tells participants
 * the target's copy may be dropped: those writes with it. No such notice after a lost swap.
 */

test('a swap lost to a failover, no attempt left: Failed, and no notice telling participants to drop the target', async () => {
  const { store, posts, h } = failoverMigration({
    failoverAfterMs: 1000,
    env: {
      ROUTELOCK_REPLICATION_BOUND_SECONDS: '10',
      ROUTELOCK_SAFETY_BUFFER_SECONDS: '2',
      // the write lease ends before the confirmation read: no swap again, SwapLost
      ROUTELOCK_WRITE_LEASE_SECONDS: '10',
      ROUTELOCK_WRITE_BUDGET_SECONDS: '10',
      ROUTELOCK_MIGRATION_ATTEMPTS: '1',
    },
  });
  await h.router.createRoute('r-1', SOURCE);
  const { record } = h.runner.start({ resourceId: 'r-1', target: TARGET });
  await h.settle();
  const status = await h.runner.status(record.migrationId);
  expect(store.dropped).toHaveLength(1);
  expect(status.status).toBe('Failed');
  expect(status.error).toMatch(/the swap is gone/);
  expect(posts.map((p) => p.step)).not.toContain('failed');
});
