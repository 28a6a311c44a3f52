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

test.each(['dev', 'production'])(
  'a delta that overruns every attempt uses all of them (%s profile): the hard-delete lock is renewed in between',
  async (profile) => {
    const h = virtualRunner({
      env: {
        ROUTELOCK_PROFILE: profile,
        ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p', url: 'https://p.test/migrate' }]),
      },
      // the bulk copy is done at once; the delta never finishes
      http: (call) =>
        call.body.step === 'bulkCopy'
          ? Promise.resolve({ status: 200, body: null })
          : new Promise(() => undefined),
    });
    await h.router.createRoute('r-over', SOURCE);
    const { record } = h.runner.start({ resourceId: 'r-over', target: TARGET });
    await h.settle();
    const status = await h.runner.status(record.migrationId);
    // before the renewal, the dev profile's 120 s hard-delete lease lapsed during attempt 2 and the
    // migration failed "escalate to write: … the hard-delete lock lapsed" with attempts left
    expect(status).toMatchObject({ status: 'Failed', deltaAttempts: h.config.migration.deltaAttempts });
    expect(status.error).toMatch(/^write budget exceeded on all 3 attempts/);
    expect((await h.store.read('r-over', { from: 'writeRegion' })).doc).toMatchObject({
      location: SOURCE,
      lock: null,
    });
  },
);

describe('a route already at the target (version 5: no re-read after the pre-lock)', () => {
  test('the pre-lock decides on the write region and refuses it: NoOp, no lock taken, no read after it', async () => {
    const h = virtualRunner();
    await h.router.createRoute('r-2', TARGET);
    const reads: string[] = [];
    const readRoute = h.activities.readRoute;
    h.activities.readRoute = async (input) => {
      reads.push(input.from);
      return readRoute(input);
    };
    const { record } = h.runner.start({ resourceId: 'r-2', target: TARGET });
    await h.settle();
    expect(await h.runner.status(record.migrationId)).toMatchObject({ status: 'NoOp' });
    expect(reads).toEqual([]);
    const doc = (await h.store.read('r-2', { from: 'writeRegion' })).doc;
    expect(doc).toMatchObject({ location: TARGET, lock: null, lastMigration: null });
  });

  test('negative control: the router holds a stale version (at the source) of a route another instance moved: the pre-lock names its ETag, gets a 412, decides again on the write region: NoOp', async () => {
    const h = virtualRunner();
    const { stored } = await h.router.createRoute('r-3', SOURCE);
    // another instance moved it meanwhile (a raw write, past this router): its copy is stale
    await h.store.replace({ ...stored.doc, location: TARGET }, stored.etag);
    expect(h.router.holdsVersion('r-3', stored.etag)).toBe(true);
    const { record } = h.runner.start({ resourceId: 'r-3', target: TARGET });
    await h.settle();
    expect(await h.runner.status(record.migrationId)).toMatchObject({ status: 'NoOp' });
    const doc = (await h.store.read('r-3', { from: 'writeRegion' })).doc;
    expect(doc).toMatchObject({ location: TARGET, lock: null });
  });
});

describe('statuses survive the runner', () => {
  test('the journal is dropped once a migration is done; its status stays', async () => {
    const h = virtualRunner();
    await h.router.createRoute('r-3', SOURCE);
    const { record } = h.runner.start({ resourceId: 'r-3', target: TARGET });
    for (let i = 0; i < 5; i += 1) await new Promise((r) => setImmediate(r)); // up to the convergence timer
    expect(h.scheduler.pendingTimers).toBe(1);
    expect(h.state.journal(record.migrationId).size).toBeGreaterThan(0);
    await h.settle();
    expect(h.state.journal(record.migrationId).size).toBe(0);
    expect(await h.state.get(record.migrationId)).toMatchObject({
      done: true,
      status: { status: 'Completed' },
    });
  });
});
