import { type Placed, lintPlaced } from './support/lintPlaced';

/**
 * Functions in shared/ stay within 80 lines (docs/contributing.md, "Functions stay short"): ESLint's
 * max-lines-per-function counts every line from the signature to the closing brace. Here it is run on
 * functions placed in each layer, a line over the limit and at it, with the one way to make an exception
 * and the ways that must not work.
 */

const LENGTH = 'max-lines-per-function';
const EXCEPTIONS = 'routelock/length-exceptions';

interface Shape {
  head?: string;
  filler?: (i: number) => string;
  tail?: string;
}

/** A function of exactly `lines` lines (signature and closing brace included), `filler` inside it. */
function fn(lines: number, shape: Shape = {}): string {
  const {
    head = 'export function long(): number {',
    filler = (i: number) => `  total += ${i};`,
    tail = '}',
  } = shape;
  const body = Array.from({ length: lines - 4 }, (_, i) => filler(i));
  return [head, '  let total = 0;', ...body, '  return total;', tail].join('\n');
}

const commented = { filler: (i: number) => (i % 2 ? '' : `  // why ${i}`) };

const reason = '// eslint-disable-next-line max-lines-per-function -- a table of cases read top to bottom\n';

const reported: Placed[] = [
  ['shared/core/probe.ts', fn(81)],
  ['shared/migration/telemetry/probe.ts', fn(81)],
  ['shared/campaign/probe.ts', fn(81)],
  ['shared/probe.ts', fn(81)],
  // comments and blank lines count: they are read too
  ['shared/core/probe.ts', fn(81, commented)],
  ['shared/core/probe.ts', fn(81, { head: 'export const long = (): number => {' })],
  [
    'shared/core/probe.ts',
    `export class Long {
${fn(81, { head: '  run(): number {', tail: '  }' })}
}`,
  ],
  ['shared/core/probe.ts', fn(81, { head: 'export const value = (() => {', tail: '})();' })],
];

const allowed: Placed[] = [
  ['shared/core/probe.ts', fn(80)],
  ['shared/migration/probe.ts', fn(80, commented)],
  ['shared/campaign/probe.ts', reason + fn(120)],
  // the rule is for shared/; the hosts and tests keep their own shape
  ['functions/probe.ts', fn(120)],
  ['test/probe.test.ts', fn(120)],
];

/** Exceptions in any other form: each is refused, whether or not it silences the length rule. */
const refusedExceptions: Placed[] = [
  ['shared/core/probe.ts', '// eslint-disable-next-line max-lines-per-function\n' + fn(81)],
  ['shared/core/probe.ts', '// eslint-disable-next-line max-lines-per-function --\n' + fn(81)],
  ['shared/core/probe.ts', '/* eslint-disable max-lines-per-function -- the whole file */\n' + fn(81)],
  ['shared/core/probe.ts', '/* eslint max-lines-per-function: ["error", 200] */\n' + fn(81)],
  [
    'shared/core/probe.ts',
    fn(81, { head: 'export function long(): number { // eslint-disable-line max-lines-per-function -- x' }),
  ],
];

describe('the function length rule in shared/', () => {
  const answers = lintPlaced([...reported, ...allowed, ...refusedExceptions], [LENGTH, EXCEPTIONS]);
  const numbered = (cases: Placed[], from: number): [string, number][] =>
    cases.map(([path], i) => [path, from + i]);

  test.each(numbered(reported, 0))('%s: a function over 80 lines is reported (case %#)', (_path, i) => {
    expect(answers[i]).toEqual([
      expect.objectContaining({ ruleId: LENGTH, message: expect.stringContaining('(81)') }),
    ]);
  });

  test.each(numbered(allowed, reported.length))(
    '%s: 80 lines, an exception with its reason, or outside shared/ passes (case %#)',
    (_path, i) => {
      expect(answers[i]).toEqual([]);
    },
  );

  test.each(numbered(refusedExceptions, reported.length + allowed.length))(
    '%s: an exception without a reason or in another form is refused (case %#)',
    (_path, i) => {
      expect(answers[i]).toContainEqual(expect.objectContaining({ ruleId: EXCEPTIONS, line: 1 }));
    },
  );
});
