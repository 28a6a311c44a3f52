import { InProcessMigrationService } from '../../shared/migration/inProcessService';
import type { CutoverWindow, MigrationStatus } from '../../shared/migration/types';
import { virtualRunner } from '../support/migrationHarness';
import { watchLocks, writeLocks, writeLocksOutside } from './windowSupport';

/**
 * Cutover windows on the in-process runner (workflow version 4): the write lock only
 * inside the window, the wait on durable timers renewing the hard-delete lock, the early failures, and
 * a cancel during the wait. Production timing on virtual time (a 6 h hard-delete lease renewed every
 * 2 h, a 900 s write budget, a 3-day pre-lock cap); the clock starts at 2026-01-01T00:00Z.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const operator = { id: 'operator-1' };
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const BUDGET_MS = 900_000;
const T0 = Date.UTC(2026, 0, 1);
const at = (iso: string) => Date.parse(iso);

async function setup() {
  const h = virtualRunner();
  const service = new InProcessMigrationService(h.runner, h.router);
  await h.router.createRoute('r-1', SOURCE);
  const locks = watchLocks(h.activities, h.clock.now);
  const statuses: MigrationStatus[] = [];
  const save = h.state.saveStatus.bind(h.state);
  h.state.saveStatus = async (id, status, done) => {
    statuses.push(structuredClone(status));
    return save(id, status, done);
  };
  const doc = async () => (await h.store.read('r-1', { from: 'writeRegion' })).doc;
  return { h, service, locks, statuses, doc };
}

/** Fire timers one at a time until `reached` holds. */
async function runUntil(h: ReturnType<typeof virtualRunner>, reached: () => boolean): Promise<void> {
  for (let i = 0; i < 10_000 && !reached(); i += 1) {
    const fired = await h.scheduler.runUntilIdle({ maxTimers: 1 });
    if (fired === 0 && !reached()) throw new Error('the migration ended before the point the test waits for');
  }
}

const daily = (start: string, end: string, timeZone = 'UTC'): CutoverWindow => ({
  daily: { start, end, timeZone },
});

describe('cutover windows on the in-process runner', () => {
  test('outside its daily window: waits (waitingForWindow, hard-delete renewals), write lock only at the slot, then swaps', async () => {
    const { h, service, locks, statuses, doc } = await setup();
    const window = daily('12:00', '13:00');
    const { migrationId } = await service.start({ resourceId: 'r-1', target: TARGET, window });
    await h.settle();
    const ended = await service.status(migrationId);
    expect(ended).toMatchObject({ status: 'Completed', phase: 'swapped' });
    expect(ended).not.toHaveProperty('waitingForWindow');
    expect((await doc())?.location).toEqual(TARGET);

    const opening = '2026-01-01T12:00:00.000Z';
    const waiting = statuses.filter((s) => s.waitingForWindow !== undefined);
    expect(waiting.length).toBeGreaterThan(0);
    expect(
      waiting.every((s) => s.waitingForWindow?.nextOpening === opening && s.phase === 'hardDelete'),
    ).toBe(true);
    // the status once open has the key removed, before the write lock
    const firstWrite = statuses.findIndex((s) => s.phase === 'write');
    expect(statuses[firstWrite - 1]).not.toHaveProperty('waitingForWindow');

    const hardDeleteAt = locks.find((c) => c.name === 'escalate' && c.phase === 'hardDelete')!.at;
    const writes = writeLocks(locks);
    expect(writes.map((c) => new Date(c.at).toISOString())).toEqual([opening]);
    // renewed during the wait, at most every 2 h (a third of the 6 h lease), and never past the slot
    const renewals = locks.filter((c) => c.name === 'renew' && c.phase === 'hardDelete').map((c) => c.at);
    expect(renewals.length).toBeGreaterThanOrEqual(Math.ceil((at(opening) - hardDeleteAt) / (2 * HOUR)));
    const points = [hardDeleteAt, ...renewals, at(opening)];
    const gaps = points.slice(1).map((t, i) => t - points[i]!);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(2 * HOUR);
    expect(renewals.every((t) => t >= hardDeleteAt && t < at(opening))).toBe(true);
    // the hard-delete lock at 02:15 (the convergence wait), renewed then and every 2 h until the slot
    expect(new Date(hardDeleteAt).toISOString()).toBe('2026-01-01T02:15:00.000Z');
    expect(renewals.map((t) => new Date(t).toISOString().slice(11, 16))).toEqual([
      '02:15',
      '04:15',
      '06:15',
      '08:15',
      '10:15',
    ]);
    expect(writeLocksOutside(locks, [[at(opening), at('2026-01-01T13:00:00Z')]], BUDGET_MS)).toEqual([]);
  });

  test('inside its window from the start: no wait, no waitingForWindow, no extra renewal', async () => {
    const { h, service, locks, statuses } = await setup();
    const { migrationId } = await service.start({
      resourceId: 'r-1',
      target: TARGET,
      window: { notBefore: '2025-12-31T00:00:00Z', notAfter: '2026-01-02T00:00:00Z' },
    });
    await h.settle();
    expect(await service.status(migrationId)).toMatchObject({ status: 'Completed' });
    expect(statuses.some((s) => s.waitingForWindow !== undefined)).toBe(false);
    expect(locks.filter((c) => c.name === 'renew')).toEqual([]);
  });

  test('the next opening beyond what a lock could reach (its 3-day cap): fails before the pre-lock, no lock taken', async () => {
    const { h, service, locks, doc } = await setup();
    const { migrationId } = await service.start({
      resourceId: 'r-1',
      target: TARGET,
      window: { notBefore: new Date(T0 + 4 * DAY).toISOString() },
    });
    await h.settle();
    const ended = await service.status(migrationId);
    expect(ended).toMatchObject({ status: 'Failed', attempts: [{ attempt: 1, outcome: 'Failed' }] });
    expect(ended.error).toMatch(
      /^WindowUnreachable: the cutover window next opens at 2026-01-05T00:00:00.000Z; .* past a new lock's cap \(2026-01-03T23:59:55.000Z\); no lock was taken$/,
    );
    expect(locks).toEqual([]);
    expect(await doc()).toMatchObject({ location: SOURCE, lock: null });
  });

  test('a window with no slot left (over before the write budget fits): WindowClosed before the pre-lock', async () => {
    const { h, service, locks } = await setup();
    const { migrationId } = await service.start({
      resourceId: 'r-1',
      target: TARGET,
      window: { notAfter: new Date(T0 + 10 * 60_000).toISOString() },
    });
    await h.settle();
    const ended = await service.status(migrationId);
    // final: one attempt, no retry with a fresh lock
    expect(ended).toMatchObject({ status: 'Failed', attempts: [{ attempt: 1 }] });
    expect(ended.error).toMatch(
      /^WindowClosed: the cutover window has no slot left that holds the write budget \(900 s\); no lock was taken$/,
    );
    expect(locks).toEqual([]);
  });

  test('a window that closes during the convergence wait: WindowClosed at the write step, lock released, no write lock', async () => {
    const { h, service, locks, doc } = await setup();
    const { migrationId } = await service.start({
      resourceId: 'r-1',
      target: TARGET,
      window: { notAfter: new Date(T0 + HOUR).toISOString() },
    });
    await h.settle();
    const ended = await service.status(migrationId);
    expect(ended).toMatchObject({ status: 'Failed', attempts: [{ attempt: 1 }] });
    expect(ended.error).toMatch(/^WindowClosed: the cutover window has no slot left .*; lock released/);
    expect(writeLocks(locks)).toEqual([]);
    expect(locks.some((c) => c.name === 'escalate' && c.phase === 'hardDelete')).toBe(true);
    expect(await doc()).toMatchObject({ location: SOURCE, lock: null });
  });

  test('cancel during the wait: the timer ends at once, Cancelled, the lock released, no write lock', async () => {
    const { h, service, locks, doc } = await setup();
    const { migrationId } = await service.start({
      resourceId: 'r-1',
      target: TARGET,
      window: daily('12:00', '13:00'),
    });
    await runUntil(h, () => h.state.activeFor('r-1')?.status.waitingForWindow !== undefined);
    expect((await doc())?.lock?.phase).toBe('hardDelete');
    await service.cancel(migrationId, operator);
    const cancelledAt = h.clock.now();
    await h.settle();
    expect(await service.status(migrationId)).toMatchObject({
      status: 'Cancelled',
      phase: 'released',
      error: expect.stringMatching(/^cancelled by operator-1 .*; lock released$/),
    });
    expect(h.clock.now()).toBe(cancelledAt);
    expect(writeLocks(locks)).toEqual([]);
    expect(await doc()).toMatchObject({ location: SOURCE, lock: null });
  });

  test('a bad window is refused at the start (400 BadRequest naming the field), nothing written', async () => {
    const { h, service, locks } = await setup();
    await expect(
      service.start({ resourceId: 'r-1', target: TARGET, window: { notAfter: '2025-12-31T00:00:00Z' } }),
    ).rejects.toMatchObject({
      code: 'BadRequest',
      message: expect.stringMatching(/^window\.notAfter: is already past/),
    });
    await expect(
      service.start({ resourceId: 'r-1', target: TARGET, window: daily('12:00', '13:00', 'Nowhere/City') }),
    ).rejects.toMatchObject({
      code: 'BadRequest',
      message: expect.stringMatching(/^window\.daily\.timeZone/),
    });
    expect(h.state.activeFor('r-1')).toBeNull();
    expect(locks).toEqual([]);
  });

  test('an operator retry keeps the window', async () => {
    const { h, service } = await setup();
    const window = { notBefore: new Date(T0 + 4 * DAY).toISOString() };
    const { migrationId } = await service.start({ resourceId: 'r-1', target: TARGET, window });
    await h.settle();
    await service.retry(migrationId, operator);
    expect((await h.runner.record(migrationId))?.input.window).toEqual(window);
    await h.settle();
    expect(await service.status(migrationId)).toMatchObject({ status: 'Failed', attempts: [{}, {}] });
  });
});
