import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InProcessCampaignRunner } from '../../shared/campaign/inProcess';
import type { TickResult } from '../../shared/campaign/service';
import { countsFrom, emptyHistogram } from '../../shared/campaign/plan';
import type { CampaignRecord, CampaignState } from '../../shared/campaign/types';
import { SqliteCampaignRecords } from '../../shared/campaign/store/sqlite/campaigns';
import { ManualClock } from '../../testkit/clock';
import { VirtualScheduler } from '../../testkit/virtualScheduler';

/**
 * The in-process campaign runner's loop (shared/campaign/inProcess.ts), with a scripted tick: one loop
 * per campaign, ticks at nextTickAt or on a wake, a failing tick retried with back-off, resumeAll of
 * the unfinished, stop and idle.
 */

const dir = mkdtempSync(join(tmpdir(), 'routelock-campaign-runner-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function setup(script: (campaignId: string, n: number, now: number) => TickResult | Error) {
  const clock = new ManualClock(0);
  const scheduler = new VirtualScheduler(clock);
  const campaigns = new SqliteCampaignRecords(join(dir, `${Math.random()}.db`));
  const ticks: { campaignId: string; at: number }[] = [];
  let inTick = 0;
  let overlapping = 0;
  const logs: string[] = [];
  const runner = new InProcessCampaignRunner({
    scheduler,
    campaigns,
    log: (message) => logs.push(message),
    tick: async (campaignId) => {
      inTick += 1;
      overlapping = Math.max(overlapping, inTick);
      await new Promise((r) => setImmediate(r));
      inTick -= 1;
      const n = ticks.filter((t) => t.campaignId === campaignId).length;
      ticks.push({ campaignId, at: clock.now() });
      const result = script(campaignId, n, clock.now());
      if (result instanceof Error) throw result;
      return result;
    },
  });
  return { clock, scheduler, campaigns, runner, ticks, logs, overlapping: () => overlapping };
}

const next = (now: number, ms = 5000): TickResult => ({
  done: false,
  status: 'Running',
  nextTickAt: now + ms,
});
const done: TickResult = { done: true, status: 'Completed', nextTickAt: 0 };

test('ticks at each nextTickAt until done; a second launch makes no second loop (it ticks the one there again)', async () => {
  const s = setup((_id, n, now) => (n < 3 ? next(now) : done));
  await s.runner.launch('c-1');
  await s.runner.launch('c-1');
  await s.scheduler.runWhile(() => s.runner.activeCount > 0);
  await s.runner.idle();
  expect(s.ticks.map((t) => t.at)).toEqual([0, 0, 5000, 10_000]);
  expect(s.overlapping()).toBe(1);
  expect(s.runner.activeCount).toBe(0);
});

test('a wake ticks at once; a wake during a tick ticks again right after', async () => {
  const s = setup((_id, n, now) => (n < 4 ? next(now, 60_000) : done));
  await s.runner.launch('c-1');
  const turns = async (k: number) => {
    for (let i = 0; i < k; i += 1) await new Promise((r) => setImmediate(r));
  };
  await turns(5);
  expect(s.ticks).toHaveLength(1);
  await s.runner.wake('c-1');
  await turns(1);
  await s.runner.wake('c-1'); // during the second tick
  await turns(5);
  expect(s.ticks).toHaveLength(3);
  await s.scheduler.runWhile(() => s.runner.activeCount > 0);
  expect(s.ticks.map((t) => t.at)).toEqual([0, 0, 0, 60_000, 120_000]);
});

test('a tick that throws is logged and retried with back-off (1, 2, 4 s), the loop goes on', async () => {
  const s = setup((_id, n, now) => (n < 3 ? new Error(`store down ${n}`) : n < 4 ? next(now) : done));
  await s.runner.launch('c-1');
  await s.scheduler.runWhile(() => s.runner.activeCount > 0);
  expect(s.ticks.map((t) => t.at)).toEqual([0, 1000, 3000, 7000, 12_000]);
  expect(s.logs.filter((l) => l === 'campaign tick failed')).toHaveLength(3);
});

test('resumeAll launches every Running, Paused and Cancelling campaign; stop ends the loops, idle returns', async () => {
  const s = setup((_id, _n, now) => next(now));
  const record = (campaignId: string, status: CampaignState): CampaignRecord => ({
    campaignId,
    target: { region: 'eastus', account: 'a' },
    limits: { maxConcurrent: 1 },
    status,
    source: { kind: 'ids' },
    createdAt: new Date(0).toISOString(),
    updatedAt: new Date(0).toISOString(),
    createdBy: 'op',
    pages: 0,
    reserved: 0,
    counts: countsFrom({}),
    recentStarts: [],
    writeLockHistogram: emptyHistogram(),
  });
  for (const [id, status] of [
    ['c-run', 'Running'],
    ['c-pause', 'Paused'],
    ['c-cancel', 'Cancelling'],
    ['c-done', 'Completed'],
    ['c-gone', 'Cancelled'],
  ] as const)
    await s.campaigns.create(record(id, status));
  expect(await s.runner.resumeAll()).toBe(3);
  expect(await s.runner.resumeAll()).toBe(0);
  await s.scheduler.runUntilIdle({ maxTimers: 3 });
  expect(new Set(s.ticks.map((t) => t.campaignId))).toEqual(new Set(['c-run', 'c-pause', 'c-cancel']));
  s.runner.stop();
  await s.runner.idle();
  expect(s.runner.activeCount).toBe(0);
  const ticked = s.ticks.length;
  await s.scheduler.runUntilIdle();
  expect(s.ticks.length).toBe(ticked);
  await s.runner.launch('c-run');
  expect(s.runner.activeCount).toBe(0);
});
