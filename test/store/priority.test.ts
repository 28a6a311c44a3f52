import cosmosServer from '@vercel/cosmosdb-server';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseConfig } from '../../shared/config';
import type { LockGrant } from '../../shared/core/lock/view';
import { InProcessMigrationService } from '../../shared/migration/inProcessService';
import { runProbe } from '../../shared/migration/probe';
import { Router, operationPriority } from '../../shared/core/router';
import { CosmosStore } from '../../shared/core/store/cosmos/locations';
import type { RequestPriority } from '../../shared/core/store/ports/locations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { sweepOrphans } from '../../shared/migration/sweeper';
import { ManualClock } from '../../testkit/clock';
import { ForwardingStore, type StoreCall } from '../../testkit/forwardingStore';
import { call, handlerServices } from '../support/handlers';
import { virtualRunner } from '../support/migrationHarness';

/**
 * Cosmos DB priority-based execution (docs/design.md §5.7): the resolve path's store requests go high,
 * migration traffic (the orchestrator, the sweeper, the probe) and listing go low. First each call site
 * over a recording store, then the Cosmos adapter on the wire (`x-ms-cosmos-priority-level`).
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };

/** Every store call, with the priority it asked for. */
class PriorityRecorder extends ForwardingStore {
  private calls: StoreCall[] = [];

  protected override around<T>(storeCall: StoreCall, work: () => Promise<T>): Promise<T> {
    this.calls.push(storeCall);
    return work();
  }

  /** The calls since the last take. */
  take(): StoreCall[] {
    const calls = this.calls;
    this.calls = [];
    return calls;
  }
}

/** The calls that did not ask for `expected` (none sent is a finding too: the test must see traffic). */
function offenders(calls: StoreCall[], expected: RequestPriority): StoreCall[] | 'no store calls' {
  if (calls.length === 0) return 'no store calls';
  return calls.filter((c) => c.priority !== expected);
}

const methods = (calls: StoreCall[]) => [...new Set(calls.map((c) => c.method))].sort();

test('the rule: only route resolution and the owner’s route changes are high', () => {
  expect(operationPriority).toEqual({ resolvePath: 'high', routeChange: 'high', background: 'low' });
});

describe('each call site sends the priority it should (recording store over SQLite)', () => {
  test('HTTP: GET /routes/{id} high (a miss, a started lock’s read-through), PUT/DELETE high; lock steps, GET /routes low', async () => {
    const store = new PriorityRecorder(new SqliteStore(':memory:'));
    const { services, clock } = await handlerServices({}, store);
    const id = 'r-http';

    expect((await call('putRoute', { params: { id }, body: { location: SOURCE } })).status).toBe(201);
    expect(offenders(store.take(), 'high')).toEqual([]);

    services.router.forget(id);
    expect((await call('getRoute', { params: { id } })).status).toBe(200);
    const miss = store.take();
    expect(miss).toEqual([{ method: 'read', id, priority: 'high' }]);

    const prelock = await call('prelock', {
      params: { id },
      body: { migrationId: 'm-1', owner: 'orch', target: TARGET },
    });
    expect(prelock.status).toBe(200);
    const lockCalls = store.take();
    expect(methods(lockCalls)).toEqual(['read', 'replace']);
    expect(offenders(lockCalls, 'low')).toEqual([]);

    // Past the lock's start every resolution reads the write region: still high.
    const grant = prelock.body as LockGrant;
    clock.set(Date.parse(grant.startsAt) + 60_000);
    expect((await call('getRoute', { params: { id } })).status).toBe(200);
    const readThrough = store.take();
    expect(methods(readThrough)).toEqual(['read']);
    expect(offenders(readThrough, 'high')).toEqual([]);

    expect((await call('listRoutes', { query: 'locked=true' })).status).toBe(200);
    expect(store.take()).toEqual([{ method: 'list', priority: 'low' }]);

    const released = await call('release', { params: { id }, body: { token: grant.token } });
    expect(released.status).toBe(200);
    expect(offenders(store.take(), 'low')).toEqual([]);

    expect((await call('deleteRoute', { params: { id } })).status).toBe(204);
    const deleted = store.take();
    expect(methods(deleted)).toContain('delete');
    expect(offenders(deleted, 'high')).toEqual([]);
  });

  test('the orchestrator: a whole migration, its read-path check and its start send low', async () => {
    const store = new PriorityRecorder(new SqliteStore(':memory:'));
    const h = virtualRunner({ store });
    await h.router.createRoute('r-mig', SOURCE);
    store.take();

    h.router.forget('r-mig');
    const service = new InProcessMigrationService(h.runner, h.router);
    const { migrationId } = await service.start({ resourceId: 'r-mig', target: TARGET });
    await h.settle();
    expect(await h.runner.status(migrationId)).toMatchObject({ status: 'Completed' });
    const migration = store.take();
    expect(methods(migration)).toEqual(['read', 'replace']);
    expect(offenders(migration, 'low')).toEqual([]);

    for (const from of ['readPath', 'writeRegion'] as const) {
      h.router.forget('r-mig');
      expect(await h.activities.readRoute({ resourceId: 'r-mig', from })).toMatchObject({ ok: true });
      expect(offenders(store.take(), 'low')).toEqual([]);
    }
  });

  test('the sweeper lists and reclaims low', async () => {
    const store = new PriorityRecorder(new SqliteStore(':memory:'));
    const clock = new ManualClock();
    const router = new Router({ store, timing: parseConfig({}).timing, clock: clock.now });
    await router.createRoute('r-orphan', SOURCE);
    const stale = await router.prelock('r-orphan', { migrationId: 'm-old', owner: 'o', target: TARGET });
    clock.set(Date.parse(stale.expiresAt) + 120_000);
    store.take();

    const result = await sweepOrphans({ router, clock: clock.now });
    expect(result.reclaimed).toEqual([{ resourceId: 'r-orphan', ageSeconds: 120 }]);
    const sweep = store.take();
    expect(methods(sweep)).toEqual(['list', 'read', 'replace']);
    expect(offenders(sweep, 'low')).toEqual([]);
  });

  test('the probe sends low throughout, its route creation and its read-path checks included', async () => {
    const store = new PriorityRecorder(new SqliteStore(':memory:'));
    const clock = new ManualClock();
    const sleep = async (ms: number) => void clock.advance(ms);
    const result = await runProbe({ store, region: 'westeurope', clock: clock.now, sleep });
    expect(result.success).toBe(true);
    const probe = store.take();
    expect(methods(probe)).toEqual(['create', 'read', 'replace']);
    expect(offenders(probe, 'low')).toEqual([]);
  });

  describe('negative controls: a call site with the wrong priority is caught', () => {
    test('an orchestrator whose read-path check resolves like a service (view) sends high', async () => {
      const store = new PriorityRecorder(new SqliteStore(':memory:'));
      const h = virtualRunner({ store });
      await h.router.createRoute('r-bug', SOURCE);
      h.router.forget('r-bug');
      store.take();
      h.router.backgroundView = h.router.view.bind(h.router); // the planted bug
      await h.activities.readRoute({ resourceId: 'r-bug', from: 'readPath' });
      expect(offenders(store.take(), 'low')).toEqual([{ method: 'read', id: 'r-bug', priority: 'high' }]);
    });

    test('a sweeper that lists through the store, past the router, sends no priority', async () => {
      const store = new PriorityRecorder(new SqliteStore(':memory:'));
      await store.list({ lockedOnly: true, limit: 100 }); // what the sweeper did before
      expect(offenders(store.take(), 'low')).toEqual([{ method: 'list' }]);
    });

    test('a resolve path that used the background view sends low', async () => {
      const store = new PriorityRecorder(new SqliteStore(':memory:'));
      const router = new Router({ store, timing: parseConfig({}).timing });
      await router.createRoute('r-slow', SOURCE);
      router.forget('r-slow');
      store.take();
      router.view = router.backgroundView.bind(router); // the planted bug
      await router.view('r-slow');
      expect(offenders(store.take(), 'high')).toEqual([{ method: 'read', id: 'r-slow', priority: 'low' }]);
    });

    test('no traffic at all is not a pass', () => {
      expect(offenders([], 'low')).toBe('no store calls');
    });
  });
});

describe('the Cosmos adapter puts the priority on the wire (x-ms-cosmos-priority-level)', () => {
  interface Seen {
    method: string;
    url: string;
    priority: string | undefined;
  }
  const seen: Seen[] = [];
  const server = cosmosServer();
  let store: CosmosStore;

  beforeAll(async () => {
    // Observed beside the server's own handler: every request as it arrived.
    server.on('request', (req: IncomingMessage) => {
      const priority = req.headers['x-ms-cosmos-priority-level'];
      seen.push({ method: req.method ?? '', url: req.url ?? '', priority: priority as string | undefined });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    store = await CosmosStore.connect({
      endpoint: `https://127.0.0.1:${port}`,
      key: Buffer.from('routelock-test-key').toString('base64'),
      disableTlsVerify: true,
      database: 'routelock',
      container: 'locations',
    });
  });
  afterAll(async () => {
    await store.close();
    await new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  });

  /** The document requests (`…/docs…`) since the last take: what the store's operations sent. */
  const takeDocs = (): Pick<Seen, 'method' | 'priority'>[] =>
    seen
      .splice(0)
      .filter((s) => s.url.includes('/docs'))
      .map(({ method, priority }) => ({ method, priority }));

  test('each operation sends the priority it is given, and none when given none', async () => {
    const doc = {
      id: 'c-1',
      location: SOURCE,
      lock: null,
    } as unknown as Parameters<CosmosStore['create']>[0];
    const created = await store.create(doc, { priority: 'low' });
    expect(takeDocs()).toEqual([{ method: 'POST', priority: 'Low' }]);

    await store.read('c-1', { from: 'nearest', priority: 'high' });
    await store.read('c-1', { from: 'writeRegion', priority: 'low' });
    await store.read('c-1', { from: 'writeRegion' });
    expect(takeDocs()).toEqual([
      { method: 'GET', priority: 'High' },
      { method: 'GET', priority: 'Low' },
      { method: 'GET', priority: undefined },
    ]);

    const replaced = await store.replace(doc, created.etag, { priority: 'low' });
    expect(takeDocs()).toEqual([{ method: 'PUT', priority: 'Low' }]);

    await store.list({ lockedOnly: false, limit: 10, priority: 'low' });
    const listed = takeDocs();
    expect(listed.length).toBeGreaterThan(0);
    expect(listed.every((s) => s.priority === 'Low')).toBe(true);

    await store.delete('c-1', replaced.etag, { priority: 'high' });
    expect(takeDocs()).toEqual([{ method: 'DELETE', priority: 'High' }]);
  });

  test('through the router: resolution High, a lock step Low', async () => {
    const router = new Router({ store, timing: parseConfig({}).timing });
    await router.createRoute('c-2', SOURCE);
    router.forget('c-2');
    takeDocs();
    await router.resolve('c-2');
    expect(takeDocs()).toEqual([{ method: 'GET', priority: 'High' }]);
    await router.prelock('c-2', { migrationId: 'm-c', owner: 'o', target: TARGET });
    expect(takeDocs()).toEqual([
      { method: 'GET', priority: 'Low' },
      { method: 'PUT', priority: 'Low' },
    ]);
  });
});
