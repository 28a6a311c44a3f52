import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { scratchDir } from '../support/scratch';

/**
 * The app builds a deploy scenario moves between (test/functionsHost/deploy.test.ts), each an app root
 * the worker stand-in loads (`ROUTELOCK_APP_ROOT`, read only by hosts/webjobs/worker.js) under the
 * current launcher and WebJobs host: in Azure a deploy replaces the app's files, while the Functions host
 * and the extension bundle are the platform's and stay.
 */

const root = join(__dirname, '../..');

/** What the worker loads: a change here is a change of the deployed app. */
const APP_SOURCES = ['shared', 'functions'];

/** What `npm run build` (tsconfig.build.json) compiles, and the files it reads besides. */
const BUILD_INPUTS = [
  'shared',
  'functions',
  'local',
  'cli',
  'host.json',
  'package.json',
  'tsconfig.json',
  'tsconfig.build.json',
];

const git = (...args: string[]) =>
  execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

/**
 * The commit before the change: the first parent of the newest commit that changed the app's sources
 * (shared/, functions/), so the previous build differs from the current one in the code the worker
 * runs, whatever HEAD's own commit touched. It needs the checkout's history back to that commit; a clone
 * without it fails here, naming the fix, rather than testing a build against itself.
 */
export function commitBeforeTheChange(): { commit: string; change: string } {
  let change = '';
  try {
    change = git('log', '-1', '--format=%H', 'HEAD', '--', ...APP_SOURCES);
    return { commit: git('rev-parse', '--verify', '--quiet', `${change}^1`), change };
  } catch (error) {
    const detail = error instanceof Error ? error.message.split('\n')[0] : String(error);
    throw new Error(
      `deploy.test.ts builds the app at the commit before the newest change to ${APP_SOURCES.join('/, ')}/ ` +
        `(${change === '' ? 'not found' : `the parent of ${change.slice(0, 12)}`}), which needs the checkout's git ` +
        `history: clone without --depth, or run \`git fetch --unshallow\`. (${detail})`,
    );
  }
}

/**
 * `npm run build` of a commit, in a scratch directory: its sources from `git archive`, the checkout's
 * node_modules, the checkout's TypeScript. Returns the app root.
 */
export function buildCommit(commit: string): string {
  const dir = scratchDir('build-');
  const present = new Set(git('ls-tree', '--name-only', commit).split('\n'));
  const archive = join(dir, 'sources.tar');
  git('archive', '--format=tar', '-o', archive, commit, ...BUILD_INPUTS.filter((p) => present.has(p)));
  execFileSync('tar', ['-xf', archive, '-C', dir]);
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  execFileSync(
    process.execPath,
    [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
    {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  if (!existsSync(join(dir, 'dist/functions')))
    throw new Error(`the build of ${commit} has no dist/functions`);
  return dir;
}

/**
 * A build's host.json for these scenarios: its own, with the Azure Storage provider's visibility
 * timeouts cut (the extension accepts no less than 1 min for the control queues; 5 min each by default).
 * A host stops its task hub worker forced (the extension's `useGracefulShutdown` defaults to false, and
 * the project's host.json leaves it so): an episode running at the stop is dropped uncommitted and its
 * message is taken again only once that timeout passes, as it would be after a deploy in Azure.
 * `defaultVersion`, when given, replaces the build's.
 */
export function deployHostJson(source: string, defaultVersion?: string): string {
  const hostJson = JSON.parse(readFileSync(source, 'utf8')) as {
    extensions: { durableTask: Record<string, unknown> };
  };
  const durableTask = hostJson.extensions.durableTask;
  durableTask.storageProvider = {
    ...(durableTask.storageProvider as object | undefined),
    controlQueueVisibilityTimeout: '00:01:00',
    workItemQueueVisibilityTimeout: '00:00:10',
  };
  if (defaultVersion !== undefined) durableTask.defaultVersion = defaultVersion;
  const path = join(scratchDir('hostjson-'), 'host.json');
  writeFileSync(path, JSON.stringify(hostJson, null, 2));
  return path;
}

/**
 * The current build carrying workflow version `next`: an app root whose entry sets `WORKFLOW_VERSION`
 * before the app's functions load, and a host.json whose `defaultVersion` names it, as the change that
 * introduces the version would. It exists only here, in a scratch directory: nothing in the checkout,
 * in package.json or in any setting the app reads can select it.
 */
export function nextVersionBuild(next: number): { appRoot: string; hostJson: string } {
  const dir = scratchDir('next-version-');
  const dist = join(root, 'dist');
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: 'routelock-next-version', main: 'app.js' }),
  );
  writeFileSync(
    join(dir, 'app.js'),
    [
      "'use strict';",
      "const { readdirSync } = require('node:fs');",
      "const { join } = require('node:path');",
      `const dist = ${JSON.stringify(dist)};`,
      `require(join(dist, 'shared/migration/types.js')).WORKFLOW_VERSION = ${next};`,
      "for (const file of readdirSync(join(dist, 'functions')).filter((f) => f.endsWith('.js')).sort())",
      "  require(join(dist, 'functions', file));",
      '',
    ].join('\n'),
  );
  return { appRoot: dir, hostJson: deployHostJson(join(root, 'host.json'), `${next}.0`) };
}
