import { ManualClock } from '../../testkit/clock';
import { parseConfig } from '../../shared/config';
import { RouteLockError } from '../../shared/core/errors';
import {
  APPROVAL_WINDOW_MS,
  ForceReleaseService,
  approveRequest,
  openRequest,
} from '../../shared/core/forceRelease';
import { forceRelease } from '../../shared/core/lock/rules';
import { Router } from '../../shared/core/router';
import { CosmosAuditLedger } from '../../shared/core/store/cosmos/audit';
import { CosmosForceReleaseRequests } from '../../shared/core/store/cosmos/forceRelease';
import type { AuditLedger } from '../../shared/core/store/ports/audit';
import type { ForceReleaseRequests } from '../../shared/core/store/ports/forceRelease';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { SqliteAuditLedger } from '../../shared/core/store/sqlite/audit';
import { SqliteForceReleaseRequests } from '../../shared/core/store/sqlite/forceRelease';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { sweepOrphans } from '../../shared/migration/sweeper';
import { handleDocumentVersions } from '../../shared/migration/telemetry/changeHandler';
import { MetricsRecorder } from '../../shared/migration/telemetry/sink';
import { type CosmosTestServer, startCosmosServer } from '../../testkit/cosmosServer';

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

function codeOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    return (error as RouteLockError).code;
  }
  return 'ok';
}

describe('force-release rules', () => {
  const T = Date.UTC(2026, 5, 1);
  const request = openRequest({
    id: 'fr-1',
    resourceId: 'r',
    migrationId: 'm',
    actor: 'alice',
    reason: 'stuck',
    now: T,
  });

  test('two distinct approvers, neither the requester, within one hour', () => {
    const one = approveRequest(request, 'bob', T + 1000);
    expect(one.ready).toBe(false);
    const two = approveRequest(one.request, 'carol', T + 2000);
    expect(two.ready).toBe(true);
    expect(two.request.approvals.map((a) => a.actor)).toEqual(['bob', 'carol']);
  });

  test.each([
    ['the requester approving', (r: typeof request) => approveRequest(r, 'alice', T + 1), 'Forbidden'],
    [
      'a duplicate approver',
      (r: typeof request) => approveRequest(approveRequest(r, 'bob', T + 1).request, 'bob', T + 2),
      'DuplicateApproval',
    ],
    [
      'an approval after the hour',
      (r: typeof request) => approveRequest(r, 'bob', T + APPROVAL_WINDOW_MS + 1),
      'RequestExpired',
    ],
    [
      'an approval after the release',
      (r: typeof request) => approveRequest({ ...r, status: 'released' }, 'bob', T + 1),
      'InvalidTransition',
    ],
  ])('refused: %s', (_name, run, code) => {
    expect(codeOf(() => run(request))).toBe(code);
  });
});

let cosmos: CosmosTestServer;
beforeAll(async () => {
  cosmos = await startCosmosServer();
});
afterAll(async () => {
  await cosmos.close();
});

interface Opened {
  store: LocationStore;
  audit: AuditLedger;
  requests: ForceReleaseRequests;
}

describe.each([
  [
    'sqlite',
    async (): Promise<Opened> => ({
      store: new SqliteStore(':memory:'),
      audit: new SqliteAuditLedger(':memory:'),
      requests: new SqliteForceReleaseRequests(':memory:'),
    }),
  ],
  [
    'cosmos',
    async (): Promise<Opened> => {
      const store = await cosmos.connect();
      // the audit container, as Bicep would create it
      const container = store.containerNamed('locations' + Math.random().toString(36).slice(2));
      await container.database.containers.createIfNotExists({
        id: container.id,
        partitionKey: { paths: ['/id'] },
      });
      return {
        store,
        audit: new CosmosAuditLedger(container),
        requests: new CosmosForceReleaseRequests(container),
      };
    },
  ],
])('force-release, sweeper and audit on %s', (_name, open) => {
  async function setup() {
    const { store, audit, requests } = await open();
    const clock = new ManualClock();
    const timing = parseConfig({}).timing;
    const router = new Router({ store, timing, clock: clock.now });
    const service = new ForceReleaseService(router, audit, requests, clock.now);
    await router.createRoute('stuck-1', SOURCE);
    return { store, audit, clock, router, service, timing };
  }

  test('a stuck lock is released after two approvals; location unchanged; every step audited', async () => {
    const h = await setup();
    await h.router.prelock('stuck-1', { migrationId: 'm-stuck', owner: 'o', target: TARGET });
    const request = await h.service.open('stuck-1', 'alice', 'orchestrator gone since Tuesday');
    expect(request).toMatchObject({ status: 'pending', requestedBy: 'alice', migrationId: 'm-stuck' });
    h.clock.advance(60_000);
    const first = await h.service.approve(request.id, 'bob');
    expect(first.released).toBe(false);
    expect((await h.store.read('stuck-1', { from: 'writeRegion' })).doc.lock).not.toBeNull();
    h.clock.advance(60_000);
    const second = await h.service.approve(request.id, 'carol');
    expect(second).toMatchObject({
      released: true,
      request: { status: 'released' },
      route: { location: SOURCE, lock: null },
    });
    const doc = (await h.store.read('stuck-1', { from: 'writeRegion' })).doc;
    expect(doc).toMatchObject({
      location: SOURCE,
      lock: null,
      lastChange: { op: 'forceRelease', reason: 'orchestrator gone since Tuesday', requestId: request.id },
    });
    // the change feed writes the release itself to the ledger
    await handleDocumentVersions([doc], {
      sink: new MetricsRecorder(),
      audit: h.audit,
      declaredConvergenceDelaySeconds: 0,
    });
    const records = await h.audit.list('stuck-1', 20);
    expect(records.map((r) => `${r.op}:${r.actor}`)).toEqual([
      'forceReleaseRequested:alice',
      'forceReleaseApproved:bob',
      'forceReleaseApproved:carol',
      'forceRelease:alice,bob,carol',
    ]);
    await expect(h.service.approve(request.id, 'dave')).rejects.toMatchObject({ code: 'InvalidTransition' });
  });

  test('an unlocked resource cannot be force-released; a request outlives neither its hour nor its lock', async () => {
    const h = await setup();
    await expect(h.service.open('stuck-1', 'alice', 'why not')).rejects.toMatchObject({ code: 'NotLocked' });
    const grant = await h.router.prelock('stuck-1', { migrationId: 'm-a', owner: 'o', target: TARGET });
    const request = await h.service.open('stuck-1', 'alice', 'stuck');
    await h.service.approve(request.id, 'bob');
    h.clock.advance(APPROVAL_WINDOW_MS + 1);
    await expect(h.service.approve(request.id, 'carol')).rejects.toMatchObject({ code: 'RequestExpired' });
    // A second request: the lock it names is released normally, a new migration locks the resource,
    // and the approvals can no longer touch the new lock.
    const again = await h.service.open('stuck-1', 'alice', 'stuck again');
    await h.router.release('stuck-1', { token: grant.token! });
    await h.router.prelock('stuck-1', { migrationId: 'm-b', owner: 'o2', target: TARGET });
    await h.service.approve(again.id, 'bob');
    await expect(h.service.approve(again.id, 'carol')).rejects.toMatchObject({ code: 'NotLocked' });
    expect((await h.store.read('stuck-1', { from: 'writeRegion' })).doc.lock?.migrationId).toBe('m-b');
  });

  test('a request is bound to its lock instance: a later lock under the same migration id is not released, and the request ends obsolete', async () => {
    const h = await setup();
    const body = { migrationId: 'm-1', owner: 'o', target: TARGET };
    const first = await h.router.prelock('stuck-1', body);
    const request = await h.service.open('stuck-1', 'alice', 'stuck');
    await h.service.approve(request.id, 'bob');
    await h.router.release('stuck-1', { token: first.token! }); // its holder let go after all
    await expect(h.service.approve(request.id, 'carol')).rejects.toMatchObject({ code: 'NotLocked' });
    expect((await h.service.get(request.id)).status).toBe('obsolete');
    // the same migration id locks the resource again; one more approver must not release it
    await h.router.prelock('stuck-1', body);
    await expect(h.service.approve(request.id, 'dave')).rejects.toMatchObject({ code: 'InvalidTransition' });
    expect((await h.store.read('stuck-1', { from: 'writeRegion' })).doc.lock?.migrationId).toBe('m-1');

    // taken again before the second approval: the approvals were not for this lock
    const again = await h.service.open('stuck-1', 'alice', 'stuck again');
    const current = (await h.store.read('stuck-1', { from: 'writeRegion' })).doc;
    await h.service.approve(again.id, 'bob');
    await h.store.replace(
      { ...current, lock: null },
      (await h.store.read('stuck-1', { from: 'writeRegion' })).etag,
    );
    await h.router.prelock('stuck-1', body);
    await expect(h.service.approve(again.id, 'carol')).rejects.toMatchObject({ code: 'NotLocked' });
    const still = (await h.store.read('stuck-1', { from: 'writeRegion' })).doc;
    expect(still.lock?.migrationId).toBe('m-1');
    // the control: the rule bound to the migration id alone (as before) would have released this lock
    expect(
      codeOf(() =>
        forceRelease(
          still,
          { actor: 'x', reason: 'r', requestId: again.id, migrationId: 'm-1' },
          h.clock.now(),
        ),
      ),
    ).toBe('ok');
  });

  test('the sweeper reclaims only expired locks, with their age, and the ledger records it', async () => {
    const h = await setup();
    await h.router.createRoute('live-1', SOURCE);
    const stale = await h.router.prelock('stuck-1', { migrationId: 'm-old', owner: 'o', target: TARGET });
    h.clock.set(Date.parse(stale.expiresAt) + 120_000);
    await h.router.prelock('live-1', { migrationId: 'm-live', owner: 'o', target: TARGET });
    const recorder = new MetricsRecorder();
    const result = await sweepOrphans({ router: h.router, clock: h.clock.now });
    expect(result).toEqual({ scanned: 2, reclaimed: [{ resourceId: 'stuck-1', ageSeconds: 120 }] });
    const reclaimed = (await h.store.read('stuck-1', { from: 'writeRegion' })).doc;
    await handleDocumentVersions([reclaimed], {
      sink: recorder,
      audit: h.audit,
      declaredConvergenceDelaySeconds: 0,
    });
    expect(recorder.snapshot().events).toMatchObject({ OrphanedLockReclaimed: 1, LockReleased: 1 });
    expect((await h.audit.list('stuck-1', 10)).map((r) => r.op)).toEqual(['reclaim']);
    expect((await h.store.read('live-1', { from: 'writeRegion' })).doc.lock?.migrationId).toBe('m-live');
    expect(await sweepOrphans({ router: h.router, clock: h.clock.now })).toEqual({
      scanned: 1,
      reclaimed: [],
    });
  });
});
