import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RouteLockError, errorKind } from '../../shared/core/errors';
import { InProcessMigrationService } from '../../shared/migration/inProcessService';
import type { HttpCall, HttpResult, MigrationPhase, MigrationStatus } from '../../shared/migration/types';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { ManualClock } from '../../testkit/clock';
import { virtualRunner } from '../support/migrationHarness';

/**
 * Cancel on the in-process runner (docs/design.md §6.8): the request is journaled, every cancellable wait ends
 * on it and the next check finds it. A cancel in each phase ends Cancelled with the lock released and
 * the route unchanged; a runner restarted after the request still cancels.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const operator = { id: 'operator-1', name: 'Ops' };
const participants = JSON.stringify([{ name: 'p', url: 'https://p.test/migrate' }]);

/** A participant whose copies of `hang` never answer; the others answer 200 at once. */
const participant =
  (hang: 'bulkCopy' | 'deltaCopy' | 'none', calls: HttpCall[] = []) =>
  (call: HttpCall): Promise<HttpResult> => {
    calls.push(call);
    if (call.body.step === 'verify') return Promise.resolve({ status: 404, body: null }); // not implemented
    return call.body.step === hang
      ? new Promise(() => undefined)
      : Promise.resolve({ status: 200, body: null });
  };

type Harness = ReturnType<typeof virtualRunner>;

/** Fire timers one at a time until `reached` holds (the migration is in the phase the test wants). */
async function runUntil(h: Harness, reached: () => boolean): Promise<void> {
  for (let i = 0; i < 10_000 && !reached(); i += 1) {
    const fired = await h.scheduler.runUntilIdle({ maxTimers: 1 });
    if (fired === 0 && !reached()) throw new Error('the migration ended before the point the test waits for');
  }
}

const phaseOf = (h: Harness, resourceId: string): MigrationPhase | undefined =>
  h.state.activeFor(resourceId)?.status.phase;

async function setup(hang: 'bulkCopy' | 'deltaCopy' | 'none' = 'none', env: Record<string, string> = {}) {
  const calls: HttpCall[] = [];
  const h = virtualRunner({
    env: { ROUTELOCK_PARTICIPANTS: participants, ...env },
    http: participant(hang, calls),
  });
  const service = new InProcessMigrationService(h.runner, h.router);
  await h.router.createRoute('r-1', SOURCE);
  const swaps: unknown[] = [];
  const swap = h.activities.swap;
  h.activities.swap = (input) => {
    swaps.push(input);
    return swap(input);
  };
  const prelocks: unknown[] = [];
  const prelock = h.activities.prelock;
  h.activities.prelock = (input) => {
    prelocks.push(input);
    return prelock(input);
  };
  const doc = async () => (await h.store.read('r-1', { from: 'writeRegion' })).doc;
  return { h, service, calls, swaps, prelocks, doc };
}

describe('cancel on the in-process runner', () => {
  test('before the pre-lock: it never starts, no lock is taken', async () => {
    const { h, service, prelocks, doc } = await setup();
    // the cancel arrives as the migration starts: journaled before its first check
    let answered: MigrationStatus | undefined;
    const save = h.state.saveStatus.bind(h.state);
    h.state.saveStatus = async (id, status, done) => {
      await save(id, status, done);
      if (status.status === 'Running' && !answered) answered = await service.cancel(id, operator);
    };
    const { migrationId } = await service.start({ resourceId: 'r-1', target: TARGET });
    await h.settle();
    expect(answered).toMatchObject({ status: 'Running', phase: 'starting', cancelRequestedBy: 'operator-1' });
    expect(await service.status(migrationId)).toMatchObject({
      status: 'Cancelled',
      phase: 'starting',
      cancelRequestedAt: answered?.cancelRequestedAt,
      cancelRequestedBy: 'operator-1',
      error: expect.stringMatching(/before the pre-lock; no lock was taken/),
    });
    expect(prelocks).toHaveLength(0);
    expect(await doc()).toMatchObject({ location: SOURCE, lock: null });
  });

  test.each([
    ['prelock (the pre-lock taken, before the re-read)', 'none', 'prelock'],
    ['converging (the convergence wait)', 'none', 'converging'],
    ['hardDelete, the bulk copy running', 'bulkCopy', 'hardDelete'],
    ['write, the delta copy running', 'deltaCopy', 'write'],
  ] as const)('%s: Cancelled, lock released, route unchanged, no swap', async (_label, hang, phase) => {
    const { h, service, calls, swaps, doc } = await setup(hang);
    if (phase === 'prelock') {
      // cancelled while the pre-lock activity runs: the re-read's check finds it
      const prelock = h.activities.prelock;
      h.activities.prelock = async (input) => {
        const granted = await prelock(input);
        await service.cancel(input.migrationId, operator);
        return granted;
      };
    }
    const { migrationId } = await service.start({ resourceId: 'r-1', target: TARGET });
    const copying = (step: string) => calls.some((c) => c.body.step === step);
    await runUntil(h, () =>
      phase === 'prelock'
        ? true
        : phaseOf(h, 'r-1') === phase &&
          (phase === 'converging' || copying(phase === 'write' ? 'deltaCopy' : 'bulkCopy')),
    );
    if (phase !== 'prelock') {
      expect((await doc()).lock?.phase).toBe(phase === 'converging' ? 'prelock' : phase);
      const answered = await service.cancel(migrationId, operator);
      expect(answered).toMatchObject({ status: 'Running', phase, cancelRequestedBy: 'operator-1' });
    }
    const cancelledAt = h.clock.now();
    await h.settle();
    expect(await service.status(migrationId)).toMatchObject({
      status: 'Cancelled',
      phase: 'released',
      cancelRequestedBy: 'operator-1',
      error: expect.stringMatching(/^cancelled by operator-1 .*; lock released$/),
    });
    expect(swaps).toHaveLength(0);
    expect(await doc()).toMatchObject({ location: SOURCE, lock: null });
    // the wait under way ended at once: no timer ran on after the cancel
    if (phase !== 'prelock') expect(h.clock.now()).toBe(cancelledAt);
  });

  test('while waiting out a refused pre-lock (ConvergencePending): the wait ends, Cancelled, no lock was held', async () => {
    const { h, service, doc } = await setup();
    h.activities.prelock = async (input) => {
      await service.cancel(input.migrationId, operator);
      return { ok: false, code: 'ConvergencePending', message: 'a swap moments ago', retryAfterSeconds: 30 };
    };
    const { migrationId } = await service.start({ resourceId: 'r-1', target: TARGET });
    const before = h.clock.now();
    await h.settle();
    expect(await service.status(migrationId)).toMatchObject({
      status: 'Cancelled',
      phase: 'starting',
      error: expect.stringMatching(/; no lock was held$/),
    });
    expect(h.clock.now()).toBe(before); // the 30 s wait ended at once
    expect(await doc()).toMatchObject({ location: SOURCE, lock: null });
  });

  test('after the swap: 409 AlreadySwapped; an unknown migration: 404', async () => {
    const { h, service } = await setup();
    const { migrationId } = await service.start({ resourceId: 'r-1', target: TARGET });
    await h.settle();
    const error = await service.cancel(migrationId, operator).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RouteLockError);
    expect((error as RouteLockError).code).toBe('AlreadySwapped');
    expect(errorKind((error as RouteLockError).code).status).toBe(409);
    await expect(service.cancel('m-unknown', operator)).rejects.toMatchObject({ code: 'NotFound' });
  });

  test('a cancel that arrives during the swap activity: the swap decides (Completed), the late request is recorded', async () => {
    const { h, service, doc } = await setup();
    const { migrationId } = await service.start({ resourceId: 'r-1', target: TARGET });
    const swap = h.activities.swap;
    h.activities.swap = async (input) => {
      await service.cancel(migrationId, operator);
      return swap(input);
    };
    await h.settle();
    expect(await service.status(migrationId)).toMatchObject({
      status: 'Completed',
      phase: 'swapped',
      cancelRequestedBy: 'operator-1',
    });
    expect((await doc()).location).toEqual(TARGET);
  });

  test('cancel twice: the same status both times, and after the end the same Cancelled', async () => {
    const { h, service } = await setup('bulkCopy');
    const { migrationId } = await service.start({ resourceId: 'r-1', target: TARGET });
    await runUntil(h, () => phaseOf(h, 'r-1') === 'hardDelete');
    const first = await service.cancel(migrationId, operator);
    const second = await service.cancel(migrationId, { id: 'operator-2' });
    expect(second).toEqual(first);
    await h.settle();
    const ended = await service.status(migrationId);
    expect(ended.status).toBe('Cancelled');
    expect(await service.cancel(migrationId, operator)).toEqual(ended);
    expect(ended.cancelRequestedAt).toBe(first.cancelRequestedAt);
  });

  test('a migration of a workflow version this code does not run is refused: 409 MigrationNotCancellable', async () => {
    const { h, service } = await setup('bulkCopy');
    const { migrationId } = await service.start({ resourceId: 'r-1', target: TARGET });
    // as a record written by a version below the floor
    const record = h.state.activeFor('r-1')!;
    const db = (
      h.state as unknown as { db: { prepare: (sql: string) => { run: (...a: unknown[]) => void } } }
    ).db;
    db.prepare('UPDATE migrations SET record = ? WHERE migration_id = ?').run(
      JSON.stringify({ ...record, input: { ...record.input, workflowVersion: 2 } }),
      migrationId,
    );
    await expect(service.cancel(migrationId, operator)).rejects.toMatchObject({
      code: 'MigrationNotCancellable',
    });
    expect(errorKind('MigrationNotCancellable').status).toBe(409);
    h.runner.stop();
  });
});

describe('a crash after the cancel is journaled', () => {
  const dir = mkdtempSync(join(tmpdir(), 'routelock-cancel-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('the restarted runner resumes the migration and cancels it: lock released, route unchanged', async () => {
    const statePath = join(dir, 'migrations.db');
    const store = new SqliteStore(':memory:');
    const clock = new ManualClock();
    const env = { ROUTELOCK_PARTICIPANTS: participants };
    const first = virtualRunner({ env, store, statePath, clock, http: participant('bulkCopy') });
    await first.router.createRoute('r-1', SOURCE);
    const { record } = first.runner.start({ resourceId: 'r-1', target: TARGET });
    await runUntil(first, () => phaseOf(first, 'r-1') === 'hardDelete');
    // the request is journaled, then the process dies before the workflow takes its next step
    first.runner.stop();
    await first.runner.cancel(record.migrationId, operator);
    expect((await store.read('r-1', { from: 'writeRegion' })).doc.lock?.phase).toBe('hardDelete');

    const second = virtualRunner({
      env,
      store,
      statePath,
      clock,
      keyring: first.keyring,
      http: participant('bulkCopy'),
    });
    expect(second.runner.resumeAll()).toBe(1);
    await second.settle();
    expect(await second.runner.status(record.migrationId)).toMatchObject({
      status: 'Cancelled',
      phase: 'released',
      cancelRequestedBy: 'operator-1',
    });
    expect((await store.read('r-1', { from: 'writeRegion' })).doc).toMatchObject({
      location: SOURCE,
      lock: null,
    });
  });
});

describe('a crash after the cancel reached the journal as a step', () => {
  const dir = mkdtempSync(join(tmpdir(), 'routelock-cancel-step-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('killed as it releases: the restarted runner replays the cancelled round and releases', async () => {
    const statePath = join(dir, 'migrations.db');
    const store = new SqliteStore(':memory:');
    const clock = new ManualClock();
    const env = { ROUTELOCK_PARTICIPANTS: participants };
    const first = virtualRunner({ env, store, statePath, clock, http: participant('bulkCopy') });
    await first.router.createRoute('r-1', SOURCE);
    const { record } = first.runner.start({ resourceId: 'r-1', target: TARGET });
    await runUntil(first, () => phaseOf(first, 'r-1') === 'hardDelete');
    let releases = 0;
    first.activities.release = () => {
      releases += 1;
      first.runner.stop(); // the process dies as the release goes out, before it lands
      return new Promise(() => undefined);
    };
    await first.runner.cancel(record.migrationId, operator);
    await first.scheduler.runUntilIdle();
    expect(releases).toBe(1);
    expect((await store.read('r-1', { from: 'writeRegion' })).doc.lock?.phase).toBe('hardDelete');

    const second = virtualRunner({
      env,
      store,
      statePath,
      clock,
      keyring: first.keyring,
      http: participant('bulkCopy'),
    });
    const posts: unknown[] = [];
    const call = second.activities.callParticipant;
    second.activities.callParticipant = (input) => {
      posts.push(input);
      return call(input);
    };
    expect(second.runner.resumeAll()).toBe(1);
    await second.settle();
    expect(await second.runner.status(record.migrationId)).toMatchObject({
      status: 'Cancelled',
      phase: 'released',
    });
    expect((await store.read('r-1', { from: 'writeRegion' })).doc).toMatchObject({
      location: SOURCE,
      lock: null,
    });
    expect(posts).toHaveLength(0); // replayed from the journal: no copy request went out again
  });
});

describe('negative control', () => {
  test('a runner that ignores the request swaps anyway, and the checks above catch it', async () => {
    const outcome = async (deaf: boolean) => {
      const { h, service, doc } = await setup('none');
      const { migrationId } = await service.start({ resourceId: 'r-1', target: TARGET });
      await runUntil(h, () => phaseOf(h, 'r-1') === 'converging');
      if (deaf) {
        // the planted runner: answers the cancel as the real one does, but its workflow never hears it
        const runner = h.runner as unknown as { signal: (id: string) => { raise: () => void } };
        const signal = runner.signal.bind(h.runner);
        runner.signal = (id: string) => ({ ...signal(`${id}-elsewhere`), raise: () => undefined });
      }
      const answered: MigrationStatus = await service.cancel(migrationId, operator);
      expect(answered.cancelRequestedBy).toBe('operator-1');
      await h.settle();
      return [(await service.status(migrationId)).status, (await doc()).location];
    };
    expect(await outcome(true)).toEqual(['Completed', TARGET]);
    expect(await outcome(false)).toEqual(['Cancelled', SOURCE]);
  });
});
