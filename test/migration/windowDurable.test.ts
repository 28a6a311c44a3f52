import { CANCEL_EVENT, type CutoverWindow, type MigrationStatus } from '../../shared/migration/types';
import type { RaisedEvent } from '../../testkit/durableReplay';
import { type InputVersion, START, SOURCE, V5, durableMigration } from '../support/durableMigrations';
import { watchLocks, writeLocks, writeLocksOutside } from './windowSupport';

/**
 * Cutover windows on Durable Functions (docs/design.md §6.10), through the replay harness
 * that drives the real orchestrator with durable-functions' executor: the wait is durable timers (each
 * also waiting for the cancel event) with hard-delete renewals between them, replayed from history.
 * Production timing; the instance starts at 2026-03-01T00:00Z.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const BUDGET_MS = 900_000;

const withWindow = (window: CutoverWindow): InputVersion => ({
  ...V5,
  label: 'with a window',
  toInput: (i) => ({ ...V5.toInput(i), window }),
});

async function replay(window: CutoverWindow, events: RaisedEvent[] = []) {
  const h = await durableMigration({ version: withWindow(window) });
  const locks = watchLocks(h.activities, h.clock.now);
  const harness = h.make({ events });
  const result = await harness.run();
  const doc = (await h.store.read(h.input.resourceId, { from: 'writeRegion' })).doc;
  const statuses = result.statuses as MigrationStatus[];
  return { result, output: result.output as MigrationStatus, doc, locks, statuses };
}

describe('cutover windows on the Durable runner', () => {
  test('outside its daily window: durable timers and hard-delete renewals until the slot, then the write lock and the swap', async () => {
    const r = await replay({ daily: { start: '09:00', end: '10:00', timeZone: 'Europe/Berlin' } });
    expect(r.result.error).toBeUndefined();
    expect(r.output).toMatchObject({ status: 'Completed', phase: 'swapped' });
    expect(r.output).not.toHaveProperty('waitingForWindow');
    expect(r.doc?.location).toEqual({ region: 'eastus', account: 'chatuse01' });
    // 09:00 in Berlin in March (CET) is 08:00Z
    const opening = '2026-03-01T08:00:00.000Z';
    const waiting = r.statuses.filter((s) => s.waitingForWindow !== undefined);
    expect(waiting.length).toBeGreaterThan(0);
    expect(new Set(waiting.map((s) => s.waitingForWindow?.nextOpening))).toEqual(new Set([opening]));
    expect(writeLocks(r.locks).map((c) => new Date(c.at).toISOString())).toEqual([opening]);
    expect(
      writeLocksOutside(r.locks, [[Date.parse(opening), Date.parse(opening) + HOUR]], BUDGET_MS),
    ).toEqual([]);
    const hardDeleteAt = r.locks.find((c) => c.name === 'escalate' && c.phase === 'hardDelete')!.at;
    const renewals = r.locks.filter((c) => c.name === 'renew' && c.phase === 'hardDelete').map((c) => c.at);
    expect(renewals.length).toBe(Math.ceil((Date.parse(opening) - hardDeleteAt) / (2 * HOUR)));
    // the wait's timers, each cancellable: one per renewal, none longer than the renewal period
    const timers = r.result.actions.filter(
      (a) =>
        a.kind === 'timer' &&
        a.fireAt !== undefined &&
        a.fireAt > hardDeleteAt &&
        a.fireAt <= Date.parse(opening),
    );
    expect(timers.length).toBe(renewals.length);
    expect(r.locks.filter((c) => c.name === 'prelock')).toHaveLength(1);
  });

  test("the next opening beyond a lock's cap: fails before the pre-lock, no lock taken", async () => {
    const r = await replay({ notBefore: new Date(START + 4 * DAY).toISOString() });
    expect(r.output).toMatchObject({ status: 'Failed' });
    expect(r.output.error).toMatch(
      /^WindowUnreachable: the cutover window next opens at 2026-03-05T00:00:00.000Z/,
    );
    expect(r.locks).toEqual([]);
    expect(r.doc).toMatchObject({ location: SOURCE, lock: null });
  });

  test('cancel during the wait: Cancelled, the lock released, no write lock', async () => {
    const cancel: RaisedEvent = {
      name: CANCEL_EVENT,
      input: { requestedAt: '2026-03-01T05:00:00.000Z', by: 'operator-1' },
      when: (s) => (s.statuses.at(-1) as MigrationStatus | undefined)?.waitingForWindow !== undefined,
    };
    const r = await replay({ daily: { start: '09:00', end: '10:00', timeZone: 'Europe/Berlin' } }, [cancel]);
    expect(r.output).toMatchObject({
      status: 'Cancelled',
      phase: 'released',
      cancelRequestedBy: 'operator-1',
    });
    expect(r.output.error).toMatch(/; lock released$/);
    expect(writeLocks(r.locks)).toEqual([]);
    expect(r.doc).toMatchObject({ location: SOURCE, lock: null });
  });
});
