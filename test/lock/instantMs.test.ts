import { instantMs } from '../../shared/core/lock/state';
import { prng } from '../../testkit/prng';

/**
 * `instantMs` (shared/core/lock/state.ts) reads the canonical ISO shape digit by digit instead of calling
 * `Date.parse` (the read path's lock dating). It must give exactly what `Date.parse` gives for
 * every string, canonical or not: a lock instant read one millisecond off would move a lock's start or end.
 */
describe('instantMs equals Date.parse', () => {
  const same = (iso: string) => expect([iso, instantMs(iso)]).toEqual([iso, Date.parse(iso)]);

  test.each([
    // canonical shapes, the fast path
    '2026-01-01T00:00:00.000Z',
    '2026-12-31T23:59:59.999Z',
    '2024-02-29T12:00:00.001Z', // a leap day
    '2000-02-29T00:00:00.000Z', // divisible by 400: leap
    '0100-01-01T00:00:00.000Z', // the smallest year the fast path takes
    '9999-12-31T23:59:59.999Z',
    '1970-01-01T00:00:00.000Z',
    // Date.parse's to judge: each leaves the fast path
    '0099-12-31T23:59:59.999Z', // Date.UTC would read it as 1999
    '0000-01-01T00:00:00.000Z',
    '2025-02-29T00:00:00.000Z', // no leap day in 2025
    '1900-02-29T00:00:00.000Z', // divisible by 100, not 400
    '2026-04-31T00:00:00.000Z',
    '2026-13-01T00:00:00.000Z',
    '2026-00-10T00:00:00.000Z',
    '2026-01-00T00:00:00.000Z',
    '2026-01-01T24:00:00.000Z', // end of day, valid ISO
    '2026-01-01T23:60:00.000Z',
    '2026-01-01T23:59:60.000Z',
    '2026-01-01T00:00:00.000+', // wrong last character
    '2026-01-01 00:00:00.000Z',
    '2026-01-01T00:00:00,000Z',
    '2026/01/01T00:00:00.000Z',
    '2026-01-01T00:00:00.00aZ',
    '2026-0a-01T00:00:00.000Z',
    '2026-01-01T00:00:00Z', // no milliseconds
    '2026-01-01T00:00:00.000+01:00', // an offset
    '+002026-01-01T00:00:00.000Z', // an expanded year
    '2026-01-01',
    '',
    'not a date',
  ])('%s', same);

  test('every millisecond shape over 2,000 random instants, and each one with a digit or separator broken', () => {
    const random = prng(20);
    for (let i = 0; i < 2000; i += 1) {
      const iso = new Date(Math.floor(random() * 8e12) - 1e12).toISOString();
      same(iso);
      const at = Math.floor(random() * iso.length);
      same(`${iso.slice(0, at)}${String.fromCharCode(32 + Math.floor(random() * 95))}${iso.slice(at + 1)}`);
    }
  });

  // Negative control: the check above can fail. A reader that ignores the milliseconds, or reads the years
  // 0–99 through Date.UTC, disagrees with Date.parse on strings this table holds.
  test('the comparison catches a reader that is one millisecond off', () => {
    const truncated = (iso: string) => Math.floor(instantMs(iso) / 1000) * 1000;
    expect(truncated('2026-12-31T23:59:59.999Z')).not.toBe(Date.parse('2026-12-31T23:59:59.999Z'));
    expect(Date.UTC(99, 11, 31, 23, 59, 59, 999)).not.toBe(Date.parse('0099-12-31T23:59:59.999Z'));
  });
});
