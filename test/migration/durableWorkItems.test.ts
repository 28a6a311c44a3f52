import { countWorkItems, measureAll, table } from '../../bench/durableWorkItems';

/**
 * The Durable work items one migration costs, measured through the real executor (bench/durableWorkItems.ts)
 * and pinned here, so the README's sizing ("Sizing the Durable backend") cannot drift from the code: a
 * workflow change that adds a step fails this test until the README's table is measured again.
 */

test('work items per migration: 0, 1 and 2 participants under the dev and production profiles', async () => {
  const rows = await measureAll();
  expect(rows.every((r) => r.status === 'Completed')).toBe(true);
  expect(table(rows)).toBe(
    [
      '| profile | participants | activities | timers | HTTP calls | episodes | work items | DTS actions |',
      '|---|---:|---:|---:|---:|---:|---:|---:|',
      '| dev | 0 | 7 | 1 | 0 | 9 | 16 | 16 |',
      '| dev | 1 | 7 | 3 | 2 | 11 | 20 | 22 |',
      '| dev | 2 | 7 | 3 | 4 | 13 | 24 | 26 |',
      '| production | 0 | 7 | 1 | 0 | 9 | 16 | 16 |',
      '| production | 1 | 7 | 5 | 2 | 13 | 22 | 24 |',
      '| production | 2 | 7 | 5 | 4 | 15 | 26 | 28 |',
    ].join('\n'),
  );
  // no sub-orchestrations or external events: the harness fails on any action but activity, timer, HTTP
  expect(rows.every((r) => r.subOrchestrations === 0 && r.externalEvents === 0)).toBe(true);
});

test('a long bulk copy adds one renewal per third of the hard-delete lease (a 300 s lease: every 100 s)', async () => {
  // A participant answers within the Durable HTTP client's 240 s, so the renewals are shown on a short
  // lease (production renews every 2 h of a copy that long-running participants report by polling).
  // one delta attempt: a 300 s hard-delete lease cannot outlast a 900 s overrun (config.ts timingInequalities)
  const env = { ROUTELOCK_HARD_DELETE_LEASE_SECONDS: '300', ROUTELOCK_DELTA_ATTEMPTS: '1' };
  const short = await countWorkItems({ profile: 'production', participants: 1, env });
  const oneRenewal = await countWorkItems({ profile: 'production', participants: 1, env, copySeconds: 101 });
  const twoRenewals = await countWorkItems({ profile: 'production', participants: 1, env, copySeconds: 201 });
  const delta = (a: typeof short, b: typeof short) => ({
    activities: b.activities - a.activities,
    timers: b.timers - a.timers,
    httpCalls: b.httpCalls - a.httpCalls,
    episodes: b.episodes - a.episodes,
    workItems: b.workItems - a.workItems,
    schedulerActions: b.schedulerActions - a.schedulerActions,
  });
  // each renewal: the renew activity, the next renewal timer, the participant asked again, 3 episodes
  const perRenewal = {
    activities: 1,
    timers: 1,
    httpCalls: 1,
    episodes: 3,
    workItems: 5,
    schedulerActions: 5,
  };
  expect(delta(short, oneRenewal)).toEqual(perRenewal);
  expect(delta(oneRenewal, twoRenewals)).toEqual(perRenewal);
});
