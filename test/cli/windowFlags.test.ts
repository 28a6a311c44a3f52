import { windowFromFlags } from '../../cli/format';

/**
 * The CLI's window flags. README: "a malformed span, instant or zone is
 * exit 2, nothing sent" (windowFromFlags throws, main maps it to a usage error). The API's rule
 * (shared/migration/window.ts) wants an RFC 3339 instant with an offset and a real date, and HH:MM
 * times of day: whatever it would refuse as malformed must be refused here, before anything is sent.
 */
test.each([
  ['an instant without an offset (local time on the operator host)', { notBefore: '2026-12-01T22:00' }],
  ['an instant without an offset, with seconds', { notAfter: '2026-12-01T22:00:00' }],
  ['a date that does not exist', { notBefore: '2026-02-30T00:00:00Z' }],
  ['a time of day past 23:59', { daily: '25:00-04:00', timeZone: 'Europe/Amsterdam' }],
  ['minutes past 59', { daily: '22:75-04:00', timeZone: 'Europe/Amsterdam' }],
])('%s: refused by the flags (exit 2), not sent to be refused by the API (exit 1)', (_name, flags) => {
  expect(() => windowFromFlags(flags)).toThrow(/^--/);
});

test('well-formed flags still build the window', () => {
  expect(
    windowFromFlags({
      notBefore: '2026-12-01T22:00:00+01:00',
      notAfter: '2026-12-31T00:00:00Z',
      daily: '22:00-04:00',
      timeZone: 'Europe/Amsterdam',
    }),
  ).toEqual({
    notBefore: '2026-12-01T22:00:00+01:00',
    notAfter: '2026-12-31T00:00:00Z',
    daily: { start: '22:00', end: '04:00', timeZone: 'Europe/Amsterdam' },
  });
});
