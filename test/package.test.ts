import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import {
  type LockEntry,
  defaultOutDir,
  type PackageResult,
  dependencyFiles,
  leftOut,
  packageViolations,
  productionLocations,
  stagePackage,
} from '../scripts/package';

/**
 * `npm run package` staged for real into a temporary folder outside the project (so Node cannot fall
 * back to the project's node_modules when the entry points load), with hard links for speed, and its
 * file list held to the packaging rules; the same rules are shown catching planted mistakes.
 */

const root = resolve(__dirname, '..');
const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, LockEntry>;
};
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  main: string;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const temp = mkdtempSync(join(tmpdir(), 'routelock-package-'));
const outDir = join(temp, 'routelock');
let staged: PackageResult;

beforeAll(() => {
  staged = stagePackage({ root, outDir, zip: false, link: true });
}, 180_000);
afterAll(() => rmSync(temp, { recursive: true, force: true }));

test('the staged package breaks no packaging rule: no dev-only dependency, project folder, .ts or .node', () => {
  expect(packageViolations(staged.files, lock)).toEqual([]);
  expect(staged.files.filter((f) => f.startsWith('dist/')).every((f) => f.endsWith('.js'))).toBe(true);
  // neither the embedded host nor the command line (nor what only the command line needs) is a function
  expect(staged.files.filter((f) => /^dist\/(?:local|cli)\//.test(f))).toEqual([]);
  expect(staged.files.filter((f) => /^node_modules\/(?:commander|cli-progress)\//.test(f))).toEqual([]);
  expect(packageViolations([...staged.files, 'dist/cli/main.js'], lock)).toEqual([
    'project-only dist/cli/main.js',
  ]);
});

test('devDependencies: only those production packages need too are inside (the lockfile says which)', () => {
  const inside = Object.keys(manifest.devDependencies).filter((name) =>
    staged.files.some((f) => f.startsWith(`node_modules/${name}/`)),
  );
  // @types/node: protobufjs (OpenTelemetry's exporters) depends on it; yaml: @opentelemetry/configuration;
  // @opentelemetry/api and sdk-metrics: applicationinsights' exporter (the client's metrics tests use them).
  expect(inside.sort()).toEqual(['@opentelemetry/api', '@opentelemetry/sdk-metrics', '@types/node', 'yaml']);
  for (const name of inside) expect(lock.packages[`node_modules/${name}`]?.dev).toBeUndefined();
});

test('host.json as the project has it; package.json with production dependencies only, no scripts', () => {
  expect(readFileSync(join(outDir, 'host.json'), 'utf8')).toBe(readFileSync(join(root, 'host.json'), 'utf8'));
  const pkg = JSON.parse(readFileSync(join(outDir, 'package.json'), 'utf8')) as Record<string, unknown>;
  expect(pkg.main).toBe(manifest.main);
  expect(pkg.devDependencies).toBeUndefined();
  expect(pkg.scripts).toBeUndefined();
  const {
    'better-sqlite3': _sqlite,
    commander: _commander,
    'cli-progress': _progress,
    ...production
  } = manifest.dependencies;
  expect(pkg.dependencies).toEqual(production);
  expect(staged.files.some((f) => f.includes('node_modules/better-sqlite3/'))).toBe(false);
});

test('every function entry point that package.json main names loads from the package alone', () => {
  const entries = readdirSync(join(outDir, 'dist/functions')).filter((f) => f.endsWith('.js'));
  const sources = readdirSync(join(root, 'functions')).filter((f) => f.endsWith('.ts'));
  expect(entries.sort()).toEqual(sources.map((f) => f.replace(/\.ts$/, '.js')).sort());
  expect(manifest.main).toBe('dist/functions/*.js');
  const {
    NODE_PATH: _path,
    NODE_OPTIONS: _options,
    FUNCTIONS_WORKER_RUNTIME: _runtime,
    ...env
  } = process.env;
  const load = spawnSync(
    process.execPath,
    [
      '-e',
      `for (const f of ${JSON.stringify(entries)}) require('./dist/functions/' + f);
       const native = Object.keys(require.cache).filter((p) => p.endsWith('.node') || p.includes('better-sqlite3'));
       if (native.length) throw new Error('loaded ' + native.join(', '));
       const outside = Object.keys(require.cache).filter((p) => !p.startsWith(process.cwd()));
       if (outside.length) throw new Error('loaded from outside the package: ' + outside.join(', '));`,
    ],
    { cwd: outDir, env, encoding: 'utf8' },
  );
  expect(load.stderr).toBe('');
  expect(load.status).toBe(0);
}, 60_000);

test('azd packages through the script: its prepackage hook runs it and deploys its folder as built', () => {
  const azd = parseYaml(readFileSync(join(root, 'azure.yaml'), 'utf8')) as {
    services: {
      api: { dist: string; remoteBuild: boolean; hooks: { prepackage: { posix: { run: string } } } };
    };
  };
  expect(azd.services.api).toMatchObject({ dist: defaultOutDir, remoteBuild: false });
  expect(azd.services.api.hooks.prepackage.posix.run).toBe('npm run package');
  expect(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).scripts.package).toMatch(
    /scripts\/package\.ts$/,
  );
  // The stage's own .funcignore keeps node_modules (else azd would exclude it and ask for a remote build).
  expect(readFileSync(join(outDir, '.funcignore'), 'utf8')).not.toMatch(/node_modules/);
});

describe('negative controls: the rules catch what they exist for', () => {
  test('better-sqlite3 kept: its native binary is caught', () => {
    const withSqlite = productionLocations(lock, {});
    expect(withSqlite).toContain('node_modules/better-sqlite3');
    const files = ['host.json', 'package.json', ...dependencyFiles(root, withSqlite)];
    const violations = packageViolations(files, lock);
    expect(violations).toContain(
      'native binary node_modules/better-sqlite3/build/Release/better_sqlite3.node',
    );
    expect(violations.every((v) => v.startsWith('native binary node_modules/better-sqlite3/'))).toBe(true);
  });

  test('a devDependency packaged, a test folder, a .ts source, a missing host.json: each is caught', () => {
    const planted = [
      'package.json',
      'node_modules/jest/package.json',
      'test/router.test.js',
      'shared/core/router.ts',
      'node_modules/zod/index.d.ts',
    ];
    expect(packageViolations(planted, lock)).toEqual([
      'missing host.json',
      'project-only test/router.test.js',
      'TypeScript file shared/core/router.ts',
      'TypeScript file node_modules/zod/index.d.ts',
      'dev-only dependency node_modules/jest',
    ]);
  });

  test('leftOut names better-sqlite3 and the command line packages, and nothing only they need is packaged', () => {
    expect(Object.keys(leftOut)).toEqual(['better-sqlite3', 'commander', 'cli-progress']);
    const only = productionLocations(lock, {}).filter((l) => !productionLocations(lock).includes(l));
    expect(only.length).toBeGreaterThan(1); // bindings, prebuild-install and what they need
    for (const location of only) expect(staged.files.some((f) => f.startsWith(`${location}/`))).toBe(false);
  });
});
