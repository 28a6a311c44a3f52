import { createRouter } from '../../shared/library';
import { isRouteLockError } from '../../shared/core/errors';
import { Router } from '../../shared/core/router';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { productionTiming } from '../support/timing';

/**
 * Library mode is read-only by default (docs/design.md §5.4): every mutation of a router from `createRouter`
 * is refused with ReadOnlyRouter before any store call; `allowMutations: true` (and routelock's own
 * routers, which never set `readOnly`) write as before.
 */

const here = { region: 'westeurope' };
const there = { region: 'northeurope' };
const token = 'a'.repeat(43);

/** Every mutation entry point of Router, with arguments the rules would accept or refuse on their own. */
const mutations: Record<string, (router: Router, id: string) => Promise<unknown>> = {
  createRoute: (r, id) => r.createRoute(id, here),
  deleteRoute: (r, id) => r.deleteRoute(id),
  prelock: (r, id) => r.prelock(id, { migrationId: 'm1', owner: 'test', target: there }),
  escalate: (r, id) => r.escalate(id, { token, phase: 'write' }),
  announce: (r, id) => r.announce(id, { token, phase: 'write' }),
  renew: (r, id) => r.renew(id, { token }),
  swap: (r, id) => r.swap(id, { token }),
  swapWithTime: (r, id) => r.swapWithTime(id, { token }),
  release: (r, id) => r.release(id, { token }),
  forceRelease: (r, id) => r.forceRelease(id, { actor: 'op', reason: 'test', requestId: 'r1' }),
  reclaim: (r, id) => r.reclaim(id),
};

async function seeded(): Promise<LocationStore> {
  const store = new SqliteStore(':memory:');
  await new Router({ store, timing: productionTiming }).createRoute('r1', here);
  Object.assign(store.counters, {
    nearestReads: 0,
    writeRegionReads: 0,
    creates: 0,
    replaces: 0,
    deletes: 0,
  });
  return store;
}

const untouched = { nearestReads: 0, writeRegionReads: 0, creates: 0, replaces: 0, deletes: 0, lists: 0 };

test.each(Object.keys(mutations))(
  'createRouter refuses %s with ReadOnlyRouter before any store call',
  async (name) => {
    const store = await seeded();
    const router = createRouter({ store, timing: productionTiming });
    const error = await mutations[name]!(router, 'r1').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isRouteLockError(error, 'ReadOnlyRouter')).toBe(true);
    expect((error as Error).message).not.toContain(token);
    expect(store.counters).toEqual(untouched);
    // reads still work, and see the route unchanged
    expect((await router.view('r1')).view.location).toEqual(here);
  },
);

test('allowMutations: true writes (the negative control: the same calls do reach the store)', async () => {
  const store = await seeded();
  const router = createRouter({ store, timing: productionTiming, allowMutations: true });
  expect((await router.createRoute('r2', here)).created).toBe(true);
  const grant = await router.prelock('r2', { migrationId: 'm1', owner: 'test', target: there });
  expect(grant.phase).toBe('prelock');
  expect(store.counters.creates + store.counters.replaces).toBe(2);
  await router.release('r2', { token: grant.token! });
  await router.deleteRoute('r2');
  expect(store.counters.deletes).toBe(1);
});

test("routelock's own routers (no readOnly option) keep writing", async () => {
  const store = await seeded();
  const router = new Router({ store, timing: productionTiming });
  await router.deleteRoute('r1');
  expect(store.counters.deletes).toBe(1);
});
