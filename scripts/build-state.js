'use strict';
// Build only when a source is newer than the last build. tsc itself (incremental, its state in
// dist/.tsbuildinfo) decides what to emit; this check only spares its start-up, several seconds, when
// nothing changed. A fresh clone has no build info, so it builds. Used by `npm start` and
// `npm run start:functions`.
const { execFileSync } = require('node:child_process');
const { readdirSync, statSync } = require('node:fs');
const { join } = require('node:path');

function newest(path) {
  const stat = statSync(path);
  if (!stat.isDirectory()) return path.endsWith('.ts') || path.endsWith('.json') ? stat.mtimeMs : 0;
  let latest = stat.mtimeMs; // a deleted or renamed source changes its folder
  for (const entry of readdirSync(path)) latest = Math.max(latest, newest(join(path, entry)));
  return latest;
}

function stale(root) {
  let built;
  try {
    built = statSync(join(root, 'dist/.tsbuildinfo')).mtimeMs;
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

function buildIfStale(root, say) {
  if (!stale(root)) return;
  say('building (tsc)…');
  execFileSync(
    process.execPath,
    [require.resolve('typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json')],
    { stdio: 'inherit' },
  );
}

module.exports = { buildIfStale };
