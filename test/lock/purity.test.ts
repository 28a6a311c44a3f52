import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { newLocationDocument } from '../../shared/lock/document';
import { escalate, prelock, swap } from '../../shared/lock/rules';
import { routeView } from '../../shared/lock/view';
import { T0, productionTiming as cfg } from '../support/timing';

/** The lock rules are pure functions of (document, request, now, config). */
describe('lock rules are pure', () => {
  const dir = join(__dirname, '../../shared/lock');
  const ruleFiles = ['rules.ts', 'view.ts', 'document.ts'];

  test.each(ruleFiles)('%s reads no clock, no randomness and does no I/O', (file) => {
    const source = readFileSync(join(dir, file), 'utf8');
    expect(source).not.toMatch(/Date\.now\(|new Date\(\)|Math\.random|randomBytes|performance\.now/);
    expect(source).not.toMatch(
      /from ['"]node:(fs|net|http|https|child_process)['"]|from ['"]better-sqlite3|@azure\//,
    );
  });

  test('the scan sees every rule module', () => {
    const modules = readdirSync(dir).filter((f) => f.endsWith('.ts'));
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
      const b = escalate(a, { token: 't', phase: 'hardDelete' }, T0 + 7_500_000, cfg).doc;
      const c = escalate(b, { token: 't', phase: 'write' }, T0 + 7_600_000, cfg).doc;
      const d = swap(c, { token: 't' }, T0 + 7_610_000).doc;
      return [a, b, c, d, routeView({ doc: c, etag: 'e' }, T0 + 7_605_000, cfg)];
    };
    expect(run()).toEqual(run());
  });
});
