const base = require('./jest.config');

/**
 * The real-engine scenarios (test/functionsHost): the app on the real Durable Task, Storage Queues and timer
 * extensions through `npm run start:functions`. Their own step of `npm test`, after jest, with their own
 * budget (15 minutes on a quiet 2-core machine): `npm run test:functions` builds the .NET host once, then
 * runs these. Each suite starts hosts of its own on free ports; two suites run side by side, as most of
 * their time is spent waiting on durable timers and participants.
 * @type {import('jest').Config}
 */
module.exports = {
  ...base,
  roots: ['<rootDir>/test/functionsHost'],
  testPathIgnorePatterns: ['/node_modules/'],
  testTimeout: 120_000,
};
