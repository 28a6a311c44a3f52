import type { HardDeleteLock, Lock, WriteLock } from '../../shared/core/lock/document';
import {
  activationClosesAt,
  activationOpensAt,
  announcedWaitUntil,
  renewalLeadOk,
  windowDeadInWriteRegion,
  windowOpensAt,
} from '../../shared/core/lock/state';
import { T0, seconds } from '../support/timing';

/**
 * The announced lock's time predicates (shared/core/lock/state.ts, design §3.7) as a table: each one
 * millisecond before, at, and one millisecond after its boundary, with a skew margin of 5 s and a lead of
 * 100 s. Expected values are written out. A negative control runs the rows against variants that drop a
 * margin (or move a boundary by a millisecond) and must see rows fail.
 */

const SKEW = 5;
const S = seconds(SKEW);
const LEAD = 100;
const at = (offsetSeconds: number) => new Date(T0 + seconds(offsetSeconds)).toISOString();

const W = T0 + seconds(1000);
const UNTIL = W + seconds(305);
const WRITE_END = W + seconds(400);
const PARENT_END = T0 + seconds(5000);

const hardDelete: HardDeleteLock = {
  tokenHash: 'h',
  migrationId: 'm',
  owner: 'o',
  target: { region: 'eastus' },
  acquiredAt: at(0),
  startsAt: at(100),
  expiresAt: new Date(PARENT_END).toISOString(),
  maxExpiresAt: at(9000),
  convergenceDelaySeconds: 90,
  announceLeadSeconds: LEAD,
  phase: 'hardDelete',
  hardDeleteAt: at(100),
  hardDeleteExpiresAt: at(3000),
};
const windowed: HardDeleteLock = {
  ...hardDelete,
  writeWindowAt: new Date(W).toISOString(),
  writeWindowUntil: new Date(UNTIL).toISOString(),
};
const written: WriteLock = {
  ...windowed,
  phase: 'write',
  writeAt: new Date(W + S).toISOString(),
  writeExpiresAt: new Date(WRITE_END).toISOString(),
};

interface Predicates {
  windowOpensAt: typeof windowOpensAt;
  activationOpensAt: typeof activationOpensAt;
  activationClosesAt: typeof activationClosesAt;
  windowDeadInWriteRegion: typeof windowDeadInWriteRegion;
  renewalLeadOk: typeof renewalLeadOk;
  announcedWaitUntil: typeof announcedWaitUntil;
}
const real: Predicates = {
  windowOpensAt,
  activationOpensAt,
  activationClosesAt,
  windowDeadInWriteRegion,
  renewalLeadOk,
  announcedWaitUntil,
};

type Row = [
  name: string,
  ask: (p: Predicates, now: number) => boolean,
  boundary: number,
  before: boolean,
  atIt: boolean,
  after: boolean,
];

const rows: Row[] = [
  // readers read through from W − S on (their clock), and not before
  [
    'reading through the window',
    (p, now) => now >= p.windowOpensAt(windowed, SKEW),
    W - S,
    false,
    true,
    true,
  ],
  // the holder activates from W + S on
  ['activation opens', (p, now) => now >= p.activationOpensAt(windowed, SKEW), W + S, false, true, true],
  // and no later than writeWindowUntil − S
  [
    'activation still open',
    (p, now) => now <= p.activationClosesAt(windowed, SKEW),
    UNTIL - S,
    true,
    true,
    false,
  ],
  // a write-region copy of the window (not activated) is dead from writeWindowUntil + 2S
  [
    'window dead (hard-delete)',
    (p, now) => p.windowDeadInWriteRegion(windowed, now, SKEW),
    UNTIL + 2 * S,
    false,
    true,
    true,
  ],
  // of the activated write lock, from writeExpiresAt + 2S (the window's own end no longer counts)
  [
    'window dead (write)',
    (p, now) => p.windowDeadInWriteRegion(written, now, SKEW),
    WRITE_END + 2 * S,
    false,
    true,
    true,
  ],
  // of any announced lock, once the parent is dead
  [
    'window dead (parent)',
    (p, now) => p.windowDeadInWriteRegion({ ...written, writeExpiresAt: at(99_999) }, now, SKEW),
    PARENT_END + 2 * S,
    false,
    true,
    true,
  ],
  // a renewal of an end E reaches every reader in time while E − now ≥ L
  [
    'renewal lead',
    (p, now) => p.renewalLeadOk(at(3000), now, LEAD),
    T0 + seconds(3000 - LEAD),
    true,
    true,
    false,
  ],
  // the holder relies on the announced hard-delete lock from startsAt + S
  [
    'holder may rely',
    (p, now) => now >= p.announcedWaitUntil(hardDelete, SKEW),
    T0 + seconds(100) + S,
    false,
    true,
    true,
  ],
];

describe('announced lock predicates at −1 / 0 / +1 ms of their boundaries', () => {
  test.each(rows)('%s', (_name, ask, boundary, before, atIt, after) => {
    expect([ask(real, boundary - 1), ask(real, boundary), ask(real, boundary + 1)]).toEqual([
      before,
      atIt,
      after,
    ]);
  });

  test('without a window: no reading through, no activation, and a write-region copy is already dead', () => {
    expect(windowOpensAt(hardDelete, SKEW)).toBe(Number.POSITIVE_INFINITY);
    expect(activationOpensAt(hardDelete, SKEW)).toBe(Number.POSITIVE_INFINITY);
    expect(activationClosesAt(hardDelete, SKEW)).toBe(Number.NEGATIVE_INFINITY);
    expect(windowDeadInWriteRegion(hardDelete, T0, SKEW)).toBe(true);
  });
});

describe('negative control: variants without a margin fail rows', () => {
  const ms = (iso: string) => Date.parse(iso);
  const variants: [string, Partial<Predicates>, string][] = [
    [
      'readers from W (no skew)',
      { windowOpensAt: (l) => ms(l.writeWindowAt!) },
      'reading through the window',
    ],
    ['activation from W', { activationOpensAt: (l) => ms(l.writeWindowAt!) }, 'activation opens'],
    [
      'activation until writeWindowUntil',
      { activationClosesAt: (l) => ms(l.writeWindowUntil!) },
      'activation still open',
    ],
    [
      'window dead after one margin',
      { windowDeadInWriteRegion: (l: Lock, f: number, s: number) => ms(l.writeWindowUntil!) + s * 1000 <= f },
      'window dead (hard-delete)',
    ],
    ['renewal lead strict by 1 ms', { renewalLeadOk: (e, now, l) => ms(e) - now > l * 1000 }, 'renewal lead'],
    ['holder relies at startsAt', { announcedWaitUntil: (g) => ms(g.startsAt) }, 'holder may rely'],
  ];
  test.each(variants)('%s is caught', (_name, variant, row) => {
    const p = { ...real, ...variant };
    const [, ask, boundary, before, atIt, after] = rows.find((r) => r[0] === row)!;
    expect([ask(p, boundary - 1), ask(p, boundary), ask(p, boundary + 1)]).not.toEqual([before, atIt, after]);
  });
});
