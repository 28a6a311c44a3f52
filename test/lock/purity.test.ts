import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { newLocationDocument } from '../../shared/core/lock/document';
import { escalate, prelock, swap } from '../../shared/core/lock/rules';
import { routeView } from '../../shared/core/lock/view';
import { T0, productionTiming as cfg } from '../support/timing';

/** What a pure module must not contain: a clock, randomness, timers, awaited I/O, I/O imports. */
function impurities(source: string): string[] {
  const patterns: [string, RegExp][] = [
    ['clock', /Date\.now\(|new Date\(\)|performance\.now/],
    ['randomness', /Math\.random|randomBytes|randomUUID/],
    ['timers', /setTimeout|setInterval|setImmediate/],
    ['awaited I/O', /\bawait\b|\bfetch\(/],
    [
      'I/O imports',
      /from ['"]node:(fs|net|http|https|child_process)['"]|from ['"]better-sqlite3|from ['"]@azure\//,
    ],
  ];
  return patterns.filter(([, pattern]) => pattern.test(source)).map(([name]) => name);
}

/**
 * The lock rules are pure functions of (document, request, now, config), and the migration workflow
 * only yields steps (Durable replay depends on it). ESLint enforces the same on these files.
 */
describe('lock rules and the migration workflow are pure', () => {
  const lockDir = join(__dirname, '../../shared/core/lock');
  const ruleFiles = ['rules.ts', 'state.ts', 'view.ts', 'document.ts', 'readPolicy.ts'];
  const phaseDir = join(__dirname, '../../shared/migration/workflow');
  const pureFiles = [
    ...ruleFiles.map((f) => join(lockDir, f)),
    join(__dirname, '../../shared/migration/workflow.ts'),
    ...readdirSync(phaseDir).map((f) => join(phaseDir, f)),
    join(__dirname, '../../shared/migration/types.ts'),
  ];

  test.each(pureFiles)('%s reads no clock, no randomness, sets no timer and does no I/O', (file) => {
    expect(impurities(readFileSync(file, 'utf8'))).toEqual([]);
  });

  test('negative control: the scan catches each kind of impurity', () => {
    expect(impurities('const t = Date.now();')).toEqual(['clock']);
    expect(impurities('const id = crypto.randomUUID();')).toEqual(['randomness']);
    expect(impurities('setTimeout(done, 5);')).toEqual(['timers']);
    expect(impurities('const r = await fetch(url);')).toEqual(['awaited I/O']);
    expect(impurities("import { readFileSync } from 'node:fs';")).toEqual(['I/O imports']);
  });

  test('the scan sees every rule module', () => {
    const modules = readdirSync(lockDir).filter((f) => f.endsWith('.ts'));
    expect(modules.sort()).toEqual([...ruleFiles, 'token.ts'].sort());
  });

  test('same inputs, same outputs', () => {
    const run = () => {
      const a = prelock(
        newLocationDocument('r', { region: 'westeurope' }),
        { migrationId: 'm', owner: 'o', target: { region: 'eastus' }, newToken: 't' },
        T0,
        cfg,
      ).doc;
      const b = escalate(a, { token: 't', phase: 'hardDelete' }, T0 + 7_505_000, cfg).doc;
      const c = escalate(b, { token: 't', phase: 'write' }, T0 + 7_600_000, cfg).doc;
      const d = swap(c, { token: 't' }, T0 + 7_610_000, cfg).doc;
      return [a, b, c, d, routeView({ doc: c, etag: 'e' }, T0 + 7_605_000, cfg)];
    };
    expect(run()).toEqual(run());
  });
});
