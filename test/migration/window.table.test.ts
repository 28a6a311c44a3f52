import type { CutoverWindow } from '../../shared/migration/types';
import { nextWriteSlot, rfc3339Ms, windowProblem } from '../../shared/migration/window';

/** Cutover windows' pure rule: validation, the next write slot, DST, and a negative control. */

const at = (iso: string): number => Date.parse(iso);
const MIN = 60_000;
const HOUR = 60 * MIN;
const NOW = at('2026-12-01T12:00:00Z');

describe('windowProblem names the field at fault', () => {
  const rows: [string, CutoverWindow, string | undefined][] = [
    ['empty (no limit)', {}, undefined],
    [
      'a good window',
      { notBefore: '2026-12-01T00:00:00Z', notAfter: '2026-12-31T00:00:00+01:00' },
      undefined,
    ],
    ['a good daily', { daily: { start: '22:00', end: '02:00', timeZone: 'Europe/Berlin' } }, undefined],
    ['notBefore not RFC 3339', { notBefore: '2026-12-01' }, 'window.notBefore: must be an RFC 3339'],
    ['notBefore not a date', { notBefore: '2026-02-30T00:00:00Z' }, 'window.notBefore: must be an RFC 3339'],
    ['notAfter without offset', { notAfter: '2026-12-02T00:00:00' }, 'window.notAfter: must be an RFC 3339'],
    [
      'notAfter before notBefore',
      { notBefore: '2026-12-03T00:00:00Z', notAfter: '2026-12-02T00:00:00Z' },
      'window.notAfter: must be after notBefore',
    ],
    [
      'notAfter = notBefore',
      { notBefore: '2026-12-03T00:00:00Z', notAfter: '2026-12-03T00:00:00Z' },
      'window.notAfter: must be after notBefore',
    ],
    ['notAfter past', { notAfter: '2026-12-01T11:59:59Z' }, 'window.notAfter: is already past'],
    [
      'bad start',
      { daily: { start: '24:00', end: '02:00', timeZone: 'UTC' } },
      'window.daily.start: must be',
    ],
    ['bad end', { daily: { start: '22:00', end: '2:00', timeZone: 'UTC' } }, 'window.daily.end: must be'],
    [
      'start = end',
      { daily: { start: '22:00', end: '22:00', timeZone: 'UTC' } },
      'window.daily.end: must differ',
    ],
    [
      'unknown zone',
      { daily: { start: '22:00', end: '02:00', timeZone: 'Mars/Olympus' } },
      'window.daily.timeZone: unknown IANA time zone "Mars/Olympus"',
    ],
  ];
  test.each(rows)('%s', (_name, window, expected) => {
    const problem = windowProblem(window, NOW);
    if (expected === undefined) expect(problem).toBeUndefined();
    else expect(problem).toContain(expected);
  });

  test('without a clock (-Infinity) only the form is checked', () => {
    expect(windowProblem({ notAfter: '2020-01-01T00:00:00Z' }, Number.NEGATIVE_INFINITY)).toBeUndefined();
  });

  test('rfc3339Ms: lower-case t/z and fractions are RFC 3339; a bad offset is not', () => {
    expect(rfc3339Ms('2026-12-01t12:00:00.5z')).toBe(NOW + 500);
    expect(rfc3339Ms('2026-12-01T13:00:00+01:00')).toBe(NOW);
    expect(rfc3339Ms('2026-12-01T12:00:00+24:00')).toBeNaN();
  });
});

/** [name, window, from, holdMs, expected slot (ISO) or null] */
type SlotRow = [string, CutoverWindow, string, number, string | null];

const utcNight = { daily: { start: '22:00', end: '02:00', timeZone: 'UTC' } };
const berlin = (start: string, end: string) => ({ daily: { start, end, timeZone: 'Europe/Berlin' } });
const newYork = (start: string, end: string) => ({ daily: { start, end, timeZone: 'America/New_York' } });

const slotRows: SlotRow[] = [
  ['no window: at once', {}, '2026-12-01T12:00:00Z', HOUR, '2026-12-01T12:00:00.000Z'],
  [
    'before notBefore: at notBefore',
    { notBefore: '2026-12-02T00:00:00Z' },
    '2026-12-01T12:00:00Z',
    HOUR,
    '2026-12-02T00:00:00.000Z',
  ],
  [
    'the hold ends exactly at notAfter: fits',
    { notAfter: '2026-12-01T13:00:00Z' },
    '2026-12-01T12:00:00Z',
    HOUR,
    '2026-12-01T12:00:00.000Z',
  ],
  [
    'the hold would run past notAfter: none',
    { notAfter: '2026-12-01T12:59:59Z' },
    '2026-12-01T12:00:00Z',
    HOUR,
    null,
  ],
  ['window over', { notAfter: '2026-12-01T11:00:00Z' }, '2026-12-01T12:00:00Z', MIN, null],
  [
    'daily, before it opens: at its start',
    utcNight,
    '2026-12-01T12:00:00Z',
    HOUR,
    '2026-12-01T22:00:00.000Z',
  ],
  ['daily, inside (after midnight)', utcNight, '2026-12-02T00:30:00Z', HOUR, '2026-12-02T00:30:00.000Z'],
  [
    'daily, inside but the hold passes its end: the next night',
    utcNight,
    '2026-12-02T01:30:00Z',
    HOUR,
    '2026-12-02T22:00:00.000Z',
  ],
  [
    'daily, the hold ends exactly at its end',
    utcNight,
    '2026-12-02T01:00:00Z',
    HOUR,
    '2026-12-02T01:00:00.000Z',
  ],
  ['daily shorter than the hold: none', utcNight, '2026-12-01T12:00:00Z', 5 * HOUR, null],
  [
    'daily and notBefore: the first night after it',
    { ...utcNight, notBefore: '2026-12-03T23:00:00Z' },
    '2026-12-01T12:00:00Z',
    HOUR,
    '2026-12-03T23:00:00.000Z',
  ],
  [
    'daily and notAfter that cuts the last night short: none',
    { ...utcNight, notAfter: '2026-12-01T22:30:00Z' },
    '2026-12-01T12:00:00Z',
    HOUR,
    null,
  ],
  [
    'Berlin in winter (CET, +01:00)',
    berlin('22:00', '02:00'),
    '2026-12-01T12:00:00Z',
    HOUR,
    '2026-12-01T21:00:00.000Z',
  ],
  // Europe/Berlin springs forward on 2026-03-29 at 01:00Z: 02:00 CET → 03:00 CEST
  [
    'Berlin spring forward: a start in the gap opens at its end (03:00 CEST)',
    berlin('02:30', '04:00'),
    '2026-03-29T00:00:00Z',
    30 * MIN,
    '2026-03-29T01:00:00.000Z',
  ],
  [
    'Berlin spring forward: that day is one hour long, too short for 61 min: the next day',
    berlin('02:30', '04:00'),
    '2026-03-29T00:00:00Z',
    61 * MIN,
    '2026-03-30T00:30:00.000Z',
  ],
  [
    'Berlin spring forward: a night window is an hour shorter (23:00–04:00 is 4 h)',
    berlin('23:00', '04:00'),
    '2026-03-28T12:00:00Z',
    4 * HOUR + MIN,
    '2026-03-29T21:00:00.000Z',
  ],
  // Europe/Berlin falls back on 2026-10-25 at 01:00Z: 03:00 CEST → 02:00 CET
  [
    'Berlin fall back: 01:00–03:00 lasts 3 h that day (the only day a 2.5 h hold fits)',
    berlin('01:00', '03:00'),
    '2026-10-20T12:00:00Z',
    150 * MIN,
    '2026-10-24T23:00:00.000Z',
  ],
  [
    'Berlin fall back: a repeated start means its first occurrence (02:30 CEST)',
    berlin('02:30', '05:00'),
    '2026-10-24T12:00:00Z',
    HOUR,
    '2026-10-25T00:30:00.000Z',
  ],
  // America/New_York springs forward on 2026-03-08 at 07:00Z (02:00 EST → 03:00 EDT)
  [
    'New York spring forward: 02:00–03:00 does not exist that day: the next day',
    newYork('02:00', '03:00'),
    '2026-03-08T00:00:00Z',
    10 * MIN,
    '2026-03-09T06:00:00.000Z',
  ],
  [
    'New York spring forward: 01:00–04:00 is 2 h that day',
    newYork('01:00', '04:00'),
    '2026-03-08T06:30:00Z',
    2 * HOUR,
    '2026-03-09T05:00:00.000Z',
  ],
  // … and falls back on 2026-11-01 at 06:00Z (02:00 EDT → 01:00 EST)
  [
    'New York fall back: 01:00–02:00 lasts 2 h (01:00 EDT to 02:00 EST)',
    newYork('01:00', '02:00'),
    '2026-11-01T00:00:00Z',
    90 * MIN,
    '2026-11-01T05:00:00.000Z',
  ],
  [
    'New York in summer (EDT, −04:00)',
    newYork('09:00', '17:00'),
    '2026-07-01T00:00:00Z',
    HOUR,
    '2026-07-01T13:00:00.000Z',
  ],
];

/** The slot is the earliest t ≥ from with [t, t + hold] inside the window. */
type SlotRule = (window: CutoverWindow, from: number, holdMs: number) => number | null;

const mismatches = (rule: SlotRule): string[] =>
  slotRows
    .filter(([, window, from, hold, expected]) => {
      const slot = rule(window, at(from), hold);
      return (slot === null ? null : new Date(slot).toISOString()) !== expected;
    })
    .map(([name]) => name);

describe('nextWriteSlot', () => {
  test.each(slotRows)('%s', (_name, window, from, hold, expected) => {
    const slot = nextWriteSlot(window, at(from), hold);
    expect(slot === null ? null : new Date(slot).toISOString()).toBe(expected);
  });

  test('deterministic: the same answer twice, and at the slot itself the same slot', () => {
    const window = berlin('22:00', '02:00');
    const slot = nextWriteSlot(window, NOW, HOUR) as number;
    expect(nextWriteSlot(window, NOW, HOUR)).toBe(slot);
    expect(nextWriteSlot(window, slot, HOUR)).toBe(slot);
    expect(nextWriteSlot(window, slot - 1, HOUR)).toBe(slot);
  });

  test('NEGATIVE CONTROL: a rule that checks only the start (ignores the hold) is caught', () => {
    // The planted bug: any t inside the window opens it, however long the freeze that follows.
    const startOnly: SlotRule = (window, from) => nextWriteSlot(window, from, 0);
    expect(mismatches(startOnly)).toEqual(
      expect.arrayContaining([
        'the hold would run past notAfter: none',
        'daily, inside but the hold passes its end: the next night',
        'daily shorter than the hold: none',
      ]),
    );
    expect(mismatches(nextWriteSlot)).toEqual([]);
  });
});
