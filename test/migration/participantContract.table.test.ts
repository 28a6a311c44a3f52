import { parseConfig } from '../../shared/config';
import {
  type RequestKind,
  type StepNeed,
  type Verdict,
  classifyAnswer,
  pollWaitMs,
  resolveLocation,
  transientExhausted,
  transientWaitMs,
} from '../../shared/migration/participantContract';
import { parseRetryAfter } from '../../shared/core/retryAfter';
import type { HttpAnswer, MigrationSettings } from '../../shared/migration/types';
import { migrationSettings } from '../../shared/migration/workflow';

/** Every row of the participant contract (docs/design.md §6.5), as the classifier answers it. */

const LOC = 'https://p.test/jobs/1';
type Row = [string, RequestKind, StepNeed, HttpAnswer, Verdict['kind'], RegExp?];
const rows: Row[] = [
  ['200 is done', 'post', 'required', { status: 200, body: { done: true } }, 'done'],
  ['200 with an empty body is done', 'post', 'required', { status: 200, body: null }, 'done'],
  [
    '200 {done:false} is a protocol error',
    'post',
    'required',
    { status: 200, body: { done: false } },
    'failed',
    /done": false/,
  ],
  [
    'poll 200 {done:false} too',
    'poll',
    'required',
    { status: 200, body: { done: false } },
    'failed',
    /protocol error/,
  ],
  ['202 + Location runs', 'post', 'required', { status: 202, body: null, location: LOC }, 'running'],
  [
    '202 without Location fails (the data-loss case)',
    'post',
    'required',
    { status: 202, body: null },
    'failed',
    /without a Location/,
  ],
  [
    '202 with a refused Location fails',
    'post',
    'required',
    { status: 202, body: null, locationRefused: 'a Location that is not https (http://p.test)' },
    'failed',
    /not https/,
  ],
  [
    'poll 202 without Location: still running at the same one',
    'poll',
    'required',
    { status: 202, body: null },
    'running',
  ],
  [
    '201 is a protocol error',
    'post',
    'required',
    { status: 201, body: null },
    'failed',
    /protocol error: 201/,
  ],
  [
    '204 is a protocol error',
    'post',
    'required',
    { status: 204, body: null },
    'failed',
    /protocol error: 204/,
  ],
  [
    '1xx is a protocol error',
    'post',
    'required',
    { status: 103, body: null },
    'failed',
    /protocol error: 103/,
  ],
  [
    '301 is a protocol error (redirects are not followed)',
    'post',
    'required',
    { status: 301, body: null },
    'failed',
    /protocol error: 301/,
  ],
  ['307 on a poll too', 'poll', 'required', { status: 307, body: null }, 'failed', /protocol error: 307/],
  [
    '404 to a required step fails at once',
    'post',
    'required',
    { status: 404, body: null },
    'failed',
    /does not implement/,
  ],
  [
    '404 to an optional step: not implemented',
    'post',
    'optional',
    { status: 404, body: null },
    'notImplemented',
  ],
  [
    '404 to a poll: the job is gone, POST again',
    'poll',
    'required',
    { status: 404, body: null },
    'transient',
    /gone/,
  ],
  [
    '410 to a poll: the job is gone, POST again',
    'poll',
    'optional',
    { status: 410, body: null },
    'transient',
    /gone/,
  ],
  ['410 to a POST fails', 'post', 'required', { status: 410, body: null }, 'failed', /^410/],
  ['408 is transient', 'post', 'required', { status: 408, body: null }, 'transient'],
  ['429 is transient', 'post', 'required', { status: 429, body: null, retryAfterSeconds: 7 }, 'transient'],
  ['500 is transient', 'post', 'required', { status: 500, body: null }, 'transient'],
  ['503 on a poll is transient (poll again)', 'poll', 'required', { status: 503, body: null }, 'transient'],
  ['599 is transient', 'post', 'required', { status: 599, body: null }, 'transient'],
  [
    '0 (transport, timeout) is transient',
    'post',
    'required',
    { status: 0, body: 'no answer within 30 s' },
    'transient',
    /no answer within 30 s/,
  ],
  [
    '400 fails at once',
    'post',
    'required',
    { status: 400, body: { error: 'bad' } },
    'failed',
    /^400: \{"error":"bad"\}/,
  ],
  ['401 fails at once', 'post', 'required', { status: 401, body: null }, 'failed', /^401/],
  ['409 (an older job) fails at once', 'post', 'required', { status: 409, body: null }, 'failed', /^409/],
  ['422 fails at once', 'post', 'optional', { status: 422, body: 'no' }, 'failed', /^422: no/],
  [
    '600 is a protocol error',
    'post',
    'required',
    { status: 600, body: null },
    'failed',
    /protocol error: 600/,
  ],
];

// every row with six cells (jest would pass its `done` callback for a missing one)
test.each(rows.map((r): Row => [r[0], r[1], r[2], r[3], r[4], r[5]]))(
  '%s',
  (_name, kind, need, answer, expected, reason) => {
    const verdict = classifyAnswer(kind, need, answer);
    expect(verdict.kind).toBe(expected);
    if (reason) expect((verdict as { reason: string }).reason).toMatch(reason);
  },
);

test('running and transient verdicts carry Location and Retry-After; a poll 404 asks for a re-POST', () => {
  expect(
    classifyAnswer('post', 'required', { status: 202, body: null, location: LOC, retryAfterSeconds: 3 }),
  ).toEqual({
    kind: 'running',
    location: LOC,
    retryAfterSeconds: 3,
  });
  expect(classifyAnswer('post', 'required', { status: 429, body: null, retryAfterSeconds: 7 })).toMatchObject(
    {
      kind: 'transient',
      retryAfterSeconds: 7,
    },
  );
  expect(classifyAnswer('poll', 'required', { status: 404, body: null })).toMatchObject({ repost: true });
  expect(classifyAnswer('post', 'required', { status: 503, body: null })).not.toHaveProperty('repost');
});

describe('Location: resolved against the request URL, on the participant’s own origin only', () => {
  const refused = (pattern: RegExp) => ({ locationRefused: expect.stringMatching(pattern) });
  test.each([
    [
      'an absolute URL on the origin',
      'https://p.test/jobs/9',
      'https://p.test/migrate',
      { location: 'https://p.test/jobs/9' },
    ],
    ['a relative path', '/jobs/a%7Cb', 'https://p.test/migrate', { location: 'https://p.test/jobs/a%7Cb' }],
    [
      'a relative reference',
      'jobs/1',
      'https://p.test/api/migrate',
      { location: 'https://p.test/api/jobs/1' },
    ],
    [
      'loopback http from a loopback participant',
      '/jobs/1',
      'http://127.0.0.1:8080/migrate',
      { location: 'http://127.0.0.1:8080/jobs/1' },
    ],
    [
      'another host',
      'https://other.test/jobs/9',
      'https://p.test/migrate',
      refused(/another origin \(https:\/\/other\.test, not https:\/\/p\.test\)/),
    ],
    ['another port', 'https://p.test:8443/jobs/9', 'https://p.test/migrate', refused(/another origin/)],
    [
      'plain http on the same host',
      'http://p.test/jobs/1',
      'https://p.test/migrate',
      refused(/another origin \(http:\/\/p\.test/),
    ],
    [
      'loopback from a participant elsewhere',
      'https://localhost:8443/admin',
      'https://p.test/migrate',
      refused(/another origin/),
    ],
    [
      'an IPv4-mapped loopback',
      'https://[::ffff:127.0.0.1]/x',
      'https://p.test/migrate',
      refused(/another origin/),
    ],
    ['the unspecified address', 'https://0.0.0.0/x', 'https://p.test/migrate', refused(/another origin/)],
    [
      'a metadata endpoint',
      'http://169.254.169.254/metadata',
      'https://p.test/migrate',
      refused(/another origin/),
    ],
    ['a private address', 'https://10.0.0.5/jobs/1', 'https://p.test/migrate', refused(/another origin/)],
    [
      'another loopback port from a loopback participant',
      'http://127.0.0.1:7071/api/locks',
      'http://127.0.0.1:8080/migrate',
      refused(/another origin/),
    ],
    ['another scheme', 'ftp://p.test/jobs/1', 'https://p.test/migrate', refused(/another origin/)],
    ['credentials', 'https://u:pw@p.test/jobs/1', 'https://p.test/migrate', refused(/credentials/)],
    ['none', null, 'https://p.test/migrate', {}],
    ['empty', ' ', 'https://p.test/migrate', {}],
  ])('%s', (_name, header, requestUrl, expected) => {
    expect(resolveLocation(header, requestUrl)).toEqual(expected);
  });
});

test('Retry-After: delta-seconds only', () => {
  expect([
    parseRetryAfter('5'),
    parseRetryAfter(' 0 '),
    parseRetryAfter(null),
    parseRetryAfter('soon'),
  ]).toEqual([5, 0, undefined, undefined]);
  expect(parseRetryAfter('Wed, 21 Oct 2015 07:28:00 GMT')).toBeUndefined();
});

describe('timing formulas', () => {
  const s: MigrationSettings = {
    ...migrationSettings(parseConfig({})),
    participantPollMinSeconds: 1,
    participantPollMaxSeconds: 30,
    retryIntervalSeconds: 5,
    retryAttempts: 5,
  };
  test('the n-th poll waits min(pollMax, max(Retry-After, pollMin × 2^(n−1)))', () => {
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => pollWaitMs(n, undefined, s) / 1000)).toEqual([
      1, 2, 4, 8, 16, 30, 30,
    ]);
    expect(pollWaitMs(1, 10, s)).toBe(10_000);
    expect(pollWaitMs(1, 3600, s)).toBe(30_000); // the cap bounds the history
    expect(pollWaitMs(5000, undefined, s)).toBe(30_000);
  });
  test('the n-th transient answer is retried after max(min(Retry-After, pollMax), retryInterval × 2^(n−1)), up to the attempts', () => {
    expect([1, 2, 3].map((n) => transientWaitMs(n, undefined, s) / 1000)).toEqual([5, 10, 20]);
    expect(transientWaitMs(1, 20, s)).toBe(20_000);
    // a 503 asking for days holds the lock no longer than a poll would
    expect(transientWaitMs(1, 10_000_000, s)).toBe(30_000);
    expect(transientWaitMs(4, 10_000_000, s)).toBe(40_000); // the backoff itself may pass the cap
    expect([4, 5].map((n) => transientExhausted(n, s))).toEqual([false, true]);
  });
  test('inputs journaled before the settings existed read the defaults (1 s, 30 s)', () => {
    const { participantPollMinSeconds: _a, participantPollMaxSeconds: _b, ...old } = s;
    expect(pollWaitMs(1, undefined, old)).toBe(1000);
    expect(pollWaitMs(9, undefined, old)).toBe(30_000);
  });
});

describe('configuration', () => {
  test('defaults: timeout 30 s, polls 1–30 s', () => {
    expect(parseConfig({}).migration).toMatchObject({
      participantTimeoutSeconds: 30,
      participantPollMinSeconds: 1,
      participantPollMaxSeconds: 30,
    });
  });
  test.each([
    [
      { ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: '241' },
      /ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: expected at most 240 seconds/,
    ],
    [
      { ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: '0' },
      /ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: expected a whole number of seconds, at least 1/,
    ],
    [
      { ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS: '40' },
      /ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS: must not exceed ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS \(30 s\), got 40/,
    ],
    [
      { ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS: 'x' },
      /ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS: expected a whole number of seconds/,
    ],
  ])('%o is refused', (env, message) => {
    expect(() => parseConfig(env)).toThrow(message);
  });
  test('the timeout stays under the lock renewal cadence: by default 30 s, or less when renewals come sooner', () => {
    expect(parseConfig({}).migration.participantTimeoutSeconds).toBe(30);
    // dev: a 30 s write lease is renewed every 10 s, so a request must end within 9 s
    expect(parseConfig({ ROUTELOCK_PROFILE: 'dev' }).migration.participantTimeoutSeconds).toBe(9);
    expect(() => parseConfig({ ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: '240' })).toThrow(
      /ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: must be under the lock renewal cadence .*: 100 s\) by 1 s, so a request always ends before the next renewal; got 240/,
    );
    expect(() =>
      parseConfig({ ROUTELOCK_PROFILE: 'dev', ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: '10' }),
    ).toThrow(/ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: .*10 s\) by 1 s.*got 10/);
  });
  test('240 s (with a write window that renews every 300 s) and min = max are accepted', () => {
    expect(
      parseConfig({
        ROUTELOCK_WRITE_LEASE_SECONDS: '900',
        ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: '240',
        ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS: '5',
        ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS: '5',
      }).migration,
    ).toMatchObject({
      participantTimeoutSeconds: 240,
      participantPollMinSeconds: 5,
      participantPollMaxSeconds: 5,
    });
  });
});
