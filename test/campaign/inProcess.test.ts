import { countsFrom, startsAllowed, throttleAfterTick } from '../../shared/campaign/plan';
import { type TickRules, campaignTick } from '../../shared/campaign/tick';
import type { HttpCall, HttpResult, MigrationPhase } from '../../shared/migration/types';
import type { TelemetryEvent } from '../../shared/migration/telemetry/lockTelemetry';
import { nullSink } from '../../shared/migration/telemetry/sink';
import { FaultyStore } from '../../testkit/faultyStore';
import { SOURCE, TARGET, campaignHarness, operator, worstMinute } from './harness';

/**
 * Campaigns on the embedded host's real parts (docs/design.md §6.9): the in-process migration runner and
 * service over SQLite, SqliteCampaignRecords, the campaign tick and its in-process runner, all on
 * virtual time. Every limit is checked from outside (the migration records' start instants, the
 * runner's unfinished migrations sampled at every start), and each check is shown to catch a planted
 * rule that ignores its limit.
 */

type Harness = ReturnType<typeof campaignHarness>;
const ids = (n: number, prefix = 'r') => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
// lock-only migrations of 12 s (dev timing, an 8 s local cache tier, and version 4's 2 s confirmation of
// the swap): 7 at a time would start 35 a minute
const env = { ROUTELOCK_CACHE_TIERS: 'local=8' };

let harnesses: Harness[] = [];
afterEach(() => {
  for (const h of harnesses) h.cleanup();
  harnesses = [];
});
const harness = (options: Parameters<typeof campaignHarness>[0] = {}) => {
  const h = campaignHarness({ env, ...options });
  harnesses.push(h);
  return h;
};

/** Routes, a campaign of them, run to its end: what was seen. */
async function runCampaign(
  h: Harness,
  n: number,
  limits: { maxConcurrent: number; startsPerMinute?: number },
) {
  await h.routes(ids(n));
  const startedAt = h.clock.now();
  const { campaignId } = await h.campaigns.create({ target: TARGET, resources: ids(n), ...limits }, operator);
  await h.settle();
  return {
    campaignId,
    ...(await outcome(h, campaignId)),
    virtualSeconds: (h.clock.now() - startedAt) / 1000,
  };
}

async function outcome(h: Harness, campaignId: string) {
  const records = await h.migrationRecords(campaignId);
  const perResource = new Map<string, number>();
  for (const r of records) perResource.set(r.resourceId, (perResource.get(r.resourceId) ?? 0) + 1);
  return {
    status: await h.campaigns.status(campaignId),
    records,
    duplicates: [...perResource].filter(([, k]) => k > 1).map(([id]) => id),
    worstMinute: worstMinute(records.map((r) => Date.parse(r.createdAt))),
  };
}

describe('limits', () => {
  test('200 lock-only migrations, maxConcurrent 7, startsPerMinute 30: Completed, neither limit ever exceeded', async () => {
    const events: TelemetryEvent[] = [];
    const h = harness({ sink: { ...nullSink, event: (e) => events.push(e) } });
    const run = await runCampaign(h, 200, { maxConcurrent: 7, startsPerMinute: 30 });
    expect(run.status).toMatchObject({
      status: 'Completed',
      counts: { total: 200, completed: 200, pending: 0, running: 0 },
      etaSeconds: 0,
      migrationsUrl: `/api/migrations?campaignId=${run.campaignId}`,
    });
    expect(run.status.writeLockSeconds).not.toBeNull();
    expect(run.records).toHaveLength(200);
    expect(run.duplicates).toEqual([]);
    // both limits bind (each is reached), neither is exceeded
    expect(h.observed.peakRunning).toBe(7);
    expect(h.observed.peakMembersRunning).toBe(7);
    expect(run.worstMinute).toBe(30);
    // the rate sets the pace: 200 starts at 30 a minute take over 6 minutes
    expect(run.virtualSeconds).toBeGreaterThan(6 * 60);
    for (const r of run.records) expect(r).toMatchObject({ campaignId: run.campaignId, done: true });
    // telemetry: one start, one end, with the counts
    expect(events.map((e) => e.name)).toEqual(['CampaignStarted', 'CampaignEnded']);
    expect(events[1]).toMatchObject({
      properties: { campaignId: run.campaignId, status: 'Completed', targetRegion: 'eastus' },
      measurements: { total: 200, completed: 200 },
    });
    // no lock seed (what a fencing token derives from) in the campaign's record, members, status or telemetry
    const seen = JSON.stringify([
      await h.records.get(run.campaignId),
      await h.members(run.campaignId, 'completed'),
      run.status,
      events,
    ]);
    for (const r of run.records) expect(seen).not.toContain(r.input.lock.nonce);
    expect(seen).not.toMatch(/nonce|token/i);
    console.log(
      `campaign of 200: ${run.virtualSeconds} s virtual, peak ${h.observed.peakRunning}/7 running, worst minute ${run.worstMinute}/30 starts, ${h.observed.ticks} ticks, write lock p50 ${run.status.writeLockSeconds?.p50} s`,
    );
  });

  test.each([
    [
      'maxConcurrent',
      (input: Parameters<typeof startsAllowed>[0]) => startsAllowed({ ...input, running: 0 }),
    ],
    [
      'startsPerMinute',
      (input: Parameters<typeof startsAllowed>[0]) => startsAllowed({ ...input, recentStarts: [] }),
    ],
  ])('negative control: a planted startsAllowed that ignores %s is caught', async (ignored, planted) => {
    const h = harness({ rules: { startsAllowed: planted, throttleAfterTick } satisfies TickRules });
    const run = await runCampaign(h, 60, { maxConcurrent: 7, startsPerMinute: 30 });
    expect(run.status.status).toBe('Completed');
    expect(run.duplicates).toEqual([]);
    if (ignored === 'maxConcurrent') {
      expect(h.observed.peakRunning).toBeGreaterThan(7);
      expect(run.worstMinute).toBeLessThanOrEqual(30);
    } else {
      expect(run.worstMinute).toBeGreaterThan(30);
      expect(h.observed.peakRunning).toBeLessThanOrEqual(7);
    }
  });

  test('PATCH while it runs: a higher maxConcurrent is used at once, a lower one holds starts back until below it', async () => {
    const h = harness();
    await h.routes(ids(80));
    const { campaignId } = await h.campaigns.create(
      { target: TARGET, resources: ids(80), maxConcurrent: 2 },
      operator,
    );
    await h.runUntil(async () => (await h.counts(campaignId)).completed >= 6);
    expect(h.observed.peakRunning).toBe(2);
    const raised = await h.campaigns.update(campaignId, { maxConcurrent: 9, startsPerMinute: 20 }, operator);
    expect(raised.limits).toEqual({ maxConcurrent: 9, startsPerMinute: 20 });
    await h.runUntil(async () => (await h.counts(campaignId)).completed >= 40);
    expect(h.observed.peakRunning).toBe(9);
    // lowered: nothing starts while 3 or more run; from then on never more than 3
    const lowered = await h.campaigns.update(
      campaignId,
      { maxConcurrent: 3, startsPerMinute: null },
      operator,
    );
    expect(lowered.limits).toEqual({ maxConcurrent: 3 });
    await h.runUntil(() => h.parts.migrationRunner.activeCount <= 3);
    h.observed.peakRunning = 0;
    await h.settle();
    expect(h.observed.peakRunning).toBe(3);
    const end = await outcome(h, campaignId);
    expect(end.status.counts).toMatchObject({ completed: 80, total: 80 });
    expect(end.duplicates).toEqual([]);
  });
});

describe('pause, resume', () => {
  test('pause starts nothing new and lets the running finish; resume goes on to Completed', async () => {
    const h = harness();
    await h.routes(ids(30));
    const { campaignId } = await h.campaigns.create(
      { target: TARGET, resources: ids(30), maxConcurrent: 4 },
      operator,
    );
    await h.runUntil(async () => (await h.counts(campaignId)).completed >= 8);
    const paused = await h.campaigns.pause(campaignId, operator);
    expect(paused).toMatchObject({ status: 'Paused', pausedAt: expect.any(String) });
    expect(await h.campaigns.pause(campaignId, operator)).toMatchObject({
      status: 'Paused',
      pausedAt: paused.pausedAt,
    });
    const startedBefore = (await h.migrationRecords(campaignId)).length;
    // the running end, nothing new starts, however long it stays paused
    await h.runUntil(async () => (await h.counts(campaignId)).running === 0);
    const pausedAt = h.clock.now();
    await h.runUntil(() => h.clock.now() > pausedAt + 10 * 60_000);
    const whilePaused = await h.campaigns.status(campaignId);
    expect(whilePaused).toMatchObject({ status: 'Paused', counts: { running: 0 } });
    expect(whilePaused.counts.pending).toBeGreaterThan(0);
    expect((await h.migrationRecords(campaignId)).length).toBe(startedBefore);
    expect(whilePaused.counts.completed).toBe(startedBefore);

    expect(await h.campaigns.resume(campaignId, operator)).toMatchObject({ status: 'Running' });
    await h.settle();
    const end = await outcome(h, campaignId);
    expect(end.status).toMatchObject({ status: 'Completed', counts: { completed: 30 } });
    expect(end.status).not.toHaveProperty('pausedAt');
    expect(end.duplicates).toEqual([]);
    expect(h.observed.peakRunning).toBe(4);
    // an ended campaign refuses pause and resume, and answers a cancel unchanged
    await expect(h.campaigns.pause(campaignId, operator)).rejects.toMatchObject({ code: 'CampaignEnded' });
    await expect(h.campaigns.resume(campaignId, operator)).rejects.toMatchObject({ code: 'CampaignEnded' });
    expect(await h.campaigns.cancel(campaignId, operator)).toMatchObject({ status: 'Completed' });
  });
});

describe('cancel', () => {
  const participants = JSON.stringify([{ name: 'p', url: 'https://p.test/migrate' }]);
  /** A participant whose `hang` step never answers; the other answers at once. */
  const participant =
    (hang: 'bulkCopy' | 'deltaCopy' | 'none') =>
    (call: HttpCall): Promise<HttpResult> =>
      call.body.step === 'verify'
        ? Promise.resolve({ status: 404, body: null }) // not implemented (version 4's optional step)
        : call.body.step === hang
          ? new Promise(() => undefined)
          : Promise.resolve({ status: 200, body: null });

  test.each([
    ['prelock', 'none'],
    ['converging', 'none'],
    ['hardDelete', 'bulkCopy'],
    ['write', 'deltaCopy'],
  ] as [MigrationPhase, 'bulkCopy' | 'deltaCopy' | 'none'][])(
    'while its migrations are in %s and others pending: Cancelled, every lock released, the pending never started',
    async (phase, hang) => {
      const h = harness({ env: { ...env, ROUTELOCK_PARTICIPANTS: participants }, http: participant(hang) });
      const all = ids(12);
      await h.routes(all);
      const { campaignId } = await h.campaigns.create(
        { target: TARGET, resources: all, maxConcurrent: 3 },
        operator,
      );
      let cancelled = false;
      if (phase === 'prelock') {
        // the cancel is asked as the first pre-lock lands
        const prelock = h.parts.activities.prelock;
        h.parts.activities.prelock = async (input) => {
          const granted = await prelock(input);
          if (!cancelled) {
            cancelled = true;
            await h.campaigns.cancel(campaignId, operator);
          }
          return granted;
        };
      }
      const phaseOf = (id: string) => h.parts.state.activeFor(id)?.status.phase;
      await h.runUntil(() => cancelled || all.filter((id) => phaseOf(id) === phase).length === 3);
      if (!cancelled) {
        const answered = await h.campaigns.cancel(campaignId, operator);
        expect(answered).toMatchObject({ status: 'Cancelling', cancelRequestedBy: 'operator-1' });
      }
      await h.settle();
      const end = await outcome(h, campaignId);
      expect(end.status).toMatchObject({
        status: 'Cancelled',
        cancelRequestedBy: 'operator-1',
        counts: { pending: 0, running: 0, total: 12 },
        endedAt: expect.any(String),
      });
      expect(end.status.counts.cancelled).toBeGreaterThanOrEqual(9);
      // started: only the first three, each Cancelled (or Completed when its swap came first)
      expect(end.records).toHaveLength(3);
      for (const r of end.records) expect(['Cancelled', 'Completed']).toContain(r.status.status);
      expect(end.records.filter((r) => r.status.status === 'Cancelled').length).toBeGreaterThan(0);
      for (const id of all) {
        const { doc } = await h.store.read(id, { from: 'writeRegion' });
        expect(doc.lock).toBeNull();
        const record = end.records.find((r) => r.resourceId === id);
        expect(doc.location).toEqual(record?.status.status === 'Completed' ? TARGET : SOURCE);
      }
      expect(await h.campaigns.cancel(campaignId, operator)).toMatchObject({ status: 'Cancelled' });
    },
  );

  test("cancelling campaign B never cancels campaign A's migration that B's member joined", async () => {
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
      // A.0 is A's: B's cancel leaves it running
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
});

describe('a crash of the runner', () => {
  test('mid-campaign: new runners over the same files resume it; no second migration of any resource, the limits held', async () => {
    const h = harness();
    await h.routes(ids(100));
    const { campaignId } = await h.campaigns.create(
      { target: TARGET, resources: ids(100), maxConcurrent: 7, startsPerMinute: 30 },
      operator,
    );
    await h.runUntil(async () => (await h.counts(campaignId)).completed >= 40);
    const before = await h.counts(campaignId);
    expect(before.running).toBeGreaterThan(0);
    const resumed = await h.restart();
    expect(resumed.campaignsResumed).toBe(1);
    expect(resumed.migrationsResumed).toBeGreaterThan(0);
    await h.settle();
    const end = await outcome(h, campaignId);
    expect(end.status).toMatchObject({ status: 'Completed', counts: { completed: 100, total: 100 } });
    expect(end.records).toHaveLength(100);
    expect(end.duplicates).toEqual([]);
    expect(end.worstMinute).toBeLessThanOrEqual(30);
    expect(h.observed.peakRunning).toBeLessThanOrEqual(7);
  });

  test('a tick killed at any of its writes (before or after the write lands): the next ticks finish the job, no duplicate, limits held', async () => {
    let writes = 0;
    const dying = new Set<number>();
    for (let k = 3; k < 400; k += 7) dying.add(k);
    const h = harness();
    const records = h.parts.records;
    for (const name of ['replace', 'addMembers', 'saveMembers'] as const) {
      const real = records[name].bind(records) as (...args: unknown[]) => Promise<unknown>;
      (records as unknown as Record<string, unknown>)[name] = async (...args: unknown[]) => {
        writes += 1;
        const dies = dying.has(writes);
        if (dies && writes % 2 === 0) throw new Error(`crash before write ${writes}`);
        const result = await real(...args);
        if (dies) throw new Error(`crash after write ${writes}`);
        return result;
      };
    }
    const run = await runCampaign(h, 80, { maxConcurrent: 7, startsPerMinute: 30 });
    expect(writes).toBeGreaterThan(100);
    expect(run.status).toMatchObject({ status: 'Completed', counts: { completed: 80, total: 80 } });
    expect(run.records).toHaveLength(80);
    expect(run.duplicates).toEqual([]);
    expect(run.worstMinute).toBeLessThanOrEqual(30);
    expect(h.observed.peakRunning).toBeLessThanOrEqual(7);
  });
});

describe('a migration whose runner died', () => {
  test('unfinished past an hour: asked of the migration service every 10 minutes, and a crashed one (Failed) ends its member', async () => {
    const h = harness();
    await h.routes(ids(3));
    const { campaignId } = await h.campaigns.create(
      { target: TARGET, resources: ids(3), maxConcurrent: 3 },
      operator,
    );
    await h.runUntil(async () => (await h.counts(campaignId)).running === 3);
    // the migrations' runner dies; their records stay unfinished (Durable: the orchestration crashed)
    h.parts.migrationRunner.stop();
    const asked: { id: string; at: number }[] = [];
    const crashedAt = h.clock.now();
    h.parts.deps.migrations.status = async (migrationId) => {
      asked.push({ id: migrationId, at: h.clock.now() });
      const record = await h.parts.state.get(migrationId);
      // what the Durable service answers for a failed orchestration, after 2 hours
      return h.clock.now() - crashedAt > 2 * 3_600_000
        ? { ...record!.status, status: 'Failed', error: 'the orchestration failed' }
        : record!.status;
    };
    // the stopped runner's migrations never settle: run until the campaign's loop ends
    await h.parts.scheduler.runWhile(() => h.parts.campaignRunner.activeCount > 0);
    const end = await outcome(h, campaignId);
    expect(end.status).toMatchObject({ status: 'Completed', counts: { failed: 3, total: 3 } });
    expect(asked.length).toBeGreaterThan(0);
    // never before the hour, and each at most once a 10-minute round
    expect(Math.min(...asked.map((a) => a.at)) - crashedAt).toBeGreaterThanOrEqual(3_600_000 - 60_000);
    const rounds = new Set(asked.map((a) => `${a.id}@${Math.floor(a.at / 600_000)}`));
    expect(rounds.size).toBe(asked.length);
    const members = await h.members(campaignId, 'failed');
    expect(members.map((m) => m.reason)).toEqual(Array(3).fill('the orchestration failed'));
  });
});

describe('retries and a throttling store', () => {
  test('a participant that fails only the first attempt: every migration Completed on its second', async () => {
    const seen: HttpCall[] = [];
    const refusingFirst = (call: HttpCall): Promise<HttpResult> => {
      if (call.body.step === 'verify') return Promise.resolve({ status: 404, body: null }); // not implemented
      seen.push(call);
      return Promise.resolve(
        (call.body.migrationAttempt ?? 1) <= 1
          ? { status: 422, body: { error: 'not now' } }
          : { status: 200, body: null },
      );
    };
    const h = harness({
      env: { ...env, ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p', url: 'https://p.test/migrate' }]) },
      http: refusingFirst,
    });
    await h.routes(ids(10));
    const { campaignId } = await h.campaigns.create(
      { target: TARGET, resources: ids(10), maxConcurrent: 5, migrationAttempts: 2 },
      operator,
    );
    await h.settle();
    const end = await outcome(h, campaignId);
    expect(end.status).toMatchObject({ status: 'Completed', counts: { completed: 10, failed: 0 } });
    for (const r of end.records) {
      expect(r.status).toMatchObject({ status: 'Completed', attempt: 2 });
      expect(r.status.attempts?.[0]).toMatchObject({ attempt: 1, outcome: 'Failed' });
      expect(r.input.settings.migrationAttempts).toBe(2);
    }
    expect(seen.some((c) => c.body.migrationAttempt === 1)).toBe(true);
  });

  test.each([
    ['starts back off, 1 s doubling', false],
    ['negative control: a tick that never sets the throttle is caught', true],
  ])('store throttling (429): %s', async (_label, planted) => {
    let faulty: FaultyStore | undefined;
    const h = harness({
      wrapStore: (store) => (faulty = new FaultyStore(store)),
      ...(planted ? { rules: { startsAllowed, throttleAfterTick: () => undefined } } : {}),
    });
    await h.routes(ids(20));
    const attempts: number[] = [];
    const start = h.parts.deps.migrations.start;
    h.parts.deps.migrations.start = (request) => {
      attempts.push(h.clock.now());
      return start(request);
    };
    // past the routes' cache life: a start's route check reads the store
    h.clock.advance(11_000);
    faulty!.down = true;
    const { campaignId } = await h.campaigns.create(
      { target: TARGET, resources: ids(20), maxConcurrent: 5 },
      operator,
    );
    const t0 = h.clock.now();
    await h.runUntil(() => h.clock.now() >= t0 + 60_000);
    const inFirstMinute = attempts.filter((at) => at < t0 + 60_000).map((at) => (at - t0) / 1000);
    const throttled = await h.campaigns.status(campaignId);
    expect(throttled).toMatchObject({ status: 'Running', counts: { pending: 20, running: 0 } });
    expect(throttled.lastTickError).toMatch(/throttled \(429\)/);
    if (!planted) {
      // one start a tick, each after the back-off: 1, 2, 4, 8, 16 s
      expect(inFirstMinute).toEqual([0, 1, 3, 7, 15, 31]);
      expect((await h.records.get(campaignId))?.record.throttle).toMatchObject({ reason: /429/ });
    } else {
      // a start every tick (1 s)
      expect(inFirstMinute.length).toBeGreaterThan(50);
    }
    faulty!.down = false;
    await h.settle();
    const end = await outcome(h, campaignId);
    expect(end.status).toMatchObject({ status: 'Completed', counts: { completed: 20 } });
    expect(end.status).not.toHaveProperty('throttledUntil');
    expect(end.status).not.toHaveProperty('lastTickError');
  });
});

describe('from: {region}', () => {
  test('selects only the routes at that region (never the probe), through several pages of the route list', async () => {
    const h = harness();
    const at = (i: number) =>
      i % 15 === 0 ? SOURCE : { region: i % 2 === 0 ? 'northeurope' : 'eastus', account: 'other01' };
    const all = ids(2400, 'x');
    for (const [i, id] of all.entries()) await h.parts.router.createRoute(id, at(i));
    await h.parts.router.createRoute('probe-westeurope', SOURCE);
    const expected = all.filter((_, i) => i % 15 === 0);
    const lists = h.store.counters.lists;
    const { campaignId } = await h.campaigns.create(
      { target: TARGET, from: { region: 'westeurope' }, maxConcurrent: 50 },
      operator,
    );
    await h.settle();
    const end = await outcome(h, campaignId);
    expect(end.status).toMatchObject({
      status: 'Completed',
      source: { kind: 'from', region: 'westeurope', selected: expected.length, done: true },
      counts: { total: expected.length, completed: expected.length },
    });
    expect(end.records.map((r) => r.resourceId).sort()).toEqual([...expected].sort());
    expect(h.store.counters.lists - lists).toBeGreaterThanOrEqual(3);
    expect((await h.store.read('probe-westeurope', { from: 'writeRegion' })).doc.location).toEqual(SOURCE);
  });

  test('a campaign near its 100,000: selection takes what fits, stops, and says so', async () => {
    const h = harness();
    for (const id of ids(30)) await h.parts.router.createRoute(id, SOURCE);
    const at = new Date(h.clock.now()).toISOString();
    // a record as 99,995 resources later, ticked by hand (no runner)
    await h.records.create({
      campaignId: 'c-full',
      target: TARGET,
      limits: { maxConcurrent: 10 },
      status: 'Running',
      source: { kind: 'from', region: 'westeurope', selected: 0, done: false },
      createdAt: at,
      updatedAt: at,
      createdBy: 'operator-1',
      pages: 3,
      reserved: 99_995,
      counts: countsFrom({}),
      recentStarts: [],
      writeLockHistogram: [],
    });
    await campaignTick(h.parts.deps, 'c-full');
    const record = (await h.records.get('c-full'))!.record;
    expect(record).toMatchObject({
      pages: 4,
      reserved: 100_000,
      source: { selected: 5, done: true },
      lastTickError: expect.stringMatching(/full/),
    });
    expect(
      (await h.members('c-full', 'pending'))
        .map((m) => m.seq)
        .concat((await h.members('c-full', 'running')).map((m) => m.seq))
        .sort((a, b) => a - b),
    ).toEqual([99_995, 99_996, 99_997, 99_998, 99_999]);
  });

  test('limit: selects at most that many', async () => {
    const h = harness();
    for (const id of ids(30)) await h.parts.router.createRoute(id, SOURCE);
    const { campaignId } = await h.campaigns.create(
      { target: TARGET, from: { region: 'westeurope', limit: 12 }, maxConcurrent: 5 },
      operator,
    );
    await h.settle();
    const end = await outcome(h, campaignId);
    expect(end.status).toMatchObject({
      status: 'Completed',
      source: { selected: 12, done: true },
      counts: { total: 12, completed: 12 },
    });
  });
});
