import { parseConfig } from '../../shared/config';
import type {
  HardDeleteLock,
  Lock,
  LocationDocument,
  PrelockLock,
  WriteLock,
} from '../../shared/core/lock/document';
import {
  DEFAULT_CLOCK_SKEW_SECONDS,
  beforeEnd,
  convergenceWaitUntil,
  deadInWriteRegion,
  earliestEscalationAt,
  enforcedFrom,
  hardDeleteInForce,
  hasStarted,
  holderEndsAt,
  isLive,
  liveLock,
  phaseExpiresAt,
  retiredSourceWindow,
  secondaryInForce,
  startedEverywhereAt,
  writeLockInForce,
} from '../../shared/core/lock/state';
import { T0, seconds } from '../support/timing';

/**
 * What a lock means at `now` (shared/core/lock/state.ts), as a table: each predicate one millisecond before,
 * at, and one millisecond after its boundary, with a clock-skew margin of 5 s. Expected values are
 * written out; the boundaries are the lock's own timestamps plus or minus the margin the predicate
 * counts on its side. A negative control runs the same table against predicates that drop the margin
 * (or move the boundary by a millisecond) and must see rows fail.
 */

const SKEW = 5;
const S = seconds(SKEW);
const at = (offsetSeconds: number) => new Date(T0 + seconds(offsetSeconds)).toISOString();

const base = {
  tokenHash: 'h',
  migrationId: 'm-1',
  owner: 'o',
  target: { region: 'eastus' },
  acquiredAt: at(0),
  startsAt: at(300),
  expiresAt: at(900),
  maxExpiresAt: at(3600),
  convergenceDelaySeconds: 300,
};
const prelockLock: PrelockLock = { ...base, phase: 'prelock' };
const hardDeleteLock: HardDeleteLock = {
  ...base,
  phase: 'hardDelete',
  hardDeleteAt: at(320),
  hardDeleteExpiresAt: at(620),
};
const writeLock: WriteLock = {
  ...base,
  phase: 'write',
  hardDeleteAt: at(320),
  hardDeleteExpiresAt: at(700),
  writeAt: at(400),
  writeExpiresAt: at(600),
};
const doc = (lock: Lock | null, secondary: LocationDocument['secondary'] = null): LocationDocument => ({
  id: 'r',
  schemaVersion: 1,
  location: { region: 'westeurope' },
  lock,
  secondary,
  lastMigration: null,
});

type Row = [name: string, boundary: number, before: boolean, atBoundary: boolean, after: boolean];
interface Predicates {
  isLive: typeof isLive;
  hasStarted: typeof hasStarted;
  hardDeleteInForce: typeof hardDeleteInForce;
  writeLockInForce: typeof writeLockInForce;
  beforeEnd: typeof beforeEnd;
  deadInWriteRegion: typeof deadInWriteRegion;
  retiredSourceWindow: typeof retiredSourceWindow;
  secondaryInForce: typeof secondaryInForce;
}
const real: Predicates = {
  isLive,
  hasStarted,
  hardDeleteInForce,
  writeLockInForce,
  beforeEnd,
  deadInWriteRegion,
  retiredSourceWindow,
  secondaryInForce,
};

const expiresAt = Date.parse(base.expiresAt);
const startsAt = Date.parse(base.startsAt);
const retired = {
  location: { region: 'northeurope' },
  role: 'retiredSource' as const,
  writesBlockedUntil: at(500),
};
const pending = {
  location: { region: 'eastus' },
  role: 'pendingTarget' as const,
  writesBlockedUntil: at(3600),
};

/** Each row: the predicate at boundary − 1 ms, at it, and + 1 ms. */
function table(p: Predicates): [Row, (t: number) => boolean][] {
  return [
    [['live: until expiresAt', expiresAt, true, false, false], (t) => p.isLive(prelockLock, t)],
    [['no lock is never live', expiresAt, false, false, false], (t) => p.isLive(null, t)],
    [
      ['started (enforcement): from startsAt − skew', startsAt - S, false, true, true],
      (t) => p.hasStarted(prelockLock, t, SKEW),
    ],
    [
      ['started at face value without skew', startsAt, false, true, true],
      (t) => p.hasStarted(prelockLock, t),
    ],
    [
      ['a pre-lock holds no hard-delete lock', startsAt, false, false, false],
      (t) => p.hardDeleteInForce(prelockLock, t),
    ],
    [
      ['hard-delete in force: until hardDeleteExpiresAt', Date.parse(at(620)), true, false, false],
      (t) => p.hardDeleteInForce(hardDeleteLock, t),
    ],
    [
      [
        'hard-delete in force under a write lock: until its hardDeleteExpiresAt',
        Date.parse(at(700)),
        true,
        false,
        false,
      ],
      (t) => p.hardDeleteInForce(writeLock, t),
    ],
    [
      ['write lock in force: until writeExpiresAt', Date.parse(at(600)), true, false, false],
      (t) => p.writeLockInForce(writeLock, t),
    ],
    [
      ['a hard-delete lock holds no write lock', Date.parse(at(600)), false, false, false],
      (t) => p.writeLockInForce(hardDeleteLock, t),
    ],
    [
      ['nothing is in force past the parent lease', expiresAt, true, false, false],
      (t) => p.hardDeleteInForce({ ...hardDeleteLock, hardDeleteExpiresAt: at(1000) }, t),
    ],
    [
      ['the holder acts until the phase end − skew', Date.parse(at(600)) - S, true, false, false],
      (t) => p.beforeEnd(writeLock.writeExpiresAt, t, SKEW),
    ],
    [
      ['dead in the write region: from expiresAt + 2 × skew', expiresAt + 2 * S, false, true, true],
      (t) => p.deadInWriteRegion(prelockLock, t, SKEW),
    ],
    [
      ['retired-source window: until writesBlockedUntil', Date.parse(at(500)), true, false, false],
      (t) => p.retiredSourceWindow(doc(null, retired), t) !== null,
    ],
    [
      ['a pending target is no retired-source window', Date.parse(at(500)), false, false, false],
      (t) => p.retiredSourceWindow(doc(prelockLock, pending), t) !== null,
    ],
    [
      ['a pending target stands while its lock lives', expiresAt, true, false, false],
      (t) => p.secondaryInForce(doc(prelockLock, pending), t) !== null,
    ],
    [
      ['a retired source stands until writesBlockedUntil', Date.parse(at(500)), true, false, false],
      (t) => p.secondaryInForce(doc(null, retired), t) !== null,
    ],
  ];
}

function disagreements(p: Predicates): string[] {
  const wrong: string[] = [];
  for (const [[name, boundary, before, atBoundary, after], holds] of table(p)) {
    const seen = [holds(boundary - 1), holds(boundary), holds(boundary + 1)];
    if (seen.join() !== [before, atBoundary, after].join()) wrong.push(`${name}: ${seen.join('/')}`);
  }
  return wrong;
}

describe('lock state at its boundaries, with a 5 s skew margin', () => {
  test.each(table(real).map(([row, holds]) => [row[0], row, holds] as const))('%s', (_name, row, holds) => {
    const [, boundary, before, atBoundary, after] = row;
    expect([holds(boundary - 1), holds(boundary), holds(boundary + 1)]).toEqual([before, atBoundary, after]);
  });

  test('negative control: predicates that drop the skew margin or move a boundary fail the table', () => {
    const noSkew: Predicates = {
      ...real,
      hasStarted: (lock, now) => hasStarted(lock, now, 0),
      beforeEnd: (endsAt, now) => beforeEnd(endsAt, now, 0),
      deadInWriteRegion: (lock, now, skew) => deadInWriteRegion(lock, now, skew / 2),
    };
    expect(disagreements(noSkew)).toEqual([
      expect.stringMatching(/^started \(enforcement\)/),
      expect.stringMatching(/^the holder acts/),
      expect.stringMatching(/^dead in the write region/),
    ]);
    const inclusiveEnds: Predicates = {
      ...real,
      isLive: (lock, now): lock is Lock => lock !== null && now <= Date.parse(lock.expiresAt),
      writeLockInForce: (lock, now) => writeLockInForce(lock, now - 1),
    };
    expect(disagreements(inclusiveEnds).length).toBeGreaterThanOrEqual(2);
    expect(disagreements(real)).toEqual([]);
  });

  test('the margins each side counts, as instants', () => {
    expect(enforcedFrom(prelockLock, SKEW)).toBe(startsAt - S);
    expect(startedEverywhereAt(prelockLock, SKEW)).toBe(startsAt + S);
    expect(holderEndsAt(writeLock.writeExpiresAt, SKEW)).toBe(Date.parse(at(600)) - S);
  });

  test('liveLock: a lock that is not live is absent', () => {
    expect(liveLock(doc(prelockLock), expiresAt - 1)).toBe(prelockLock);
    expect(liveLock(doc(prelockLock), expiresAt)).toBeNull();
  });

  test('phaseExpiresAt: the current phase lease, the parent lease for a pre-lock', () => {
    expect([phaseExpiresAt(prelockLock), phaseExpiresAt(hardDeleteLock), phaseExpiresAt(writeLock)]).toEqual([
      base.expiresAt,
      at(620),
      at(600),
    ]);
  });
});

describe('convergence wait', () => {
  const margins = { replicationBoundSeconds: 10, safetyBufferSeconds: 2, clockSkewSeconds: SKEW };

  test('waits for startsAt, or for the replication bound when that comes later, plus the safety buffer', () => {
    expect(convergenceWaitUntil(prelockLock, margins)).toBe(startsAt + seconds(2));
    const late = { ...prelockLock, startsAt: at(5) };
    expect(convergenceWaitUntil(late, margins)).toBe(T0 + seconds(10 + 2));
  });

  test('the earliest escalation also waits for the start on every clock (startsAt + skew)', () => {
    expect(earliestEscalationAt(prelockLock, margins)).toBe(startsAt + S);
    expect(earliestEscalationAt(prelockLock, { ...margins, safetyBufferSeconds: 8 })).toBe(
      startsAt + seconds(8),
    );
  });

  test('start-up refuses a pre-lock cap that does not outlast the earliest escalation', () => {
    const env = {
      ROUTELOCK_CACHE_TIERS: 'local=30',
      ROUTELOCK_REPLICATION_BOUND_SECONDS: '10',
      ROUTELOCK_SAFETY_BUFFER_SECONDS: '2',
      ROUTELOCK_CLOCK_SKEW_SECONDS: '5',
    };
    // convergence 40 s; earliest escalation 40 + max(2, 5) = 45 s after the pre-lock
    expect(() => parseConfig({ ...env, ROUTELOCK_PRELOCK_MAX_SECONDS: '45' })).toThrow(/\(45 s\)/);
    expect(() => parseConfig({ ...env, ROUTELOCK_PRELOCK_MAX_SECONDS: '46' })).not.toThrow();
  });
});

test("RoutingClient's default skew margin is the production profile's", () => {
  expect(parseConfig({}).timing.clockSkewSeconds).toBe(DEFAULT_CLOCK_SKEW_SECONDS);
});
