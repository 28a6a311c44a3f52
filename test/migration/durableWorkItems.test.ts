import { countWorkItems, measureAll, measureAnnounced, table } from '../../bench/durableWorkItems';

/**
 * The Durable work items one migration costs, measured through the real executor (bench/durableWorkItems.ts)
 * and pinned here, so the operators' guide's sizing (docs/operators.md, "Sizing the Durable backend") cannot drift from the code: a
 * workflow change that adds a step fails this test until that table is measured again.
 */

test('work items per migration: 0, 1 and 2 participants under the dev and production profiles', async () => {
  const rows = await measureAll();
  expect(rows.every((r) => r.status === 'Completed')).toBe(true);
  // workflow version 5 (docs/design.md §6.7): no re-read after the pre-lock (one activity fewer) and, without
  // participants, no read-path check (another fewer)
  expect(table(rows)).toBe(
    [
      '| profile | participants | activities | timers | HTTP calls | episodes | work items | DTS actions |',
      '|---|---:|---:|---:|---:|---:|---:|---:|',
      '| dev | 0 | 6 | 3 | 0 | 10 | 16 | 16 |',
      '| dev | 1 | 9 | 14 | 7 | 25 | 41 | 47 |',
      '| dev | 2 | 9 | 14 | 14 | 32 | 55 | 61 |',
      '| production | 0 | 6 | 3 | 0 | 10 | 16 | 16 |',
      '| production | 1 | 7 | 14 | 7 | 27 | 41 | 43 |',
      '| production | 2 | 7 | 14 | 14 | 34 | 55 | 57 |',
    ].join('\n'),
  );
  // no sub-orchestrations or external events: the harness fails on any action but activity, timer, HTTP
  expect(rows.every((r) => r.subOrchestrations === 0 && r.externalEvents === 0)).toBe(true);
});

test('under announced locks: the same cases with ROUTELOCK_ANNOUNCED_LOCKS=true', async () => {
  const [plain, rows] = [await measureAll(), await measureAnnounced()];
  expect(rows.every((r) => r.status === 'Completed')).toBe(true);
  // Against the table above (docs/design.md §6.3): the pre-lock is already the hard-delete lock, so no
  // escalation to it (one activity fewer); the write-lock attempt announces its window (the announce
  // activity) and holds the hard-delete lock until W + S, a round per third of the hard-delete lease, each a
  // renewal and a timer (L + S = 4 s in dev: one round; 8110 s in production against a third of 2 h: two).
  // The activation's wait-out rounds (ConvergencePending, asked again after Retry-After) add none here:
  // the harness fires the hold's last timer at W + S exactly; a timer that fires early (Azure Storage: up
  // to 1 s) adds an escalation and a timer per round. Episodes follow the activities and timers.
  expect(table(rows)).toBe(
    [
      '| profile | participants | activities | timers | HTTP calls | episodes | work items | DTS actions |',
      '|---|---:|---:|---:|---:|---:|---:|---:|',
      '| dev | 0 | 7 | 4 | 0 | 12 | 19 | 19 |',
      '| dev | 1 | 10 | 15 | 7 | 27 | 44 | 50 |',
      '| dev | 2 | 10 | 15 | 14 | 34 | 58 | 64 |',
      '| production | 0 | 8 | 5 | 0 | 14 | 22 | 22 |',
      '| production | 1 | 9 | 16 | 7 | 32 | 48 | 49 |',
      '| production | 2 | 9 | 16 | 14 | 39 | 62 | 63 |',
    ].join('\n'),
  );
  // the difference, row by row, is exactly that: one announcement, the hold's rounds, one escalation fewer
  const holdRounds = { dev: 1, production: 2 };
  rows.forEach((r, i) => {
    const before = plain[i]!;
    const rounds = holdRounds[r.profile as keyof typeof holdRounds];
    expect(r.announces).toBe(1);
    expect(r.renewals - before.renewals).toBe(rounds);
    expect(r.activities - before.activities).toBe(1 + rounds - 1);
    expect(r.timers - before.timers).toBe(rounds);
    expect(r.httpCalls).toBe(before.httpCalls);
  });
  expect(plain.every((r) => r.announces === 0)).toBe(true);
  expect(rows.every((r) => r.subOrchestrations === 0 && r.externalEvents === 0)).toBe(true);
});

test('a long bulk copy adds one renewal per third of the hard-delete lease (a 300 s lease: every 100 s), polled at the cap between', async () => {
  // one delta attempt: a 300 s hard-delete lease cannot outlast a 900 s overrun (timingInequalities, shared/migration/settings.ts)
  const env = { ROUTELOCK_HARD_DELETE_LEASE_SECONDS: '300', ROUTELOCK_DELTA_ATTEMPTS: '1' };
  const [short, oneRenewal, twoRenewals] = await Promise.all(
    [undefined, 101, 201].map((copySeconds) =>
      countWorkItems({
        profile: 'production',
        participants: 1,
        env,
        ...(copySeconds ? { copySeconds } : {}),
      }),
    ),
  );
  expect([short, oneRenewal, twoRenewals].map((c) => c!.renewals)).toEqual([0, 1, 2]);
  // 100 s more of copy: the polls at the 30 s cap (3 or 4) and one renewal, nothing else
  const morePolls = twoRenewals!.httpCalls - oneRenewal!.httpCalls;
  expect(morePolls).toBeGreaterThanOrEqual(3);
  expect(morePolls).toBeLessThanOrEqual(4);
  expect(twoRenewals!.activities - oneRenewal!.activities).toBe(1);
});
