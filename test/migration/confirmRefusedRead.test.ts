import type { HttpCall } from '../../shared/migration/types';
import { ManualClock } from '../../testkit/clock';
import { virtualRunner } from '../support/migrationHarness';

/**
 * The confirmation's replica read refused (a read region's 403: StoreRejected,
 * a code attemptVerdict calls final) after the swap committed. The migration must not end Failed with a
 * `failed` notice: the participant would drop the target the route now points to.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };

test('a replica read refused after the swap: never a failed notice for a route at the target', async () => {
  const clock = new ManualClock(Date.UTC(2026, 4, 1));
  const posts: { step: string; body: HttpCall['body'] }[] = [];
  const h = virtualRunner({
    clock,
    env: {
      ROUTELOCK_PROFILE: 'dev',
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p', url: 'https://p.test/migrate' }]),
      ROUTELOCK_MIGRATION_ATTEMPTS: '1',
    },
    http: (call) => {
      posts.push({ step: call.body.step, body: call.body });
      return Promise.resolve(
        call.body.step === 'verify' ? { status: 404, body: null } : { status: 200, body: null },
      );
    },
  });
  let swapped = false;
  const swap = h.activities.swap;
  h.activities.swap = async (input) => {
    const result = await swap(input);
    if (result.ok) swapped = true;
    return result;
  };
  // the first replica read after the swap is refused
  let refusedOnce = false;
  const readRoute = h.activities.readRoute;
  h.activities.readRoute = async (input) => {
    if (swapped && input.from === 'replica' && !refusedOnce) {
      refusedOnce = true;
      return { ok: false, code: 'StoreRejected', message: 'The routing store refused the request.' };
    }
    return readRoute(input);
  };
  await h.router.createRoute('r-1', SOURCE);
  clock.advance(60_000);
  const { record } = h.runner.start({ resourceId: 'r-1', target: TARGET });
  await h.settle();
  const status = await h.runner.status(record.migrationId);
  const doc = (await h.store.read('r-1', { from: 'writeRegion' })).doc;
  expect(refusedOnce).toBe(true);
  expect(doc.location).toEqual(TARGET);
  expect(posts.map((p) => p.step)).not.toContain('failed');
  expect(status.status).toBe('Completed');
});
