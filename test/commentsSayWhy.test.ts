import { readFileSync, readdirSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

/**
 * Comments and test names say why, never where the code came from (docs/contributing.md): no ticket
 * numbers, no notes of the review that found a defect, no "Version N:" history and no file that is not in
 * the repository. History goes in CHANGELOG.md and the commit messages; `docs/design.md §n` is the
 * reference to give (`design §n` in what a package ships: docs/contributing.md). The scan reads every code, configuration and Markdown file of the product and its
 * tests, comments and strings alike (a test's name is a string).
 */

const root = join(__dirname, '..');

/** Folders not scanned, anywhere (as .gitignore has them): tooling, generated output, local data. */
const skippedNames = new Set([
  '.git',
  'node_modules',
  'dist',
  'coverage',
  'test-output',
  '.routelock',
  '.azure',
  '.deploy',
  '.tools',
]);
/** Folders not scanned at these paths: generated output, results, and the prose that holds the history. */
const skippedPaths = new Set(['docs', 'bench/results', 'infra/arm', 'infra/tools/obj']);
/** Files that are history by design: the changelogs and the benchmark record. */
const historyFile = (path: string) => /(^|\/)CHANGELOG\.md$/.test(path) || path === 'bench/README.md';
const scanned = /\.(ts|js|mjs|cjs|sh|bicep|kql|ya?ml|md)$/;

/** What provenance looks like, each with what to write instead. */
const provenance: [kind: string, pattern: RegExp][] = [
  // the word, an optional "#" and a number, also when a comment's line break falls between them
  ['an issue number', /\bissues?(?:[ \t]|\n[ \t]*(?:\*|\/\/|#)?)*#?\d+/gi],
  ['a review note', /\breview(?:[ \t]|\n[ \t]*(?:\*|\/\/|#)?)+(?:of|round)\b|\bfound in (?:the )?review\b/gi],
  ['a review note', /\b(?:[Rr]eview|rev)[ ]?[A-D]\b(?![\w-])/g],
  ['a "Version N:" history line', /^[ \t]*(?:\/\/+|\/?\*+|#)?[ \t]*Version \d+(?: \([^)\n]*\))?:/gm],
  ['a file not in the repository', /(?<![\w./-])notes\/[\w.-]+|\bcontract17\b/g],
];

/** Every finding in one file's text: its line, its kind and the line itself. */
function findings(text: string): { line: number; kind: string; text: string }[] {
  const lines = text.split('\n');
  const found = provenance.flatMap(([kind, pattern]) =>
    [...text.matchAll(pattern)].map((m) => {
      const line = text.slice(0, m.index).split('\n').length;
      return { line, kind, text: lines[line - 1]!.trim() };
    }),
  );
  return found.sort((a, b) => a.line - b.line);
}

/** Every scanned file under `dir`, as a path relative to the repository, in order. */
function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      const path = join(dir, entry.name);
      const rel = relative(root, path).split(sep).join('/');
      if (entry.isDirectory())
        return skippedNames.has(entry.name) || skippedPaths.has(rel) ? [] : files(path);
      return entry.isFile() && scanned.test(entry.name) && !historyFile(rel) ? [rel] : [];
    })
    .sort();
}

const all = files(root).map((path) => ({ path, found: findings(readFileSync(join(root, path), 'utf8')) }));

describe('comments and test names carry no provenance', () => {
  test('no file cites an issue, a review, a "Version N:" history or a file not in the repository', () => {
    const report = all.flatMap(({ path, found }) =>
      found.map((f) => `${path}:${f.line}: ${f.kind}: ${f.text}`),
    );
    expect(report).toEqual([]);
  });

  test('the scan reaches the product, its tests and its tooling', () => {
    const paths = all.map((f) => f.path);
    for (const expected of [
      'shared/core/router.ts',
      'functions/endpoints.ts',
      'local/host.ts',
      'cli/main.ts',
      'testkit/plantedBugs.ts',
      'verify/run.ts',
      'drill/drill.ts',
      'bench/run.ts',
      'examples/message-store/service.ts',
      'infra/bicep/main.bicep',
      'openapi.yaml',
      'README.md',
      'test/commentsSayWhy.test.ts',
    ])
      expect(paths).toContain(expected);
    expect(paths.filter((p) => p.startsWith('docs/') || p.endsWith('CHANGELOG.md'))).toEqual([]);
  });

  test('negative control: each kind of provenance is caught', () => {
    const kinds = (text: string) => findings(text).map((f) => f.kind);
    // built from parts, so that this file does not hold the provenance it plants
    const [issue, review, version, notes, contract] = [
      'issue',
      'review',
      'Version',
      'notes/',
      'contract' + '17',
    ];
    expect(kinds(`// the cutover window (${issue} 19 §3)`)).toEqual(['an issue number']);
    expect(kinds(`/** Automatic retry (${issue} #18). */`)).toEqual(['an issue number']);
    expect(kinds(` * one home for it (the ${issue}\n * 21 §4): the reason`)).toEqual(['an issue number']);
    expect(kinds(`test('a cancel (${review} of ${issue.toUpperCase()} 18)', () => {`)).toEqual([
      'an issue number',
      'a review note',
    ]);
    expect(kinds(`// found in ${review}: it was a 500`)).toEqual(['a review note']);
    expect(kinds(`// second ${review} round`)).toEqual(['a review note']);
    expect(kinds(`test('reports its hold too (${review} D)', () => {`)).toEqual(['a review note']);
    expect(kinds(`  // ${version} 4: the swap confirmed on a replica`)).toEqual([
      'a "Version N:" history line',
    ]);
    expect(kinds(`  /** ${version} 4 (cutover windows): set while waiting */`)).toEqual([
      'a "Version N:" history line',
    ]);
    expect(kinds(` * The participant protocol (${notes}${contract}.md)`)).toEqual([
      'a file not in the repository',
    ]);
    expect(kinds(`  // the job's key (${contract}): migrationId and step`)).toEqual([
      'a file not in the repository',
    ]);
  });

  test('negative control: what says why passes', () => {
    for (const text of [
      '// the cutover window (docs/design.md §6.10)',
      'const issue = windowIssue(window, now);',
      "ctx.addIssue({ code: 'custom', message: issue.message });",
      "resource diagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {",
      '/** Inputs of version 4: verify before the swap. */',
      '// for compliance reviews',
      '// version 4: the end notice, last of attempt 2',
    ])
      expect(findings(text)).toEqual([]);
  });
});
