import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assertRetryOutsideCampaign, Campaigns } from '../../shared/campaign/campaigns';
import { MAX_START_FAILURES } from '../../shared/campaign/plan';
import type { CampaignLauncher, TickDeps } from '../../shared/campaign/service';
import { campaignTick } from '../../shared/campaign/tick';
import { RouteLockError } from '../../shared/errors';
import type { MigrationRecord } from '../../shared/migration/records';
import { type MigrationRequest, settingsFor } from '../../shared/migration/service';
import type { MigrationSettings } from '../../shared/migration/types';
import type { CampaignRecords } from '../../shared/store/ports/campaigns';
import { SqliteCampaignRecords } from '../../shared/store/sqlite/campaigns';
import type { LocationStore } from '../../shared/store/ports/locations';
import { call, handlerServices } from '../support/handlers';
import { TARGET, campaignHarness, operator } from './harness';

/**
 * The review's defects (issue 18 §3 campaigns), each with the test that failed before its fix: a tick
 * against real SQLite campaign records and a start that ends its migration at once (or refuses).
 */

const launcher: CampaignLauncher = { launch: async () => {}, wake: async () => {} };
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

type Start = (
  request: MigrationRequest,
) => Promise<{ migrationId: string; instanceId: string; created: boolean }>;

/** Runs before each start: throws to refuse it. */
type BeforeStart = (request: MigrationRequest) => Promise<void>;

function setup(startImpl?: BeforeStart) {
  const dir = mkdtempSync(join(tmpdir(), 'routelock-review-'));
  dirs.push(dir);
  const records = new SqliteCampaignRecords(join(dir, 'campaigns.db'));
  let now = Date.parse('2025-01-01T00:00:00Z');
  const clock = () => now;
  const migrations = new Map<string, MigrationRecord>();
  // the tick hands the router the listed versions (issue 20 §5): nothing to hold in this stub
  const router = { allowedRegions: null, holdVersions: () => undefined } as unknown as TickDeps['router'];
  const hooks: { beforeReplace?: () => Promise<void>; beforeAddMembers?: () => Promise<void> } = {};
  let counted = 0;
  // the records with seams: a hook runs once, just before the write it names
  const wrapped: CampaignRecords = Object.create(records) as CampaignRecords;
  wrapped.replace = async (record, etag) => {
    const hook = record.tickLease === undefined ? hooks.beforeReplace : undefined;
    if (hook) {
      delete hooks.beforeReplace;
      await hook();
    }
    return records.replace(record, etag);
  };
  wrapped.addMembers = async (id, members) => {
    const hook = hooks.beforeAddMembers;
    if (hook) {
      delete hooks.beforeAddMembers;
      await hook();
    }
    return records.addMembers(id, members);
  };
  wrapped.countMembers = async (id) => {
    counted += 1;
    return records.countMembers(id);
  };
  const ended = (request: MigrationRequest): MigrationRecord =>
    ({
      migrationId: request.migrationId,
      resourceId: request.resourceId,
      done: true,
      createdAt: new Date(now).toISOString(),
      status: {
        migrationId: request.migrationId,
        resourceId: request.resourceId,
        status: 'Completed',
        phase: 'released',
        target: TARGET,
        timeline: { prelockAt: null, hardDeleteAt: null, writeAt: null, swappedAt: null },
      },
    }) as unknown as MigrationRecord;
  const start: Start = async (request) => {
    if (startImpl) await startImpl(request);
    migrations.set(request.migrationId as string, ended(request));
    return { migrationId: request.migrationId as string, instanceId: 'i', created: true };
  };
  const deps: TickDeps = {
    campaigns: wrapped,
    migrations: { start } as unknown as TickDeps['migrations'],
    records: { get: async (id: string) => migrations.get(id) ?? null },
    store: {} as LocationStore,
    router,
    now: clock,
    settings: { tickMs: 5000 },
  };
  const service = new Campaigns({
    campaigns: wrapped,
    router,
    launcher,
    now: clock,
    maxMigrationAttempts: 3,
  });
  return {
    records,
    service,
    deps,
    hooks,
    counted: () => counted,
    advance: (ms: number) => (now += ms),
  };
}

async function tickUntilDone(s: ReturnType<typeof setup>, campaignId: string, most = 50): Promise<void> {
  for (let i = 0; i < most; i += 1) {
    if ((await campaignTick(s.deps, campaignId)).done) return;
    s.advance(61_000);
  }
}

describe('1. an append racing the tick that sees everything ended', () => {
  test('between the count and the save: the save counts again, the campaign runs on and completes both', async () => {
    const s = setup();
    await s.service.create({ campaignId: 'c1', target: TARGET, resources: ['a'] }, operator);
    await campaignTick(s.deps, 'c1'); // a started (and ended at once)
    s.advance(5000);
    // the next tick counts a ended, nothing pending; the append lands before its save
    s.hooks.beforeReplace = async () => {
      await s.service.addResources('c1', ['b'], operator);
    };
    await campaignTick(s.deps, 'c1');
    // before the fix: Completed with b pending, and every later append 409 CampaignEnded
    expect(await s.service.status('c1')).toMatchObject({ status: 'Running', counts: { pending: 1 } });
    await tickUntilDone(s, 'c1');
    expect(await s.service.status('c1')).toMatchObject({
      status: 'Completed',
      counts: { total: 2, completed: 2, pending: 0 },
    });
  });

  test('reserved before a cancel, landed after the Cancelled save: the append cancels its members', async () => {
    const s = setup();
    await s.service.create({ campaignId: 'c1b', target: TARGET, resources: ['a'] }, operator);
    await campaignTick(s.deps, 'c1b');
    s.advance(5000);
    s.hooks.beforeAddMembers = async () => {
      await s.service.cancel('c1b', operator);
      expect((await campaignTick(s.deps, 'c1b')).status).toBe('Cancelled');
    };
    await s.service.addResources('c1b', ['late'], operator);
    expect(await s.records.countMembers('c1b')).toEqual({ completed: 1, cancelled: 1 });
    expect(await s.service.status('c1b')).toMatchObject({
      status: 'Cancelled',
      counts: { total: 2, pending: 0, cancelled: 1 },
    });
  });

  test('6. the members are counted once a tick', async () => {
    const s = setup();
    await s.service.create({ campaignId: 'c6', target: TARGET, resources: ['a', 'b'] }, operator);
    const before = s.counted();
    await campaignTick(s.deps, 'c6');
    expect(s.counted() - before).toBe(1);
  });
});

test('2. from: a region of 1 route a page selects past 100 pages, every seq its own', async () => {
  const s = setup();
  const PAGES = 150;
  s.deps.store = {
    list: async (q: { continuation?: string }) => {
      const pageNo = q.continuation === undefined ? 0 : Number(q.continuation);
      const items = Array.from({ length: 1000 }, (_, i) => ({
        doc: {
          id: `r-${pageNo}-${i}`,
          location: { region: i === 0 ? 'westeurope' : 'northeurope', account: 'x' },
        },
      }));
      return { items, continuation: pageNo < PAGES - 1 ? String(pageNo + 1) : null };
    },
  } as unknown as LocationStore;
  await s.service.create({ campaignId: 'c2', target: TARGET, from: { region: 'westeurope' } }, operator);
  const appended = await s.service.addResources('c2', ['extra-1', 'extra-2'], operator);
  expect(appended.added).toBe(2);
  await tickUntilDone(s, 'c2', 400);
  const status = await s.service.status('c2');
  // before the fix: selection declared the campaign full at 100 selected
  expect(status).toMatchObject({
    status: 'Completed',
    source: { done: true, selected: PAGES },
    counts: { total: PAGES + 2 },
  });
  expect(status.lastTickError).toBeUndefined();
  const members = await s.records.members('c2', { state: 'completed', limit: 1000 });
  expect(new Set(members.map((m) => m.seq)).size).toBe(PAGES + 2);
});

test("3. cancelling campaign B never cancels campaign A's migration that B's member joined", async () => {
  const h = campaignHarness({ env: { ROUTELOCK_CACHE_TIERS: 'local=10' } });
  try {
    await h.routes(['r-0', 'r-1']);
    await h.campaigns.create({ campaignId: 'A', target: TARGET, resources: ['r-0', 'r-1'] }, operator);
    await h.runUntil(async () => (await h.counts('A')).running === 2);
    await h.campaigns.create({ campaignId: 'B', target: TARGET, resources: ['r-0'] }, { id: 'operator-2' });
    await h.runUntil(async () => (await h.counts('B')).running === 1);
    expect((await h.members('B', 'running'))[0]!.migrationId).toBe('A.0');
    await h.campaigns.cancel('B', { id: 'operator-2' });
    await h.settle();
    // before the fix: A.0 Cancelled by B's cancel
    expect(await h.campaigns.status('A')).toMatchObject({
      status: 'Completed',
      counts: { completed: 2, cancelled: 0 },
    });
    // B watched the joined migration to its end and counts it
    expect(await h.campaigns.status('B')).toMatchObject({ status: 'Cancelled', counts: { completed: 1 } });
    const a0 = (await h.migrationRecords('A')).find((r) => r.migrationId === 'A.0');
    expect(a0?.status.cancelRequestedBy).toBeUndefined();
  } finally {
    h.cleanup();
  }
});

describe('4. a refused start does not hold the queue', () => {
  test('a non-retriable refusal skips its member (reason kept); the others start', async () => {
    const started: string[] = [];
    const s = setup(async (r) => {
      if (r.resourceId === 'bad') throw new RouteLockError('StoreRejected', 'the store refused the document');
      if (r.resourceId === 'odd') throw new TypeError('no code at all');
      started.push(r.resourceId);
    });
    await s.service.create(
      { campaignId: 'c4', target: TARGET, resources: ['bad', 'odd', 'x', 'y'], maxConcurrent: 10 },
      operator,
    );
    await tickUntilDone(s, 'c4');
    // before the fix: nothing ever started, the campaign Running with `bad` at the head forever
    expect(started.sort()).toEqual(['x', 'y']);
    expect(await s.service.status('c4')).toMatchObject({
      status: 'Completed',
      counts: { skipped: 2, completed: 2 },
    });
    const skipped = await s.records.members('c4', { state: 'skipped', limit: 10 });
    expect(skipped.map((m) => m.reason)).toEqual(['the store refused the document', 'no code at all']);
  });

  test.each([
    ['a retriable refusal of its own: skipped after MAX_START_FAILURES in a row', 'PreconditionFailed', true],
    ['negative control: an outage (the store down) skips no one', 'StoreUnavailable', false],
  ] as const)('%s', async (_label, code, skips) => {
    const started: string[] = [];
    const s = setup(async (r) => {
      if (r.resourceId === 'flaky') throw new RouteLockError(code, `refused (${code})`);
      started.push(r.resourceId);
    });
    await s.service.create({ campaignId: 'c4r', target: TARGET, resources: ['flaky', 'x'] }, operator);
    for (let i = 0; i < MAX_START_FAILURES + 5; i += 1) {
      await campaignTick(s.deps, 'c4r');
      s.advance(61_000);
    }
    const status = await s.service.status('c4r');
    if (skips) {
      expect(status).toMatchObject({ status: 'Completed', counts: { skipped: 1, completed: 1 } });
      const [member] = await s.records.members('c4r', { state: 'skipped', limit: 1 });
      expect(member?.reason).toMatch(new RegExp(`${MAX_START_FAILURES} starts in a row failed.*refused`));
    } else {
      expect(status).toMatchObject({ status: 'Running', counts: { pending: 2, skipped: 0 } });
      expect(started).toEqual([]);
    }
  });
});

describe("5. an operator's retry of a member waits for its campaign's end", () => {
  test('409 MigrationNotRetriable through POST /migrations/{id}/retry while it runs; allowed once it ended', async () => {
    const h = campaignHarness({
      env: {
        ROUTELOCK_MIGRATION_ATTEMPTS: '1',
        ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p', url: 'https://p.test/migrate' }]),
      },
      http: async (c) =>
        c.body.resourceId === 'r-0' ? { status: 422, body: { error: 'no' } } : { status: 200, body: null },
    });
    try {
      await h.routes(['r-0', 'r-1', 'r-2']);
      await h.campaigns.create(
        {
          campaignId: 'c5',
          target: TARGET,
          resources: ['r-0', 'r-1', 'r-2'],
          maxConcurrent: 1,
          startsPerMinute: 1,
        },
        operator,
      );
      await h.runUntil(async () => (await h.counts('c5')).failed === 1);
      await handlerServices({}, undefined, {
        migrations: () => h.parts.migrations,
        records: h.parts.state,
        campaigns: () => h.campaigns,
      });
      const refused = await call('retryMigration', { params: { migrationId: 'c5.0' } });
      // before the fix: 202, a migration outside the campaign's limits and its cancel
      expect(refused.status).toBe(409);
      expect(refused.body).toMatchObject({
        code: 'MigrationNotRetriable',
        detail: expect.stringMatching(/campaign c5.*after the campaign ends/),
      });
      expect((await h.parts.state.get('c5.0'))?.status.status).toBe('Failed');
      await h.campaigns.cancel('c5', operator);
      await h.settle();
      expect((await h.campaigns.status('c5')).status).toBe('Cancelled');
      expect((await call('retryMigration', { params: { migrationId: 'c5.0' } })).status).toBe(202);
    } finally {
      h.cleanup();
    }
  });

  test('a migration of no campaign (or of one gone) is not asked about', async () => {
    const asked: string[] = [];
    const campaigns = () => ({
      status: async (id: string) => {
        asked.push(id);
        throw new RouteLockError('NotFound', `No campaign ${id}.`);
      },
    });
    await assertRetryOutsideCampaign({ migrationId: 'm', resourceId: 'r' }, campaigns);
    await assertRetryOutsideCampaign(null, campaigns);
    await assertRetryOutsideCampaign({ migrationId: 'g.0', resourceId: 'r', campaignId: 'g' }, campaigns);
    expect(asked).toEqual(['g']);
  });
});

test('7. a campaign asking more attempts than now configured is capped, not refused', () => {
  const settings = { migrationAttempts: 2 } as MigrationSettings;
  // before the fix: BadRequest, which the tick took for skipped (a campaign Completed, all skipped)
  expect(
    settingsFor(settings, { resourceId: 'r', target: TARGET, migrationAttempts: 3 }).migrationAttempts,
  ).toBe(2);
  expect(
    settingsFor(settings, { resourceId: 'r', target: TARGET, migrationAttempts: 1 }).migrationAttempts,
  ).toBe(1);
  expect(() => settingsFor(settings, { resourceId: 'r', target: TARGET, migrationAttempts: 0 })).toThrow(
    /whole number/,
  );
});
