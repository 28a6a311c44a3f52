'use strict';
// `npm start`: build only when a source is newer than the last build, then run the embedded host.
// tsc itself (incremental, its state in dist/.tsbuildinfo) decides what to emit; this check only spares
// its start-up, several seconds, when nothing changed. A fresh clone has no build info, so it builds.
const { execFileSync } = require('node:child_process');
const { readdirSync, statSync } = require('node:fs');
const { join } = require('node:path');

const root = join(require.resolve('../package.json'), '..');
const buildInfo = join(root, 'dist/.tsbuildinfo');

function newest(path) {
  const stat = statSync(path);
  if (!stat.isDirectory()) return path.endsWith('.ts') || path.endsWith('.json') ? stat.mtimeMs : 0;
  let latest = stat.mtimeMs; // a deleted or renamed source changes its folder
  for (const entry of readdirSync(path)) latest = Math.max(latest, newest(join(path, entry)));
  return latest;
}

function stale() {
  let built;
  try {
    built = statSync(buildInfo).mtimeMs;
  } catch {
    return true;
  }
  const inputs = [
    'shared',
    'functions',
    'local',
    'cli',
    'tsconfig.json',
    'tsconfig.build.json',
    'package-lock.json',
  ];
  return inputs.some((input) => newest(join(root, input)) > built);
}

if (stale()) {
  process.stdout.write('routelock: building (tsc)…\n');
  execFileSync(
    process.execPath,
    [require.resolve('typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json')],
    {
      stdio: 'inherit',
    },
  );
}
require(join(root, 'dist/local/main.js'));
