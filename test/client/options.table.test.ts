import {
  DEFAULT_TIMEOUT_MS,
  RoutingClient,
  type RoutingClientOptions,
  RoutingClientOptionError,
} from '../../shared/core/client';

/**
 * Every option is checked when the client is built. A bad one throws RoutingClientOptionError: code
 * `InvalidClientOption`, the option's name and the value given, a RangeError as any bad argument. One
 * rule per option, so two bad values of one option are refused with the same words.
 */

const baseUrl = 'http://127.0.0.1:9/api';

function refusal(options: Record<string, unknown>): RoutingClientOptionError | 'built' {
  try {
    new RoutingClient(options as unknown as RoutingClientOptions);
    return 'built';
  } catch (error) {
    if (error instanceof RoutingClientOptionError) return error;
    throw error;
  }
}

const bad: [string, Record<string, unknown>, string, unknown, RegExp][] = [
  ['no baseUrl', {}, 'baseUrl', undefined, /absolute http\(s\) URL/],
  ['a relative baseUrl', { baseUrl: '/api' }, 'baseUrl', '/api', /absolute http\(s\) URL/],
  ['a baseUrl of another scheme', { baseUrl: 'ftp://x/api' }, 'baseUrl', 'ftp://x/api', /http\(s\)/],
  [
    'an unknown policy',
    { baseUrl, whenUnreachable: 'bogus' },
    'whenUnreachable',
    'bogus',
    /one of fail, serveStaleReads/,
  ],
  ['a negative skew', { baseUrl, clockSkewSeconds: -1 }, 'clockSkewSeconds', -1, /finite number ≥ 0/],
  [
    'a skew that is not a number',
    { baseUrl, clockSkewSeconds: '5' },
    'clockSkewSeconds',
    '5',
    /finite number ≥ 0/,
  ],
  ['timeoutMs 0', { baseUrl, timeoutMs: 0 }, 'timeoutMs', 0, /must be a finite number > 0 \(got 0\)$/],
  ['timeoutMs -1', { baseUrl, timeoutMs: -1 }, 'timeoutMs', -1, /must be a finite number > 0 \(got -1\)$/],
  ['timeoutMs NaN', { baseUrl, timeoutMs: NaN }, 'timeoutMs', NaN, /finite number > 0/],
  ['cacheMax 0', { baseUrl, cacheMax: 0 }, 'cacheMax', 0, /whole number ≥ 1/],
  ['cacheMax 1.5', { baseUrl, cacheMax: 1.5 }, 'cacheMax', 1.5, /whole number ≥ 1/],
  ['a negative grace', { baseUrl, inFlightGraceSeconds: -5 }, 'inFlightGraceSeconds', -5, /≥ 0/],
  ['a negative join', { baseUrl, coalesceJoinMs: -1 }, 'coalesceJoinMs', -1, /≥ 0/],
  [
    'an infinite server join',
    { baseUrl, serverCoalesceJoinMs: Infinity },
    'serverCoalesceJoinMs',
    Infinity,
    /finite/,
  ],
  [
    'joins past a tenth of the grace',
    { baseUrl, coalesceJoinMs: 500 },
    'coalesceJoinMs',
    500,
    /a tenth of the in-flight grace \(500 ms\)/,
  ],
  [
    'a server join past a tenth of the grace',
    { baseUrl, inFlightGraceSeconds: 0.1 },
    'serverCoalesceJoinMs',
    50,
    /a tenth/,
  ],
  ['a negative 404 TTL', { baseUrl, notFoundTtlMs: -1 }, 'notFoundTtlMs', -1, /≥ 0/],
  ['a negative stale window', { baseUrl, staleForMs: -1 }, 'staleForMs', -1, /≥ 0/],
  ['a functionKey that is not a string', { baseUrl, functionKey: 42 }, 'functionKey', 42, /a string/],
  ['an accessToken that is a string', { baseUrl, accessToken: 'eyJ' }, 'accessToken', 'eyJ', /a function/],
  ['a clock that is a number', { baseUrl, clock: 0 }, 'clock', 0, /a function/],
  ['a fetch that is not a function', { baseUrl, fetch: {} }, 'fetch', {}, /a function/],
  ['a misspelt option', { baseUrl, timeoutMS: 500 }, 'timeoutMS', 500, /is not a RoutingClient option/],
  ['a negative cache cap', { baseUrl, maxCacheSeconds: -1 }, 'maxCacheSeconds', -1, /finite number ≥ 0/],
  ['breakerFailures 2.5', { baseUrl, breakerFailures: 2.5 }, 'breakerFailures', 2.5, /whole number ≥ 0/],
  ['breakerFailures -1', { baseUrl, breakerFailures: -1 }, 'breakerFailures', -1, /whole number ≥ 0/],
  ['breakerBackoffMs 0', { baseUrl, breakerBackoffMs: 0 }, 'breakerBackoffMs', 0, /finite number > 0/],
  [
    'a backoff cap below the first backoff',
    { baseUrl, breakerBackoffMs: 5_000, breakerMaxBackoffMs: 1_000 },
    'breakerMaxBackoffMs',
    1_000,
    /at least breakerBackoffMs \(5000 ms\)/,
  ],
  ['breakerJitter 1.5', { baseUrl, breakerJitter: 1.5 }, 'breakerJitter', 1.5, /from 0 to 1/],
];

test.each(bad)(
  '%s: InvalidClientOption naming the option and the value',
  (_name, options, option, value, rule) => {
    const error = refusal(options);
    expect(error).toBeInstanceOf(RoutingClientOptionError);
    expect(error).toBeInstanceOf(RangeError);
    const refused = error as RoutingClientOptionError;
    expect(refused).toMatchObject({ code: 'InvalidClientOption', option });
    expect(Object.is(refused.value, value) || JSON.stringify(refused.value) === JSON.stringify(value)).toBe(
      true,
    );
    expect(refused.message).toContain(`option ${option} `);
    expect(refused.message).toMatch(rule);
  },
);

test('timeoutMs 0 and -1 are refused by the same rule, in the same words', () => {
  const zero = refusal({ baseUrl, timeoutMs: 0 }) as RoutingClientOptionError;
  const negative = refusal({ baseUrl, timeoutMs: -1 }) as RoutingClientOptionError;
  expect(zero.message.replace('(got 0)', '')).toBe(negative.message.replace('(got -1)', ''));
});

test('good options build a client, defaults applied; the bounds themselves are accepted', () => {
  const good: Record<string, unknown>[] = [
    { baseUrl },
    { baseUrl: `${baseUrl}/` },
    { baseUrl, whenUnreachable: 'fail' },
    { baseUrl, whenUnreachable: 'serveStaleReads', staleForMs: 0 },
    { baseUrl, clockSkewSeconds: 0, notFoundTtlMs: 0, coalesceJoinMs: 0, serverCoalesceJoinMs: 0 },
    { baseUrl, timeoutMs: 1, cacheMax: 1 },
    { baseUrl, coalesceJoinMs: 450 }, // with the server's 50 ms: exactly a tenth of 5 s
    { baseUrl, functionKey: 'k', accessToken: async () => 't', clock: () => 0, fetch },
    { baseUrl, maxCacheSeconds: 0, breakerFailures: 0, breakerJitter: 0 },
    { baseUrl, breakerBackoffMs: 60_000 }, // the default cap rises to the first backoff
    { baseUrl, breakerFailures: 1, breakerBackoffMs: 10, breakerMaxBackoffMs: 10, breakerJitter: 1 },
  ];
  for (const options of good) expect(refusal(options)).toBe('built');
  const client = new RoutingClient({ baseUrl });
  expect(client.inFlightGraceSeconds).toBe(5);
  expect(DEFAULT_TIMEOUT_MS).toBe(2_000);
});
