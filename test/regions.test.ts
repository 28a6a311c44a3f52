import { InvocationContext } from '@azure/functions';
import type { DurableClient } from 'durable-functions';
import { DurableMigrationService } from '../functions/durable/service';
import { handleMigrationMessage } from '../functions/migrationQueue';
import { type LocalHost } from '../local/host';
import { startLocalHost } from './support/localHost';
import { ManualClock } from '../testkit/clock';
import { seamedRouter } from '../testkit/router';
import { parseConfig } from '../shared/config';
import { swap as swapRule } from '../shared/core/lock/rules';
import { SqliteMigrationState } from '../shared/migration/store/sqlite/migrations';
import { migrationSettings } from '../shared/migration/workflow';
import { Router } from '../shared/core/router';
import { TokenKeyring } from '../shared/core/security/tokenKeys';
import { SqliteStore } from '../shared/core/store/sqlite/locations';

/**
 * ROUTELOCK_REGIONS: a route is placed in, locked towards and moved to declared regions only. The check
 * is in the library, so HTTP, the queue trigger, the workflow's activities and library callers all obey
 * it; a refused request changes nothing.
 */

const ALLOWED = ['westeurope', 'eastus'];
const SOURCE = { region: 'westeurope' };
const UNDECLARED = { region: 'eastus2' };
const refusal = (region: string) => ({
  code: 'RegionNotAllowed',
  message: expect.stringContaining(
    `"${region}" is not one of the declared regions (ROUTELOCK_REGIONS: westeurope, eastus)`,
  ),
});

describe('the router', () => {
  const timing = parseConfig({ ROUTELOCK_PROFILE: 'dev' }).timing;
  function routers() {
    const store = new SqliteStore(':memory:');
    const clock = new ManualClock(Date.UTC(2026, 5, 1));
    const restricted = new Router({ store, timing, clock: clock.now, allowedRegions: ALLOWED });
    const anywhere = new Router({ store, timing, clock: clock.now });
    return { store, clock, restricted, anywhere };
  }

  test('creating a route or pre-locking towards an undeclared region is refused and writes nothing', async () => {
    const h = routers();
    await expect(h.restricted.createRoute('r-1', { region: 'northeurope' })).rejects.toMatchObject(
      refusal('northeurope'),
    );
    await expect(h.store.read('r-1', { from: 'writeRegion' })).rejects.toMatchObject({ code: 'NotFound' });
    const created = (await h.restricted.createRoute('r-1', SOURCE)).stored;
    await expect(
      h.restricted.prelock('r-1', { migrationId: 'm', owner: 'o', target: UNDECLARED }),
    ).rejects.toMatchObject(refusal('eastus2'));
    const after = await h.store.read('r-1', { from: 'writeRegion' });
    expect(after.etag).toBe(created.etag);
    expect(after.doc.lock).toBeNull();
    // negative control: the same pre-lock through an unrestricted router is granted
    await expect(
      h.anywhere.prelock('r-1', { migrationId: 'm', owner: 'o', target: UNDECLARED }),
    ).resolves.toMatchObject({ migrationId: 'm' });
  });

  test('a swap that would move the route to an undeclared region is refused, by swap() and by any planted rule', async () => {
    const h = routers();
    await h.anywhere.createRoute('r-2', SOURCE);
    const grant = await h.anywhere.prelock('r-2', { migrationId: 'm', owner: 'o', target: UNDECLARED });
    h.clock.advance((timing.convergenceDelaySeconds + timing.safetyBufferSeconds + 1) * 1000);
    await h.anywhere.escalate('r-2', { token: grant.token!, phase: 'hardDelete' });
    await h.anywhere.escalate('r-2', { token: grant.token!, phase: 'write' });
    const before = await h.store.read('r-2', { from: 'writeRegion' });

    await expect(h.restricted.swap('r-2', { token: grant.token! })).rejects.toMatchObject(refusal('eastus2'));
    // the workflow's activities swap through swapWithTime()
    await expect(h.restricted.swapWithTime('r-2', { token: grant.token! })).rejects.toMatchObject(
      refusal('eastus2'),
    );
    // a rule planted through the `rules` seam that moves the route (here a release that swaps) is held too
    const planted = seamedRouter({
      store: h.store,
      timing,
      clock: h.clock.now,
      allowedRegions: ALLOWED,
      rules: { release: (doc, req, now) => swapRule(doc, { token: req.token }, now, timing) },
    });
    await expect(planted.release('r-2', { token: grant.token! })).rejects.toMatchObject(refusal('eastus2'));
    const after = await h.store.read('r-2', { from: 'writeRegion' });
    expect(after.etag).toBe(before.etag);
    expect(after.doc).toMatchObject({ location: SOURCE, lock: { phase: 'write' } });
    // a wrong token is still told so first (the region is decided after the token check)
    await expect(h.restricted.swap('r-2', { token: 'not-the-token' })).rejects.not.toMatchObject({
      code: 'RegionNotAllowed',
    });
    // negative control: unrestricted, the swap goes through
    await expect(h.anywhere.swap('r-2', { token: grant.token! })).resolves.toMatchObject({
      location: UNDECLARED,
    });
  });
});

describe('migration starts', () => {
  test('Durable: refused before the orchestration client is touched', async () => {
    const config = parseConfig({ ROUTELOCK_REGIONS: ALLOWED.join(',') });
    const store = new SqliteStore(':memory:');
    const router = new Router({ store, timing: config.timing, allowedRegions: config.regions.allowed });
    await router.createRoute('r-3', SOURCE);
    const records = new SqliteMigrationState(':memory:');
    const untouchable = new Proxy(
      {},
      {
        get: (_t, name) => () => {
          throw new Error(`the Durable client was called (${String(name)})`);
        },
      },
    ) as DurableClient;
    const service = new DurableMigrationService(
      untouchable,
      records,
      router,
      migrationSettings(config),
      () => Date.now(),
      TokenKeyring.ephemeral(),
    );
    await expect(
      service.start({ resourceId: 'r-3', target: UNDECLARED, migrationId: 'm-3' }),
    ).rejects.toMatchObject(refusal('eastus2'));
    expect(await records.get('m-3')).toBeNull();
  });

  describe('on the embedded host (HTTP and the queue)', () => {
    let host: LocalHost;
    let api: string;
    beforeAll(async () => {
      host = await startLocalHost({
        env: { PORT: '0', ROUTELOCK_REGIONS: ALLOWED.join(',') },
        store: new SqliteStore(':memory:'),
        log: () => undefined,
      });
      api = `${host.url}/api`;
    });
    afterAll(async () => {
      await host.close();
    });
    const send = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${api}${path}`, {
        method,
        headers: { 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      return { status: res.status, body: (text ? JSON.parse(text) : null) as Record<string, unknown> };
    };
    const problem = (region: string) => ({
      status: 400,
      body: {
        code: 'RegionNotAllowed',
        detail: expect.stringContaining(`"${region}" is not one of the declared regions`),
      },
    });

    test('PUT, pre-lock and POST /migrations to an undeclared region: 400 RegionNotAllowed, nothing changes', async () => {
      expect(await send('PUT', '/routes/conv-n', { location: { region: 'northeurope' } })).toMatchObject(
        problem('northeurope'),
      );
      expect((await send('GET', '/routes/conv-n')).status).toBe(404);
      expect((await send('PUT', '/routes/conv-r', { location: SOURCE })).status).toBe(201);
      expect(
        await send('POST', '/routes/conv-r/prelock', { migrationId: 'm-r', owner: 'o', target: UNDECLARED }),
      ).toMatchObject(problem('eastus2'));
      expect(await send('POST', '/migrations', { resourceId: 'conv-r', target: UNDECLARED })).toMatchObject(
        problem('eastus2'),
      );
      expect((await send('GET', '/routes/conv-r')).body).toMatchObject({ location: SOURCE, lock: null });
      expect(host.state.recent(10)).toEqual([]);
    });

    test('a queue message to an undeclared region goes to poison with the reason; a declared one starts', async () => {
      expect((await send('PUT', '/routes/conv-q', { location: SOURCE })).status).toBe(201);
      const migrations = host.services.migrations(new InvocationContext());
      expect(await handleMigrationMessage({ resourceId: 'conv-q', target: UNDECLARED }, migrations)).toEqual({
        kind: 'poison',
        reason: expect.stringContaining('"eastus2" is not one of the declared regions'),
      });
      expect(host.state.recent(10)).toEqual([]);
      // negative control: a declared target is started
      expect(
        await handleMigrationMessage({ resourceId: 'conv-q', target: { region: 'eastus' } }, migrations),
      ).toMatchObject({ kind: 'started' });
    });
  });
});
