import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const runtimeFree = [
  { name: '@azure/functions', message: 'shared/ must not import the Functions runtime (docs/design.md §1).' },
  { name: 'durable-functions', message: 'shared/ must not import durable-functions (docs/design.md §1).' },
];
const notTestkit = { group: ['**/testkit/**'], message: 'The test kit is not part of the product.' };

// The layers of shared/ (docs/design.md §1), matched on relative specifiers: any number of `../`, then
// a layer above. The composition modules sit at the top of shared/, the hosts beside it.
const above = {
  migration: {
    regex: '^(\\.\\./)+migration(/|$)',
    message: 'shared/core/ must not import the migration layer.',
  },
  campaign: {
    regex: '^(\\.\\./)+campaign(/|$)',
    message: 'The campaign layer sits above core and migration.',
  },
  composition: {
    regex: '^(\\.\\./)+(config|index|library|librarySqlite|stores)$',
    message:
      'The composition (config, stores, the library entries) sits above every layer: take settings as arguments.',
  },
  participant: {
    regex: '^(\\.\\./)+participant(/|$)',
    message:
      'shared/participant/ (the participant SDK) sits beside the orchestrator, on core: nothing in core, migration or campaign imports it.',
  },
  hosts: {
    regex: '^(\\.\\./)+(functions|local|cli)(/|$)',
    message: 'shared/ is composed by the hosts, never the other way round.',
  },
};
const layerRules = {
  core: [above.migration, above.campaign, above.participant, above.composition, above.hosts],
  migration: [above.campaign, above.participant, above.composition, above.hosts],
  campaign: [above.participant, above.composition, above.hosts],
  // The participant SDK runs in a participant's process: the wire and the route types from core, nothing
  // of the orchestrator (migration, campaign) or the composition.
  participant: [above.migration, above.campaign, above.composition, above.hosts],
};

// A function in shared/ stays short enough to read whole (docs/contributing.md, "Functions stay short"). An
// exception names the rule on the line before the function, with its reason after ` -- `; any other
// directive that names the rule (a block or file disable, an inline option) is refused, so the limit
// cannot be loosened out of sight.
const LENGTH_RULE = 'max-lines-per-function';
const directive = /^eslint(-[a-z-]+)?\s/;
const exception = new RegExp(`^eslint-disable-next-line ${LENGTH_RULE} -- \\S`);
const lengthExceptions = {
  meta: {
    type: 'problem',
    schema: [],
    messages: {
      form: `Exempt a function from ${LENGTH_RULE} only with "// eslint-disable-next-line ${LENGTH_RULE} -- <reason>" on the line before it.`,
    },
  },
  create: (context) => ({
    Program() {
      for (const comment of context.sourceCode.getAllComments()) {
        const text = comment.value.trim();
        if (!directive.test(text) || !text.includes(LENGTH_RULE) || exception.test(text)) continue;
        context.report({ loc: comment.loc, messageId: 'form' });
      }
    },
  }),
};

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      'hosts/webjobs/bin/**',
      'hosts/webjobs/obj/**',
      'coverage/**',
      '.routelock/**',
      'bench/results/**',
      '.deploy/**',
    ],
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
    rules: { 'no-restricted-imports': ['error', { paths: runtimeFree, patterns: [notTestkit] }] },
  },
  {
    // Counted as the rule counts by default, every line from the signature to the closing brace, comments
    // and blank lines included: the figure an editor's line numbers show, so "about 80 lines" needs no
    // arithmetic; a comment that explains is part of what a reader reads. IIFEs are counted too, so a
    // long module-level one is not a way round.
    files: ['shared/**/*.ts'],
    plugins: { routelock: { rules: { 'length-exceptions': lengthExceptions } } },
    rules: {
      [LENGTH_RULE]: ['error', { max: 80, skipBlankLines: false, skipComments: false, IIFEs: true }],
      'routelock/length-exceptions': 'error',
    },
  },
  {
    // The layers import one way (docs/design.md §1): core <- migration <- campaign <- composition <- hosts.
    // Each block repeats the runtime and test-kit rules: a later block's options replace an earlier one's.
    files: ['shared/core/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { paths: runtimeFree, patterns: [notTestkit, ...layerRules.core] }],
    },
  },
  {
    files: ['shared/migration/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: runtimeFree, patterns: [notTestkit, ...layerRules.migration] },
      ],
    },
  },
  {
    files: ['shared/campaign/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: runtimeFree, patterns: [notTestkit, ...layerRules.campaign] },
      ],
    },
  },
  {
    files: ['shared/participant/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: runtimeFree, patterns: [notTestkit, ...layerRules.participant] },
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
            notTestkit,
            ...layerRules.migration,
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
