import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { type LockEntry, productionLocations } from '../scripts/package';

/**
 * A package tarball installed the way a service installs it, without a network: into a scratch project
 * outside the checkout (so Node cannot fall back to the checkout's node_modules), by `npm install
 * --offline` with an empty npm cache of its own. What the tarball needs is copied (hard-linked when it can)
 * from the checkout's own install first, at the lockfile's versions and places; npm keeps an installed
 * package that satisfies the range and fetches nothing, so anything else it would need fails the install.
 * The package tests and the install-size benchmark share it.
 */

export interface Lock {
  packages: Record<string, LockEntry>;
}

export function readLock(root: string): Lock {
  return JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as Lock;
}

/**
 * Files of an installed package as its own tarball holds them (its nested node_modules apart). A native
 * module built here from source also leaves its compiler's objects under build/: only the binaries
 * (build/Release/*.node) are what a prebuilt install leaves there.
 */
function packageFiles(root: string, location: string): string[] {
  const native = existsSync(join(root, location, 'binding.gyp'));
  const compiled = (path: string): boolean =>
    native && path.startsWith('build/') && !/^build\/Release\/[^/]+\.node$/.test(path);
  const files: string[] = [];
  const walk = (rel: string): void => {
    for (const entry of readdirSync(join(root, rel), { withFileTypes: true })) {
      const path = `${rel}/${entry.name}`;
      if (entry.isDirectory()) {
        if (path !== `${location}/node_modules`) walk(path);
      } else if (!compiled(relative(location, path))) files.push(path);
    }
  };
  walk(location);
  return files;
}

/**
 * Copy `names` and everything they need (the lockfile's closure) from `root`'s node_modules into `project`,
 * with their `.bin` links as npm makes them (npm re-fetches an installed package whose bin link is missing).
 */
export function prelink(root: string, lock: Lock, project: string, names: readonly string[]): void {
  const locations = productionLocations(
    { packages: { ...lock.packages, '': { dependencies: Object.fromEntries(names.map((n) => [n, '*'])) } } },
    {},
  );
  for (const location of locations) {
    for (const file of packageFiles(root, location)) {
      const target = join(project, file);
      mkdirSync(dirname(target), { recursive: true });
      const source = realpathSync(join(root, file));
      try {
        linkSync(source, target);
      } catch {
        copyFileSync(source, target);
      }
    }
    linkBins(project, location);
  }
}

function linkBins(project: string, location: string): void {
  const manifest = JSON.parse(readFileSync(join(project, location, 'package.json'), 'utf8')) as {
    name: string;
    bin?: string | Record<string, string>;
  };
  const bins =
    typeof manifest.bin === 'string'
      ? { [manifest.name.replace(/^@[^/]+\//, '')]: manifest.bin }
      : (manifest.bin ?? {});
  const binDir = join(project, dirname(location), '.bin');
  for (const [name, file] of Object.entries(bins)) {
    mkdirSync(binDir, { recursive: true });
    rmSync(join(binDir, name), { force: true });
    symlinkSync(relative(binDir, join(project, location, file)), join(binDir, name));
  }
}

/** `npm <args>` in `project`, offline-able: an npm cache of its own (`cache`), no update check. */
export function npmIn(project: string, args: string[], cache: string): string {
  const run = spawnSync('npm', args, {
    cwd: project,
    encoding: 'utf8',
    env: { ...process.env, npm_config_cache: cache, npm_config_update_notifier: 'false' },
  });
  if (run.status !== 0)
    throw new Error(`npm ${args.join(' ')} failed in ${project}:\n${run.stdout}${run.stderr}`);
  return run.stdout;
}

export interface ScratchInstall {
  /** The folder holding the tarballs (`cache` and the projects go under it). */
  temp: string;
  /** The project's folder name under `temp`. */
  name: string;
  tarballs: readonly string[];
  /** Packages to copy in first: the tarballs' dependencies (and what the project itself asks for). */
  deps: readonly string[];
  /** The project's own dependencies, at these ranges (an optional peer it chose to install). */
  dependencies?: Record<string, string>;
  /** More `npm install` flags (`--omit=optional`). */
  npmArgs?: readonly string[];
}

/** A scratch project with `deps` copied in and `tarballs` installed offline, from an empty cache. */
export function scratchProject(root: string, lock: Lock, install: ScratchInstall): string {
  const project = join(install.temp, install.name);
  mkdirSync(project);
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({
      name: install.name,
      version: '1.0.0',
      private: true,
      dependencies: install.dependencies,
    }),
  );
  prelink(root, lock, project, install.deps);
  npmIn(
    project,
    [
      'install',
      '--offline',
      '--no-audit',
      '--no-fund',
      '--ignore-scripts',
      ...(install.npmArgs ?? []),
      ...install.tarballs,
    ],
    join(install.temp, 'npm-cache'),
  );
  return project;
}

/** Package names installed anywhere under `project`'s node_modules. */
export function installed(project: string): string[] {
  const names: string[] = [];
  const walk = (dir: string): void => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir)) {
      if (entry.startsWith('.')) continue;
      const path = join(dir, entry);
      if (entry.startsWith('@')) {
        for (const scoped of readdirSync(path)) {
          names.push(`${entry}/${scoped}`);
          walk(join(path, scoped, 'node_modules'));
        }
      } else {
        names.push(entry);
        walk(join(path, 'node_modules'));
      }
    }
  };
  walk(join(project, 'node_modules'));
  return [...new Set(names)].sort();
}

/** The files under `dir` (links not followed): their bytes, and the disk blocks they take (`du`). */
export function diskUsage(dir: string): { files: number; bytes: number; diskBytes: number } {
  const usage = { files: 0, bytes: 0, diskBytes: 0 };
  const walk = (path: string): void => {
    const stat = lstatSync(path);
    if (stat.isDirectory()) {
      for (const entry of readdirSync(path)) walk(join(path, entry));
      return;
    }
    usage.files++;
    usage.bytes += stat.size;
    usage.diskBytes += stat.blocks * 512;
  };
  if (existsSync(dir)) walk(dir);
  return usage;
}
