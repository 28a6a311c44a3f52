import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { importCycles, importGraph } from './support/importGraph';
import { type Placed, lintPlaced } from './support/lintPlaced';
import { scratchDir } from './support/scratch';

/**
 * shared/ is layered (docs/design.md §1): core ← migration ← campaign ← composition (config, stores,
 * the library entries) ← the hosts. ESLint's no-restricted-imports keeps the imports one way; here its
 * rule is run on files placed as if in each layer, with the imports it must refuse and those it must
 * let through, and the whole of shared/ is checked for import cycles, type imports included.
 */

const root = join(__dirname, '..');

type Case = Placed;

/** The no-restricted-imports messages each placed file gets. */
function refusals(cases: readonly Case[]): string[][] {
  return lintPlaced(cases, ['no-restricted-imports']).map((messages) => messages.map((m) => m.message));
}

const refused: Case[] = [
  ['shared/core/probe.ts', "export type { MigrationInput } from '../migration/types';"],
  ['shared/core/lock/probe.ts', "export type { Config } from '../../config';"],
  ['shared/core/store/sqlite/probe.ts', "export { participantsFor } from '../../../migration/participants';"],
  ['shared/core/probe.ts', "export type { CampaignConfig } from '../campaign/settings';"],
  ['shared/core/probe.ts', "export { openStores } from '../stores';"],
  ['shared/migration/probe.ts', "export type { Config } from '../config';"],
  ['shared/migration/telemetry/probe.ts', "export { createRouter } from '../../library';"],
  ['shared/migration/probe.ts', "export type { CampaignConfig } from '../campaign/settings';"],
  ['shared/migration/probe.ts', "export { createServices } from '../../functions/services';"],
  ['shared/migration/workflow/probe.ts', "export type { Config } from '../../config';"],
  ['shared/campaign/probe.ts', "export { getConfig } from '../config';"],
  ['shared/campaign/probe.ts', "export { startLocalHost } from '../../local/host';"],
  // the participant SDK: beside the orchestrator, on core alone
  ['shared/core/probe.ts', "export { createParticipantHandler } from '../participant/handler';"],
  ['shared/migration/probe.ts', "export type { Job } from '../participant/jobTable';"],
  ['shared/campaign/probe.ts', "export * from '../participant';"],
  ['shared/participant/probe.ts', "export { classifyAnswer } from '../migration/participantContract';"],
  ['shared/participant/probe.ts', "export type { CampaignConfig } from '../campaign/settings';"],
  ['shared/participant/probe.ts', "export type { Config } from '../config';"],
  // the rules each layer's block repeats (a later block's options replace an earlier one's)
  ...['core', 'migration', 'campaign', 'participant'].flatMap((layer) => [
    [`shared/${layer}/probe.ts`, "export { app } from '@azure/functions';"] as const,
    [`shared/${layer}/probe.ts`, "export * from '../../testkit/clock';"] as const,
  ]),
];

const passed: Case[] = [
  ['shared/core/probe.ts', "export { Router } from './router';"],
  ['shared/core/store/sqlite/probe.ts', "export type { TimingConfig } from '../../settings';"],
  ['shared/migration/probe.ts', "export { Router } from '../core/router';"],
  ['shared/migration/telemetry/probe.ts', "export type { MigrationConfig } from '../settings';"],
  ['shared/campaign/probe.ts', "export type { MigrationInput } from '../migration/types';"],
  ['shared/probe.ts', "export type { CampaignConfig } from './campaign/settings';"],
  ['shared/participant/probe.ts', "export { parseJobRequest } from '../core/participantWire';"],
  ['shared/participant/probe.ts', "export type { RouteResolver } from '../core/client';"],
];

describe('the layer rule', () => {
  const answers = refusals([...refused, ...passed]);

  const numbered = (cases: Case[], from: number): [string, string, number][] =>
    cases.map(([path, code], i) => [path, code, from + i]);

  test.each(numbered(refused, 0))('%s: %s is refused', (_path, _code, i) => {
    expect(answers[i]).toHaveLength(1);
  });

  test.each(numbered(passed, refused.length))(
    '%s: %s passes (downward or within a layer)',
    (_path, _code, i) => {
      expect(answers[i]).toEqual([]);
    },
  );
});

describe('import cycles', () => {
  test('shared/ has none, type imports included', () => {
    const graph = importGraph(join(root, 'shared'));
    expect(graph.size).toBeGreaterThan(90);
    expect(importCycles(graph)).toEqual([]);
  });

  test('negative control: a two-file cycle through a type import, and a file importing itself, are found', () => {
    const dir = scratchDir('cycle-');
    mkdirSync(join(dir, 'core'));
    writeFileSync(join(dir, 'core/a.ts'), "import type { B } from '../b';\nexport type A = B[];\n");
    writeFileSync(join(dir, 'b.ts'), "import { a } from './core/a';\nexport type B = typeof a;\n");
    writeFileSync(join(dir, 'self.ts'), "export type S = import('./self').S[];\n");
    writeFileSync(join(dir, 'leaf.ts'), "import type { A } from './core/a';\nexport type L = A;\n");
    expect(importCycles(importGraph(dir))).toEqual([['b.ts', 'core/a.ts'], ['self.ts']]);
  });
});
