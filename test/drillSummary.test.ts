import type { DrillSummary } from '../drill/drill';
import { endedByLine, formatSummary } from '../drill/summary';

/** The drill's printed summary: one word for one count, the holds counted the same way on every line. */

const ms = (count: number) => ({ count, p50: 100, p99: 200, max: 300 });
const summary = (violations: string[] = []): DrillSummary => ({
  migrations: { requested: 12, completed: 12, failed: 0, conflict: 0, noop: 0, running: 0 },
  writeLockSeconds: { count: 13, p50: 0.2, p75: 0.3, p99: 0.5, max: 0.6 } as DrillSummary['writeLockSeconds'],
  writeLockHold: {
    holdMs: ms(13),
    workMs: ms(13),
    overheadMs: ms(13),
    beforeWorkMs: ms(13),
    betweenWorkMs: ms(13),
    afterWorkMs: ms(13),
    endedBy: { downgrade: 1, swap: 12 },
  },
  operations: {
    reads: 1,
    writes: 1,
    deletes: 1,
    writesRefusedThenAccepted: 0,
    refusals: 0,
    deletesTombstoned: 0,
    misdirected: 0,
  },
  verification: { run: 13, mismatches: 1, swapsRefused: 1, notVerified: 0 },
  cleanUps: { noticesDelivered: 12, sourcesDeleted: 12, targetsDropped: 0, kept: 0, leftToJanitor: 0 },
  violations,
  url: 'http://127.0.0.1:1',
});

test('the hold lines count holds, and say how they ended: swaps first, the release without a swap named', () => {
  const text = formatSummary(summary());
  expect(text).toContain('(13 write-lock holds, lock telemetry)');
  expect(text).toContain("13 write-lock holds on the routes' commits");
  expect(text).toContain('ended 12 by a swap, 1 released without a swap (downgrade)');
  expect(text).not.toMatch(/\d+ swaps\)/);
  expect(text).toContain('0 violations');
});

test('ended-by wording: singular counts, unknown ends by name, none', () => {
  expect(endedByLine({ swap: 1 })).toBe('ended 1 by a swap');
  expect(endedByLine({ forceRelease: 2, swap: 3 })).toBe('ended 3 by a swap, 2 by forceRelease');
  expect(endedByLine({})).toBe('none ended');
});

test('violations are listed under their count', () => {
  const text = formatSummary(summary(['write accepted at the source during the write lock: conv-1/m-2']));
  expect(text).toContain('VIOLATIONS (1):\n  write accepted at the source during the write lock: conv-1/m-2');
  expect(text).not.toContain('0 violations');
});
