import type {
  HardDeleteLock,
  Lock,
  PrelockLock,
  StoredDocument,
  WriteLock,
} from '../../shared/core/lock/document';
import {
  type HeldCopy,
  type Provenance,
  type ReadAction,
  nextTighteningFrom,
  readAction,
  windowFrom,
} from '../../shared/core/lock/readPolicy';
import { deadInWriteRegion, enforcedFrom } from '../../shared/core/lock/state';
import { type ReadPolicyBug, plantedReadAction } from '../../testkit/readPolicyBugs';
import {
  WINDOW_UNTIL,
  WRITE_END,
  W,
  announcedHardDelete,
  announcedWindow,
  announcedWrite,
  at,
  docUnder,
  iso,
  legacyPrelock,
  lockBase as base,
} from '../support/announcedLocks';
import { productionTiming, seconds } from '../support/timing';

/**
 * The read decision (shared/core/lock/readPolicy.ts) as a table over (document state × provenance ×
 * readStartedAt × now), production timing (skew S = 5 s, local TTL 60 s), each boundary one millisecond
 * before, at and after. Legacy locks are checked against the read path as it was before announced locks
 * (its readThroughFrom and its cache's TTL, copied below), on a sweep of the same inputs. Each planted
 * broken policy (testkit/readPolicyBugs) must fail the rows that guard against it.
 */

const timing = productionTiming;
const S = seconds(timing.clockSkewSeconds);
const TTL = seconds(timing.localCacheTtlSeconds);
const L = timing.announceLeadSeconds;
const t = at;
const ms = (isoText: string) => Date.parse(isoText);

// Legacy locks: the pre-lock starts a convergence delay after it is taken.
const legacyHardDelete: HardDeleteLock = {
  ...base,
  phase: 'hardDelete',
  startsAt: iso(7500),
  hardDeleteAt: iso(8200),
  hardDeleteExpiresAt: iso(30_000),
};
const legacyWrite: WriteLock = {
  ...legacyHardDelete,
  phase: 'write',
  writeAt: iso(20_000),
  writeExpiresAt: iso(20_300),
};

/** Not written by the rules (an announced lock starts in hard-delete): read by the stricter legacy rule. */
const announcedPrelock: PrelockLock = { ...legacyPrelock, announceLeadSeconds: L };

const doc = docUnder;
const copy = (lock: Lock | null, provenance: Provenance, readStartedAt: number): HeldCopy => ({
  doc: doc(lock),
  provenance,
  readStartedAt,
});

type Kind = ReadAction['kind'];
interface Row {
  name: string;
  copy: HeldCopy | undefined;
  now: number;
  expected: Kind;
  /** The planted policies this row (or one of its boundary group) catches. */
  catches?: ReadPolicyBug[];
}

/** Three rows: `now` one millisecond before, at and after `boundary`. */
function around(
  name: string,
  at: (now: number) => HeldCopy,
  boundary: number,
  [before, atBoundary, after]: [Kind, Kind, Kind],
  catches?: ReadPolicyBug[],
): Row[] {
  return [
    { name: `${name}: −1 ms`, copy: at(boundary - 1), now: boundary - 1, expected: before },
    { name: `${name}: 0`, copy: at(boundary), now: boundary, expected: atBoundary },
    { name: `${name}: +1 ms`, copy: at(boundary + 1), now: boundary + 1, expected: after },
  ].map((row) => (catches ? { ...row, catches } : row));
}

/** Three rows over the copy's read start, one millisecond before, at and after `boundary`; `now` fixed after it. */
function aroundRead(
  name: string,
  at: (readStartedAt: number) => HeldCopy,
  boundary: number,
  now: (readStartedAt: number) => number,
  expected: [Kind, Kind, Kind],
  catches?: ReadPolicyBug[],
): Row[] {
  return [-1, 0, 1].map((d, i) => ({
    name: `${name}: read ${d === 0 ? '0' : `${d > 0 ? '+' : '−'}1 ms`}`,
    copy: at(boundary + d),
    now: now(boundary + d),
    expected: expected[i]!,
    ...(catches ? { catches } : {}),
  }));
}

const rows: Row[] = [
  { name: 'no copy held: refresh from the nearest replica', copy: undefined, now: t(0), expected: 'refresh' },
  ...around(
    'unlocked, at its TTL',
    () => copy(null, 'replica', t(100)),
    t(100) + TTL,
    ['serve', 'serve', 'refresh'],
    ['servedPastTtl'],
  ),

  // An announced hard-delete lock: its start, renewals and end were announced; no read at any of them.
  ...around(
    'announced hard-delete, replica copy read before the start, at start − S',
    () => copy(announcedHardDelete, 'replica', t(L) - S - seconds(30)),
    t(L) - S,
    ['serve', 'serve', 'serve'],
    ['legacyForAll'],
  ),
  ...around(
    'announced hard-delete in force, replica copy, at its TTL',
    () => copy(announcedHardDelete, 'replica', t(10_000)),
    t(10_000) + TTL,
    ['serve', 'serve', 'refresh'],
    ['servedPastTtl'],
  ),
  ...around(
    'announced hard-delete in force, write-region copy, at its TTL',
    () => copy(announcedHardDelete, 'writeRegion', t(10_000)),
    t(10_000) + TTL,
    ['serve', 'serve', 'refresh'],
    ['servedPastTtl'],
  ),
  {
    name: 'announced hard-delete lapsed (past its lease), fresh replica copy: served',
    copy: copy(announcedHardDelete, 'replica', t(L + 21_600 + 10)),
    now: t(L + 21_600 + 20),
    expected: 'serve',
  },

  // The write window: from W − S every resolve reads the write region.
  ...around(
    'announced window, replica copy, at W − S',
    () => copy(announcedWindow, 'replica', t(W) - S - seconds(30)),
    t(W) - S,
    ['serve', 'readThrough', 'readThrough'],
  ),
  ...around(
    'announced window, in the window, the copy at its TTL: read through, never refreshed',
    () => copy(announcedWindow, 'writeRegion', t(W)),
    t(W) + TTL,
    ['readThrough', 'readThrough', 'readThrough'],
    ['replicaInWindow'],
  ),
  {
    name: 'announced window, a fresh replica copy in the window: read through',
    copy: copy(announcedWindow, 'replica', t(W + 10)),
    now: t(W + 10),
    expected: 'readThrough',
    catches: ['replicaInWindow'],
  },
  {
    name: 'announced window, past W + S before any write lock: read through',
    copy: copy(announcedWindow, 'writeRegion', t(W + 100)),
    now: t(W + 100),
    expected: 'readThrough',
  },
  ...aroundRead(
    'announced window, write-region copy, window dead at writeWindowUntil + 2S',
    (r) => copy(announcedWindow, 'writeRegion', r),
    t(WINDOW_UNTIL) + 2 * S,
    (r) => r + seconds(1),
    ['readThrough', 'serve', 'serve'],
  ),
  ...aroundRead(
    'announced window, replica copy, window past writeWindowUntil + 2S on its own timestamps',
    (r) => copy(announcedWindow, 'replica', r),
    t(WINDOW_UNTIL) + 2 * S,
    (r) => r + seconds(1),
    ['readThrough', 'readThrough', 'readThrough'],
    ['leaveOnOwnTimestamps'],
  ),
  {
    name: 'announced window dead in the write region, past its TTL: refresh from the nearest replica',
    copy: copy(announcedWindow, 'writeRegion', t(WINDOW_UNTIL + 100)),
    now: t(WINDOW_UNTIL + 100) + TTL + 1,
    expected: 'refresh',
  },

  // The write lock (activated): read through in force or lapsed, until the write region shows it dead.
  {
    name: 'announced write lock in force, fresh write-region copy: read through',
    copy: copy(announcedWrite, 'writeRegion', t(W + 60)),
    now: t(W + 60),
    expected: 'readThrough',
    catches: ['leaveOnOwnTimestamps'],
  },
  {
    name: 'announced write lock lapsed an hour ago, replica copy: read through',
    copy: copy(announcedWrite, 'replica', t(WRITE_END + 3600)),
    now: t(WRITE_END + 3600),
    expected: 'readThrough',
    catches: ['leaveOnOwnTimestamps'],
  },
  ...aroundRead(
    'announced write lock, write-region copy, dead at writeExpiresAt + 2S',
    (r) => copy(announcedWrite, 'writeRegion', r),
    t(WRITE_END) + 2 * S,
    (r) => r + seconds(1),
    ['readThrough', 'serve', 'serve'],
  ),
  ...around(
    'announced write lock dead in the write region, at its TTL: refresh from the nearest replica',
    () => copy(announcedWrite, 'writeRegion', t(WRITE_END + 100)),
    t(WRITE_END + 100) + TTL,
    ['serve', 'serve', 'refresh'],
    ['servedPastTtl'],
  ),
  ...aroundRead(
    'announced write lock ending with its parent lease, write-region copy, dead at expiresAt + 2S',
    (r) =>
      copy(
        { ...announcedWrite, expiresAt: iso(WRITE_END), hardDeleteExpiresAt: iso(WRITE_END) },
        'writeRegion',
        r,
      ),
    t(WRITE_END) + 2 * S,
    (r) => r + seconds(1),
    ['readThrough', 'serve', 'serve'],
  ),

  // Legacy locks: read through from the start less the skew, as before.
  ...around(
    'legacy pre-lock, replica copy, at start − S',
    () => copy(legacyPrelock, 'replica', t(7500) - S - seconds(30)),
    t(7500) - S,
    ['serve', 'readThrough', 'readThrough'],
  ),
  ...around(
    'legacy hard-delete, in its start, the copy at its TTL: refreshed (its cache dropped it), as before',
    () => copy(legacyHardDelete, 'writeRegion', t(9000)),
    t(9000) + TTL,
    ['readThrough', 'readThrough', 'refresh'],
  ),
  {
    name: 'a lock marked announced in phase pre-lock (never written so): the legacy rule',
    copy: copy(announcedPrelock, 'replica', t(7500)),
    now: t(7500),
    expected: 'readThrough',
  },
];

const run = (policy: typeof readAction, row: Row): Kind => policy(row.copy, row.now, timing).kind;

describe('readAction', () => {
  test.each(rows.map((row) => [row.name, row] as const))('%s', (_name, row) => {
    expect(run(readAction, row)).toBe(row.expected);
  });
});

describe('windowFrom, case by case', () => {
  const cases: [string, HeldCopy, number][] = [
    ['1. no lock', copy(null, 'replica', t(0)), Infinity],
    ['2. legacy, replica', copy(legacyHardDelete, 'replica', t(9000)), t(7500) - S],
    [
      '2. legacy, dead in the write region',
      copy(legacyHardDelete, 'writeRegion', t(100_000) + 2 * S),
      Infinity,
    ],
    [
      '3. announced, window dead in the write region',
      copy(announcedWindow, 'writeRegion', t(WINDOW_UNTIL) + 2 * S),
      Infinity,
    ],
    [
      '3. announced, write lock dead in the write region',
      copy(announcedWrite, 'writeRegion', t(WRITE_END) + 2 * S),
      Infinity,
    ],
    ['4. announced write lock, replica', copy(announcedWrite, 'replica', t(WRITE_END + 3600)), -Infinity],
    ['5. announced window, replica', copy(announcedWindow, 'replica', t(100)), t(W) - S],
    ['6. announced hard-delete, no window, replica', copy(announcedHardDelete, 'replica', t(100)), Infinity],
  ];
  test.each(cases)('%s', (_name, held, expected) => {
    expect(windowFrom(held, timing.clockSkewSeconds)).toBe(expected);
  });
});

describe('nextTighteningFrom', () => {
  test.each([
    ['announced, before its start less the skew', announcedHardDelete, t(L) - S - 1, t(L) - S],
    ['announced, at its start less the skew', announcedHardDelete, t(L) - S, Infinity],
    ['announced, after it', announcedHardDelete, t(L) - S + 1, Infinity],
    ['legacy, before its start less the skew', legacyPrelock, t(7500) - S - 1, t(7500) - S],
    ['unlocked', null, t(0), Infinity],
  ] as const)('%s', (_name, lock, now, expected) => {
    expect(nextTighteningFrom(doc(lock), now, timing.clockSkewSeconds)).toBe(expected);
  });
});

/**
 * The read path before announced locks, copied as it was: a copy's read-through instant (Router
 * readThroughFrom), and the cache's TTL in front of it (an expired copy is gone: a miss, the nearest read).
 */
function todayReadThroughFrom(stored: StoredDocument, fetchedAt: number, fromWriteRegion: boolean): number {
  const lock = stored.doc.lock;
  const skew = timing.clockSkewSeconds;
  if (!lock) return Number.POSITIVE_INFINITY;
  if (fromWriteRegion && deadInWriteRegion(lock, fetchedAt, skew)) return Number.POSITIVE_INFINITY;
  return enforcedFrom(lock, skew);
}
function todayAction(held: HeldCopy, now: number): Kind {
  if (now - held.readStartedAt > TTL) return 'refresh'; // lru-cache: stale once older than its ttl
  const from = todayReadThroughFrom(
    { doc: held.doc, etag: 'e' },
    held.readStartedAt,
    held.provenance === 'writeRegion',
  );
  return now >= from ? 'readThrough' : 'serve';
}

describe('legacy locks read as before (a sweep of the same inputs)', () => {
  const locks: [string, Lock | null][] = [
    ['unlocked', null],
    ['legacy pre-lock', legacyPrelock],
    ['legacy hard-delete', legacyHardDelete],
    ['legacy write', legacyWrite],
    ['announced pre-lock (legacy rule)', announcedPrelock],
  ];
  const instants = [
    ms(legacyPrelock.startsAt) - S,
    ms(legacyWrite.writeExpiresAt),
    ms(base.expiresAt),
    ms(base.expiresAt) + 2 * S,
  ].flatMap((b) => [b - TTL - 1, b - TTL, b - 1, b, b + 1]);
  const nowOffsets = [0, 1, TTL - 1, TTL, TTL + 1, seconds(3600)];
  test.each(locks)('%s', (_name, lock) => {
    let compared = 0;
    for (const provenance of ['replica', 'writeRegion'] as const)
      for (const readStartedAt of instants)
        for (const offset of [
          ...nowOffsets,
          ...instants.map((i) => i - readStartedAt).filter((o) => o >= 0),
        ]) {
          const held = copy(lock, provenance, readStartedAt);
          const now = readStartedAt + offset;
          const fetched = { doc: held.doc, etag: 'e' };
          expect([provenance, readStartedAt, now, windowFrom(held, timing.clockSkewSeconds)]).toEqual([
            provenance,
            readStartedAt,
            now,
            todayReadThroughFrom(fetched, readStartedAt, provenance === 'writeRegion'),
          ]);
          expect([provenance, readStartedAt, now, readAction(held, now, timing).kind]).toEqual([
            provenance,
            readStartedAt,
            now,
            todayAction(held, now),
          ]);
          compared += 1;
        }
    expect(compared).toBeGreaterThan(500);
  });
});

describe('negative controls: each planted policy fails the rows that guard against it', () => {
  const bugs: ReadPolicyBug[] = ['leaveOnOwnTimestamps', 'replicaInWindow', 'servedPastTtl', 'legacyForAll'];
  test.each(bugs)('%s', (bug) => {
    const guarding = rows.filter((row) => row.catches?.includes(bug));
    expect(guarding.length).toBeGreaterThan(0);
    const caught = guarding.filter((row) => run(plantedReadAction(bug), row) !== row.expected);
    expect(caught.length).toBeGreaterThan(0);
  });
});
