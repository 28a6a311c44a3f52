import { RouteLockError } from '../../shared/core/errors';
import {
  type CampaignCommand,
  type StartsAllowedInput,
  addToHistogram,
  bucketOf,
  campaignView,
  checkedLimits,
  commandOutcome,
  countsFrom,
  dueForCheck,
  emptyHistogram,
  etaSeconds,
  histogramQuantile,
  memberCheckIntervalMs,
  memberStateOf,
  nextCampaignState,
  patchedLimits,
  pruneStarts,
  startLost,
  startsAllowed,
  throttleAfterTick,
  throttledAfter,
  TICK_LEASE_MS,
} from '../../shared/campaign/plan';
import type { CampaignLimits, CampaignRecord, CampaignState, StartBatch } from '../../shared/campaign/types';
import { campaignStates } from '../../shared/campaign/types';
import type { MigrationState } from '../../shared/migration/types';

/** The campaign's rules (shared/campaign/plan.ts), row by row. */

const NOW = 1_000_000;
const base: StartsAllowedInput = {
  limits: { maxConcurrent: 10, startsPerMinute: 30 },
  running: 0,
  pending: 100,
  recentStarts: [],
  now: NOW,
};

describe('startsAllowed', () => {
  const rows: [string, Partial<StartsAllowedInput>, number][] = [
    ['the concurrency room', {}, 10],
    ['less the running', { running: 7 }, 3],
    ['never negative when over the limit (lowered by a PATCH)', { running: 12 }, 0],
    ['no more than are waiting', { pending: 2 }, 2],
    ['nothing waiting', { pending: 0 }, 0],
    [
      'the rate room: starts of the last 60 s count',
      {
        limits: { maxConcurrent: 100, startsPerMinute: 30 },
        recentStarts: [{ at: NOW - 59_999, count: 25 }],
      },
      5,
    ],
    [
      'a batch exactly 60 s old no longer counts (strict)',
      {
        limits: { maxConcurrent: 100, startsPerMinute: 30 },
        recentStarts: [{ at: NOW - 60_000, count: 25 }],
      },
      30,
    ],
    [
      'batches sum',
      {
        limits: { maxConcurrent: 100, startsPerMinute: 30 },
        recentStarts: [
          { at: NOW - 1000, count: 10 },
          { at: NOW - 2000, count: 15 },
          { at: NOW - 70_000, count: 30 },
        ],
      },
      5,
    ],
    [
      'rate used up',
      { limits: { maxConcurrent: 100, startsPerMinute: 30 }, recentStarts: [{ at: NOW, count: 31 }] },
      0,
    ],
    ['no rate limit', { limits: { maxConcurrent: 50 }, recentStarts: [{ at: NOW, count: 1000 }] }, 50],
    ['throttled: nothing before until', { throttle: { until: NOW + 1, backoffMs: 1000, reason: '429' } }, 0],
    ['throttle run out', { throttle: { until: NOW, backoffMs: 1000, reason: '429' } }, 10],
  ];
  test.each(rows)('%s', (_label, change, expected) => {
    expect(startsAllowed({ ...base, ...change })).toBe(expected);
  });

  /** Any run of ticks, each starting what is allowed: the sum in every 60 s window (t − 60 s, t]. */
  function worstWindow(
    allowed: (input: StartsAllowedInput) => number,
    tickMs: number,
    limit: number,
  ): number {
    let recent: StartBatch[] = [];
    const all: StartBatch[] = [];
    for (let now = 0; now < 600_000; now += tickMs) {
      const count = allowed({
        limits: { maxConcurrent: 10_000, startsPerMinute: limit },
        running: 0,
        pending: 10_000,
        recentStarts: recent,
        now,
      });
      if (count > 0) {
        recent = [...pruneStarts(recent, now), { at: now, count }];
        all.push({ at: now, count });
      }
    }
    return Math.max(
      ...all.map((b) =>
        all.filter((o) => o.at > b.at - 60_000 && o.at <= b.at).reduce((s, o) => s + o.count, 0),
      ),
    );
  }

  test.each([1000, 7000, 13_000, 60_000, 61_000])(
    'no 60 s window holds more than startsPerMinute starts (tick every %i ms)',
    (tickMs) => {
      expect(worstWindow(startsAllowed, tickMs, 30)).toBeLessThanOrEqual(30);
    },
  );

  test('negative control: a rule whose window is a second short lets a 60 s window hold twice the limit', () => {
    const inclusive = (input: StartsAllowedInput) =>
      startsAllowed({
        ...input,
        recentStarts: input.recentStarts.filter((b) => b.at > input.now - 59_000),
      });
    expect(worstWindow(inclusive, 1000, 30)).toBeGreaterThan(30);
  });

  test('pruneStarts keeps the batches that still count', () => {
    expect(
      pruneStarts(
        [
          { at: NOW - 60_000, count: 1 },
          { at: NOW - 59_999, count: 2 },
        ],
        NOW,
      ),
    ).toEqual([{ at: NOW - 59_999, count: 2 }]);
  });
});

describe('throttle back-off', () => {
  test('doubles from 1 s to a 60 s cap', () => {
    let throttle = throttledAfter(undefined, 0, '429');
    const backoffs = [throttle.backoffMs];
    for (let i = 0; i < 8; i += 1) {
      throttle = throttledAfter(throttle, throttle.until, '429');
      backoffs.push(throttle.backoffMs);
    }
    expect(backoffs).toEqual([1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000, 60_000]);
    expect(throttle).toMatchObject({ reason: '429' });
  });

  test('a tick: kept while it runs, cleared after an unthrottled tick, doubled on another throttled start', () => {
    const t = throttledAfter(undefined, NOW, 'x');
    expect(throttleAfterTick(t, NOW + 500, undefined)).toBe(t);
    expect(throttleAfterTick(t, NOW + 1000, undefined)).toBeUndefined();
    expect(throttleAfterTick(t, NOW + 1000, 'y')).toEqual({
      until: NOW + 3000,
      backoffMs: 2000,
      reason: 'y',
    });
    expect(throttleAfterTick(undefined, NOW, undefined)).toBeUndefined();
  });
});

describe('state transitions', () => {
  const rows: [CampaignState, number, number, boolean, CampaignState][] = [
    ['Running', 0, 0, true, 'Completed'],
    ['Running', 1, 0, true, 'Running'],
    ['Running', 0, 1, true, 'Running'],
    ['Running', 0, 0, false, 'Running'], // the selection goes on
    ['Paused', 0, 0, true, 'Paused'],
    ['Cancelling', 0, 0, false, 'Cancelled'],
    ['Cancelling', 0, 2, true, 'Cancelling'],
    ['Cancelling', 3, 0, true, 'Cancelling'], // the tick cancels the pending first
    ['Cancelled', 0, 0, true, 'Cancelled'],
    ['Completed', 5, 0, true, 'Completed'],
  ];
  test.each(rows)(
    '%s, pending %i, running %i, selection done %s → %s',
    (status, pending, running, done, next) => {
      expect(nextCampaignState(status, { pending, running }, done)).toBe(next);
    },
  );
});

describe('commands', () => {
  const rows: [CampaignState, CampaignCommand, CampaignState | 'CampaignEnded'][] = [
    ['Running', 'pause', 'Paused'],
    ['Paused', 'pause', 'Paused'],
    ['Cancelling', 'pause', 'CampaignEnded'],
    ['Cancelled', 'pause', 'CampaignEnded'],
    ['Completed', 'pause', 'CampaignEnded'],
    ['Paused', 'resume', 'Running'],
    ['Running', 'resume', 'Running'],
    ['Cancelling', 'resume', 'CampaignEnded'],
    ['Cancelled', 'resume', 'CampaignEnded'],
    ['Completed', 'resume', 'CampaignEnded'],
    ['Running', 'cancel', 'Cancelling'],
    ['Paused', 'cancel', 'Cancelling'],
    ['Cancelling', 'cancel', 'Cancelling'],
    ['Cancelled', 'cancel', 'Cancelled'],
    ['Completed', 'cancel', 'Completed'],
  ];
  test.each(rows)('%s + %s → %s', (status, command, expected) => {
    if (expected === 'CampaignEnded') {
      const error = (() => {
        try {
          return commandOutcome(status, command, 'c-1');
        } catch (e) {
          return e;
        }
      })();
      expect(error).toBeInstanceOf(RouteLockError);
      expect(error).toMatchObject({ code: 'CampaignEnded' });
    } else expect(commandOutcome(status, command, 'c-1')).toBe(expected);
  });
  test('every state has a row for every command', () => {
    for (const s of campaignStates)
      for (const c of ['pause', 'resume', 'cancel'] as const)
        expect(rows.some(([rs, rc]) => rs === s && rc === c)).toBe(true);
  });
});

describe('write-lock histogram', () => {
  test('fixed log buckets: 1 ms to 1 h in 60', () => {
    expect(emptyHistogram()).toHaveLength(60);
    expect(bucketOf(0)).toBe(0);
    expect(bucketOf(1)).toBe(0);
    expect(bucketOf(10)).toBe(9);
    expect(bucketOf(11)).toBe(10);
    expect(bucketOf(3_600_000)).toBe(59);
    expect(bucketOf(1e9)).toBe(59);
  });

  test('p50 and p99 within a bucket (≤ 29 % above the hold); null when empty', () => {
    expect(histogramQuantile(emptyHistogram(), 0.5)).toBeNull();
    expect(histogramQuantile([], 0.99)).toBeNull();
    let h: number[] = [];
    for (let i = 0; i < 98; i += 1) h = addToHistogram(h, 2000);
    h = addToHistogram(h, 30_000);
    h = addToHistogram(h, 30_000);
    const p50 = histogramQuantile(h, 0.5) as number;
    const p99 = histogramQuantile(h, 0.99) as number;
    expect(p50).toBeGreaterThanOrEqual(2);
    expect(p50).toBeLessThan(2 * 1.3);
    expect(p99).toBeGreaterThanOrEqual(30);
    expect(p99).toBeLessThan(30 * 1.3);
    expect(histogramQuantile(addToHistogram([], 5000), 0.99)).toBeGreaterThanOrEqual(5);
  });
});

describe('ETA, member states, counts, the view', () => {
  const counts = countsFrom({ pending: 60, running: 10, completed: 25, failed: 5 });
  test('countsFrom fills zeros and totals', () => {
    expect(counts).toEqual({
      pending: 60,
      running: 10,
      completed: 25,
      noOp: 0,
      failed: 5,
      conflict: 0,
      cancelled: 0,
      skipped: 0,
      total: 100,
    });
  });

  // 30 ended migrations of 10 s each on average
  const ended = { count: 30, totalMs: 300_000 };
  const eta = (
    pending: number,
    running: number,
    elapsedMs: number,
    limits: CampaignLimits = { maxConcurrent: 10 },
    endedMigrations: typeof ended | null = ended,
  ) =>
    etaSeconds({
      pending,
      running,
      endedMigrations: endedMigrations ?? undefined,
      runningStartedAt: NOW - elapsedMs,
      limits,
      now: NOW,
    });
  test.each([
    // the last wave running: mean − elapsed, falling as they run (the old rate estimate rose), never < 0
    ['last 10 running, 4 s in', eta(0, 10, 4000), 6],
    ['last 10 running, 6 s in', eta(0, 10, 6000), 4],
    ['last 10 running, 8 s in', eta(0, 10, 8000), 2],
    ['last 10 running, 9 s in', eta(0, 10, 9000), 1],
    ['last 10 running, past the mean', eta(0, 10, 12_000), 0],
    // pending in waves of maxConcurrent
    ['5 pending, slots free: one wave', eta(5, 0, 0), 10],
    ['25 pending, nothing running: 3 waves', eta(25, 0, 0), 30],
    ['60 pending behind 10 running 4 s in: 6 s, then 6 waves', eta(60, 10, 4000), 66],
    ['25 pending, 5 running 4 s in: 5 start now, 20 after 6 s in 2 waves', eta(25, 5, 4000), 26],
    ['maxConcurrent lowered under the running: waits for them', eta(6, 10, 4000, { maxConcurrent: 3 }), 26],
    // 30 a minute allow 5 starts in one 10 s mean: waves of 5
    ['startsPerMinute 30: waves of 5', eta(20, 0, 0, { maxConcurrent: 10, startsPerMinute: 30 }), 40],
    ['startsPerMinute 1, long mean: waves of 1', eta(2, 0, 0, { maxConcurrent: 10, startsPerMinute: 1 }), 20],
    ['nothing left', eta(0, 0, 0), 0],
    ['none ended yet: null', eta(5, 2, 0, { maxConcurrent: 10 }, null), null],
    ['none ended with a duration: null', eta(5, 2, 0, { maxConcurrent: 10 }, { count: 0, totalMs: 0 }), null],
  ] as [string, number | null, number | null][])('etaSeconds: %s', (_row, got, want) => {
    expect(got).toBe(want);
  });

  test.each([
    ['Completed', 'completed'],
    ['NoOp', 'noOp'],
    ['Failed', 'failed'],
    ['Conflict', 'conflict'],
    ['Cancelled', 'cancelled'],
    ['Running', 'running'],
    ['Pending', 'running'],
  ] as [MigrationState, string][])('memberStateOf(%s) = %s', (state, member) => {
    expect(memberStateOf(state)).toBe(member);
  });

  test('campaignView: the status, its migrations url, nothing secret', () => {
    const record: CampaignRecord = {
      campaignId: 'c-1',
      target: { region: 'eastus', account: 'a' },
      limits: { maxConcurrent: 7, startsPerMinute: 30 },
      status: 'Running',
      source: { kind: 'from', region: 'westeurope', selected: 100, done: false, continuation: 'opaque' },
      createdAt: new Date(NOW - 120_000).toISOString(),
      updatedAt: new Date(NOW).toISOString(),
      createdBy: 'operator-1',
      pages: 1,
      reserved: 100,
      counts,
      recentStarts: [{ at: NOW, count: 3 }],
      throttle: { until: NOW + 5000, backoffMs: 4000, reason: 'Store throttled (429).' },
      writeLockHistogram: addToHistogram([], 1500),
      firstStartAt: NOW - 60_000,
      endedMigrations: { count: 30, totalMs: 300_000 },
      runningStartedAt: NOW - 4000,
      tickLease: { owner: 'tick-owner-uuid', until: NOW + 60_000 },
    };
    const view = campaignView(record, NOW);
    expect(view).toMatchObject({
      campaignId: 'c-1',
      status: 'Running',
      source: { kind: 'from', region: 'westeurope', selected: 100, done: false },
      startedAt: new Date(NOW - 60_000).toISOString(),
      // 10 running 4 s into a 10 s mean, then 60 pending in waves of 7 (30 a minute allow 5 in 10 s: 5)
      etaSeconds: 126,
      throttledUntil: new Date(NOW + 5000).toISOString(),
      migrationsUrl: '/api/migrations?campaignId=c-1',
    });
    expect(view.writeLockSeconds?.p50).toBeGreaterThanOrEqual(1.5);
    // the store's continuation and the batches stay inside
    expect(JSON.stringify(view)).not.toMatch(/opaque|recentStarts|createdBy|tick-owner/);
    expect(
      campaignView({ ...record, throttle: { ...record.throttle!, until: NOW } }, NOW),
    ).not.toHaveProperty('throttledUntil');
  });
});

describe('limits', () => {
  test('defaults and bounds', () => {
    expect(checkedLimits({}, 3)).toEqual({ maxConcurrent: 10 });
    expect(checkedLimits({ maxConcurrent: 10_000, startsPerMinute: 1, migrationAttempts: 3 }, 3)).toEqual({
      maxConcurrent: 10_000,
      startsPerMinute: 1,
      migrationAttempts: 3,
    });
    for (const bad of [
      { maxConcurrent: 0 },
      { maxConcurrent: 10_001 },
      { maxConcurrent: 1.5 },
      { startsPerMinute: 0 },
      { migrationAttempts: 4 },
    ])
      expect(() => checkedLimits(bad, 3)).toThrow(expect.objectContaining({ code: 'BadRequest' }));
  });
  test('a PATCH replaces what it names; startsPerMinute null removes the rate limit', () => {
    const limits = { maxConcurrent: 5, startsPerMinute: 30, migrationAttempts: 2 };
    expect(patchedLimits(limits, { maxConcurrent: 9 }, 3)).toEqual({ ...limits, maxConcurrent: 9 });
    expect(patchedLimits(limits, { startsPerMinute: null }, 3)).toEqual({
      maxConcurrent: 5,
      migrationAttempts: 2,
    });
    expect(patchedLimits(limits, { startsPerMinute: 60 }, 3)).toEqual({ ...limits, startsPerMinute: 60 });
    expect(() => patchedLimits(limits, { maxConcurrent: 0 }, 3)).toThrow(
      expect.objectContaining({ code: 'BadRequest' }),
    );
  });
});

describe('when a running member is read', () => {
  const TICK = 5000;
  test.each([
    // age, interval: every tick while young, then doublings of the tick near a tenth of the age, capped
    [0, 5000],
    [49_000, 5000],
    [100_000, 10_000],
    [200_000, 20_000],
    [400_000, 40_000],
    [800_000, 40_000],
    [7_200_000, 40_000],
  ])('at age %i ms every %i ms', (age, interval) => {
    expect(memberCheckIntervalMs(age, TICK)).toBe(interval);
  });

  test.each([
    ['never read yet (no start time)', undefined, NOW, NOW - TICK, true],
    ['started since the last tick', NOW - 1000, NOW, NOW - TICK, true],
    ['young: every tick', NOW - 30_000, NOW, NOW - TICK, true],
    ['old, no multiple crossed', 0, 7_210_000, 7_205_000, false],
    ['old, a multiple crossed', 0, 7_200_000, 7_195_000, true],
  ] as const)('%s', (_name, startedAt, now, lastTickAt, due) => {
    expect(dueForCheck(startedAt, now, lastTickAt, TICK)).toBe(due);
  });

  test('over a two-hour migration on 5 s ticks: about 200 reads instead of 1,440, and none more than 40 s apart', () => {
    const startedAt = 0;
    const reads: number[] = [];
    for (let now = TICK; now <= 7_200_000; now += TICK) {
      if (dueForCheck(startedAt, now, now - TICK, TICK)) reads.push(now);
    }
    expect(reads.length).toBeGreaterThan(100);
    expect(reads.length).toBeLessThan(250);
    const gaps = reads.slice(1).map((at, i) => at - (reads[i] as number));
    expect(Math.max(...gaps)).toBeLessThanOrEqual(40_000);
    // negative control: reading on every tick would be 1,440
    expect(7_200_000 / TICK).toBe(1440);
  });
});

test.each([
  ['no mark', undefined, true],
  ['marked a lease ago: maybe a start still under way', NOW - TICK_LEASE_MS, false],
  ['marked a lease and 1 ms ago: lost', NOW - TICK_LEASE_MS - 1, true],
] as const)('startLost: %s', (_name, markedAt, lost) => {
  expect(startLost(markedAt, NOW)).toBe(lost);
});
