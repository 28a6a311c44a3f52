/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
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
  // the protocol search first, on a fresh heap (see the file)
  testSequencer: '<rootDir>/test/support/sequencer.js',
};
