import {
  type ClientTiming,
  type ServerTiming,
  adoptTiming,
  parseTiming,
  timingHeader,
} from '../../shared/core/serverTiming';

/**
 * What a client takes of the timing its server says at `ready()`: one row each. The server can make the
 * client stricter than the production profile it starts with, never looser; explicit options stay.
 */

const production: ClientTiming = {
  inFlightGraceSeconds: 5,
  clockSkewSeconds: 5,
  maxCacheSeconds: 60,
  serverCoalesceJoinMs: 50,
  coalesceJoinMs: 50,
};
const dev: ServerTiming = {
  inFlightGraceSeconds: 1,
  coalesceJoinMs: 0,
  clockSkewSeconds: 0,
  cacheTtlSeconds: 2,
};

const rows: [string, Partial<ServerTiming>, Partial<Record<keyof ClientTiming, boolean>>, ClientTiming][] = [
  [
    'a production server: nothing moves',
    { inFlightGraceSeconds: 5, coalesceJoinMs: 50, clockSkewSeconds: 5, cacheTtlSeconds: 60 },
    {},
    production,
  ],
  [
    'the dev host: grace 1 s, server join 0, a 2 s cache; the client join stays 50 ms, the skew margin 5 s',
    dev,
    {},
    {
      inFlightGraceSeconds: 1,
      clockSkewSeconds: 5,
      maxCacheSeconds: 2,
      serverCoalesceJoinMs: 0,
      coalesceJoinMs: 50,
    },
  ],
  [
    'a grace of 0 leaves no join on either side',
    { ...dev, inFlightGraceSeconds: 0 },
    {},
    {
      inFlightGraceSeconds: 0,
      clockSkewSeconds: 5,
      maxCacheSeconds: 2,
      serverCoalesceJoinMs: 0,
      coalesceJoinMs: 0,
    },
  ],
  ['a larger grace is not taken (looser)', { inFlightGraceSeconds: 3600 }, {}, production],
  ['a larger cache TTL is not taken', { cacheTtlSeconds: 86_400 }, {}, production],
  [
    'a larger skew is taken, up to 300 s',
    { clockSkewSeconds: 100_000 },
    {},
    { ...production, clockSkewSeconds: 300 },
  ],
  [
    'a server join past a tenth of its grace is lowered to it, and the client join to what is left',
    { inFlightGraceSeconds: 1, coalesceJoinMs: 900 },
    {},
    { ...production, inFlightGraceSeconds: 1, serverCoalesceJoinMs: 100, coalesceJoinMs: 0 },
  ],
  [
    'a grace of 2 s leaves the client 150 ms of join beside a 50 ms server join: the default 50 stays',
    { inFlightGraceSeconds: 2 },
    {},
    { ...production, inFlightGraceSeconds: 2 },
  ],
  [
    'explicit options win: grace and cache cap set by the team stay',
    dev,
    { inFlightGraceSeconds: true, maxCacheSeconds: true },
    { ...production, serverCoalesceJoinMs: 0, coalesceJoinMs: 50 },
  ],
  ['nothing said: nothing moves', {}, {}, production],
];

test.each(rows)('%s', (_name, said, explicit, expected) => {
  expect(adoptTiming(production, said, explicit).timing).toEqual(expected);
});

test('what was bounded is named, with what was said and what is used', () => {
  const { clamped } = adoptTiming(production, { inFlightGraceSeconds: 3600, clockSkewSeconds: 0 }, {});
  expect(clamped).toEqual(['inFlightGraceSeconds: said 3600, used 5', 'clockSkewSeconds: said 0, used 5']);
});

test('the header: written and read back; junk, negatives and unknown names ignored and named', () => {
  expect(parseTiming(timingHeader(dev))).toEqual({ said: dev, ignored: [] });
  expect(
    parseTiming('inFlightGraceSeconds=-1, coalesceJoinMs=NaN, x=1, clockSkewSeconds=1e9, cacheTtlSeconds=2'),
  ).toEqual({
    said: { cacheTtlSeconds: 2 },
    ignored: ['inFlightGraceSeconds=-1', 'coalesceJoinMs=NaN', 'x=1', 'clockSkewSeconds=1e9'],
  });
  expect(parseTiming(null)).toEqual({ said: {}, ignored: [] });
});
