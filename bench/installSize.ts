import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type BuiltPackage, buildPackage, packPackage, packageSpecs } from '../scripts/build-packages';
import { diskUsage, installed, readLock, scratchProject } from '../testkit/scratchInstall';
import { table } from './lib';

/**
 * What a service takes on by installing each package (every entry of `packageSpecs`): the package is built
 * and packed (`npm run packages -- --pack`), and its tarball installed into an empty project outside the
 * checkout by `npm install --offline` from an empty npm cache (testkit/scratchInstall.ts: what it needs is
 * copied from the checkout's own install at the lockfile's versions, so the install needs no network and
 * fails if it would fetch anything). Reported: the packages in node_modules (itself included), their files,
 * bytes (the files' sizes) and bytes on disk (their blocks, as `du` counts), and the tarball's size. A
 * package with an optional peer (the library's better-sqlite3) gets a second row with the peer installed.
 */

interface Manifest {
  name: string;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

export interface InstallRow {
  package: string;
  /** `default`, or `with <peer>` for an optional peer installed beside it. */
  install: string;
  /** Packages in node_modules, the package itself included. */
  packages: number;
  names: string[];
  files: number;
  bytes: number;
  diskBytes: number;
  tarballBytes: number;
}

const isOurs = (name: string): boolean => name.startsWith('@routelock/');

/** The packages a service gets by installing `manifest`: dependencies and the peers npm installs itself. */
function required(manifest: Manifest): string[] {
  const peers = Object.keys(manifest.peerDependencies ?? {}).filter(
    (p) => manifest.peerDependenciesMeta?.[p]?.optional !== true,
  );
  return [...Object.keys(manifest.dependencies ?? {}), ...peers];
}

function manifestOf(built: BuiltPackage): Manifest {
  return JSON.parse(readFileSync(join(built.dir, 'package.json'), 'utf8')) as Manifest;
}

/** `name` and the routelock packages it needs, transitively (their tarballs are installed together). */
function oursNeeded(name: string, byName: Map<string, BuiltPackage>): BuiltPackage[] {
  const found = new Map<string, BuiltPackage>();
  const visit = (n: string): void => {
    const built = byName.get(n);
    if (!built) throw new Error(`${n} is not one of the packages built (packageSpecs)`);
    if (found.has(n)) return;
    found.set(n, built);
    for (const dep of required(manifestOf(built)).filter(isOurs)) visit(dep);
  };
  visit(name);
  return [...found.values()];
}

function measure(
  root: string,
  temp: string,
  built: BuiltPackage,
  byName: Map<string, BuiltPackage>,
  peer?: string,
): InstallRow {
  const lock = readLock(root);
  const ours = oursNeeded(built.name, byName);
  const deps = [...new Set(ours.flatMap((b) => required(manifestOf(b))).filter((n) => !isOurs(n)))];
  const peerVersion =
    peer && (lock.packages[`node_modules/${peer}`] as { version?: string } | undefined)?.version;
  if (peer && !peerVersion) throw new Error(`${peer} is not in the checkout's lockfile`);
  const project = scratchProject(root, lock, {
    temp,
    name: `${built.name.replace(/\W+/g, '-')}${peer ? `-with-${peer}` : ''}`,
    tarballs: ours.map((b) => b.tarball as string),
    deps: peer ? [...deps, peer] : deps,
    dependencies: peer ? { [peer]: peerVersion as string } : undefined,
  });
  const names = installed(project);
  return {
    package: built.name,
    install: peer ? `with ${peer}` : 'default',
    packages: names.length,
    names,
    ...diskUsage(join(project, 'node_modules')),
    tarballBytes: statSync(built.tarball as string).size,
  };
}

const mib = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

export function installSizeTable(rows: readonly InstallRow[]): string {
  return table(
    ['package', 'install', 'packages', 'files', 'node_modules', 'on disk', 'tarball'],
    rows.map((r) => [
      r.package,
      r.install,
      r.packages,
      r.files,
      mib(r.bytes),
      mib(r.diskBytes),
      `${(r.tarballBytes / 1024).toFixed(0)} kB`,
    ]),
  );
}

/** Every package of `packageSpecs` (or those in `folders`), measured as the comment at the top says. */
export async function runInstallSize(
  options: { folders?: readonly string[] } = {},
): Promise<{ table: string; data: { rows: InstallRow[]; offline: true } }> {
  const root = resolve(__dirname, '..');
  const temp = mkdtempSync(join(tmpdir(), 'routelock-install-size-'));
  try {
    const specs = packageSpecs.filter((s) => !options.folders || options.folders.includes(s.folder));
    const builtAll = specs.map((spec) => buildPackage(root, join(temp, 'built'), spec));
    for (const built of builtAll) built.tarball = packPackage(built, join(temp, 'tarballs'));
    const byName = new Map(builtAll.map((b) => [b.name, b]));
    const rows: InstallRow[] = [];
    for (const built of builtAll) {
      rows.push(measure(root, temp, built, byName));
      const manifest = manifestOf(built);
      const optional = Object.keys(manifest.peerDependencies ?? {}).filter(
        (p) => manifest.peerDependenciesMeta?.[p]?.optional === true,
      );
      for (const peer of optional) rows.push(measure(root, temp, built, byName, peer));
    }
    return { table: installSizeTable(rows), data: { rows, offline: true } };
  } finally {
    rmSync(temp, { recursive: true, force: true });
  }
}

if (require.main === module) {
  runInstallSize().then(
    (result) => process.stdout.write(`${result.table}\n`),
    (error: unknown) => {
      process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
      process.exit(1);
    },
  );
}
