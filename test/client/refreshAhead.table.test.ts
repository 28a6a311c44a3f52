import { type CachedFreshness, cachedFreshness } from '../../shared/core/refreshAhead';

/**
 * Refresh ahead's rule, one row each: a cached view's age and lifetime, the share → fresh, refresh
 * ahead, or expired. Pure: the client passes the figures.
 */

const rows: [string, number, number, number, CachedFreshness][] = [
  ['young: fresh', 0, 60_000, 0.2, 'fresh'],
  ['just before the last fifth: fresh', 47_999, 60_000, 0.2, 'fresh'],
  ['at the last fifth: refresh ahead', 48_000, 60_000, 0.2, 'refreshAhead'],
  ['the last millisecond: refresh ahead', 59_999, 60_000, 0.2, 'refreshAhead'],
  ['at its lifetime: expired', 60_000, 60_000, 0.2, 'expired'],
  ['past it: expired', 90_000, 60_000, 0.2, 'expired'],
  ['share 0: never refreshed ahead', 59_999, 60_000, 0, 'fresh'],
  ['share 0: still expires', 60_000, 60_000, 0, 'expired'],
  ['share 1: every hit refreshes', 0, 60_000, 1, 'refreshAhead'],
  ['no lifetime (no-store): expired', 0, 0, 0.2, 'expired'],
  ['a clock stepped back: as young as can be', -5_000, 2_000, 0.2, 'fresh'],
  ['the dev tier (2 s): the last 400 ms', 1_600, 2_000, 0.2, 'refreshAhead'],
];

test.each(rows)('%s', (_name, age, lifetime, share, expected) => {
  expect(cachedFreshness(age, lifetime, { share })).toBe(expected);
});
