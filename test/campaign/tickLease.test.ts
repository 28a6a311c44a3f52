import { Campaigns } from '../../shared/campaign/campaigns';
import {
  TICK_LEASE_MARGIN_MS,
  TICK_LEASE_MS,
  startsAllowed,
  throttleAfterTick,
} from '../../shared/campaign/plan';
import type { TickDeps, TickResult } from '../../shared/campaign/service';
import { type TickRules, campaignTick } from '../../shared/campaign/tick';
import type { CampaignRecords } from '../../shared/campaign/store/ports/campaigns';
import { TARGET, campaignHarness, operator } from './harness';

/**
 * Overlapping ticks of one campaign (Durable activities are at-least-once: a redelivered tick runs
 * beside the first): the tick lease (shared/campaign/tick.ts, plan.ts) keeps maxConcurrent. The ticks
 * here are really interleaved: one is held at a chosen await while the other runs, over the embedded
 * host's real parts (SQLite, the in-process migration runner) on virtual time.
 */

type Harness = ReturnType<typeof campaignHarness>;
let harnesses: Harness[] = [];
afterEach(() => {
  for (const h of harnesses) h.cleanup();
  harnesses = [];
});

const ids = (n: number) => Array.from({ length: n }, (_, i) => `r-${String(i).padStart(2, '0')}`);
const nobody = { launch: async () => undefined, wake: async () => undefined };
const noLease: TickRules = { startsAllowed, throttleAfterTick, leaseAllows: () => true };

/** A campaign whose runner is the test: only the ticks it calls run. */
async function setup(n: number, maxConcurrent: number) {
  const h = campaignHarness({ env: { ROUTELOCK_CACHE_TIERS: 'local=10' } });
  harnesses.push(h);
  await h.routes(ids(n));
  const campaigns = new Campaigns({
    campaigns: h.records,
    router: h.parts.router,
    launcher: nobody,
    now: h.clock.now,
    maxMigrationAttempts: 3,
  });
  const { campaignId } = await campaigns.create(
    { target: TARGET, resources: ids(n), maxConcurrent },
    operator,
  );
  return { h, campaignId, deps: h.parts.deps };
}

/** The same records, with a wait before each read of the pending members (where a tick picks its starts). */
function beforePendingRead(records: CampaignRecords, wait: () => Promise<void>): CampaignRecords {
  return {
    create: (r) => records.create(r),
    get: (id) => records.get(id),
    replace: (r, etag) => records.replace(r, etag),
    list: (q) => records.list(q),
    idsInStates: (s) => records.idsInStates(s),
    addMembers: (id, m) => records.addMembers(id, m),
    members: async (id, q) => {
      if (q.state === 'pending') await wait();
      return records.members(id, q);
    },
    saveMembers: (id, m) => records.saveMembers(id, m),
    countMembers: (id) => records.countMembers(id),
  };
}

/**
 * Tick B runs until it is about to pick its starts (it has counted the running), then tick A runs to
 * its end, then B goes on: without the lease B starts as many again as its stale count allows.
 */
async function interleaved(rules?: TickRules) {
  const { h, campaignId, deps } = await setup(12, 3);
  let reached!: () => void;
  const atPick = new Promise<void>((resolve) => (reached = resolve));
  let release!: () => void;
  const aDone = new Promise<void>((resolve) => (release = resolve));
  const depsB: TickDeps = {
    ...deps,
    campaigns: beforePendingRead(h.records, () => {
      reached();
      return aDone;
    }),
  };
  const b = campaignTick(depsB, campaignId, rules);
  await Promise.race([atPick, b]);
  let a: TickResult;
  try {
    a = await campaignTick(deps, campaignId, rules);
  } finally {
    release();
  }
  const resultB = await b;
  const running = (await h.records.countMembers(campaignId)).running ?? 0;
  const migrations = (await h.migrationRecords(campaignId)).length;
  return { h, a, b: resultB, running, migrations, peak: h.observed.peakRunning };
}

describe('two ticks of one campaign at once', () => {
  test('with the lease: the second finds the first holding it and returns at once; maxConcurrent 3 holds', async () => {
    const run = await interleaved();
    expect(run.peak).toBe(3);
    expect(run.migrations).toBe(3);
    expect(run.running).toBe(3);
    // A found B's lease: it did nothing and asked to tick again within a tick
    expect(run.a).toMatchObject({ done: false, status: 'Running' });
    expect(run.a.nextTickAt).toBeLessThanOrEqual(run.h.clock.now() + run.h.parts.deps.settings.tickMs);
    // B released its lease when it saved
    const record = (await run.h.records.get((await run.h.records.idsInStates(['Running']))[0]!))!.record;
    expect(record.tickLease).toBeUndefined();
  });

  test('negative control: with the lease check planted away, the same interleaving starts 6 under maxConcurrent 3', async () => {
    const run = await interleaved(noLease);
    expect(run.peak).toBe(6);
    expect(run.migrations).toBe(6);
    expect(run.running).toBe(6);
  });
});

describe('the lease', () => {
  test("another tick's live lease: nothing done, tick again soon; one run out is taken over", async () => {
    const { h, campaignId, deps } = await setup(4, 2);
    const now = h.clock.now();
    const read = (await h.records.get(campaignId))!;
    await h.records.replace({ ...read.record, tickLease: { owner: 'other', until: now + 5000 } }, read.etag);
    const result = await campaignTick(deps, campaignId);
    expect(result).toEqual({ done: false, status: 'Running', nextTickAt: now + deps.settings.tickMs });
    expect((await h.records.countMembers(campaignId)).running ?? 0).toBe(0);
    h.clock.set(now + 5000);
    await campaignTick(deps, campaignId);
    expect((await h.records.countMembers(campaignId)).running).toBe(2);
    expect((await h.records.get(campaignId))!.record.tickLease).toBeUndefined();
  });

  test('a tick that fails gives its lease back: the retry need not wait for it to run out', async () => {
    const { h, campaignId, deps } = await setup(2, 2);
    const failing: TickDeps = {
      ...deps,
      campaigns: {
        ...beforePendingRead(h.records, async () => undefined),
        countMembers: async () => {
          throw new Error('store down');
        },
      },
    };
    await expect(campaignTick(failing, campaignId)).rejects.toThrow('store down');
    expect((await h.records.get(campaignId))!.record.tickLease).toBeUndefined();
    await campaignTick(deps, campaignId);
    expect((await h.records.countMembers(campaignId)).running).toBe(2);
  });

  test('no start with less than the margin of the lease left: the rest wait for the next tick', async () => {
    const { h, campaignId, deps } = await setup(3, 3);
    const step = (TICK_LEASE_MS - TICK_LEASE_MARGIN_MS) / 2 + 1;
    // each start takes `step` of the tick's clock: the third would begin past until − margin
    const slow: TickDeps = {
      ...deps,
      migrations: {
        ...deps.migrations,
        start: (request) => {
          h.clock.advance(step);
          return deps.migrations.start(request);
        },
      },
    };
    await campaignTick(slow, campaignId);
    expect(await h.counts(campaignId)).toMatchObject({ running: 2, pending: 1 });
    expect((await h.records.get(campaignId))!.record.lastTickError).toMatch(/lease/);
    await campaignTick(deps, campaignId);
    expect(await h.counts(campaignId)).toMatchObject({ running: 3, pending: 0 });
  });

  test('a running member with no migration record goes back to pending only once marked longer ago than a lease', async () => {
    const { h, campaignId, deps } = await setup(1, 1);
    await h.parts.campaigns.pause(campaignId, operator);
    const [member] = await h.members(campaignId, 'pending');
    const markedAt = h.clock.now();
    // marked by a tick whose start has not landed (in flight, or lost in a crash)
    await h.records.saveMembers(campaignId, [
      { ...member!, state: 'running', migrationId: `${campaignId}.0`, startedAt: markedAt },
    ]);
    h.clock.set(markedAt + TICK_LEASE_MS);
    await campaignTick(deps, campaignId);
    expect(await h.counts(campaignId)).toMatchObject({ running: 1, pending: 0 });
    // (the boundary to the millisecond is startLost's table row; a member that old is read once per
    // check interval, dueForCheck, so the next tick comes an interval on)
    h.clock.set(markedAt + TICK_LEASE_MS + 10_000);
    await campaignTick(deps, campaignId);
    expect(await h.counts(campaignId)).toMatchObject({ running: 0, pending: 1 });
  });
});
