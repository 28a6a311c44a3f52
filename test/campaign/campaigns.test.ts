import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Campaigns } from '../../shared/campaign/campaigns';
import type { CampaignLauncher } from '../../shared/campaign/service';
import { campaignSettings } from '../../shared/campaign/tick';
import { MAX_CAMPAIGN_PAGES } from '../../shared/campaign/types';
import { parseConfig } from '../../shared/config';
import { RouteLockError, errorKind } from '../../shared/core/errors';
import { Router } from '../../shared/core/router';
import { SqliteCampaignRecords } from '../../shared/campaign/store/sqlite/campaigns';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { ManualClock } from '../../testkit/clock';
import { TARGET, campaignHarness, operator } from './harness';

/**
 * The campaign service's own checks (shared/campaign/campaigns.ts) over SqliteCampaignRecords: what a
 * request means (bad input is a 400 and changes nothing), the create's idempotency, the page budget,
 * the commands' states, and the runner launched or woken after each write.
 */

const dir = mkdtempSync(join(tmpdir(), 'routelock-campaigns-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

/** A launcher that only records what it was asked: these tests look at the service, not a runner. */
class RecordingLauncher implements CampaignLauncher {
  readonly calls: string[] = [];
  async launch(campaignId: string): Promise<void> {
    this.calls.push(`launch ${campaignId}`);
  }
  async wake(campaignId: string): Promise<void> {
    this.calls.push(`wake ${campaignId}`);
  }
}

function service(allowedRegions: string[] | null = null) {
  n += 1;
  const clock = new ManualClock();
  const config = parseConfig({ ROUTELOCK_PROFILE: 'dev' });
  const router = new Router({
    store: new SqliteStore(':memory:'),
    timing: config.timing,
    clock: clock.now,
    allowedRegions,
  });
  const records = new SqliteCampaignRecords(join(dir, `c${n}.db`));
  const launcher = new RecordingLauncher();
  const campaigns = new Campaigns({
    campaigns: records,
    router,
    launcher,
    now: clock.now,
    maxMigrationAttempts: 3,
  });
  return { campaigns, records, launcher, clock };
}

const code = async (p: Promise<unknown>) => {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(RouteLockError);
  return (error as RouteLockError).code;
};

describe('create', () => {
  test.each([
    ['neither resources nor from', { target: TARGET }, 'BadRequest'],
    ['both', { target: TARGET, resources: ['a'], from: { region: 'x' } }, 'BadRequest'],
    ['no ids', { target: TARGET, resources: [] }, 'BadRequest'],
    [
      '1,001 ids',
      { target: TARGET, resources: Array.from({ length: 1001 }, (_, i) => `r${i}`) },
      'BadRequest',
    ],
    ['a probe id', { target: TARGET, resources: ['r-1', 'probe-eastus'] }, 'BadRequest'],
    ['maxConcurrent 0', { target: TARGET, resources: ['a'], maxConcurrent: 0 }, 'BadRequest'],
    ['maxConcurrent 10,001', { target: TARGET, resources: ['a'], maxConcurrent: 10_001 }, 'BadRequest'],
    ['startsPerMinute 0', { target: TARGET, resources: ['a'], startsPerMinute: 0 }, 'BadRequest'],
    [
      'more attempts than configured',
      { target: TARGET, resources: ['a'], migrationAttempts: 4 },
      'BadRequest',
    ],
    ['from.limit 0', { target: TARGET, from: { region: 'westeurope', limit: 0 } }, 'BadRequest'],
    [
      'a target outside ROUTELOCK_REGIONS',
      { target: { region: 'mars', account: 'a' }, resources: ['a'] },
      'RegionNotAllowed',
    ],
  ])('%s: 400 %s, nothing saved, nothing launched', async (_label, request, expected) => {
    const s = service(['eastus', 'westeurope']);
    expect(await code(s.campaigns.create({ campaignId: 'c-bad', ...request } as never, operator))).toBe(
      expected,
    );
    expect(errorKind(expected as 'BadRequest').status).toBe(400);
    expect(await s.records.get('c-bad')).toBeNull();
    expect(s.launcher.calls).toEqual([]);
  });

  test('a new campaign: 202 created, its page 0 members (duplicates kept once), the runner launched', async () => {
    const s = service();
    const created = await s.campaigns.create(
      { target: TARGET, resources: ['a', 'b', 'a', 'c'], maxConcurrent: 3, startsPerMinute: 60 },
      operator,
    );
    expect(created.campaignId).toMatch(/^c-[0-9a-f-]{36}$/);
    expect(created).toMatchObject({
      created: true,
      status: {
        status: 'Running',
        limits: { maxConcurrent: 3, startsPerMinute: 60 },
        counts: { total: 3, pending: 3 },
        source: { kind: 'ids' },
        startedAt: null,
        etaSeconds: null,
        writeLockSeconds: null,
      },
    });
    expect(s.launcher.calls).toEqual([`launch ${created.campaignId}`]);
    const members = await s.records.members(created.campaignId, { state: 'pending', limit: 10 });
    expect(members.map((m) => [m.seq, m.resourceId])).toEqual([
      [0, 'a'],
      [1, 'b'],
      [3, 'c'],
    ]);
    expect((await s.records.get(created.campaignId))?.record.createdBy).toBe('operator-1');
  });

  test('the same id again: the same target answers the campaign (created: false, ids not added); another target is 409 CampaignExists', async () => {
    const s = service();
    await s.campaigns.create({ campaignId: 'c-1', target: TARGET, resources: ['a'] }, operator);
    const again = await s.campaigns.create(
      { campaignId: 'c-1', target: TARGET, resources: ['a', 'b'] },
      operator,
    );
    expect(again).toMatchObject({ campaignId: 'c-1', created: false, status: { counts: { total: 1 } } });
    expect(
      await code(
        s.campaigns.create(
          { campaignId: 'c-1', target: { region: 'northeurope', account: 'x' }, resources: ['a'] },
          operator,
        ),
      ),
    ).toBe('CampaignExists');
    expect(errorKind('CampaignExists').status).toBe(409);
    expect(s.launcher.calls).toEqual(['launch c-1', 'launch c-1', 'wake c-1']);
  });

  test('404 for an unknown campaign, on every command', async () => {
    const s = service();
    for (const call of [
      s.campaigns.status('nope'),
      s.campaigns.pause('nope', operator),
      s.campaigns.resume('nope', operator),
      s.campaigns.cancel('nope', operator),
      s.campaigns.update('nope', { maxConcurrent: 2 }, operator),
      s.campaigns.addResources('nope', ['a'], operator),
    ])
      expect(await code(call)).toBe('NotFound');
  });
});

describe('addResources', () => {
  test('appends a batch (seq reserved + i), counts duplicates, launches and wakes the runner', async () => {
    const s = service();
    await s.campaigns.create({ campaignId: 'c-1', target: TARGET, resources: ['a', 'b'] }, operator);
    const added = await s.campaigns.addResources('c-1', ['b', 'c', 'd', 'c'], operator);
    expect(added).toMatchObject({ added: 2, duplicates: 2, status: { counts: { total: 4, pending: 4 } } });
    const members = await s.records.members('c-1', { state: 'pending', limit: 10 });
    expect(members.map((m) => [m.seq, m.resourceId])).toEqual([
      [0, 'a'],
      [1, 'b'],
      [3, 'c'],
      [4, 'd'],
    ]);
    expect(s.launcher.calls).toEqual(['launch c-1', 'launch c-1', 'wake c-1']);
  });

  test('409 CampaignFull past 100,000 resources (any number of pages), and nothing changes', async () => {
    const s = service();
    await s.campaigns.create({ campaignId: 'c-1', target: TARGET, resources: ['a'] }, operator);
    // as though many small appends had come: pages are no cap, only the resources are
    const standing = (await s.records.get('c-1'))!;
    await s.records.replace({ ...standing.record, pages: MAX_CAMPAIGN_PAGES, reserved: 1000 }, standing.etag);
    expect(await s.campaigns.addResources('c-1', ['b'], operator)).toMatchObject({ added: 1 });
    expect((await s.records.members('c-1', { state: 'pending', limit: 10 })).map((m) => m.seq)).toEqual([
      0, 1000,
    ]);
    const nearlyFull = (await s.records.get('c-1'))!;
    await s.records.replace({ ...nearlyFull.record, pages: 5, reserved: 99_999 }, nearlyFull.etag);
    expect(await code(s.campaigns.addResources('c-1', ['b', 'c'], operator))).toBe('CampaignFull');
    expect((await s.records.get('c-1'))!.record).toMatchObject({ pages: 5, reserved: 99_999 });
    expect(await s.records.countMembers('c-1')).toEqual({ pending: 2 });
    expect(errorKind('CampaignFull').status).toBe(409);
  });

  test('409 CampaignEnded once Cancelling or ended', async () => {
    const s = service();
    await s.campaigns.create({ campaignId: 'c-1', target: TARGET, resources: ['a'] }, operator);
    await s.campaigns.cancel('c-1', operator);
    expect(await code(s.campaigns.addResources('c-1', ['b'], operator))).toBe('CampaignEnded');
  });

  test('resources added to a campaign that completed meanwhile reopen it: Running, launched again, it completes them', async () => {
    const h = campaignHarness({ env: { ROUTELOCK_CACHE_TIERS: 'local=1' } });
    try {
      await h.routes(['a', 'b', 'c']);
      const { campaignId } = await h.campaigns.create({ target: TARGET, resources: ['a'] }, operator);
      // the campaign completes between the page reservation and the members' insert
      const addMembers = h.records.addMembers.bind(h.records);
      let racing = true;
      h.records.addMembers = async (id, members) => {
        if (racing) {
          racing = false;
          await h.settle();
          expect((await h.campaigns.status(campaignId)).status).toBe('Completed');
        }
        return addMembers(id, members);
      };
      const added = await h.campaigns.addResources(campaignId, ['b', 'c'], operator);
      expect(added).toMatchObject({ added: 2, status: { status: 'Running' } });
      expect(added.status).not.toHaveProperty('endedAt');
      await h.settle();
      expect(await h.campaigns.status(campaignId)).toMatchObject({
        status: 'Completed',
        counts: { completed: 3, total: 3 },
      });
    } finally {
      h.cleanup();
    }
  });
});

describe('commands', () => {
  test('pause, resume, cancel and update: record CAS, stamps, the runner launched and woken', async () => {
    const s = service();
    await s.campaigns.create(
      { campaignId: 'c-1', target: TARGET, resources: ['a'], startsPerMinute: 30 },
      operator,
    );
    expect(await s.campaigns.pause('c-1', operator)).toMatchObject({
      status: 'Paused',
      pausedAt: expect.any(String),
    });
    expect(await s.campaigns.resume('c-1', operator)).toMatchObject({ status: 'Running' });
    expect(
      await s.campaigns.update('c-1', { maxConcurrent: 4, startsPerMinute: null }, operator),
    ).toMatchObject({
      limits: { maxConcurrent: 4 },
    });
    expect(await code(s.campaigns.update('c-1', { maxConcurrent: 0 }, operator))).toBe('BadRequest');
    const cancelled = await s.campaigns.cancel('c-1', { id: 'operator-2' });
    expect(cancelled).toMatchObject({ status: 'Cancelling', cancelRequestedBy: 'operator-2' });
    // a second cancel answers as it stands: the first request's time and actor stay
    expect(await s.campaigns.cancel('c-1', operator)).toEqual(cancelled);
    expect(await code(s.campaigns.pause('c-1', operator))).toBe('CampaignEnded');
    // every command launches (a no-op when it runs) and then wakes: a Durable launch alone does not tick
    expect(s.launcher.calls).toEqual([
      'launch c-1',
      ...['pause', 'resume', 'update', 'cancel'].flatMap(() => ['launch c-1', 'wake c-1']),
    ]);
  });

  test('list: newest first, by status, paged', async () => {
    const s = service();
    for (const id of ['c-1', 'c-2', 'c-3']) {
      await s.campaigns.create({ campaignId: id, target: TARGET, resources: ['a'] }, operator);
      s.clock.advance(1000);
    }
    await s.campaigns.pause('c-2', operator);
    const first = await s.campaigns.list({ limit: 2 });
    expect(first.items.map((c) => c.campaignId)).toEqual(['c-3', 'c-2']);
    const second = await s.campaigns.list({ limit: 2, continuation: first.continuation });
    expect(second.items.map((c) => c.campaignId)).toEqual(['c-1']);
    expect(second.continuation).toBeUndefined();
    expect((await s.campaigns.list({ status: 'Paused' })).items.map((c) => c.campaignId)).toEqual(['c-2']);
    expect(await code(s.campaigns.list({ limit: 0 }))).toBe('BadRequest');
  });
});

test('ROUTELOCK_CAMPAIGN_TICK_SECONDS: production 5 s, dev 1 s, an override, and a bad value refused', () => {
  expect(campaignSettings(parseConfig({}))).toEqual({ tickMs: 5000 });
  expect(campaignSettings(parseConfig({ ROUTELOCK_PROFILE: 'dev' }))).toEqual({ tickMs: 1000 });
  expect(campaignSettings(parseConfig({ ROUTELOCK_CAMPAIGN_TICK_SECONDS: '30' }))).toEqual({
    tickMs: 30_000,
  });
  expect(() => parseConfig({ ROUTELOCK_CAMPAIGN_TICK_SECONDS: '0' })).toThrow(
    /ROUTELOCK_CAMPAIGN_TICK_SECONDS/,
  );
});
