/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  // the real-engine scenarios are their own step, after this one: `npm run test:functions`
  testPathIgnorePatterns: ['/node_modules/', '/test/functionsHost/'],
  transform: {
    '^.+\\.ts$': [
      '@swc/jest',
      { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' } },
    ],
  },
  testTimeout: 30000,
  // Hermetic: each test file in its own temporary directory, the checkout's .routelock/ out of reach.
  globalSetup: '<rootDir>/test/support/globalSetup.ts',
  globalTeardown: '<rootDir>/test/support/globalTeardown.ts',
  setupFiles: ['<rootDir>/test/support/hermetic.ts'],
  // Two workers on the 2-core machines CI runs on: every suite is hermetic (own directory, free ports),
  // so two run side by side, and the slow ones (spawned hosts, Azurite, the browser) mostly wait.
  maxWorkers: 2,
  // the long suites first (see the file)
  testSequencer: '<rootDir>/test/support/sequencer.js',
};
