import type {
  HardDeleteLock,
  Lock,
  LocationDocument,
  StoredDocument,
  WriteLock,
} from '../shared/core/lock/document';
import { newLocationDocument } from '../shared/core/lock/document';
import { readAction } from '../shared/core/lock/readPolicy';
import { routeView } from '../shared/core/lock/view';
import type { Router } from '../shared/core/router';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import { ManualClock } from '../testkit/clock';
import { LaggingStore } from '../testkit/laggingStore';
import { type ReadPolicyBug, plantedReadAction } from '../testkit/readPolicyBugs';
import { seamedRouter } from '../testkit/router';
import { T0, productionTiming, seconds } from './support/timing';

/**
 * The router's read path under announced locks (docs/design.md §5.1), counted: a store whose replica lags
 * by the replication bound R and counts its write-region and nearest reads, a reader resolving 100 times a
 * second on a virtual clock, production timing (S = 5 s, local TTL 60 s, L = 8105 s). The documents are
 * written literally as the announced rule writes them. Each property is one `violations` function, and each
 * negative control plants a broken read policy (RouterSeams.readAction) and must be caught by that same
 * function.
 */

const timing = productionTiming;
const S = seconds(timing.clockSkewSeconds);
const TTL = seconds(timing.localCacheTtlSeconds);
const L = seconds(timing.announceLeadSeconds);
const R = seconds(timing.replicationBoundSeconds);
const A = S + seconds(Math.min(timing.writeLeaseSeconds, timing.writeBudgetSeconds));
const WRITE_LEASE = seconds(timing.writeLeaseSeconds);
const ID = 'r';
const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const iso = (at: number) => new Date(at).toISOString();

// The timeline (epoch ms): the announced pre-lock, the window's announcement, the activation, one renewal.
const ACQUIRED = T0 + seconds(1);
const STARTS = ACQUIRED + L;
const ANNOUNCED = STARTS + seconds(600);
const W = ANNOUNCED + L;
const ACTIVATED = W + S + seconds(1);
const RENEWED = ACTIVATED + seconds(240);
const WRITE_END = RENEWED + WRITE_LEASE; // the renewed write lock's end: dead from WRITE_END + 2S

const hardDelete: HardDeleteLock = {
  phase: 'hardDelete',
  tokenHash: 'h',
  migrationId: 'm-1',
  owner: 'o',
  target: TARGET,
  acquiredAt: iso(ACQUIRED),
  startsAt: iso(STARTS),
  hardDeleteAt: iso(STARTS),
  hardDeleteExpiresAt: iso(STARTS + seconds(timing.hardDeleteLeaseSeconds)),
  expiresAt: iso(STARTS + seconds(timing.prelockLeaseSeconds)),
  maxExpiresAt: iso(ACQUIRED + seconds(timing.prelockMaxSeconds)),
  convergenceDelaySeconds: timing.convergenceDelaySeconds,
  announceLeadSeconds: timing.announceLeadSeconds,
};
const window: HardDeleteLock = { ...hardDelete, writeWindowAt: iso(W), writeWindowUntil: iso(W + A) };
const activated: WriteLock = {
  ...window,
  phase: 'write',
  writeAt: iso(ACTIVATED),
  writeExpiresAt: iso(ACTIVATED + WRITE_LEASE),
};
const renewed: WriteLock = { ...activated, writeExpiresAt: iso(WRITE_END) };

/** The writes of one announced migration whose workflow dies after one write-lock renewal. */
const announcedMigration: [at: number, lock: Lock][] = [
  [ACQUIRED, hardDelete],
  [ANNOUNCED, window],
  [ACTIVATED, activated],
  [RENEWED, renewed],
];

/** The lock in force in the write region at `at` (what a correct reader must enforce). */
function writeRegionLock(at: number): Lock | null {
  let lock: Lock | null = null;
  for (const [when, written] of announcedMigration) if (when <= at) lock = written;
  return lock;
}

/** A store whose replica lags R behind, a clock, and the migration's writes made as the clock passes them. */
class World {
  readonly clock = new ManualClock(T0);
  readonly store = new LaggingStore(new SqliteStore(':memory:'), this.clock.now, () => R);
  private stored: StoredDocument | undefined;
  private pending: [number, Lock][];

  constructor(writes: [number, Lock][]) {
    this.pending = [...writes];
  }

  async create(): Promise<void> {
    this.stored = await this.store.create(newLocationDocument(ID, SOURCE, T0));
  }

  /** Move the clock to `at`, making each write due on the way at its own instant. */
  async advanceTo(at: number): Promise<void> {
    while (this.pending.length > 0 && this.pending[0]![0] <= at) {
      const [when, lock] = this.pending.shift()!;
      this.clock.set(when);
      const doc: LocationDocument = {
        ...this.stored!.doc,
        lock,
        secondary: { location: TARGET, role: 'pendingTarget', writesBlockedUntil: lock.expiresAt },
      };
      this.stored = await this.store.replace(doc, this.stored!.etag);
    }
    this.clock.set(at);
  }

  reader(bug?: ReadPolicyBug | typeof readAction): Router {
    const seam = typeof bug === 'string' ? plantedReadAction(bug) : bug;
    return seamedRouter({
      store: this.store,
      timing,
      clock: this.clock.now,
      ...(seam ? { readAction: seam } : {}),
    });
  }

  reads(): { nearest: number; writeRegion: number } {
    return { nearest: this.store.counters.nearestReads, writeRegion: this.store.counters.writeRegionReads };
  }
}

async function announcedWorld(): Promise<World> {
  const world = new World(announcedMigration);
  await world.create();
  return world;
}

/** One resolve: when, what it read, and what the served copy enforces. */
interface Resolve {
  at: number;
  nearest: number;
  writeRegion: number;
  stored: StoredDocument;
}

/** `router` resolving `perSecond` times a second over [from, to), the migration's writes made on the way. */
async function drive(
  world: World,
  router: Router,
  from: number,
  to: number,
  perSecond = 100,
): Promise<Resolve[]> {
  const log: Resolve[] = [];
  const step = 1000 / perSecond;
  for (let at = from; at < to; at += step) {
    await world.advanceTo(at);
    const before = world.reads();
    const stored = await router.resolve(ID);
    const after = world.reads();
    log.push({
      at,
      nearest: after.nearest - before.nearest,
      writeRegion: after.writeRegion - before.writeRegion,
      stored,
    });
  }
  return log;
}

const sum = (log: Resolve[], key: 'nearest' | 'writeRegion') => log.reduce((n, r) => n + r[key], 0);

/**
 * Decisions a served copy gets wrong against the write region's lock at that instant (in true time, one
 * clock): a write allowed under a write lock in force, or a delete not intercepted under a hard-delete lock.
 */
function wrongDecisions(log: Resolve[]): string[] {
  const wrong: string[] = [];
  for (const r of log) {
    const truth = routeView(
      { doc: { ...r.stored.doc, lock: writeRegionLock(r.at) }, etag: 'e' },
      r.at,
      timing,
    );
    const served = routeView(r.stored, r.at, timing).enforcement;
    if (truth.enforcement.write === 'deny' && served.write !== 'deny')
      wrong.push(`write allowed at ${iso(r.at)}`);
    if (truth.enforcement.delete !== 'allow' && served.delete === 'allow')
      wrong.push(`delete physical at ${iso(r.at)}`);
  }
  return wrong;
}

// ---------------------------------------------------------------------------------------------
// Held in the announced hard-delete lock: no write-region read, one replica read per TTL
// ---------------------------------------------------------------------------------------------

/** Ten minutes across the hard-delete lock's start, 100 resolves a second. */
async function hardDeleteTenMinutes(bug?: ReadPolicyBug) {
  const world = await announcedWorld();
  const from = STARTS - seconds(120);
  const log = await drive(world, world.reader(bug), from, from + seconds(600));
  return { log, violations: hardDeleteViolations(log) };
}

function hardDeleteViolations(log: Resolve[]): string[] {
  const out: string[] = [];
  const writeRegion = sum(log, 'writeRegion');
  const nearest = sum(log, 'nearest');
  const ttls = (log.at(-1)!.at - log[0]!.at) / TTL;
  if (writeRegion !== 0) out.push(`${writeRegion} write-region reads`);
  if (nearest > Math.ceil(ttls) + 1) out.push(`${nearest} replica reads: more than one per TTL`);
  if (nearest < Math.floor(ttls)) out.push(`${nearest} replica reads: a copy served past its TTL`);
  return [...out, ...wrongDecisions(log)];
}

describe('an announced hard-delete lock, 10 minutes at 100 resolves a second', () => {
  test('0 write-region reads, one replica read per local TTL, deletes intercepted from its start', async () => {
    const { log, violations } = await hardDeleteTenMinutes();
    expect(log).toHaveLength(60_000);
    expect(violations).toEqual([]);
    expect(sum(log, 'nearest')).toBe(10);
    expect(
      log
        .filter((r) => r.at >= STARTS - S)
        .every((r) => routeView(r.stored, r.at, timing).enforcement.delete === 'tombstone'),
    ).toBe(true);
  });

  test.each(['legacyForAll', 'servedPastTtl'] as const)('negative control: %s is caught', async (bug) => {
    const { violations } = await hardDeleteTenMinutes(bug);
    expect(violations.length).toBeGreaterThan(0);
  });
});

test('a revalidation (a client’s refresh ahead) of an announced copy outside the window reads the nearest replica', async () => {
  const world = await announcedWorld();
  const router = world.reader();
  await world.advanceTo(STARTS + seconds(60));
  await router.view(ID);
  const before = world.reads();
  const view = await router.view(ID, { revalidate: true });
  expect(world.reads()).toEqual({ nearest: before.nearest + 1, writeRegion: before.writeRegion });
  expect(view).toMatchObject({ cacheControl: 'private, max-age=60', ageSeconds: 0 });
  // In the window a revalidation reads the write region, as every resolve does.
  await world.advanceTo(W);
  await router.view(ID);
  const inWindow = world.reads();
  await router.view(ID, { revalidate: true });
  expect(world.reads()).toEqual({ nearest: inWindow.nearest, writeRegion: inWindow.writeRegion + 1 });
});

// ---------------------------------------------------------------------------------------------
// The write window: the write region on every resolve, left only on its word
// ---------------------------------------------------------------------------------------------

/**
 * From a minute before the window to two TTLs past the renewed write lock's death, with a pause of two
 * TTLs inside the window (no resolve: the held copy ages past its TTL there).
 */
async function throughTheWindow(bug?: ReadPolicyBug) {
  const world = await announcedWorld();
  const router = world.reader(bug);
  const before = await drive(world, router, W - S - seconds(60), W + seconds(60));
  const afterPause = await drive(world, router, W + seconds(60) + 2 * TTL, WRITE_END + 2 * S + 3 * TTL);
  const log = [...before, ...afterPause];
  return { world, router, log, violations: windowViolations(log) };
}

/** The first write-region read that began once the renewed write lock was dead (≥ its end + 2S). */
const deadJudgement = (log: Resolve[]) => log.find((r) => r.writeRegion > 0 && r.at >= WRITE_END + 2 * S);

function windowViolations(log: Resolve[]): string[] {
  const out: string[] = [];
  const judged = deadJudgement(log);
  const inWindow = log.filter((r) => r.at >= W - S && (judged === undefined || r.at < judged.at));
  const skipped = inWindow.filter((r) => r.writeRegion !== 1);
  if (skipped.length > 0) out.push(`${skipped.length} resolves in the window without a write-region read`);
  const replica = sum(inWindow, 'nearest');
  if (replica > 0) out.push(`${replica} replica reads in the window`);
  if (judged === undefined) out.push('the window was never left');
  const after = judged ? log.filter((r) => r.at > judged.at) : [];
  if (sum(after, 'writeRegion') > 0)
    out.push(`${sum(after, 'writeRegion')} write-region reads after the write lock was judged dead`);
  if (
    sum(
      log.filter((r) => r.at < W - S),
      'writeRegion',
    ) > 0
  )
    out.push('write-region reads before the window');
  return [...out, ...wrongDecisions(log)];
}

describe('the write window', () => {
  test('every resolve from W − S reads the write region, never a replica, until the write region shows the write lock dead; then cache hits', async () => {
    const { log, violations } = await throughTheWindow();
    expect(violations).toEqual([]);
    const judged = deadJudgement(log)!;
    // Left on the first resolve at or after the renewed lock's end + 2S: its read is the judgement.
    expect(judged.at).toBe(log.find((r) => r.at >= WRITE_END + 2 * S)!.at);
    // After it: hits, and one replica read per TTL (that replica copy is the same dead version: the memo).
    const after = log.filter((r) => r.at > judged.at);
    expect(sum(after, 'nearest')).toBe(2);
    expect(after.filter((r) => r.nearest + r.writeRegion === 0).length).toBe(after.length - 2);
  });

  test('concurrent resolves in the window share one write-region read (within the join bound)', async () => {
    const world = await announcedWorld();
    const router = world.reader();
    await world.advanceTo(W);
    await router.resolve(ID);
    const before = world.reads();
    await Promise.all(Array.from({ length: 10 }, () => router.resolve(ID)));
    expect(world.reads().writeRegion - before.writeRegion).toBe(1);
  });

  // (leaveOnOwnTimestamps needs a replica copy in the window: a process's first sight, below.)
  test.each(['replicaInWindow', 'legacyForAll'] as const)('negative control: %s is caught', async (bug) => {
    const { violations } = await throughTheWindow(bug);
    expect(violations.length).toBeGreaterThan(0);
  });
});

// ---------------------------------------------------------------------------------------------
// A process that first sees the resource mid-migration
// ---------------------------------------------------------------------------------------------

/** The instants a new process first resolves the route, and what that first resolve must read. */
const firstSights: [name: string, at: number, reads: { nearest: number; writeRegion: number }][] = [
  ['before the lock starts', STARTS - S - seconds(30), { nearest: 1, writeRegion: 0 }],
  ['in the hard-delete lock', STARTS + seconds(60), { nearest: 1, writeRegion: 0 }],
  ['in the window, before the activation', W, { nearest: 1, writeRegion: 1 }],
  [
    'under the write lock, the replica a lag behind it',
    ACTIVATED + seconds(10),
    { nearest: 1, writeRegion: 1 },
  ],
  [
    'under the renewed write lock, the replica still showing the first lease past its end + 2S',
    ACTIVATED + WRITE_LEASE + 2 * S + seconds(1),
    { nearest: 1, writeRegion: 1 },
  ],
  // The replica still shows the dead write lock: one write-region read to judge it (then the memo).
  ['after the write lock is dead', WRITE_END + 2 * S + R, { nearest: 1, writeRegion: 1 }],
];

async function firstSight(at: number, bug?: ReadPolicyBug) {
  const world = await announcedWorld();
  await world.advanceTo(at);
  return drive(world, world.reader(bug), at, at + 1, 1000);
}

function firstSightViolations(log: Resolve[], expected: { nearest: number; writeRegion: number }): string[] {
  const reads = { nearest: sum(log, 'nearest'), writeRegion: sum(log, 'writeRegion') };
  const wrongReads = reads.nearest !== expected.nearest || reads.writeRegion !== expected.writeRegion;
  return [...(wrongReads ? [`reads ${JSON.stringify(reads)}`] : []), ...wrongDecisions(log)];
}

describe('a process that first sees the resource mid-migration', () => {
  test.each(firstSights)('%s', async (_name, at, expected) => {
    expect(firstSightViolations(await firstSight(at), expected)).toEqual([]);
  });

  test.each([
    ['leaveOnOwnTimestamps', 4],
    ['replicaInWindow', 2],
    ['replicaInWindow', 3],
  ] as const)('negative control: %s is caught (first sight %i)', async (bug, index) => {
    const [, at, expected] = firstSights[index]!;
    expect(firstSightViolations(await firstSight(at, bug), expected).length).toBeGreaterThan(0);
  });
});

// ---------------------------------------------------------------------------------------------
// Legacy locks: the read-through from the start, as before
// ---------------------------------------------------------------------------------------------

const legacyHardDelete: HardDeleteLock = (() => {
  const { announceLeadSeconds: _lead, ...lock } = hardDelete;
  return { ...lock, startsAt: iso(ACQUIRED + seconds(timing.convergenceDelaySeconds)) };
})();
const LEGACY_STARTS = Date.parse(legacyHardDelete.startsAt);

/** A legacy hard-delete lock, 2 minutes across its start at 100 resolves a second. */
async function legacyCounts(seam?: typeof readAction) {
  const world = new World([[ACQUIRED, legacyHardDelete]]);
  await world.create();
  const log = await drive(
    world,
    world.reader(seam),
    LEGACY_STARTS - S - seconds(60),
    LEGACY_STARTS + seconds(60),
  );
  return { log, violations: legacyViolations(log) };
}

/** The rule as it was: a replica read per TTL before the start less S, the write region on every resolve from it. */
function legacyViolations(log: Resolve[]): string[] {
  const out: string[] = [];
  const started = log.filter((r) => r.at >= LEGACY_STARTS - S);
  const before = log.filter((r) => r.at < LEGACY_STARTS - S);
  if (started.some((r) => r.writeRegion !== 1)) out.push('a started legacy lock served from cache');
  if (sum(started, 'nearest') !== 0) out.push('replica reads once started');
  if (sum(before, 'writeRegion') !== 0 || sum(before, 'nearest') !== 1) out.push('reads before the start');
  return out;
}

describe('a legacy lock', () => {
  test('one write-region read per resolve from its start less the skew, as before', async () => {
    const { log, violations } = await legacyCounts();
    expect(violations).toEqual([]);
    expect(sum(log, 'writeRegion')).toBe(6500); // 65 s from its start less S, 100 a second
  });

  test('negative control: a reader that takes a legacy lock for announced is caught', async () => {
    const asAnnounced: typeof readAction = (copy, now, t) =>
      copy?.doc.lock
        ? readAction(
            { ...copy, doc: { ...copy.doc, lock: { ...copy.doc.lock, announceLeadSeconds: 1 } } },
            now,
            t,
          )
        : readAction(copy, now, t);
    const { violations } = await legacyCounts(asAnnounced);
    expect(violations.length).toBeGreaterThan(0);
  });
});

// ---------------------------------------------------------------------------------------------
// Through the real rules: an announced migration written by the router, read by another
// ---------------------------------------------------------------------------------------------

test('an announced migration written by the real rules: write-region reads only in the window (10 resolves/s)', async () => {
  const clock = new ManualClock(T0);
  const store = new LaggingStore(new SqliteStore(':memory:'), clock.now, () => R);
  const orchestrator = seamedRouter({ store, timing, clock: clock.now, newToken: () => 'token-1' });
  const reader = seamedRouter({ store, timing, clock: clock.now });
  await orchestrator.createRoute(ID, SOURCE);
  const grant = await orchestrator.prelock(ID, {
    migrationId: 'm',
    owner: 'o',
    target: TARGET,
    announced: true,
  });
  const reads: { at: number; writeRegion: number }[] = [];
  const resolveUntil = async (until: number) => {
    for (; clock.now() < until; clock.advance(100)) {
      const before = store.counters.writeRegionReads;
      await reader.resolve(ID);
      reads.push({ at: clock.now(), writeRegion: store.counters.writeRegionReads - before });
    }
  };
  const writeRegionReads = (from: number, to: number) =>
    reads.filter((r) => r.at >= from && r.at < to).reduce((n, r) => n + r.writeRegion, 0);

  const starts = Date.parse(grant.startsAt);
  clock.set(starts - seconds(60));
  await resolveUntil(starts + S + seconds(60));
  const announced = await orchestrator.announce(ID, { token: 'token-1', phase: 'write' });
  const w = Date.parse(announced.writeWindowAt!);
  clock.set(w - S - seconds(60));
  await resolveUntil(w + S);
  const write = await orchestrator.escalate(ID, { token: 'token-1', phase: 'write' });
  await resolveUntil(w + S + seconds(30));
  await orchestrator.swap(ID, { token: 'token-1', writeAt: write.writeAt });
  const swapped = clock.now();
  await resolveUntil(swapped + R + 2 * TTL);

  // Outside the window: none (the lock's start, the announcement) but the orchestrator's own reads.
  expect(writeRegionReads(starts - seconds(60), w - S)).toBe(0);
  // In the window, up to the swap: every resolve.
  const inWindow = reads.filter((r) => r.at >= w - S && r.at <= swapped);
  expect(inWindow.every((r) => r.writeRegion === 1)).toBe(true);
  // From the swap: the first resolve reads it through, then hits; while the replica (R behind) still shows
  // the write lock, each TTL's refresh reads through once more: ⌈R/T⌉ = 5 in all, then none.
  expect(writeRegionReads(swapped, swapped + R + 2 * TTL)).toBe(Math.ceil(R / TTL));
  expect(writeRegionReads(swapped + R + TTL, swapped + R + 2 * TTL)).toBe(0);
});
