/**
 * `npm run package`: the Azure Functions deployment package, staged in a folder (and zipped when `zip` is
 * on PATH), offline, from what `npm ci` installed. It holds the compiled functions and shared code,
 * host.json, a package.json with the production dependencies, and exactly those dependencies' files:
 * no devDependency, no test, bench, browser, Bicep or dev tooling, no TypeScript sources.
 *
 * better-sqlite3 is left out: Azure runs on Cosmos DB, the SQLite adapter is imported only when the
 * SQLite store is chosen (shared/stores.ts), and a native module built on the packaging machine
 * would not load on a host of another OS. `npm ci && npm start` (the embedded host) is untouched: this
 * reads node_modules, never changes it. The staged package carries no `.node` binary at all.
 *
 * Usage: node -r ./scripts/ts-register.js scripts/package.ts [outDir] (default .deploy/routelock)
 */
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  existsSync,
  linkSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/** Where `npm run package` stages the package (azure.yaml's `dist` names the same folder). */
export const defaultOutDir = '.deploy/routelock';

/** Production dependencies the Azure package does not carry, with why (see the header). */
export const leftOut: Record<string, string> = {
  'better-sqlite3': 'the embedded host only; a native module built for the packaging machine',
  commander: 'the command line only (cli/, not in the package)',
  'cli-progress': 'the command line only (cli/, not in the package)',
};

/** Files of dependencies nothing loads at run time: type declarations, TypeScript sources, source maps. */
const unusedAtRunTime = /\.(?:[cm]?ts|map)$/;

export interface LockEntry {
  dev?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

/**
 * The lockfile locations (`node_modules/a/node_modules/b`) of the root's production dependencies and
 * everything they need, without `leftOut` and what only they need. Resolution as Node does it: the
 * nearest `node_modules/<name>` from the dependent's own folder upwards.
 */
export function productionLocations(
  lock: { packages: Record<string, LockEntry> },
  without: Record<string, string> = leftOut,
): string[] {
  const packages = lock.packages;
  const root = packages[''] ?? {};
  const found = new Set<string>();
  const resolveFrom = (from: string, name: string): string | undefined => {
    for (
      let base = from;
      ;
      base = base.includes('/node_modules/') ? base.slice(0, base.lastIndexOf('/node_modules/')) : ''
    ) {
      const candidate = base ? `${base}/node_modules/${name}` : `node_modules/${name}`;
      if (packages[candidate]) return candidate;
      if (!base) return undefined;
    }
  };
  const visit = (from: string, deps: Record<string, string> | undefined, required: boolean) => {
    for (const name of Object.keys(deps ?? {})) {
      if (without[name]) continue;
      const location = resolveFrom(from, name);
      if (!location) {
        if (required)
          throw new Error(`package-lock.json: ${name} (needed by ${from || 'the root'}) is not in it`);
        continue;
      }
      if (found.has(location)) continue;
      found.add(location);
      const entry = packages[location] as LockEntry;
      visit(location, entry.dependencies, true);
      visit(location, entry.optionalDependencies, false);
      visit(location, entry.peerDependencies, false);
    }
  };
  visit('', root.dependencies, true);
  visit('', root.optionalDependencies, false);
  return [...found].sort();
}

/**
 * The dependency files the package carries, relative to the project root (`node_modules/…`): every file
 * of each production location but its nested node_modules (those are locations of their own, when
 * production ones) and the files nothing loads at run time.
 */
export function dependencyFiles(root: string, locations: readonly string[]): string[] {
  const files: string[] = [];
  const walk = (rel: string, top: boolean) => {
    for (const entry of readdirSync(join(root, rel), { withFileTypes: true })) {
      if (top && entry.name === 'node_modules') continue;
      const path = `${rel}/${entry.name}`;
      if (entry.isDirectory()) walk(path, false);
      else if (!unusedAtRunTime.test(entry.name)) files.push(path);
    }
  };
  for (const location of locations) {
    if (!existsSync(join(root, location, 'package.json')))
      throw new Error(
        `${location} is not installed: run npm ci first (the package is built offline from it)`,
      );
    walk(location, true);
  }
  return files;
}

/** Every file under `dir`, as paths relative to it. */
export function filesUnder(dir: string, rel = ''): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(dir, rel), { withFileTypes: true })) {
    const path = rel ? `${rel}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...filesUnder(dir, path));
    else out.push(path);
  }
  return out;
}

export interface PackageResult {
  outDir: string;
  /** Every staged file, relative to `outDir`, `/`-separated. */
  files: string[];
  bytes: number;
  zip?: { path: string; bytes: number };
  dependencies: number;
}

export interface PackageOptions {
  root: string;
  outDir: string;
  /** Zip the stage beside it as `<outDir>.zip` when `zip` is on PATH (default true). */
  zip?: boolean;
  /**
   * Hard-link the dependency files instead of copying them (same file system only; a copy otherwise):
   * the test's fast path. The staged tree is the same.
   */
  link?: boolean;
}

/** Stage the package in `outDir` (emptied first). */
export function stagePackage(options: PackageOptions): PackageResult {
  const root = resolve(options.root);
  const outDir = resolve(options.outDir);
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });

  // Build: a fresh compile into the stage, so no stale file of an earlier build can ride along.
  const tsc = require.resolve('typescript/bin/tsc', { paths: [root] });
  const build = spawnSync(
    process.execPath,
    [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', join(outDir, 'dist'), '--sourceMap', 'false'],
    { cwd: root, encoding: 'utf8' },
  );
  if (build.status !== 0) throw new Error(`build failed:\n${build.stdout}${build.stderr}`);
  // The embedded host (local/) and the operator's command line (cli/) are not functions: Azure never
  // loads them (nor the host.json copy only the host's queue consumer imports; the Functions host reads
  // the one at the package root).
  rmSync(join(outDir, 'dist', 'local'), { recursive: true, force: true });
  rmSync(join(outDir, 'dist', 'cli'), { recursive: true, force: true });
  rmSync(join(outDir, 'dist', 'host.json'), { force: true });

  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    name: string;
    version: string;
    description?: string;
    license?: string;
    main: string;
    engines?: Record<string, string>;
    dependencies: Record<string, string>;
  };
  const staged = {
    name: manifest.name,
    version: manifest.version,
    ...(manifest.description ? { description: manifest.description } : {}),
    ...(manifest.license ? { license: manifest.license } : {}),
    private: true,
    main: manifest.main,
    ...(manifest.engines ? { engines: manifest.engines } : {}),
    dependencies: Object.fromEntries(
      Object.entries(manifest.dependencies).filter(([name]) => !leftOut[name]),
    ),
  };
  writeFileSync(join(outDir, 'package.json'), `${JSON.stringify(staged, null, 2)}\n`);
  cpSync(join(root, 'host.json'), join(outDir, 'host.json'));
  // azd applies the package folder's own .funcignore: this one keeps node_modules, so azd deploys this
  // package as built (no remote build) — see `remoteBuild: false` in azure.yaml.
  writeFileSync(join(outDir, '.funcignore'), '# The staged package is deployed as it is.\n*.zip\n');

  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockEntry>;
  };
  const locations = productionLocations(lock);
  const files = dependencyFiles(root, locations);
  for (const dir of new Set(files.map((file) => dirname(file))))
    mkdirSync(join(outDir, dir), { recursive: true });
  let link = options.link === true;
  for (const file of files) {
    const source = realpathSync(join(root, file));
    if (link) {
      try {
        linkSync(source, join(outDir, file));
        continue;
      } catch {
        link = false; // another file system: copy from here on
      }
    }
    copyFileSync(source, join(outDir, file));
  }

  const stagedFiles = filesUnder(outDir);
  const bytes = stagedFiles.reduce((sum, file) => sum + statSync(join(outDir, file)).size, 0);
  const result: PackageResult = { outDir, files: stagedFiles, bytes, dependencies: locations.length };
  if (options.zip !== false && spawnSync('zip', ['-v'], { encoding: 'utf8' }).status === 0) {
    const zipPath = `${outDir}.zip`;
    rmSync(zipPath, { force: true });
    const zipped = spawnSync('zip', ['-qrX', zipPath, '.'], { cwd: outDir, encoding: 'utf8' });
    if (zipped.status !== 0) throw new Error(`zip failed: ${zipped.stderr}`);
    result.zip = { path: zipPath, bytes: statSync(zipPath).size };
  }
  return result;
}

/** Top-level folders of the project that hold no production code: none may appear in the package. */
export const projectOnlyFolders = [
  'test',
  'testkit',
  'bench',
  'verify',
  'drill',
  'examples',
  'infra',
  'scripts',
  'docs',
  'local',
  'dist/local',
  'cli',
  'dist/cli',
  '.github',
  '.ci',
];

/**
 * What a package's file list must not hold (one home for the rules; the test applies them to a real
 * staging and to planted mistakes): a location the lockfile marks dev-only (a devDependency, or what only
 * devDependencies need), a project-only folder, a TypeScript file, a native `.node` binary, and it must
 * hold host.json and package.json at its root.
 */
export function packageViolations(
  files: readonly string[],
  lock: { packages: Record<string, LockEntry> },
): string[] {
  const violations: string[] = [];
  for (const required of ['host.json', 'package.json']) {
    if (!files.includes(required)) violations.push(`missing ${required}`);
  }
  const devLocations = new Set<string>();
  for (const file of files) {
    if (/\.[cm]?ts$/.test(file)) violations.push(`TypeScript file ${file}`);
    if (file.endsWith('.node')) violations.push(`native binary ${file}`);
    const folder = projectOnlyFolders.find((f) => file.startsWith(`${f}/`));
    if (folder) violations.push(`project-only ${file}`);
    const match = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(file);
    if (match && lock.packages[match[1] as string]?.dev) devLocations.add(match[1] as string);
  }
  for (const location of devLocations) violations.push(`dev-only dependency ${location}`);
  return violations;
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

if (require.main === module) {
  const root = resolve(__dirname, '..');
  const outDir = resolve(root, process.argv[2] ?? defaultOutDir);
  const result = stagePackage({ root, outDir });
  const where = relative(root, result.outDir) || '.';
  process.stdout.write(
    `package: ${where} — ${result.files.length} files, ${mb(result.bytes)} unpacked, ${result.dependencies} dependencies` +
      (result.zip
        ? `; ${relative(root, result.zip.path)} ${mb(result.zip.bytes)}`
        : '; no zip on PATH, not zipped') +
      `\nleft out: ${Object.keys(leftOut).join(', ')}\n`,
  );
}
