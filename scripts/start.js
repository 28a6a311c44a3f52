'use strict';
// `npm start`: build only when a source is newer than the last build (scripts/build-state.js), then run
// the embedded host.
const { join } = require('node:path');
const { buildIfStale } = require('./build-state');

const root = join(require.resolve('../package.json'), '..');
buildIfStale(root, (line) => process.stdout.write(`routelock: ${line}\n`));
require(join(root, 'dist/local/main.js'));
