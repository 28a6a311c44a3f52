import type { CutoverWindow } from '../../shared/migration/types';
import { type LockCall, watchLocks, writeLocks, writeLocksOutside } from './windowSupport';

/**
 * NEGATIVE CONTROL for cutover windows (docs/design.md §6.10): the write lock is never taken outside the
 * window, the whole write budget included. A window that closes 7.5 minutes after the moment the
 * write lock would be taken (less than the 900 s budget): the real rule refuses it (WindowClosed, no
 * write lock); a planted rule that checks only the start (ignores the hold) takes the lock, and the
 * oracle (windowSupport.ts, written apart from the rule) catches the freeze running past the window.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const BUDGET_MS = 900_000;

type Harness = typeof import('../support/migrationHarness');
type Service = typeof import('../../shared/migration/inProcessService');

/** One migration on fresh modules, the slot rule planted or real; its lock calls and its end. */
async function run(plant: boolean, window?: CutoverWindow) {
  jest.resetModules();
  if (plant) {
    jest.doMock('../../shared/migration/window', () => {
      const real = jest.requireActual<typeof import('../../shared/migration/window')>(
        '../../shared/migration/window',
      );
      // the planted bug: any instant inside the window opens it, however long the freeze after it
      return { ...real, nextWriteSlot: (w: CutoverWindow, from: number) => real.nextWriteSlot(w, from, 0) };
    });
  } else {
    jest.dontMock('../../shared/migration/window');
  }
  const { virtualRunner } = jest.requireActual<Harness>('../support/migrationHarness');
  const { InProcessMigrationService } = jest.requireActual<Service>(
    '../../shared/migration/inProcessService',
  );
  const h = virtualRunner();
  const service = new InProcessMigrationService(h.runner, h.router);
  await h.router.createRoute('r-1', SOURCE);
  const locks: LockCall[] = watchLocks(h.activities, h.clock.now);
  const { migrationId } = await service.start({
    resourceId: 'r-1',
    target: TARGET,
    ...(window ? { window } : {}),
  });
  await h.settle();
  return { locks, status: await service.status(migrationId) };
}

test('the write lock is never taken where its budget would run past the window (a start-only rule is caught)', async () => {
  // where the write lock falls without a window (virtual time: the same every run)
  const free = await run(false);
  const [writeAt] = writeLocks(free.locks).map((c) => c.at);
  expect(writeAt).toBeDefined();
  const closes = (writeAt as number) + BUDGET_MS / 2;
  const window = { notAfter: new Date(closes).toISOString() };
  const intervals = [[Number.NEGATIVE_INFINITY, closes]] as const;

  const real = await run(false, window);
  expect(real.status).toMatchObject({ status: 'Failed' });
  expect(real.status.error).toMatch(/^WindowClosed: /);
  expect(writeLocks(real.locks)).toEqual([]);
  expect(writeLocksOutside(real.locks, intervals, BUDGET_MS)).toEqual([]);

  const planted = await run(true, window);
  // the planted rule lets the write lock start 7.5 min before the window closes: the oracle sees it
  expect(writeLocksOutside(planted.locks, intervals, BUDGET_MS).map((c) => c.at)).toEqual([writeAt]);
});
