import {
  type BreakerEvent,
  type BreakerSettings,
  type BreakerState,
  CLOSED_BREAKER,
  backoffMs,
  breakerVerdict,
  nextBreaker,
} from '../../shared/core/breaker';

/**
 * The circuit breaker's transitions, one row each: state, event, now → next state (and what the client
 * may do then). Pure: no clock, no timer, no random number (the jitter is part of the event).
 */

const settings: BreakerSettings = { failures: 3, backoffMs: 1_000, maxBackoffMs: 8_000, jitter: 0.5 };
const closed = (failures: number): BreakerState => ({ kind: 'closed', failures });
const open = (opens: number, until: number): BreakerState => ({ kind: 'open', opens, until });
const halfOpen = (opens: number, since: number): BreakerState => ({ kind: 'halfOpen', opens, since });
const request: BreakerEvent = { kind: 'request' };
const success: BreakerEvent = { kind: 'success' };
const failure = (probe = false, jitter = 0): BreakerEvent => ({ kind: 'failure', probe, jitter });
const abandoned = (probe: boolean): BreakerEvent => ({ kind: 'abandoned', probe });

const rows: [string, BreakerState, BreakerEvent, number, BreakerState][] = [
  ['closed: a request changes nothing', closed(2), request, 100, closed(2)],
  ['closed: a failure is counted', closed(1), failure(), 100, closed(2)],
  [
    'closed: the third failure in a row opens it for the first backoff',
    closed(2),
    failure(),
    100,
    open(1, 1_100),
  ],
  ['closed: jitter takes up to half the backoff off', closed(2), failure(false, 0.5), 100, open(1, 850)],
  ['closed: an answer resets the count', closed(2), success, 100, closed(0)],
  ['closed: an abandoned request says nothing', closed(2), abandoned(false), 100, closed(2)],
  ['open: a request before the backoff ends changes nothing', open(1, 1_100), request, 1_099, open(1, 1_100)],
  ['open: the first request after it is the probe', open(1, 1_100), request, 1_100, halfOpen(1, 1_100)],
  [
    'open: a late failure (sent before it opened) does not lengthen it',
    open(1, 1_100),
    failure(),
    500,
    open(1, 1_100),
  ],
  ['open: a late answer closes it', open(2, 5_000), success, 500, closed(0)],
  ['half-open: other requests change nothing', halfOpen(1, 1_100), request, 1_200, halfOpen(1, 1_100)],
  ['half-open: the probe answered: closed', halfOpen(3, 1_100), success, 1_200, closed(0)],
  [
    'half-open: the probe failed: reopened for twice the backoff',
    halfOpen(1, 1_100),
    failure(true),
    1_200,
    open(2, 3_200),
  ],
  ['half-open: the third reopening waits 4 backoffs', halfOpen(2, 0), failure(true), 1_000, open(3, 5_000)],
  ['half-open: the backoff is capped', halfOpen(6, 0), failure(true), 1_000, open(7, 9_000)],
  ['half-open: the cap is jittered too', halfOpen(6, 0), failure(true, 0.999), 1_000, open(7, 5_004)],
  [
    'half-open: a late failure that is not the probe changes nothing',
    halfOpen(1, 1_100),
    failure(false),
    1_200,
    halfOpen(1, 1_100),
  ],
  [
    'half-open: an abandoned probe lets the next request probe',
    halfOpen(2, 1_100),
    abandoned(true),
    1_200,
    open(2, 1_200),
  ],
  [
    'half-open: another abandoned request changes nothing',
    halfOpen(2, 1_100),
    abandoned(false),
    1_200,
    halfOpen(2, 1_100),
  ],
];

test.each(rows)('%s', (_name, state, event, now, next) => {
  const frozen = Object.freeze({ ...state });
  expect(nextBreaker(frozen, event, now, settings)).toEqual(next);
});

test.each([
  ['closed', closed(2), 0, 'send'],
  ['open, before its end', open(1, 1_000), 999, 'refuse'],
  ['open, at its end', open(1, 1_000), 1_000, 'probe'],
  ['half-open (a probe is out)', halfOpen(1, 1_000), 60_000, 'refuse'],
] as const)('the verdict, %s: %s', (_name, state, now, verdict) => {
  expect(breakerVerdict(state, now)).toBe(verdict);
});

test('failures 0: the breaker never opens', () => {
  let state = CLOSED_BREAKER;
  for (let i = 0; i < 100; i += 1) state = nextBreaker(state, failure(), i, { ...settings, failures: 0 });
  expect(state.kind).toBe('closed');
});

test('only one caller probes: after the probe starts, every other is refused until it ends', () => {
  let state: BreakerState = open(1, 1_000);
  const verdicts: string[] = [];
  for (let caller = 0; caller < 10; caller += 1) {
    const verdict = breakerVerdict(state, 1_000);
    verdicts.push(verdict);
    if (verdict !== 'refuse') state = nextBreaker(state, request, 1_000, settings);
  }
  expect(verdicts).toEqual(['probe', ...Array<string>(9).fill('refuse')]);
});

test('backoffs double from the first to the cap', () => {
  const noJitter = { ...settings, jitter: 0 };
  expect([1, 2, 3, 4, 5, 10].map((opens) => backoffMs(opens, 0, noJitter))).toEqual([
    1_000, 2_000, 4_000, 8_000, 8_000, 8_000,
  ]);
});
