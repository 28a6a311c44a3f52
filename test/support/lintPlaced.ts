import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const root = join(__dirname, '..', '..');

/** A file's source, linted as if it were at `path` in the checkout (which need not exist). */
export type Placed = readonly [path: string, code: string];

export interface PlacedMessage {
  ruleId: string | null;
  line: number;
  message: string;
}

/**
 * The messages ESLint (its `ESLint` class, with the project's eslint.config.mjs) gives each placed
 * file, those of `ruleIds` only, in the order of `cases`. In a child process: jest's module loader
 * cannot import the ES module config. Nothing is written: the code goes in as text.
 */
export function lintPlaced(cases: readonly Placed[], ruleIds: readonly string[]): PlacedMessage[][] {
  const script = `
    const { ESLint } = require('eslint');
    const { join } = require('node:path');
    const [cases, ruleIds] = JSON.parse(process.argv[1]);
    const eslint = new ESLint({ cwd: process.cwd() });
    Promise.all(cases.map(async ([path, code]) => {
      const [result] = await eslint.lintText(code, { filePath: join(process.cwd(), path) });
      return result.messages
        .filter((m) => ruleIds.includes(m.ruleId))
        .map(({ ruleId, line, message }) => ({ ruleId, line, message }));
    })).then((out) => process.stdout.write(JSON.stringify(out)));`;
  const run = spawnSync(process.execPath, ['-e', script, JSON.stringify([cases, ruleIds])], {
    cwd: root,
    encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(`eslint failed: ${run.stderr}`);
  return JSON.parse(run.stdout) as PlacedMessage[][];
}
