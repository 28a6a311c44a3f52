import {
  type ContendedHold,
  contentionReport,
  holdOverhead,
  holdSteps,
  msDistribution,
  writeLockHolds,
} from '../drill/writeLockHold';

/** The drill's and the bench's hold arithmetic (drill/writeLockHold.ts): pure, one case per rule. */

const at = (resourceId: string, time: number, writeLocked: boolean, op: string) => ({
  resourceId,
  at: time,
  writeLocked,
  op,
});

test('holds: from the first write-locked version to the first one without it, per resource; renewals inside', () => {
  const holds = writeLockHolds([
    at('a', 0, false, 'prelock'),
    at('a', 10, true, 'escalate'),
    at('b', 12, true, 'escalate'),
    at('a', 15, true, 'renew'),
    at('a', 40, false, 'downgrade'),
    at('a', 50, true, 'escalate'),
    at('b', 60, false, 'swap'),
    at('a', 70, false, 'swap'),
    at('c', 80, true, 'escalate'), // still held: left out
  ]);
  expect(holds).toEqual([
    { resourceId: 'a', from: 10, to: 40, endedBy: 'downgrade' },
    { resourceId: 'b', from: 12, to: 60, endedBy: 'swap' },
    { resourceId: 'a', from: 50, to: 70, endedBy: 'swap' },
  ]);
});

test.each([
  [
    'no work: all overhead, before the work',
    [],
    { workMs: 0, overheadMs: 100, beforeWorkMs: 100, betweenWorkMs: 0, afterWorkMs: 0 },
  ],
  [
    'a delta and an instant verify',
    [
      { resourceId: 'r', startedAt: 5, endedAt: 65 },
      { resourceId: 'r', startedAt: 80, endedAt: 80 },
    ],
    { workMs: 60, overheadMs: 40, beforeWorkMs: 5, betweenWorkMs: 15, afterWorkMs: 20 },
  ],
  [
    'overlapping work counted once, work outside the hold clipped, another resource ignored',
    [
      { resourceId: 'r', startedAt: -50, endedAt: 10 },
      { resourceId: 'r', startedAt: 20, endedAt: 60 },
      { resourceId: 'r', startedAt: 40, endedAt: 70 },
      { resourceId: 'r', startedAt: 95, endedAt: 130 },
      { resourceId: 'other', startedAt: 0, endedAt: 100 },
    ],
    { workMs: 65, overheadMs: 35, beforeWorkMs: 0, betweenWorkMs: 35, afterWorkMs: 0 },
  ],
])('overhead: %s', (_, work, expected) => {
  expect(holdOverhead({ resourceId: 'r', from: 0, to: 100, endedBy: 'swap' }, work)).toEqual({
    resourceId: 'r',
    from: 0,
    to: 100,
    endedBy: 'swap',
    holdMs: 100,
    ...expected,
  });
});

test('distribution: nearest rank; none is nulls', () => {
  expect(msDistribution([])).toEqual({ count: 0, p50: null, p99: null, max: null });
  const values = Array.from({ length: 100 }, (_, i) => 100 - i);
  expect(msDistribution(values)).toEqual({ count: 100, p50: 50, p99: 99, max: 100 });
});

test('steps: each clipped to the hold less the work in it; a poll timer keeps only its wait after the work; the rest is between steps', () => {
  const hold = { resourceId: 'r', from: 0, to: 1100, endedBy: 'swap' };
  const step = (label: string, startedAt: number, endedAt: number) => ({
    resourceId: 'r',
    label,
    startedAt,
    endedAt,
  });
  const spent = holdSteps(
    hold,
    [
      step('activity:escalate', -5, 1), // its commit at 0: 1 ms after it
      step('status:write', 1, 2),
      step('race:callParticipant', 3, 13), // answered 202 at once
      step('timer', 13, 1013), // the delta ran 100 ms of it
      step('race:callParticipant', 1014, 1020), // the poll: 200
      step('activity:renew', 1020, 1022),
      step('activity:swap', 1090, 1200), // its commit at 1100 ends the hold
      { ...step('now', 0, 1100), resourceId: 'other' }, // another resource's step
    ],
    [{ resourceId: 'r', startedAt: 5, endedAt: 105 }],
  );
  expect(spent).toEqual({
    'escalate (after its commit)': 1,
    'status writes': 1,
    'lock renewals': 2,
    'participant calls less work': 10 - 8 + 6, // the POST's 10 ms less the 8 of work inside it, the poll
    'poll timers': 1000 - 92,
    'swap (to its commit)': 10,
    'other steps': 0,
    'between steps': 1100 - 100 - (1 + 1 + 2 + 8 + 908 + 10),
  });
});

test('the control: a hold whose thread waited for a CPU is told apart; quiet holds give the coordination its own figure', () => {
  const hold = (overheadMs: number, cpuWaitMs: number | null): ContendedHold => ({
    ...holdOverhead({ resourceId: 'r', from: 0, to: 100 + overheadMs, endedBy: 'swap' }, [
      { resourceId: 'r', startedAt: 0, endedAt: 100 },
    ]),
    cpuWaitMs,
  });
  const report = contentionReport([hold(8, 0), hold(10, 5), hold(90, 85), hold(60, 20), hold(12, null)], 5);
  // the platform that did not say (null) is left out of every figure
  expect(report.cpuWaitMs).toEqual({ count: 4, p50: 5, p99: 85, max: 85 });
  // quiet: waited ≤ 5 ms (the 90 ms hold waited 85 ms, the 60 ms one 20 ms: both out)
  expect(report.quietOverheadMs).toEqual({ count: 2, p50: 8, p99: 10, max: 10 });
  // less the wait: 8, 5, 5, 40 — the 60 ms hold keeps 40 ms the machine does not explain
  expect(report.overheadLessWaitMs).toEqual({ count: 4, p50: 5, p99: 40, max: 40 });
  expect(hold(90, 85).overheadMs).toBe(90);
  // over 50 ms: the 90 ms hold (within it less its 85 ms wait) and the 60 ms one (40 ms: within it too)
  expect(report.overBound).toEqual({ boundMs: 50, count: 2, withinItLessTheWait: 2 });
  expect(contentionReport([hold(120, 20)], 5).overBound).toEqual({
    boundMs: 50,
    count: 1,
    withinItLessTheWait: 0,
  });
});
