import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.routelock/**', 'bench/results/**', '.deploy/**'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
    },
  },
  {
    // The routing library decides everything and must stay free of the Functions runtime.
    files: ['shared/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            {
              name: '@azure/functions',
              message: 'shared/ must not import the Functions runtime (docs/design.md §1).',
            },
            {
              name: 'durable-functions',
              message: 'shared/ must not import durable-functions (docs/design.md §1).',
            },
          ],
          patterns: [{ group: ['**/testkit/**'], message: 'The test kit is not part of the product.' }],
        },
      ],
    },
  },
  {
    files: ['functions/**/*.ts', 'local/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/testkit/**'], message: 'The test kit is not part of the product.' }] },
      ],
    },
  },
  {
    // The lock rules and the migration workflow are pure: time comes in as an argument (or a step the
    // runner answers), randomness and I/O from the caller. Durable replay depends on it.
    files: [
      'shared/core/lock/**/*.ts',
      'shared/migration/workflow.ts',
      'shared/migration/workflow/**/*.ts',
      'shared/migration/types.ts',
    ],
    rules: {
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'Lock rules take `now` as an argument.' },
        { object: 'Math', property: 'random', message: 'Lock rules are deterministic.' },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "NewExpression[callee.name='Date'][arguments.length=0]",
          message: 'Lock rules take `now` as an argument.',
        },
        {
          selector: "CallExpression[callee.name='setTimeout']",
          message: 'Use a timer step; the runner owns time.',
        },
        {
          selector: "MemberExpression[object.name='crypto']",
          message: 'Ids and randomness come from the runner.',
        },
        { selector: 'AwaitExpression', message: 'The workflow yields steps; it never awaits I/O.' },
      ],
    },
  },
  {
    files: ['shared/migration/workflow.ts', 'shared/migration/types.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['node:*', 'fs', 'http', 'https', 'crypto'], message: 'The workflow does no I/O.' },
            {
              group: ['@azure/*', 'durable-functions'],
              message: 'The workflow is runner-neutral (docs/design.md §1).',
            },
            {
              group: [
                '../core/store/**',
                '../core/router',
                './store/**',
                './activities',
                './inProcess',
                './records',
              ],
              message: 'The workflow only yields steps.',
            },
          ],
        },
      ],
    },
  },
  {
    // The command line is a client of the HTTP API: the contract's types and constants, never a store,
    // a service or the Functions code (README "Operating campaigns from the command line").
    files: ['cli/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^\\.\\./shared/(?!(campaign/types|migration/types|core/lock/document)$)',
              message: 'cli/ talks to the HTTP API only: import the contract types, not stores or services.',
            },
            { regex: '^\\.\\./(functions|local|testkit)/', message: 'cli/ is a client of the HTTP API.' },
          ],
        },
      ],
    },
  },
  {
    // A host started with a store but no data path keeps its token keys in the checkout's .routelock/;
    // the tests' wrapper gives it a directory of its own (docs/contributing.md, "Tests are hermetic").
    files: ['test/**/*.ts'],
    ignores: ['test/support/localHost.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/local/host'],
              importNames: ['startLocalHost'],
              message:
                'Start hosts through test/support/localHost.ts, which keeps their data out of the checkout.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    languageOptions: {
      globals: { module: 'writable', require: 'readonly', process: 'readonly', console: 'readonly' },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
