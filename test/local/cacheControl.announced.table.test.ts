import type { HardDeleteLock, Lock, LocationDocument } from '../../shared/core/lock/document';
import type { Provenance } from '../../shared/core/lock/readPolicy';
import { enforcedFrom, hasStarted, liveLock } from '../../shared/core/lock/state';
import { type ViewTiming, cacheControl, cacheHeaders } from '../../shared/core/lock/view';
import {
  WRITE_END,
  W,
  announcedHardDelete as announced,
  announcedWindow as windowed,
  announcedWrite as activated,
  at,
  docUnder,
  iso,
  legacyPrelock,
  lockBase as base,
} from '../support/announcedLocks';
import { productionTiming, seconds } from '../support/timing';

/**
 * Cache-Control and Age of a route view (docs/design.md §5.3) for announced locks, as a table with
 * boundaries at ±1 ms (production: S = 5 s, local TTL 60 s): `no-store` only in the window, otherwise
 * `private, max-age` clamped to the window's start and the lock's start. Legacy locks are swept against
 * the function as it was (copied below). Negative controls: the legacy rule applied to an announced lock,
 * and a builder that ignores the window, each fail rows of the table.
 */

const timing = productionTiming;
const S = seconds(timing.clockSkewSeconds);
const L = timing.announceLeadSeconds;
const t = at;

const legacyHardDelete: HardDeleteLock = {
  ...base,
  phase: 'hardDelete',
  startsAt: iso(7500),
  hardDeleteAt: iso(7600),
  hardDeleteExpiresAt: iso(30_000),
};

const doc = docUnder;

type Row = [name: string, lock: Lock, now: number, heldMs: number, provenance: Provenance, expected: string];

/** Three rows at `boundary` − 1 ms, 0, + 1 ms. */
const around = (
  name: string,
  lock: Lock,
  boundary: number,
  heldMs: number,
  provenance: Provenance,
  expected: [string, string, string],
): Row[] =>
  [-1, 0, 1].map((d, i) => [
    `${name}: ${d === 0 ? '0' : `${d > 0 ? '+' : '−'}1 ms`}`,
    lock,
    boundary + d,
    heldMs,
    provenance,
    expected[i]!,
  ]);

const rows: Row[] = [
  [
    'announced, 30 s before its start less S: clamped to it',
    announced,
    t(L) - S - seconds(30),
    0,
    'replica',
    'private, max-age=30',
  ],
  ...around('announced, at its start less S', announced, t(L) - S, 0, 'replica', [
    'private, max-age=0',
    'private, max-age=60',
    'private, max-age=60',
  ]),
  [
    'announced hard-delete in force, held 20 s',
    announced,
    t(10_000),
    seconds(20),
    'replica',
    'private, max-age=40',
  ],
  [
    'announced, 20 s before the window less S: clamped to it',
    windowed,
    t(W) - S - seconds(20),
    0,
    'replica',
    'private, max-age=20',
  ],
  ...around('announced, at the window less S', windowed, t(W) - S, 0, 'writeRegion', [
    'private, max-age=0',
    'no-store',
    'no-store',
  ]),
  [
    'announced write lock in force, the write region’s copy',
    activated,
    t(W + 100),
    0,
    'writeRegion',
    'no-store',
  ],
  ...around(
    'announced write lock, the write region’s copy at its end + 2S',
    activated,
    t(WRITE_END) + 2 * S,
    0,
    'writeRegion',
    ['no-store', 'private, max-age=60', 'private, max-age=60'],
  ),
  [
    'announced write lock lapsed, a replica’s copy: never dead on its own timestamps',
    activated,
    t(WRITE_END + 3600),
    0,
    'replica',
    'no-store',
  ],
];

describe('cacheControl for announced locks', () => {
  test.each(rows)('%s', (_name, lock, now, heldMs, provenance, expected) => {
    expect(cacheControl(doc(lock), now, timing, heldMs, provenance)).toBe(expected);
  });

  test('Age is the time held, rounded down, whatever the lock', () => {
    expect(cacheHeaders(doc(announced), t(10_000), timing, 20_999, 'replica')).toEqual({
      cacheControl: 'private, max-age=39',
      ageSeconds: 20,
    });
  });

  test('a copy of unknown provenance is a replica’s (never the write region’s word)', () => {
    const dead = t(WRITE_END) + 2 * S + seconds(1);
    expect(cacheControl(doc(activated), dead, timing)).toBe('no-store');
    expect(cacheControl(doc(activated), dead, timing, 0, 'writeRegion')).toBe('private, max-age=60');
  });
});

/** Cache-Control as it was before announced locks (copied): no-store from a live lock's start less S. */
function todayCacheControl(d: LocationDocument, now: number, cfg: ViewTiming, heldMs = 0): string {
  const lock = liveLock(d, now);
  const ttl = Math.max(0, Math.floor((cfg.localCacheTtlSeconds * 1000 - Math.max(0, heldMs)) / 1000));
  if (!lock) return `private, max-age=${ttl}`;
  if (hasStarted(lock, now, cfg.clockSkewSeconds)) return 'no-store';
  const untilStart = Math.floor((enforcedFrom(lock, cfg.clockSkewSeconds) - now) / 1000);
  return `private, max-age=${Math.max(0, Math.min(ttl, untilStart))}`;
}

describe('legacy locks and unlocked routes: Cache-Control as before (a sweep)', () => {
  test.each([
    ['unlocked', null],
    ['legacy pre-lock', legacyPrelock],
    ['legacy hard-delete', legacyHardDelete],
  ] as const)('%s', (_name, lock) => {
    const instants = [t(7500) - S, t(30_000), t(100_000)].flatMap((b) => [
      b - seconds(61),
      b - seconds(30),
      b - 1,
      b,
      b + 1,
    ]);
    for (const now of instants)
      for (const heldMs of [0, 999, seconds(30), seconds(60), seconds(61)])
        for (const provenance of ['replica', 'writeRegion'] as const)
          expect([now, heldMs, provenance, cacheControl(doc(lock), now, timing, heldMs, provenance)]).toEqual(
            [now, heldMs, provenance, todayCacheControl(doc(lock), now, timing, heldMs)],
          );
  });
});

describe('negative controls: each fails rows of the table', () => {
  const failing = (build: (d: LocationDocument, now: number, heldMs: number, p: Provenance) => string) =>
    rows.filter(
      ([, lock, now, heldMs, provenance, expected]) => build(doc(lock), now, heldMs, provenance) !== expected,
    );

  test('the legacy rule for an announced lock (no-store from its start)', () => {
    expect(failing((d, now, heldMs) => todayCacheControl(d, now, timing, heldMs)).length).toBeGreaterThan(0);
  });

  test('a builder that ignores the window (max-age to the TTL once started)', () => {
    const ignoresWindow = (d: LocationDocument, now: number, heldMs: number, p: Provenance) => {
      if (d.lock === null) return cacheControl(d, now, timing, heldMs, p);
      const { writeWindowAt: _w, writeWindowUntil: _u, ...rest } = d.lock as HardDeleteLock;
      const stripped = { ...rest, phase: 'hardDelete' } as HardDeleteLock;
      return cacheControl({ ...d, lock: stripped }, now, timing, heldMs, p);
    };
    expect(failing(ignoresWindow).length).toBeGreaterThan(0);
  });
});
