import { virtualRunner } from '../support/migrationHarness';

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };

describe('in-process runner on virtual time (production timing)', () => {
  test('a lock-only migration completes, the route moves and the timeline copies the document', async () => {
    const h = virtualRunner();
    await h.router.createRoute('r-1', SOURCE);
    const { record, created } = h.runner.start({ resourceId: 'r-1', target: TARGET });
    expect(created).toBe(true);
    await h.settle();
    const status = await h.runner.status(record.migrationId);
    expect(status).toMatchObject({
      status: 'Completed',
      phase: 'swapped',
      resourceId: 'r-1',
      target: TARGET,
    });
    const doc = (await h.store.read('r-1', { from: 'writeRegion' })).doc;
    expect(doc.location).toEqual(TARGET);
    expect(doc.lock).toBeNull();
    expect(status.timeline).toEqual({
      prelockAt: doc.lastMigration!.acquiredAt,
      hardDeleteAt: doc.lastMigration!.hardDeleteAt,
      writeAt: doc.lastMigration!.writeAt,
      swappedAt: doc.lastMigration!.swappedAt,
    });
  });
});
