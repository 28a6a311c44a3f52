#!/usr/bin/env node
'use strict';
/* global __dirname */
// `npx routelock …` (npm runs the root package's own "bin"): the operator command line, cli/main.ts.
// From a checkout it runs the TypeScript source through scripts/ts-register.js (so never a stale build);
// without the dev dependencies (`npm ci --omit=dev`) it runs the build, dist/cli/main.js (`npm run build`).
const { existsSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');

function loadCli() {
  const source = join(root, 'cli', 'main.ts');
  let canTranspile = false;
  try {
    require.resolve('@swc/core', { paths: [root] });
    canTranspile = existsSync(source);
  } catch {
    // No dev dependencies: the build it is.
  }
  if (canTranspile) {
    require(join(root, 'scripts', 'ts-register.js'));
    return require(source);
  }
  const built = join(root, 'dist', 'cli', 'main.js');
  if (existsSync(built)) return require(built);
  process.stderr.write(
    'routelock: neither the sources with dev dependencies nor a build: run `npm ci`, or `npm run build` for dist/cli\n',
  );
  process.exit(2);
}

loadCli()
  .run(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr })
  .then((code) => {
    process.exitCode = code;
  });
