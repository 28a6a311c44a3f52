import { ManualClock } from '../testkit/clock';
import { Router } from '../shared/core/router';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import { productionTiming as timing, seconds } from './support/timing';
import { codeOf } from './support/errorCode';

/**
 * The router's announce mutation (shared/core/router.ts `announce`): one ETag-conditional write of the
 * `announce` rule, answered with the lock grant, as escalate is. The rule's boundaries are
 * test/lock/announced.table.test.ts's.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const S = seconds(timing.clockSkewSeconds);
const L = seconds(timing.announceLeadSeconds);

function setup() {
  const clock = new ManualClock();
  const store = new SqliteStore(':memory:');
  const router = new Router({ store, timing, clock: clock.now, newToken: () => 'token-1' });
  return { clock, store, router };
}

test('an announced migration through the router: pre-lock, announce, activation, swap', async () => {
  const { clock, store, router } = setup();
  await router.createRoute('r', SOURCE);
  const grant = await router.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET, announced: true });
  expect(grant).toMatchObject({
    phase: 'hardDelete',
    announceLeadSeconds: timing.announceLeadSeconds,
    hardDeleteAt: grant.startsAt,
  });
  expect(Date.parse(grant.startsAt) - Date.parse(grant.acquiredAt)).toBe(L);
  expect((await store.read('r', { from: 'writeRegion' })).doc.schemaVersion).toBe(2);

  clock.set(Date.parse(grant.startsAt) + S);
  expect(await router.escalate('r', { token: 'token-1', phase: 'hardDelete' })).toMatchObject({
    phase: 'hardDelete',
  });
  const announced = await router.announce('r', { token: 'token-1', phase: 'write' });
  expect(announced.writeWindowAt).toBe(new Date(clock.now() + L).toISOString());
  expect(announced.writeWindowUntil).toBeDefined();
  expect((await store.read('r', { from: 'writeRegion' })).doc.lastChange?.op).toBe('announce');
  expect(await codeOf(router.escalate('r', { token: 'token-1', phase: 'write' }))).toBe('ConvergencePending');

  clock.set(Date.parse(announced.writeWindowAt!) + S);
  const write = await router.escalate('r', { token: 'token-1', phase: 'write' });
  expect(write).toMatchObject({ phase: 'write', writeAt: new Date(clock.now()).toISOString() });
  const view = await router.swap('r', { token: 'token-1', writeAt: write.writeAt });
  expect(view.location).toEqual(TARGET);
  expect((await store.read('r', { from: 'writeRegion' })).doc).toMatchObject({
    schemaVersion: 2,
    lastMigration: { announceLeadSeconds: timing.announceLeadSeconds },
  });
});

test('announce on a legacy lock is a 409, and nothing is written', async () => {
  const { store, router } = setup();
  await router.createRoute('r', SOURCE);
  await router.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
  const before = await store.read('r', { from: 'writeRegion' });
  expect(await codeOf(router.announce('r', { token: 'token-1', phase: 'write' }))).toBe('InvalidTransition');
  const after = await store.read('r', { from: 'writeRegion' });
  expect(after.etag).toBe(before.etag);
  expect(after.doc.schemaVersion).toBe(1);
});
