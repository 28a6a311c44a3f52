import { sha256Hex } from '../../shared/core/lock/token';
import type { Services } from '../../functions/services';
import { call, handlerServices } from '../support/handlers';

/**
 * POST /routes/{id}/prelock passes the caller's object id to the pre-lock when callers are
 * authenticated: an Idempotency-Key replay is honoured for the principal that took the lock only.
 */

const A = { oid: 'a1111111-0000-4000-8000-000000000001', roles: ['Locks.Write'] };
const B = { oid: 'b2222222-0000-4000-8000-000000000002', roles: ['Locks.Write'] };
const body = { migrationId: 'm-1', owner: 'orchestrator', target: { region: 'eastus' } };

async function setup(env: Record<string, string> = {}): Promise<Services> {
  const { services } = await handlerServices(env);
  await services.router.createRoute('conv-p', { region: 'westeurope' });
  return services;
}

const prelock = (
  principal: typeof A | null,
  headers: Record<string, string> = { 'idempotency-key': 'k-1' },
) => call('prelock', { params: { id: 'conv-p' }, body, principal, headers });

test('appservice: the lock records the principal; its replay is honoured, another principal with the key gets 423', async () => {
  const services = await setup();
  expect((await prelock(A)).status).toBe(200);
  const lock = (await services.store.read('conv-p', { from: 'writeRegion' })).doc.lock;
  expect(lock?.principalHash).toBe(sha256Hex(A.oid));
  expect((await prelock(A)).status).toBe(200);
  expect(await prelock(B)).toMatchObject({ status: 423, body: { code: 'Locked' } });
});

test('none: no principal is recorded (every caller is the same local identity)', async () => {
  const services = await setup({ ROUTELOCK_AUTH: 'none' });
  expect((await prelock(null)).status).toBe(200);
  const lock = (await services.store.read('conv-p', { from: 'writeRegion' })).doc.lock;
  expect(lock).not.toBeNull();
  expect(lock?.principalHash).toBeUndefined();
  expect((await prelock(null)).status).toBe(200);
});
