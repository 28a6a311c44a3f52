import { carriedVersion } from '../../shared/core/lock/document';
import type { Activities } from '../../shared/migration/activities';
import { InProcessMigrationService } from '../../shared/migration/inProcessService';
import { Router } from '../../shared/core/router';
import { resetCounters } from '../../shared/core/store/ports/locations';
import { copiesOnly, virtualRunner } from '../support/migrationHarness';

/**
 * The reads the workflow saves (docs/design.md §6.7), each with the concurrent change it must still catch:
 * the re-read after the pre-lock (its answer says where the route was), the read-path check's write-region
 * read-through (a replica read instead; none for a lock-only migration), the pre-lock's read (decided on the
 * version the router holds, or the listed copy the start passed on) and the start's existence read (a listed
 * copy passed on). A change in
 * between, an operator's force-release or a delete, changes the ETag the next conditional write names: a 412,
 * decided again on the write region's copy, where the lock is not this migration's.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const ONE_PARTICIPANT = {
  ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p', url: 'https://p.test/migrate' }]),
};

/** The runner with `between` run once, just before the first hard-delete escalation. */
function withChangeBeforeEscalation(
  env: Record<string, string>,
  between: (h: ReturnType<typeof virtualRunner>) => Promise<void>,
) {
  const h = virtualRunner({ env, http: copiesOnly(async () => ({ status: 200, body: null })) });
  const escalate: Activities['escalate'] = h.activities.escalate;
  let done = false;
  h.activities.escalate = async (input) => {
    if (!done && input.phase === 'hardDelete') {
      done = true;
      await between(h);
    }
    return escalate(input);
  };
  return h;
}

const forceRelease = (h: ReturnType<typeof virtualRunner>, id: string) =>
  h.router.forceRelease(id, { actor: 'operator', reason: 'stuck', requestId: 'fr-1' });

describe.each([
  ['lock-only', {}],
  ['one participant', ONE_PARTICIPANT],
])('version 5, %s: a change between the pre-lock and the escalation is caught', (_name, env) => {
  test("an operator's force-release: the escalation's If-Match gets a 412, decided again: no lock held (LockExpired); the next attempt takes a fresh lock", async () => {
    const h = withChangeBeforeEscalation(env, (x) => forceRelease(x, 'r-1').then(() => undefined));
    await h.router.createRoute('r-1', SOURCE);
    const { record } = h.runner.start({ resourceId: 'r-1', target: TARGET });
    await h.settle();
    const status = await h.runner.status(record.migrationId);
    // attempt 1 never escalated a lock that was not there
    expect(status.attempts?.[0]).toMatchObject({ outcome: 'Failed' });
    expect(status.attempts?.[0]?.reason).toMatch(
      /escalate to hardDelete: LockExpired: No live lock on r-1: no lock is held/,
    );
    expect(status).toMatchObject({ status: 'Completed', attempt: 2 });
    const doc = (await h.store.read('r-1', { from: 'writeRegion' })).doc;
    expect(doc).toMatchObject({ location: TARGET, lock: null });
  });

  test('the route deleted (after a force-release, by another instance): NotFound, Failed, not recreated', async () => {
    const h = withChangeBeforeEscalation(env, async (x) => {
      const released = await forceRelease(x, 'r-1');
      await x.store.delete('r-1', released.etag);
    });
    await h.router.createRoute('r-1', SOURCE);
    const { record } = h.runner.start({ resourceId: 'r-1', target: TARGET });
    await h.settle();
    const status = await h.runner.status(record.migrationId);
    expect(status).toMatchObject({ status: 'Failed' });
    expect(status.error).toMatch(/NotFound/);
    await expect(h.store.read('r-1', { from: 'writeRegion' })).rejects.toMatchObject({ code: 'NotFound' });
  });
});

test('version 5, one participant: a replica that shows the lock is enough for the read-path check; a lock force-released in the write region is still caught by the escalation', async () => {
  const h = withChangeBeforeEscalation(ONE_PARTICIPANT, (x) => forceRelease(x, 'r-1').then(() => undefined));
  const reads: string[] = [];
  const readRoute = h.activities.readRoute;
  h.activities.readRoute = async (input) => {
    reads.push(input.from);
    return readRoute(input);
  };
  await h.router.createRoute('r-1', SOURCE);
  const { record } = h.runner.start({ resourceId: 'r-1', target: TARGET });
  await h.settle();
  // each attempt: the read-path check on a replica, then (after its swap) the confirmation
  expect(reads.filter((r) => r !== 'replica')).toEqual(['writeRegion']); // the gate between attempts
  const status = await h.runner.status(record.migrationId);
  expect(status.attempts?.[0]?.reason).toMatch(/LockExpired: No live lock on r-1: no lock is held/);
  expect(status).toMatchObject({ status: 'Completed' });
});

describe('version 5: the pre-lock decided on a version the router holds', () => {
  test('a stale held version showing a rival lock released since: the refusal is confirmed on the write region (412), not a Conflict', async () => {
    const h = virtualRunner();
    const rival = new Router({ store: h.store, timing: h.config.timing, clock: h.clock.now });
    await rival.createRoute('r-1', SOURCE);
    const grant = await rival.prelock('r-1', { migrationId: 'rival', owner: 'rival', target: TARGET });
    // this process reads the rival's lock (its version held), then the rival releases it elsewhere
    await h.router.readAuthoritative('r-1');
    await rival.release('r-1', { token: grant.token as string });
    const { record } = h.runner.start({ resourceId: 'r-1', target: TARGET });
    await h.settle();
    expect(await h.runner.status(record.migrationId)).toMatchObject({ status: 'Completed', attempt: 1 });
  });

  test('a held version that is current: the lock-only migration reads the route once (the confirmation replica)', async () => {
    const h = virtualRunner();
    await h.router.createRoute('r-1', SOURCE);
    resetCounters(h.store.counters);
    h.runner.start({ resourceId: 'r-1', target: TARGET });
    await h.settle();
    expect(h.store.counters).toMatchObject({ nearestReads: 1, writeRegionReads: 0, replaces: 4 });
  });
});

describe("a start passing the route's listed copy (a campaign's list)", () => {
  test('the listed copy, of a route another process wrote: no existence read; a lock-only migration costs 1 read', async () => {
    const h = virtualRunner();
    const service = new InProcessMigrationService(h.runner, h.router);
    const elsewhere = new Router({ store: h.store, timing: h.config.timing, clock: h.clock.now });
    const { stored } = await elsewhere.createRoute('r-1', SOURCE);
    resetCounters(h.store.counters);
    await service.start({ resourceId: 'r-1', target: TARGET, listed: carriedVersion(stored) });
    await h.settle();
    expect(h.store.counters).toMatchObject({ nearestReads: 1, writeRegionReads: 0, replaces: 4 });
  });

  test('without it: the start reads the route (and the pre-lock decides on that copy)', async () => {
    const h = virtualRunner();
    const service = new InProcessMigrationService(h.runner, h.router);
    const elsewhere = new Router({ store: h.store, timing: h.config.timing, clock: h.clock.now });
    await elsewhere.createRoute('r-1', SOURCE);
    resetCounters(h.store.counters);
    await service.start({ resourceId: 'r-1', target: TARGET });
    await h.settle();
    // the start's read (nearest), then the confirmation's (replica)
    expect(h.store.counters).toMatchObject({ nearestReads: 2, writeRegionReads: 0, replaces: 4 });
  });

  test('negative control: a stale listed copy (the route changed since): a 412 and a re-read, Completed', async () => {
    const h = virtualRunner();
    const service = new InProcessMigrationService(h.runner, h.router);
    const { stored } = await h.router.createRoute('r-1', SOURCE);
    // another instance changed the route (a raw write past this router)
    await h.store.replace({ ...stored.doc, location: { region: 'westeurope', account: 'b' } }, stored.etag);
    resetCounters(h.store.counters);
    const { migrationId } = await service.start({
      resourceId: 'r-1',
      target: TARGET,
      listed: carriedVersion(stored),
    });
    await h.settle();
    expect(await h.runner.status(migrationId)).toMatchObject({ status: 'Completed' });
    // the pre-lock's conditional write refused (412: counted as a fifth replace), the write region's
    // read it is decided again on, and the confirmation's replica read
    expect(h.store.counters).toMatchObject({ nearestReads: 1, writeRegionReads: 1, replaces: 5 });
  });

  test('negative control: a listed copy of a route deleted since: the migration fails NotFound, nothing recreated', async () => {
    const h = virtualRunner();
    const service = new InProcessMigrationService(h.runner, h.router);
    const { stored } = await h.router.createRoute('r-1', SOURCE);
    await h.store.delete('r-1', stored.etag);
    const { migrationId } = await service.start({
      resourceId: 'r-1',
      target: TARGET,
      listed: carriedVersion(stored),
    });
    await h.settle();
    const status = await h.runner.status(migrationId);
    expect(status).toMatchObject({ status: 'Failed' });
    expect(status.error).toMatch(/NotFound/);
    await expect(h.store.read('r-1', { from: 'writeRegion' })).rejects.toMatchObject({ code: 'NotFound' });
  });
});

describe('Router: a refusal decided on a held version is confirmed on the write region', () => {
  const setup = async () => {
    const h = virtualRunner();
    const rival = new Router({ store: h.store, timing: h.config.timing, clock: h.clock.now });
    await rival.createRoute('r-1', SOURCE);
    const grant = await rival.prelock('r-1', { migrationId: 'rival', owner: 'rival', target: TARGET });
    const held = await h.router.readAuthoritative('r-1');
    return { h, rival, grant, held };
  };
  const prelock = (h: ReturnType<typeof virtualRunner>, ifMatch: string) =>
    h.router.prelock('r-1', { migrationId: 'mine', owner: 'mine', target: TARGET }, { ifMatch });

  test('the document unchanged: the refusal stands (Locked), after one write-region read', async () => {
    const { h, held } = await setup();
    resetCounters(h.store.counters);
    await expect(prelock(h, held.etag)).rejects.toMatchObject({ code: 'Locked' });
    expect(h.store.counters).toMatchObject({ writeRegionReads: 1, replaces: 0 });
  });

  test('the document changed since (the rival released): 412, the caller decides again', async () => {
    const { h, rival, grant, held } = await setup();
    await rival.release('r-1', { token: grant.token as string });
    await expect(prelock(h, held.etag)).rejects.toMatchObject({ code: 'PreconditionFailed' });
  });
});

describe("Router: a caller's known version (a campaign's listed copy, passed to the pre-lock)", () => {
  const setup = async () => {
    const h = virtualRunner();
    const rival = new Router({ store: h.store, timing: h.config.timing, clock: h.clock.now });
    const { stored } = await rival.createRoute('r-1', SOURCE);
    const listed = carriedVersion(stored);
    // after the list, a rival pre-locks the route: the listed copy is stale
    await rival.prelock('r-1', { migrationId: 'rival', owner: 'rival', target: TARGET });
    // a router that holds no version of the route: only the caller's copy could save its read
    const mine = new Router({ store: h.store, timing: h.config.timing, clock: h.clock.now });
    resetCounters(h.store.counters);
    return { h, listed, mine };
  };
  const mineReq = { migrationId: 'mine', owner: 'mine', target: TARGET };
  const lockOf = async (h: ReturnType<typeof virtualRunner>) =>
    (await h.store.read('r-1', { from: 'writeRegion' })).doc.lock;

  test('a stale known version: decided on without a read, its conditional write refused (412); the rival lock stands', async () => {
    const { h, listed, mine } = await setup();
    await expect(mine.prelock('r-1', mineReq, { ifMatch: listed.etag, known: listed })).rejects.toMatchObject(
      { code: 'PreconditionFailed' },
    );
    expect(h.store.counters).toMatchObject({ writeRegionReads: 0, replaces: 1 });
    expect(await lockOf(h)).toMatchObject({ migrationId: 'rival' });
  });

  test('a start carrying a stale listed copy: the 412, then the write region re-read, where the rival lock is: Conflict, no wrong write', async () => {
    const { h, listed } = await setup();
    const service = new InProcessMigrationService(h.runner, h.router);
    const { migrationId } = await service.start({ resourceId: 'r-1', target: TARGET, listed });
    await h.settle();
    expect(await h.runner.status(migrationId)).toMatchObject({ status: 'Conflict' });
    // the pre-lock's refused conditional write, then the write region's copy it decided again on
    expect(h.store.counters).toMatchObject({ writeRegionReads: 1, replaces: 1 });
    expect(await lockOf(h)).toMatchObject({ migrationId: 'rival' });
  });

  test('a known version whose ETag is not the If-Match is ignored: the write region is read and decides', async () => {
    const { h, mine } = await setup();
    const current = await h.store.read('r-1', { from: 'writeRegion' });
    resetCounters(h.store.counters);
    // a copy that would allow the pre-lock (no lock), under another ETag than the one named
    const other = { doc: { ...current.doc, lock: null, secondary: null }, etag: 'another-version' };
    await expect(mine.prelock('r-1', mineReq, { ifMatch: current.etag, known: other })).rejects.toMatchObject(
      { code: 'Locked' },
    );
    expect(h.store.counters).toMatchObject({ writeRegionReads: 1, replaces: 0 });
    expect(await lockOf(h)).toMatchObject({ migrationId: 'rival' });
  });

  test('a known version of another route is ignored, whatever its ETag', async () => {
    const { h, mine } = await setup();
    const current = await h.store.read('r-1', { from: 'writeRegion' });
    resetCounters(h.store.counters);
    const other = { doc: { ...current.doc, id: 'r-2', lock: null, secondary: null }, etag: current.etag };
    await expect(mine.prelock('r-1', mineReq, { ifMatch: current.etag, known: other })).rejects.toMatchObject(
      { code: 'Locked' },
    );
    expect(h.store.counters).toMatchObject({ writeRegionReads: 1, replaces: 0 });
  });
});
