import { ManualClock } from '../testkit/clock';
import type { TimingConfig } from '../shared/config';
import { withinGrace } from '../shared/core/client';
import { Router } from '../shared/core/router';
import { resetCounters } from '../shared/core/store/ports/locations';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import { type HeldRead, HeldReadStore } from '../testkit/heldReadStore';
import { productionTiming, seconds } from './support/timing';

/**
 * The router's read path coalesces (docs/design.md §5.8): concurrent resolves of one id share each store
 * read in flight, joining only a read begun within `coalesceJoinMs` (production: 50 ms). Reads are held
 * open by a gate the test opens, on a clock that moves only when told.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

function setup(timing: TimingConfig = productionTiming) {
  const clock = new ManualClock();
  const sqlite = new SqliteStore(':memory:');
  let gates: { read: HeldRead; open: () => void }[] = [];
  let holding: ((read: HeldRead) => boolean) | null = null;
  const store = new HeldReadStore(sqlite, (read) =>
    holding?.(read) ? new Promise<void>((open) => gates.push({ read, open })) : Promise.resolve(),
  );
  const router = new Router({ store, timing, clock: clock.now });
  const reads = () => ({
    nearest: sqlite.counters.nearestReads,
    writeRegion: sqlite.counters.writeRegionReads,
  });
  /** Hold every read (or those `which` picks) from now on until `release()`. */
  const hold = (which: (read: HeldRead) => boolean = () => true) => {
    holding = which;
  };
  /** Open every held read (and stop holding new ones); let the answers flow. */
  const release = async () => {
    holding = null;
    while (gates.length > 0) {
      const open = gates;
      gates = [];
      for (const g of open) g.open();
      await new Promise((r) => setImmediate(r));
    }
  };
  const held = () => gates.map((g) => g.read.from);
  const reset = () => {
    resetCounters(sqlite.counters);
    for (const shared of Object.values(router.sharedReads)) Object.assign(shared, { started: 0, joined: 0 });
  };
  return { clock, sqlite, router, reads, hold, release, held, reset };
}

/** A route whose pre-lock has started (the read-through case): cached (a write-region copy) or not. */
async function startedLock(h: ReturnType<typeof setup>, id = 'r', cached = true) {
  await h.router.createRoute(id, SOURCE);
  const grant = await h.router.prelock(id, { migrationId: 'm-1', owner: 'o', target: TARGET });
  h.clock.advance(seconds(productionTiming.convergenceDelaySeconds + 1));
  // the local TTL (60 s) is long gone: a resolve caches the write region's copy again
  if (cached) await h.router.resolve(id);
  h.reset();
  return grant;
}

describe('2,000 concurrent resolves of one id', () => {
  test('cached, lock started: one write-region read for all of them, not 2,000', async () => {
    const h = setup();
    await startedLock(h);
    h.hold();
    const all = Array.from({ length: 2000 }, () => h.router.resolve('r'));
    await h.release();
    const answers = await Promise.all(all);
    expect(h.reads()).toEqual({ nearest: 0, writeRegion: 1 });
    expect(new Set(answers.map((a) => a.etag)).size).toBe(1);
    expect(h.router.sharedReads.writeRegion).toMatchObject({ started: 1, joined: 1999, size: 0 });
  });

  test('a miss, lock started: one nearest read, then one write-region read', async () => {
    const h = setup();
    await startedLock(h, 'r', false);
    h.hold();
    const all = Array.from({ length: 2000 }, () => h.router.resolve('r'));
    await h.release();
    await Promise.all(all);
    expect(h.reads()).toEqual({ nearest: 1, writeRegion: 1 });
  });

  test('a miss, no lock: one nearest read, one cache entry, no write-region read', async () => {
    const h = setup();
    await h.router.createRoute('r', SOURCE);
    h.router.forget('r');
    h.reset();
    h.hold();
    const all = Array.from({ length: 2000 }, () => h.router.view('r'));
    await h.release();
    const views = await Promise.all(all);
    expect(h.reads()).toEqual({ nearest: 1, writeRegion: 0 });
    expect(new Set(views.map((v) => v.cacheControl))).toEqual(new Set(['private, max-age=60']));
    // cached by the one read: the next resolve reads nothing
    await h.router.resolve('r');
    expect(h.reads()).toEqual({ nearest: 1, writeRegion: 0 });
  });

  test('resolves 51 ms apart never join (the bound holds): one read each', async () => {
    const h = setup();
    await startedLock(h);
    h.hold();
    const all: Promise<unknown>[] = [];
    for (let i = 0; i < 20; i += 1) {
      all.push(h.router.resolve('r'));
      h.clock.advance(productionTiming.coalesceJoinMs + 1);
    }
    await h.release();
    await Promise.all(all);
    expect(h.reads()).toEqual({ nearest: 0, writeRegion: 20 });
  });
});

describe('the join bound', () => {
  test('a resolve joins a read begun up to 50 ms before, not 51 ms: it starts its own, which later ones join', async () => {
    const h = setup();
    await startedLock(h);
    h.hold();
    const first = h.router.resolve('r');
    h.clock.advance(50);
    const joined = h.router.resolve('r');
    expect(h.reads().writeRegion).toBe(1);
    h.clock.advance(1); // 51 ms after the first read began
    const own = h.router.resolve('r');
    expect(h.reads().writeRegion).toBe(2);
    h.clock.advance(40); // 40 ms after the second
    const joinsSecond = h.router.resolve('r');
    expect(h.reads().writeRegion).toBe(2);
    await h.release();
    await Promise.all([first, joined, own, joinsSecond]);
    expect(h.router.sharedReads.writeRegion).toMatchObject({ started: 2, joined: 2 });
  });

  test('the dev profile (bound 0): only resolves in the same instant share a read', async () => {
    const h = setup({ ...productionTiming, coalesceJoinMs: 0 });
    await startedLock(h);
    h.hold();
    const sameInstant = [h.router.resolve('r'), h.router.resolve('r')];
    h.clock.advance(1);
    const later = h.router.resolve('r');
    await h.release();
    await Promise.all([...sameInstant, later]);
    expect(h.reads().writeRegion).toBe(2);
  });
});

describe('the escalation to the write region, decided by each caller on its own clock', () => {
  test('a nearest read begun before the lock started: a joiner after the start reads through, the first caller does not', async () => {
    const h = setup();
    await h.router.createRoute('r', SOURCE);
    const grant = await h.router.prelock('r', { migrationId: 'm-1', owner: 'o', target: TARGET });
    // 10 ms before startsAt − skew: the read path may still serve the copy without a read-through
    const readThroughFrom = Date.parse(grant.startsAt) - seconds(productionTiming.clockSkewSeconds);
    h.clock.set(readThroughFrom - 10);
    h.router.forget('r');
    h.reset();
    h.hold();
    const early = h.router.resolve('r');
    h.clock.advance(20); // past readThroughFrom, within the join bound
    const late = h.router.resolve('r');
    expect(h.held()).toEqual(['nearest']);
    await h.release();
    const [a, b] = await Promise.all([early, late]);
    expect(h.reads()).toEqual({ nearest: 1, writeRegion: 1 });
    expect(a.etag).toBe(b.etag);
    // the late caller's write-region read is the one cached: past the start, every resolve reads through
    await h.router.resolve('r');
    expect(h.reads()).toEqual({ nearest: 1, writeRegion: 2 });
  });
});

describe('writes and mutations', () => {
  test('a write by this router: a resolve made after it never joins a read begun before it', async () => {
    const h = setup();
    await h.router.createRoute('r', SOURCE);
    const grant = await h.router.prelock('r', { migrationId: 'm-1', owner: 'o', target: TARGET });
    h.clock.advance(
      seconds(productionTiming.convergenceDelaySeconds + productionTiming.safetyBufferSeconds + 10),
    );
    await h.router.resolve('r'); // cached: the write region's copy
    h.reset();
    // the read path's reads (high) are held; the escalation's (low) go through, and it writes
    h.hold((read) => read.priority === 'high');
    const before = h.router.resolve('r');
    await h.router.escalate('r', { token: grant.token as string, phase: 'hardDelete' });
    const after = h.router.resolve('r'); // same instant, well within the join bound
    await h.release();
    expect((await before).doc.lock?.phase).toBe('prelock');
    expect((await after).doc.lock?.phase).toBe('hardDelete');
    expect(h.router.sharedReads.writeRegion).toMatchObject({ started: 2, joined: 0 });
  });

  test('forget(id) ends joining as well as the cached copy; mutations always read for themselves', async () => {
    const h = setup();
    await startedLock(h);
    h.hold();
    const first = h.router.resolve('r');
    h.router.forget('r');
    const second = h.router.resolve('r');
    // the authoritative read (a mutation's kind) is never a joiner
    const authoritative = h.router.readAuthoritative('r');
    // the first's write-region read, the second's own (a miss: nearest), the authoritative read
    expect(h.reads()).toEqual({ nearest: 1, writeRegion: 2 });
    await h.release();
    await Promise.all([first, second, authoritative]);
  });

  test('a write lands while reads are in flight: later resolves see it, and If-Match saving still holds', async () => {
    const h = setup();
    await startedLock(h);
    h.hold();
    const before = h.router.resolve('r');
    // another process escalates: this router is told (onWrite of a second router → forget, §5.2)
    const stored = await h.sqlite.read('r', { from: 'writeRegion' });
    const lock = stored.doc.lock as NonNullable<typeof stored.doc.lock>;
    const written = await h.sqlite.replace(
      { ...stored.doc, lock: { ...lock, expiresAt: lock.maxExpiresAt } },
      stored.etag,
    );
    h.router.forget('r');
    const after = h.router.resolve('r');
    await h.release();
    expect((await before).etag).toBe(stored.etag);
    expect((await after).etag).toBe(written.etag);
    // the shared write-region read recorded its version: a mutation naming it reads nothing
    h.reset();
    await expect(h.router.reclaim('r')).rejects.toMatchObject({ code: 'Locked' });
    expect(h.reads().writeRegion).toBeLessThanOrEqual(1);
  });

  test('a failed read is shared by its joiners; the next resolve reads again', async () => {
    const h = setup();
    await startedLock(h);
    await h.sqlite.database.prepare('DELETE FROM locations WHERE id = ?').run('r');
    h.hold();
    const outcomes = Promise.allSettled(Array.from({ length: 10 }, () => h.router.resolve('r')));
    await h.release();
    expect((await outcomes).every((o) => o.status === 'rejected')).toBe(true);
    expect(h.reads().writeRegion).toBe(1);
    await expect(h.router.resolve('r')).rejects.toMatchObject({ code: 'NotFound' });
    expect(h.reads().writeRegion).toBe(2);
  });
});

describe('a slow read', () => {
  // Dated from when its read answered, a read that took 30 s would keep its (30 s old) copy 30 s past the
  // local TTL the convergence delay counts.
  test('its copy is dated from when the read began: gone one local TTL after that, however long the read took', async () => {
    const h = setup();
    await h.router.createRoute('r', SOURCE);
    h.router.forget('r');
    h.reset();
    h.hold();
    const slow = h.router.view('r');
    h.clock.advance(seconds(30));
    await h.release();
    // the answer is 30 s old when it comes: its Age says so, and max-age is what is left of the TTL
    expect(await slow).toMatchObject({ ageSeconds: 30, cacheControl: 'private, max-age=30' });
    h.clock.advance(seconds(productionTiming.localCacheTtlSeconds - 30) + 1);
    // one local TTL after the read began: the copy is gone, the next resolve reads again
    await h.router.resolve('r');
    expect(h.reads()).toEqual({ nearest: 2, writeRegion: 0 });
  });
});

describe("a view's resolvedAt (the in-flight grace in library mode)", () => {
  // A library-mode service must not date a view from its own call: a view
  // that joined a read begun before a write lock committed shows the route unlocked: dated from the call,
  // its write passes withinGrace up to the join bound after the delta copy began.
  test('a view that joined a read dates from that read; a cache hit from the call', async () => {
    const h = setup();
    const orchestrator = new Router({ store: h.sqlite, timing: productionTiming, clock: h.clock.now });
    await orchestrator.createRoute('r', SOURCE);
    const grant = await orchestrator.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
    h.clock.advance(
      seconds(productionTiming.convergenceDelaySeconds + productionTiming.clockSkewSeconds + 1),
    );
    h.hold((read) => read.from === 'writeRegion');
    const readBegan = h.clock.now();
    const first = h.router.view('r'); // the started pre-lock: a write-region read, held open
    await new Promise((r) => setImmediate(r));
    h.clock.advance(10);
    await orchestrator.escalate('r', { token: grant.token!, phase: 'hardDelete' });
    const write = await orchestrator.escalate('r', { token: grant.token!, phase: 'write' });
    const lockedAt = h.clock.now();
    h.clock.advance(30);
    const calledAt = h.clock.now();
    const joined = h.router.view('r'); // joins the read begun 40 ms ago, before the write lock
    await h.release();
    await first;
    const answer = await joined;
    expect(write.phase).toBe('write');
    expect(answer.view.enforcement.write).toBe('allow');
    expect(answer.resolvedAt).toBe(readBegan);
    // the copies start a grace after the lock: a write landing 20 ms after that is refused by the view's
    // own resolvedAt, and would pass if dated from the call (the check's negative control)
    const landsAt = lockedAt + seconds(5) + 20;
    expect(withinGrace(answer.resolvedAt, 5, landsAt)).toBe(false);
    expect(withinGrace(calledAt, 5, landsAt)).toBe(true);
  });

  test('a view served from the cache is dated from the call', async () => {
    const h = setup();
    await h.router.createRoute('r', SOURCE);
    await h.router.view('r');
    h.clock.advance(seconds(20));
    const calledAt = h.clock.now();
    expect((await h.router.view('r')).resolvedAt).toBe(calledAt);
  });
});

test('a delete refused on a held copy that has gone stale is a 412, not the stale copy’s 423', async () => {
  const h = setup();
  const other = new Router({ store: h.sqlite, timing: productionTiming, clock: h.clock.now });
  await h.router.createRoute('r', SOURCE);
  const grant = await h.router.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
  h.clock.advance(seconds(productionTiming.convergenceDelaySeconds + productionTiming.clockSkewSeconds + 1));
  const hardDelete = await h.router.escalate('r', { token: grant.token!, phase: 'hardDelete' });
  // another router releases the lock: the version this router holds is stale
  await other.release('r', { token: grant.token! });
  const error = await h.router.deleteRoute('r', { ifMatch: hardDelete.etag }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toMatchObject({ code: 'PreconditionFailed' });
});
