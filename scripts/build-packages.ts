/**
 * `npm run packages`: the publishable packages, built from this source tree without moving a file
 * (docs/services.md):
 *
 * - `@routelock/client` (packages/client): shared/core/client.ts and what it imports: HTTP only; and
 *   shared/core/clientTesting.ts (`/testing`), the test double a service's unit tests use; and
 *   shared/core/clientMiddleware.ts (`/middleware`), the request guard for node:http, Express and Fastify;
 * - `@routelock/library` (packages/library): shared/library.ts (Router through createRouter, the lock
 *   views, decide, config parsing, the Cosmos DB store) and shared/librarySqlite.ts (`/sqlite`);
 * - `@routelock/participant` (packages/participant): shared/participant/index.ts, the participant
 *   contract as a request handler, and shared/participant/entra.ts (`/entra`, the Entra token check,
 *   which alone loads its optional peer `jose`).
 *
 * For each: tsc compiles the entry points to CommonJS with declarations; only the files the entries
 * reach are kept (run time: `require`s of the emitted JavaScript; types: imports of the emitted
 * declarations); a small ESM entry re-exports each entry's named exports (`.mjs` + `.d.mts`, the
 * `exports` map's `import` condition); the committed template's package.json gets its dependency
 * ranges from the root package.json (one home for versions). The build fails when the JavaScript a
 * package ships requires a module its package.json does not declare (a dependency or a peer): the
 * client cannot start pulling zod, @azure/* or better-sqlite3 in unnoticed. It also fails when the
 * version is not the one the package's CHANGELOG ships, or a shipped comment names a file the package does
 * not have (scripts/packageChecks.ts).
 *
 * Usage: node -r ./scripts/ts-register.js scripts/build-packages.ts [outDir] [--pack]
 * (default outDir .deploy/packages; --pack also runs `npm pack` into it).
 */
import { spawnSync } from 'node:child_process';
import { builtinModules } from 'node:module';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { filesUnder } from './package';
import { checkShippedComments, shippedVersion } from './packageChecks';

export const defaultPackagesDir = '.deploy/packages';

export interface PackageSpec {
  /** Folder under packages/ holding the committed template (package.json, README.md, CHANGELOG.md). */
  folder: string;
  /** Entry modules, relative to shared/ without extension: each becomes dist/<entry>.{js,d.ts,mjs,d.mts}. */
  entries: string[];
}

export const packageSpecs: readonly PackageSpec[] = [
  { folder: 'client', entries: ['core/client', 'core/clientTesting', 'core/clientMiddleware'] },
  { folder: 'library', entries: ['library', 'librarySqlite'] },
  { folder: 'participant', entries: ['participant/index', 'participant/entra'] },
];

/**
 * Declarations a package may ship although they import a module it does not depend on, with why. None
 * today: the client's declarations reach no zod, as the settings types (shared/core/settings.ts) import
 * nothing.
 */
export const typeOnlyImports: Record<string, Record<string, string>> = {};

const templateRange = 'from the root package.json';

interface Manifest {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  [key: string]: unknown;
}

export interface BuiltPackage {
  name: string;
  version: string;
  dir: string;
  /** Files of the package, relative to `dir`. */
  files: string[];
  bytes: number;
  /** Bare modules the shipped JavaScript requires (dependencies, peers, node builtins). */
  requires: string[];
  tarball?: string;
}

const builtins = new Set([...builtinModules, ...builtinModules.map((m) => `node:${m}`)]);

/** `@scope/name/sub` → `@scope/name`; `name/sub` → `name`. */
function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] as string);
}

/**
 * Specifiers a compiled CommonJS file requires (tsc's output: `require("x")`, also inside lazy imports;
 * a `require('x')` written in the source keeps its quotes).
 */
function requiresOf(js: string): string[] {
  return [...js.matchAll(/\brequire\((["'])([^"']+)\1\)/g)].map((m) => m[2] as string);
}

/** Specifiers a declaration file imports (`from "x"`, `import("x")`, `import x = require("x")`). */
function typeImportsOf(dts: string): string[] {
  return [
    ...[...dts.matchAll(/\bfrom\s+['"]([^'"]+)['"]/g)].map((m) => m[1] as string),
    ...[...dts.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1] as string),
    ...[...dts.matchAll(/\brequire\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1] as string),
  ];
}

/**
 * The files reachable from `starts` (paths relative to `dist`) by following relative specifiers;
 * the bare ones met on the way are collected in `bare`.
 */
function closure(
  dist: string,
  starts: string[],
  extension: '.js' | '.d.ts',
  specifiersOf: (text: string) => string[],
  bare: Set<string>,
): Set<string> {
  const seen = new Set<string>();
  const visit = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const specifier of specifiersOf(readFileSync(join(dist, file), 'utf8'))) {
      if (!specifier.startsWith('.')) {
        bare.add(specifier);
        continue;
      }
      const base = join(dirname(file), specifier).replace(/\.js$/, '');
      const candidate = [`${base}${extension}`, join(base, `index${extension}`)].find((c) =>
        existsSync(join(dist, c)),
      );
      if (!candidate) throw new Error(`${file}: ${specifier} resolves to no emitted ${extension} file`);
      visit(candidate);
    }
  };
  for (const start of starts) visit(start);
  return seen;
}

/**
 * tsc over the entries alone (it follows their imports), into `dist`: the declarations with their doc
 * comments, then the CommonJS without comments (they are for the repo's readers and cite its files; the
 * declarations carry what a consumer reads, and their comments are checked).
 */
function compile(root: string, work: string, entries: string[], dist: string): void {
  compilePass(root, work, entries, dist, { declaration: true, emitDeclarationOnly: true });
  compilePass(root, work, entries, dist, { declaration: false, removeComments: true });
}

function compilePass(
  root: string,
  work: string,
  entries: string[],
  dist: string,
  emit: Record<string, boolean>,
): void {
  const tsconfig = join(work, 'tsconfig.package.json');
  writeFileSync(
    tsconfig,
    JSON.stringify({
      extends: join(root, 'tsconfig.json'),
      compilerOptions: {
        rootDir: join(root, 'shared'),
        outDir: dist,
        ...emit,
        sourceMap: false,
        noEmit: false,
        types: ['node'],
        // The config file sits outside the project (a test's temporary folder): find @types from the project.
        typeRoots: [join(root, 'node_modules/@types')],
        tsBuildInfoFile: null,
      },
      files: entries.map((entry) => join(root, 'shared', `${entry}.ts`)),
      include: [],
    }),
  );
  const tsc = require.resolve('typescript/bin/tsc', { paths: [root] });
  const build = spawnSync(process.execPath, [tsc, '-p', tsconfig], { cwd: root, encoding: 'utf8' });
  if (build.status !== 0)
    throw new Error(`tsc failed for ${entries.join(', ')}:\n${build.stdout}${build.stderr}`);
  rmSync(tsconfig);
}

/** The ESM entry beside a CommonJS entry: its named exports, read from the built module itself. */
function writeEsmEntry(dist: string, entry: string, nodePath: string): void {
  const modulePath = join(dist, `${entry}.js`);
  // A fresh process: loading it here would keep the just-built modules (and their dependencies) cached.
  const listed = spawnSync(
    process.execPath,
    ['-e', `process.stdout.write(JSON.stringify(Object.keys(require(${JSON.stringify(modulePath)}))))`],
    // Built outside the project (a test's temporary folder), its dependencies resolve from the project's.
    { encoding: 'utf8', env: { ...process.env, NODE_PATH: nodePath } },
  );
  if (listed.status !== 0) throw new Error(`cannot load ${entry}.js to list its exports:\n${listed.stderr}`);
  const names = (JSON.parse(listed.stdout) as string[]).filter((n) => n !== '__esModule' && n !== 'default');
  const base = entry.split('/').pop() as string;
  writeFileSync(
    join(dist, `${entry}.mjs`),
    `// ESM entry: the CommonJS module's named exports (one copy of each class, so instanceof holds across both).\n` +
      `import cjs from './${base}.js';\n\n` +
      names.map((n) => `export const ${n} = cjs.${n};\n`).join(''),
  );
  writeFileSync(join(dist, `${entry}.d.mts`), `export * from './${base}.js';\n`);
}

/** Fill the template's dependency ranges from the root package.json. */
function manifestFor(template: Manifest, root: Manifest): Manifest {
  const fill = (deps: Record<string, string> | undefined): Record<string, string> | undefined => {
    if (deps === undefined) return undefined;
    return Object.fromEntries(
      Object.keys(deps).map((name) => {
        const range = root.dependencies?.[name];
        if (deps[name] !== templateRange) return [name, deps[name] as string];
        if (range === undefined)
          throw new Error(`${template.name}: ${name} is not a dependency of the root package.json`);
        return [name, range];
      }),
    );
  };
  const out: Manifest = { ...template };
  for (const key of ['dependencies', 'peerDependencies', 'optionalDependencies'] as const) {
    const filled = fill(template[key]);
    if (filled) out[key] = filled;
  }
  return out;
}

export function buildPackage(root: string, outDir: string, spec: PackageSpec): BuiltPackage {
  const template = join(root, 'packages', spec.folder);
  const dir = join(outDir, spec.folder);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const emitted = join(dir, 'emitted');
  compile(root, dir, spec.entries, emitted);

  // Keep what the entries reach: their JavaScript by require, their declarations by import.
  const bareRequires = new Set<string>();
  const bareTypes = new Set<string>();
  const js = closure(
    emitted,
    spec.entries.map((e) => `${e}.js`),
    '.js',
    requiresOf,
    bareRequires,
  );
  const dts = closure(
    emitted,
    spec.entries.map((e) => `${e}.d.ts`),
    '.d.ts',
    typeImportsOf,
    bareTypes,
  );
  const dist = join(dir, 'dist');
  for (const file of [...js, ...dts]) {
    mkdirSync(dirname(join(dist, file)), { recursive: true });
    copyFileSync(join(emitted, file), join(dist, file));
  }
  rmSync(emitted, { recursive: true, force: true });

  const manifest = manifestFor(
    JSON.parse(readFileSync(join(template, 'package.json'), 'utf8')) as Manifest,
    JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Manifest,
  );
  manifest.version = shippedVersion(
    manifest.name,
    manifest.version,
    readFileSync(join(template, 'CHANGELOG.md'), 'utf8'),
  );
  const requires = [...new Set([...bareRequires].map(packageOf))].sort();
  const undeclared = undeclaredModules(requires, manifest);
  if (undeclared.length > 0)
    throw new Error(
      `${manifest.name}: its JavaScript requires ${undeclared.join(', ')}, not in its package.json`,
    );
  const tolerated = typeOnlyImports[spec.folder] ?? {};
  const untyped = undeclaredModules([...bareTypes], manifest).filter((m) => !tolerated[m]);
  if (untyped.length > 0)
    throw new Error(
      `${manifest.name}: its declarations import ${untyped.join(', ')}, not in its package.json`,
    );

  for (const entry of spec.entries) writeEsmEntry(dist, entry, join(root, 'node_modules'));
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  for (const doc of ['README.md', 'CHANGELOG.md']) copyFileSync(join(template, doc), join(dir, doc));

  const files = filesUnder(dir).sort();
  checkShippedComments(manifest.name, dir, files, repoEntries(root));
  const bytes = files.reduce((sum, f) => sum + statSync(join(dir, f)).size, 0);
  return { name: manifest.name, version: manifest.version, dir, files, bytes, requires };
}

/** The checkout's top-level folders and files: a comment's path starting with one is a repo path. */
function repoEntries(root: string): Set<string> {
  return new Set(readdirSync(root).filter((entry) => !entry.startsWith('.')));
}

/**
 * The packages among `specifiers` (bare module specifiers a package's files load) that are neither Node
 * built-ins nor declared by `manifest` (dependencies, peers, optional): the build's one rule for what a
 * package may load.
 */
export function undeclaredModules(
  specifiers: readonly string[],
  manifest: Pick<Manifest, 'dependencies' | 'peerDependencies' | 'optionalDependencies'>,
): string[] {
  const declared = new Set([
    ...Object.keys(manifest.dependencies ?? {}),
    ...Object.keys(manifest.peerDependencies ?? {}),
    ...Object.keys(manifest.optionalDependencies ?? {}),
  ]);
  return [...new Set(specifiers.map(packageOf))].filter((m) => !builtins.has(m) && !declared.has(m)).sort();
}

/** `npm pack` of a built package into `destination`: the tarball's path. */
export function packPackage(built: BuiltPackage, destination: string): string {
  mkdirSync(destination, { recursive: true });
  const packed = spawnSync('npm', ['pack', '--json', '--pack-destination', destination], {
    cwd: built.dir,
    encoding: 'utf8',
  });
  if (packed.status !== 0) throw new Error(`npm pack ${built.name} failed:\n${packed.stderr}`);
  const [info] = JSON.parse(packed.stdout) as { filename: string }[];
  return join(destination, (info as { filename: string }).filename);
}

export function buildPackages(root: string, outDir: string): BuiltPackage[] {
  return packageSpecs.map((spec) => buildPackage(root, outDir, spec));
}

if (require.main === module) {
  const root = resolve(__dirname, '..');
  const args = process.argv.slice(2);
  const outDir = resolve(root, args.find((a) => !a.startsWith('--')) ?? defaultPackagesDir);
  for (const built of buildPackages(root, outDir)) {
    if (args.includes('--pack')) built.tarball = packPackage(built, outDir);
    process.stdout.write(
      `${built.name}@${built.version}: ${relative(root, built.dir)} — ${built.files.length} files, ` +
        `${(built.bytes / 1024).toFixed(0)} kB; requires ${built.requires.join(', ') || 'nothing'}` +
        (built.tarball ? `; ${relative(root, built.tarball)}` : '') +
        '\n',
    );
  }
}
