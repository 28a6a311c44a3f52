import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';

/**
 * openapi.yaml held against an independent linter: Redocly CLI with its `recommended` rules, which
 * validate the document's structure against the OpenAPI 3.1 schema (a description cut into stray keys
 * by a comma in a flow mapping is an error), resolve every `$ref` and flag unused components. Any error
 * or warning fails. Redocly runs offline here: telemetry and its update check are switched off, and it
 * runs in a scratch directory so no config of the checkout's is read.
 */

const SPEC = join(__dirname, '../openapi.yaml');
const run = promisify(execFile);

interface LintProblem {
  ruleId: string;
  severity: 'error' | 'warn';
  message: string;
  location: { source: { ref: string }; pointer?: string }[];
}

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'routelock-openapi-lint-'));
  // An explicit ruleset: the CLI's default could change under us.
  writeFileSync(join(scratch, 'redocly.yaml'), 'extends:\n  - recommended\n');
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Every problem Redocly reports, by file name (one CLI run lints every file). */
async function lint(files: Record<string, string>): Promise<Record<string, string[]>> {
  for (const [name, text] of Object.entries(files)) writeFileSync(join(scratch, name), text);
  let cli: string;
  try {
    cli = require.resolve('@redocly/cli/bin/cli.js');
  } catch {
    throw new Error('@redocly/cli is a devDependency of this checkout: run `npm ci` to install it');
  }
  // Exit code 1 on an error, 0 with only warnings: the JSON report decides either way.
  const { stdout } = await run(
    process.execPath,
    [
      cli,
      'lint',
      ...Object.keys(files),
      '--config',
      'redocly.yaml',
      '--format',
      'json',
      '--max-problems',
      '1000',
    ],
    {
      cwd: scratch,
      env: {
        ...process.env,
        REDOCLY_TELEMETRY: 'off',
        REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
        NO_COLOR: '1',
        // and should it try anyway, its fetches go to a closed local port, never out
        HTTP_PROXY: 'http://127.0.0.1:9',
        HTTPS_PROXY: 'http://127.0.0.1:9',
        NO_PROXY: '',
      },
      maxBuffer: 16 * 1024 * 1024,
    },
  ).catch((error: { stdout?: string; stderr?: string }) => {
    if (!error.stdout) throw new Error(`redocly lint did not run: ${error.stderr ?? String(error)}`);
    return { stdout: error.stdout };
  });
  // One JSON report per file, one after another.
  const reports = JSON.parse(`[${stdout.replace(/\}\s*\{(?=\s*"totals")/g, '},{')}]`) as {
    problems: LintProblem[];
  }[];
  expect(reports).toHaveLength(Object.keys(files).length);
  const byFile: Record<string, string[]> = Object.fromEntries(Object.keys(files).map((f) => [f, []]));
  for (const p of reports.flatMap((r) => r.problems)) {
    const where = p.location[0];
    byFile[where?.source.ref ?? '?']?.push(`${p.severity} ${p.ruleId} ${where?.pointer ?? ''}: ${p.message}`);
  }
  return byFile;
}

/** A `$ref` that is not a URI reference (RFC 3986): the characters it may hold, `%` escapes included. */
function badRefs(node: unknown, at = '#'): string[] {
  if (Array.isArray(node)) return node.flatMap((v, i) => badRefs(v, `${at}/${i}`));
  if (node === null || typeof node !== 'object') return [];
  return Object.entries(node).flatMap(([key, value]) =>
    key === '$ref' && typeof value === 'string'
      ? /^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]*$/.test(value) && !/%(?![0-9A-Fa-f]{2})/.test(value)
        ? []
        : [`${at}: ${value}`]
      : badRefs(value, `${at}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`),
  );
}

test('openapi.yaml lints clean under Redocly (recommended: no error, no warning); a reintroduced defect is caught', async () => {
  const spec = readFileSync(SPEC, 'utf8');
  // Negative controls, linted in the same run: a description with a comma in a flow mapping (it becomes
  // a stray schema key), and a shared response no operation uses any more.
  const described =
    'migrationId: { type: string, description: "The dry run\'s migrationId, when the caller named one." }';
  expect(spec).toContain(described);
  const commaCut = spec.replace(
    described,
    "migrationId: { type: string, description: the dry run's id, when named }",
  );
  const misdirectedUse = /^ {8}'421': \{ \$ref: '#\/components\/responses\/MisdirectedRequest' \}\n/gm;
  expect(spec).toMatch(misdirectedUse);
  const unused = spec.replace(misdirectedUse, '');

  const problems = await lint({ 'openapi.yaml': spec, 'comma-cut.yaml': commaCut, 'unused.yaml': unused });

  expect(problems['openapi.yaml']).toEqual([]);
  expect(problems['comma-cut.yaml']).toEqual([
    expect.stringMatching(
      /^error struct #\/components\/schemas\/PreflightRequest\/properties\/migrationId\/when named/,
    ),
  ]);
  expect(problems['unused.yaml']).toEqual([
    expect.stringMatching(/^warn no-unused-components .*MisdirectedRequest/),
  ]);
}, 60_000);

test("every $ref in openapi.yaml is a URI reference (a raw '{' in a path's pointer is not)", () => {
  expect(badRefs(parse(readFileSync(SPEC, 'utf8')))).toEqual([]);
  // negative control: the pointer into a templated path, unescaped and escaped
  expect(badRefs({ a: { $ref: '#/paths/~1routes~1{id}~1audit/get' } })).toEqual([
    '#/a: #/paths/~1routes~1{id}~1audit/get',
  ]);
  expect(badRefs({ a: { $ref: '#/paths/~1routes~1%7Bid%7D~1audit/get' } })).toEqual([]);
  expect(badRefs({ a: { $ref: '#/x%zz' } })).toHaveLength(1);
});
