import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { functionEndpoints } from '../functions/endpoints';
import type { EndpointDeclaration } from '../functions/http/endpoint';
import { appRoles } from '../functions/http/auth';
import { MAX_BODY_BYTES } from '../functions/http/validation';
import { configVariables, parseConfig } from '../shared/config';
import { type Profile, type ProfileVariable, profiles } from '../shared/core/profiles';
import { WORKFLOW_VERSION } from '../shared/migration/types';
import {
  type ArmResource,
  type ArmTemplate,
  type Expr,
  callArgs,
  deploymentNamed,
  evaluate,
  evaluateNode,
  exprText,
  functionsCalled,
  instanceCount,
  isExpression,
  jsonKeys,
  jsonStrings,
  loadArmTemplate,
  moduleNamed,
  moduleOutput,
  modulesOf,
  nameSegments,
  parametersRead,
  parseExpression,
  resourceIdOf,
  resourceIn,
  resourcesOfType,
  roleAssignments,
  stringLiterals,
} from './support/arm';

/**
 * Keeps the deployment files honest. The Bicep is read as the compiler emits it: infra/arm/main.json,
 * compiled by `npm run infra:build` (npm test's pretest), its modules nested deployments. Every setting
 * the code reads is in local.settings.sample.json and in the app settings, and no stale one is; every
 * trigger's connection has its settings; package.json `main` matches the compiled functions; no key
 * material; Cosmos DB is bounded staleness with a single write region; who may call (App Service
 * authentication, the app roles); the token key set in Key Vault; the hardening; the workflows' pinning
 * and token permissions.
 */

const root = join(__dirname, '..');
const read = (path: string) => readFileSync(join(root, path), 'utf8');
let compiled: ArmTemplate | undefined;
/** The compiled entry point (read on first use, so the tests of the other files run without it). */
const arm = (): ArmTemplate => (compiled ??= loadArmTemplate(root));
const missingValue = (what: string): never => {
  throw new Error(what);
};
const localSettingValues = (
  JSON.parse(read('local.settings.sample.json')) as { Values: Record<string, string> }
).Values;
const localSettings = Object.keys(localSettingValues);

/** The properties of a resource that has them as an object. */
const props = (resource: ArmResource): Record<string, unknown> => {
  if (typeof resource.properties !== 'object') throw new Error(`${resource.type} has no properties object`);
  return resource.properties;
};
/** The default of each of main's parameters. */
const mainDefaults = (template: ArmTemplate = arm()): Record<string, unknown> =>
  Object.fromEntries(Object.entries(template.parameters ?? {}).map(([k, p]) => [k, p.defaultValue]));

/**
 * The app settings as deployed: the object main passes the app module as `appSettings`, united with the
 * ones the module adds (`union(parameters('appSettings'), createObject(…))` on its appsettings config).
 * Values as ARM writes them: literals, or "[expression]" in the scope that sets them.
 */
function appSettingValues(template: ArmTemplate = arm()): Record<string, unknown> {
  const api = moduleNamed(template, 'api');
  const config = resourceIn(api.template, 'Microsoft.Web/sites/config', 'appsettings');
  // the Durable backend's settings between them: empty for Azure Storage (durableSettingsAsDeployed)
  const [passed, durable, added, ...rest] = callArgs(String(config.properties), 'union');
  if (
    passed === undefined ||
    exprText(passed) !== "parameters('appSettings')" ||
    durable === undefined ||
    exprText(durable) !== "parameters('durableSettings')" ||
    rest.length > 0
  ) {
    throw new Error(`unexpected appsettings: ${String(config.properties)}`);
  }
  const pairs = added === undefined ? [] : callArgs(added, 'createObject');
  const own: Record<string, unknown> = {};
  for (let i = 0; i < pairs.length; i += 2) {
    const [key, value] = [pairs[i], pairs[i + 1]];
    if (key?.kind !== 'string' || value === undefined) throw new Error('createObject with a computed key');
    own[key.value] = value.kind === 'string' ? value.value : `[${exprText(value)}]`;
  }
  const fromMain = api.parameters.appSettings;
  if (fromMain === null || typeof fromMain !== 'object') throw new Error('main passes no appSettings object');
  return { ...(fromMain as Record<string, unknown>), ...own };
}

/** The names of the app settings as deployed. */
const bicepAppSettings = (template: ArmTemplate = arm()): string[] => Object.keys(appSettingValues(template));

const parameters = (
  JSON.parse(read('infra/bicep/main.parameters.json')) as {
    parameters: Record<string, { value: unknown }>;
  }
).parameters;

// Set by the platform, or meaningful only to the embedded host / a local emulator.
const platform = new Set(['REGION_NAME']);
const localOnly = new Set([
  'COSMOS_KEY',
  'COSMOS_DISABLE_TLS_VERIFY',
  'ROUTELOCK_SQLITE_PATH',
  // the embedded host's key set on disk; Azure uses ROUTELOCK_TOKEN_KEYS from Key Vault
  'ROUTELOCK_TOKEN_KEY_FILE',
  // the embedded host's reconciliation interval; Azure runs it on ROUTELOCK_RECONCILE_SCHEDULE
  'ROUTELOCK_RECONCILE_INTERVAL_SECONDS',
]);
// Read in Azure too, but left at the default there (the JWKS is the tenant's, derived from its id).
// The participant call timing too (the same under every profile; docs/design.md §6.5).
const azureDefaults = new Set([
  'ROUTELOCK_ENTRA_JWKS_URI',
  'ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS',
  'ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS',
  'ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS',
  // verify stays optional for participants unless an operator sets it (default false)
  'ROUTELOCK_REQUIRE_VERIFY',
]);
// Read outside shared/config.ts: the telemetry sink, host.json (%ROUTELOCK_TASK_HUB%), the Functions host.
const readElsewhere = ['APPLICATIONINSIGHTS_CONNECTION_STRING', 'ROUTELOCK_TASK_HUB'];

test("the reconciliation settings Bicep deploys pass the Functions host's start-up check; a slower schedule needs a wider window", () => {
  const template = arm();
  const settings = appSettingValues(template);
  const defaults = Object.fromEntries(
    ['reconcileSchedule', 'reconcileWindowSeconds', 'reconcileGraceSeconds'].map((name) => [
      name,
      template.parameters?.[name]?.defaultValue,
    ]),
  );
  const envWith = (parameters: Record<string, unknown>) => ({
    ROUTELOCK_STORE: 'cosmos',
    COSMOS_ENDPOINT: 'https://127.0.0.1:8081',
    COSMOS_KEY: 'a2V5',
    FUNCTIONS_WORKER_RUNTIME: 'node',
    ...Object.fromEntries(
      [
        'ROUTELOCK_RECONCILE_SCHEDULE',
        'ROUTELOCK_RECONCILE_WINDOW_SECONDS',
        'ROUTELOCK_RECONCILE_GRACE_SECONDS',
      ].map((key) => [
        key,
        String(evaluate(settings[key], { template, parameters: { ...defaults, ...parameters } })),
      ]),
    ),
  });
  expect(() => parseConfig(envWith({}))).not.toThrow();
  // hourly runs with the default window are refused at start-up, naming the variable; the window param fixes it
  expect(() => parseConfig(envWith({ reconcileSchedule: '0 0 * * * *' }))).toThrow(
    /ROUTELOCK_RECONCILE_SCHEDULE/,
  );
  expect(() =>
    parseConfig(envWith({ reconcileSchedule: '0 0 * * * *', reconcileWindowSeconds: 5400 })),
  ).not.toThrow();
});

test('every setting the code reads is in local.settings.sample.json', () => {
  const missing = [...configVariables, ...readElsewhere].filter(
    (v) => !platform.has(v) && !localSettings.includes(v),
  );
  expect(missing).toEqual([]);
});

test('every setting the code reads in Azure is a Bicep app setting', () => {
  const appSettings = bicepAppSettings();
  const missing = [...configVariables, ...readElsewhere, 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING'].filter(
    (v) => !platform.has(v) && !localOnly.has(v) && !azureDefaults.has(v) && !appSettings.includes(v),
  );
  expect(missing).toEqual([]);
  // and Azure runs the production profile on Cosmos DB, never an emulator key or TLS bypass
  expect(appSettingValues().ROUTELOCK_PROFILE).toBe('production');
  expect(appSettingValues().ROUTELOCK_STORE).toBe('cosmos');
  for (const v of localOnly) expect(appSettings).not.toContain(v);
});

test('no stale settings: every ROUTELOCK_/COSMOS_ setting in the files is one the code reads', () => {
  const known = new Set([...configVariables, ...readElsewhere]);
  const isOurs = (k: string) => /^(ROUTELOCK|COSMOS)_[A-Z]/.test(k); // COSMOS__* is the trigger's connection
  expect(bicepAppSettings().filter((k) => isOurs(k) && !known.has(k))).toEqual([]);
  expect(localSettings.filter((k) => isOurs(k) && !known.has(k))).toEqual([]);
});

/**
 * Each profile variable whose deployed default differs from `profile`: `VAR: bicep <expression> = <main's
 * parameter default>, profile <value>`. A setting must be main's parameter, or `string()` of it.
 */
function bicepDisagreements(profile: Profile, template: ArmTemplate = arm()): string[] {
  const defaults = mainDefaults(template);
  const settings = appSettingValues(template);
  return Object.entries(profile).flatMap(([variable, expected]) => {
    const expression = settings[variable];
    const param =
      typeof expression === 'string'
        ? /^\[(?:string\(parameters\('(\w+)'\)\)|parameters\('(\w+)'\))\]$/.exec(expression)
        : null;
    const name = param?.[1] ?? param?.[2];
    const value = name === undefined ? undefined : defaults[name];
    return value !== undefined && String(value) === expected
      ? []
      : [`${variable}: bicep ${String(expression ?? '(unset)')} = ${String(value)}, profile ${expected}`];
  });
}

test('the Bicep app settings default to the production profile (shared/core/profiles.ts)', () => {
  expect(bicepDisagreements(profiles.production)).toEqual([]);
  // the replication bound the convergence delay uses is the store's own staleness bound
  expect(appSettingValues().ROUTELOCK_REPLICATION_BOUND_SECONDS).toBe(
    "[string(parameters('maxStalenessIntervalSeconds'))]",
  );
});

test('negative control: a Bicep default that differs from the profile is caught', () => {
  expect(bicepDisagreements({ ...profiles.production, ROUTELOCK_WRITE_LEASE_SECONDS: '301' })).toEqual([
    "ROUTELOCK_WRITE_LEASE_SECONDS: bicep [string(parameters('writeLeaseSeconds'))] = 300, profile 301",
  ]);
});

test("local.settings.sample.json passes the app's own configuration check, as `func start` would load it", () => {
  expect(() => parseConfig(localSettingValues)).not.toThrow();
  // the check it passes is the one that refuses a participant timeout past the renewal cadence
  expect(() => parseConfig({ ...localSettingValues, ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: '30' })).toThrow(
    /ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS/,
  );
});

/** Each profile variable local.settings.sample.json sets otherwise than `profile`. */
function sampleDisagreements(values: Record<string, string>, profile: Profile): string[] {
  return Object.entries(profile)
    .filter(([variable, expected]) => values[variable] !== expected)
    .map(
      ([variable, expected]) => `${variable}: sample ${values[variable] ?? '(unset)'}, profile ${expected}`,
    );
}

test('local.settings.sample.json selects the dev profile and sets its values (shared/core/profiles.ts)', () => {
  expect(localSettingValues.ROUTELOCK_PROFILE).toBe('dev');
  expect(sampleDisagreements(localSettingValues, profiles.dev)).toEqual([]);
  expect(sampleDisagreements({ ...localSettingValues, ROUTELOCK_DELTA_ATTEMPTS: '4' }, profiles.dev)).toEqual(
    ['ROUTELOCK_DELTA_ATTEMPTS: sample 4, profile 3'],
  );
});

/** The operators' guide's configuration table's rows: variable → [production, dev] as written (backticks dropped). */
function readmeProfileTable(): Record<string, [string, string]> {
  const readme = read('docs/operators.md');
  const rows = [
    ...readme.matchAll(/^\| `(ROUTELOCK_[A-Z_]+)`\s*\|[^|]*\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|$/gm),
  ];
  const plain = (cell: string) => cell.replace(/`/g, '');
  return Object.fromEntries(
    rows.map((m) => [m[1] as string, [plain(m[2] as string), plain(m[3] as string)]]),
  );
}

test("the operators' guide's configuration table is the profile table", () => {
  const expected = Object.fromEntries(
    Object.keys(profiles.production).map((v) => [
      v,
      [profiles.production[v as ProfileVariable], profiles.dev[v as ProfileVariable]],
    ]),
  );
  expect(readmeProfileTable()).toEqual(expected);
});

test("the Functions host refuses bodies over the app's 64 KiB cap: FUNCTIONS_REQUEST_BODY_SIZE_LIMIT in bytes", () => {
  // the host parses it as a byte count (HttpRequestBodySizeMiddleware in azure-functions-host)
  expect(appSettingValues().FUNCTIONS_REQUEST_BODY_SIZE_LIMIT).toBe(String(MAX_BODY_BYTES));
  expect(MAX_BODY_BYTES).toBe(64 * 1024);
});

test("every trigger's connection has its settings", () => {
  const functionFiles = readdirSync(join(root, 'functions')).filter((f) => f.endsWith('.ts'));
  const connections = new Set(
    functionFiles.flatMap((f) =>
      [...read(`functions/${f}`).matchAll(/connection: '([^']+)'/g)].map((m) => m[1] as string),
    ),
  );
  expect([...connections].sort()).toEqual(['AzureWebJobsStorage', 'COSMOS']);
  const settings = appSettingValues();
  // identity-based connections: the service URI (or endpoint), the credential and the client id
  expect(settings).toMatchObject({
    COSMOS__accountEndpoint: expect.any(String),
    COSMOS__credential: 'managedidentity',
    COSMOS__clientId: expect.any(String),
  });
  expect(moduleOutput(settings.COSMOS__accountEndpoint)).toEqual({ module: 'cosmos', output: 'endpoint' });
  expect(moduleOutput(settings.COSMOS__clientId)).toEqual({ module: 'identity', output: 'clientId' });
  expect(settings).toMatchObject({
    AzureWebJobsStorage__blobServiceUri: "[parameters('storageBlobEndpoint')]",
    AzureWebJobsStorage__queueServiceUri: "[parameters('storageQueueEndpoint')]",
    AzureWebJobsStorage__tableServiceUri: "[parameters('storageTableEndpoint')]",
    AzureWebJobsStorage__credential: 'managedidentity',
    AzureWebJobsStorage__clientId: "[parameters('identityClientId')]",
  });
  // which main feeds from the storage account's endpoints and the identity's client id
  const api = moduleNamed(arm(), 'api');
  for (const service of ['Blob', 'Queue', 'Table']) {
    expect(moduleOutput(api.parameters[`storage${service}Endpoint`])).toEqual({
      module: 'storage',
      output: `${service.toLowerCase()}Endpoint`,
    });
  }
  expect(moduleOutput(api.parameters.identityClientId)).toEqual({ module: 'identity', output: 'clientId' });
  expect(localSettings).toEqual(expect.arrayContaining(['AzureWebJobsStorage', 'COSMOS__accountEndpoint']));
  // the queues and the lease container the triggers use are created by the Bicep
  const storage = moduleNamed(arm(), 'storage').template;
  expect(
    storage.resources
      .filter((r) => r.type === 'Microsoft.Storage/storageAccounts/queueServices/queues')
      .map((r) => nameSegments(r, storage).at(-1)),
  ).toEqual(['migrations', 'migrations-poison', 'campaigns', 'campaigns-poison']);
  const cosmos = moduleNamed(arm(), 'cosmos').template;
  const containers = resourceIn(cosmos, 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers');
  expect(
    Array.from({ length: instanceCount(containers, cosmos) }, (_, i) =>
      nameSegments(containers, cosmos, i).at(-1),
    ),
  ).toEqual(['locations', 'leases', 'audit', 'migrations', 'campaigns']);
  expect(read('functions/lockTelemetry.ts')).toMatch(/createLeaseContainerIfNotExists: false/);
});

test('package.json main matches the compiled function files', () => {
  const pkg = JSON.parse(read('package.json')) as { main: string };
  expect(pkg.main).toBe('dist/functions/*.js');
  const tsconfig = JSON.parse(read('tsconfig.json')) as {
    compilerOptions: { rootDir: string; outDir: string };
  };
  expect(tsconfig.compilerOptions).toMatchObject({ rootDir: '.', outDir: 'dist' });
  const sources = readdirSync(join(root, 'functions')).filter((f) => f.endsWith('.ts'));
  expect(sources.length).toBeGreaterThan(5);
  if (existsSync(join(root, 'dist/functions'))) {
    // npm test builds before jest: every function file has its compiled twin where main points
    const compiled = readdirSync(join(root, 'dist/functions')).filter((f) => f.endsWith('.js'));
    expect(compiled.sort()).toEqual(
      expect.arrayContaining(sources.map((f) => f.replace(/\.ts$/, '.js')).sort()),
    );
  }
});

/** Every template of the tree: main and each module's. */
const templates = (): { module: string; template: ArmTemplate }[] => [
  { module: 'main', template: arm() },
  ...modulesOf(arm()).map((m) => ({ module: m.name, template: m.template })),
];

test('the Bicep holds no key material; the one secret is the token key set, from a secure parameter', () => {
  const strings = jsonStrings(arm());
  const expressions = strings.filter(isExpression).map(parseExpression);
  // no function that reads keys, connection strings or secrets (listKeys, listConnectionStrings, listSecrets…)
  expect([...new Set(expressions.flatMap(functionsCalled))].filter((f) => /^list/i.test(f))).toEqual([]);
  // no key-bearing property, connection-string fragment, or literal that looks like key material
  expect(jsonKeys(arm()).filter((k) => /^(key|clientSecret|primaryMasterKey)$/i.test(k))).toEqual([]);
  const literals = [...strings.filter((s) => !isExpression(s)), ...expressions.flatMap(stringLiterals)];
  for (const pattern of [/primaryMasterKey/i, /AccountKey=/i, /SharedAccessKey/i, /clientSecret/i])
    expect({ pattern: String(pattern), found: literals.filter((s) => pattern.test(s)) }).toEqual({
      pattern: String(pattern),
      found: [],
    });
  // (random key material mixes cases and digits; a setting name such as APPLICATIONINSIGHTS_… does not)
  const keyLike = (s: string) =>
    /^[A-Za-z0-9+/_-]{40,}={0,2}$/.test(s) && /[a-z]/.test(s) && /[A-Z]/.test(s) && /\d/.test(s);
  expect(literals.filter(keyLike)).toEqual([]);
  expect(keyLike('q2E6xTm0VbQeJ8l3yP0rW5nZ4cK9aS1dF7gH2jL6mN0=')).toBe(true); // the check sees a real-looking key
  const storage = moduleNamed(arm(), 'storage').template;
  expect(props(resourceIn(storage, 'Microsoft.Storage/storageAccounts')).allowSharedKeyAccess).toBe(false);
  const cosmos = moduleNamed(arm(), 'cosmos').template;
  expect(props(resourceIn(cosmos, 'Microsoft.DocumentDB/databaseAccounts')).disableLocalAuth).toBe(true);
  const monitoring = moduleNamed(arm(), 'monitoring').template;
  expect(props(resourceIn(monitoring, 'Microsoft.Insights/components')).DisableLocalAuth).toBe(true);

  // The only secret is the Key Vault secret for the token key set, written from a secure parameter that
  // defaults to empty, is passed only to the vault's module, and appears in no output.
  const secrets = resourcesOfType(arm(), 'Microsoft.KeyVault/vaults/secrets');
  expect(secrets.map((r) => r.module)).toEqual(['keyvault']);
  expect(props(secrets[0]?.resource as ArmResource).value).toBe(
    "[base64ToString(parameters('tokenKeysBase64'))]",
  );
  for (const { module, template } of templates()) {
    const secureParams = Object.entries(template.parameters ?? {})
      .filter(([, p]) => /^secure/i.test(p.type))
      .map(([name, p]) => `${name} ${p.type}${p.defaultValue === '' ? " = ''" : ''}`);
    expect({ module, secureParams }).toEqual({
      module,
      secureParams: module === 'main' || module === 'keyvault' ? ["tokenKeysBase64 securestring = ''"] : [],
    });
    const outputsReading = Object.entries(template.outputs ?? {})
      .filter(([, o]) =>
        jsonStrings(o.value).some(
          (s) => isExpression(s) && parametersRead(parseExpression(s)).includes('tokenKeysBase64'),
        ),
      )
      .map(([name]) => name);
    expect({ module, outputsReading }).toEqual({ module, outputsReading: [] });
  }
  const passing = modulesOf(arm()).filter((m) =>
    jsonStrings(m.parameters).some(
      (s) => isExpression(s) && parametersRead(parseExpression(s)).includes('tokenKeysBase64'),
    ),
  );
  expect(
    passing.map((m) => [m.name, Object.keys(m.parameters).filter((k) => k === 'tokenKeysBase64')]),
  ).toEqual([['keyvault', ['tokenKeysBase64']]]);
});

/** The Cosmos DB account as designed; throws (a failed expectation) when the template lacks any of it. */
function expectCosmosAsDesigned(template: ArmTemplate): void {
  const cosmos = moduleNamed(template, 'cosmos');
  const account = resourceIn(cosmos.template, 'Microsoft.DocumentDB/databaseAccounts');
  const properties = props(account);
  expect(properties.consistencyPolicy).toEqual({
    defaultConsistencyLevel: 'BoundedStaleness',
    maxIntervalInSeconds: "[parameters('maxStalenessIntervalSeconds')]",
    maxStalenessPrefix: "[parameters('maxStalenessPrefix')]",
  });
  expect(properties.enableMultipleWriteLocations).toBe(false);
  // one location per region, in order: the first is the account's location and the only write region
  expect(account.location).toBe("[parameters('locations')[0]]");
  expect(
    evaluate(
      { copy: properties.copy },
      { template: cosmos.template, parameters: { locations: ['a', 'b', 'c'] } },
    ),
  ).toEqual({
    locations: [
      { locationName: 'a', failoverPriority: 0, isZoneRedundant: false },
      { locationName: 'b', failoverPriority: 1, isZoneRedundant: false },
      { locationName: 'c', failoverPriority: 2, isZoneRedundant: false },
    ],
  });
  expect(cosmos.template.parameters?.locations).toMatchObject({
    type: 'array',
    minLength: 2,
    metadata: { description: 'Regions of the account; the first is the single write region.' },
  });
  expect(cosmos.template.parameters?.maxStalenessIntervalSeconds?.defaultValue).toBe(300);
  expect(cosmos.template.parameters?.maxStalenessPrefix?.defaultValue).toBe(100000);
  // main passes its own regions and staleness bounds (the same bound ROUTELOCK_REPLICATION_BOUND_SECONDS reads)
  expect(cosmos.parameters).toMatchObject({
    locations: "[parameters('cosmosLocations')]",
    maxStalenessIntervalSeconds: "[parameters('maxStalenessIntervalSeconds')]",
    maxStalenessPrefix: "[parameters('maxStalenessPrefix')]",
  });

  // the built-in Data Contributor, on this account, for the app's identity
  const grant = resourceIn(cosmos.template, 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments');
  const grantProps = props(grant);
  const [pattern, accountId, role, ...rest] = callArgs(String(grantProps.roleDefinitionId), 'format');
  expect(pattern).toEqual({ kind: 'string', value: '{0}/sqlRoleDefinitions/{1}' });
  expect(rest).toEqual([]);
  expect(accountId && exprText(accountId)).toBe(
    "resourceId('Microsoft.DocumentDB/databaseAccounts', parameters('name'))",
  );
  expect(evaluateNode(role, { template: cosmos.template })).toBe('00000000-0000-0000-0000-000000000002');
  expect(grantProps.scope).toBe("[resourceId('Microsoft.DocumentDB/databaseAccounts', parameters('name'))]");
  expect(grantProps.principalId).toBe("[parameters('principalId')]");
  expect(moduleOutput(cosmos.parameters.principalId)).toEqual({ module: 'identity', output: 'principalId' });
}

test('Cosmos DB: bounded staleness with a single write region, and the app identity as Data Contributor', () => {
  expectCosmosAsDesigned(arm());
});

const cosmosDataReader = '00000000-0000-0000-0000-000000000001';

/**
 * Services that link @routelock/library (docs/design.md §5.4): each principal in routeReaderPrincipalIds gets
 * the built-in Data Reader, on the routelock account's locations container only; none by default.
 */
function expectRouteReadersAsDesigned(template: ArmTemplate): void {
  expect(mainDefaults(template).routeReaderPrincipalIds).toEqual([]);
  const readers = moduleNamed(template, 'cosmosReaders');
  expect(readers.parameters.principalIds).toBe("[parameters('routeReaderPrincipalIds')]");
  // the same account the cosmos module deploys, and its database
  expect(readers.parameters.accountName).toBe(moduleNamed(template, 'cosmos').parameters.name);
  expect(moduleOutput(readers.parameters.databaseName)).toEqual({ module: 'cosmos', output: 'databaseName' });
  expect(readers.parameters.containerName).toBeUndefined();
  expect(readers.template.parameters?.containerName?.defaultValue).toBe('locations');

  const grant = resourceIn(readers.template, 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments');
  const grantProps = props(grant);
  const [pattern, accountId, role, ...rest] = callArgs(String(grantProps.roleDefinitionId), 'format');
  expect(pattern).toEqual({ kind: 'string', value: '{0}/sqlRoleDefinitions/{1}' });
  expect(rest).toEqual([]);
  expect(accountId && exprText(accountId)).toBe(
    "resourceId('Microsoft.DocumentDB/databaseAccounts', parameters('accountName'))",
  );
  expect(evaluateNode(role, { template: readers.template })).toBe(cosmosDataReader);
  // scoped to the container, not the account: the reader sees routes, not the ledger or the migrations
  const [scopePattern, scopeAccount, database, container, ...more] = callArgs(
    String(grantProps.scope),
    'format',
  );
  expect(scopePattern).toEqual({ kind: 'string', value: '{0}/dbs/{1}/colls/{2}' });
  expect(more).toEqual([]);
  expect(scopeAccount && exprText(scopeAccount)).toBe(accountId && exprText(accountId));
  expect(database && exprText(database)).toBe("parameters('databaseName')");
  expect(container && exprText(container)).toBe("parameters('containerName')");
  // one assignment per listed principal
  expect(grantProps.principalId).toBe("[parameters('principalIds')[copyIndex()]]");
  const count = (principalIds: string[]) =>
    evaluate(grant.copy?.count, { template: readers.template, parameters: { principalIds } });
  expect(count([])).toBe(0);
  expect(count(['a', 'b'])).toBe(2);
  // one at a time: parallel role assignments on one account fail with 412 (Cosmos serialises them)
  expect(grant.copy).toMatchObject({ mode: 'serial', batchSize: 1 });
}

test('Cosmos DB: the principals in routeReaderPrincipalIds get only Data Reader, on the locations container', () => {
  expectRouteReadersAsDesigned(arm());
});

test('negative control: the readers check catches a writer role or an account-wide scope', () => {
  expect(() => expectRouteReadersAsDesigned(arm())).not.toThrow();
  const asWriter = structuredClone(arm());
  const writerTemplate = moduleNamed(asWriter, 'cosmosReaders').template as ArmTemplate & {
    variables: Record<string, unknown>;
  };
  writerTemplate.variables.dataReader = '00000000-0000-0000-0000-000000000002';
  expect(() => expectRouteReadersAsDesigned(asWriter)).toThrow(/00000000-0000-0000-0000-000000000002/);
  const accountWide = structuredClone(arm());
  const grant = resourceIn(
    moduleNamed(accountWide, 'cosmosReaders').template,
    'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments',
  );
  props(grant).scope = "[resourceId('Microsoft.DocumentDB/databaseAccounts', parameters('accountName'))]";
  expect(() => expectRouteReadersAsDesigned(accountWide)).toThrow(/expected format/);
});

test('Flex Consumption, Node, a user-assigned identity, the azd service tag, and the four role assignments', () => {
  const api = moduleNamed(arm(), 'api');
  const plan = resourceIn(api.template, 'Microsoft.Web/serverfarms');
  expect(plan.sku).toEqual({ name: 'FC1', tier: 'FlexConsumption' });
  const app = resourceIn(api.template, 'Microsoft.Web/sites');
  const functionAppConfig = props(app).functionAppConfig as {
    runtime: unknown;
    scaleAndConcurrency: { maximumInstanceCount: unknown };
  };
  // Node 20 left Functions support in April 2026
  expect(functionAppConfig.runtime).toEqual({ name: 'node', version: '22' });
  expect(app.identity).toMatchObject({ type: 'UserAssigned' });
  const [, azdTag] = callArgs(String(app.tags), 'union');
  expect(evaluateNode(azdTag, { template: api.template })).toEqual({ 'azd-service-name': 'api' });
  expect(functionAppConfig.scaleAndConcurrency.maximumInstanceCount).toBe(
    "[parameters('maximumInstanceCount')]",
  );
  expect(api.parameters.maximumInstanceCount).toBe("[parameters('maximumInstanceCount')]");
  // the app's identity: Storage Blob Data Owner, Queue and Table Data Contributor, Monitoring Metrics Publisher
  const rbac = moduleNamed(arm(), 'rbac');
  const forApp = roleAssignments(arm()).filter(
    (a) => a.module === 'rbac' && a.principalId === "[parameters('principalId')]",
  );
  expect(forApp.map((a) => a.role).sort()).toEqual(
    [
      'b7e6dc6d-f1e8-4753-8033-0f276bb0955b',
      '974c5e8b-45b9-4653-ba55-5f855dd0fb88',
      '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3',
      '3913510d-42f4-4e42-8a64-420c390055eb',
    ].sort(),
  );
  for (const a of forApp) {
    expect(a).toMatchObject({ principalType: 'ServicePrincipal', condition: undefined });
    // on the storage account (the data roles) or on Application Insights (the metrics publisher)
    const scope = resourceIdOf(String(a.scope));
    expect(scope).toEqual(
      a.role === '3913510d-42f4-4e42-8a64-420c390055eb'
        ? { type: 'Microsoft.Insights/components', names: ["parameters('applicationInsightsName')"] }
        : { type: 'Microsoft.Storage/storageAccounts', names: ["parameters('storageAccountName')"] },
    );
  }
  // the app's identity, and the very account and component the other modules create
  expect(moduleOutput(rbac.parameters.principalId)).toEqual({ module: 'identity', output: 'principalId' });
  expect(rbac.parameters.storageAccountName).toBe(moduleNamed(arm(), 'storage').parameters.name);
  expect(rbac.parameters.applicationInsightsName).toBe(
    moduleNamed(arm(), 'monitoring').parameters.applicationInsightsName,
  );
  expect(read('azure.yaml')).toMatch(/api:\s*\n\s*project: \.\s*\n\s*language: ts\s*\n\s*host: function/);
});

test('host.json: Host.Results at Information, extension bundle [4.32.0, 5.0.0), task hub from a setting, 5 dequeues 30 s apart, no instance overwrite, the workflow version as the orchestration version', () => {
  const host = JSON.parse(read('host.json')) as {
    logging: { logLevel: Record<string, string> };
    extensionBundle: { version: string };
    extensions: {
      queues: { maxDequeueCount: number; visibilityTimeout: string };
      durableTask: { hubName: string; overridableExistingInstanceStates: string };
    };
  };
  // the range the Durable Task Scheduler docs require of non-.NET apps for the azureManaged provider
  expect(host.extensionBundle.version).toBe('[4.32.0, 5.0.0)');
  // Orchestration versioning (bundle 4.26+; docs/design.md §6.7): new instances carry the workflow version,
  // and a worker still on older code never picks up an instance of a newer version mid-deploy ("2.0",
  // not "2": the extension compares parsable versions numerically, anything else as strings).
  expect(host.extensions.durableTask).toEqual({
    hubName: '%ROUTELOCK_TASK_HUB%',
    overridableExistingInstanceStates: 'NonRunningStates',
    defaultVersion: `${WORKFLOW_VERSION}.0`,
    versionMatchStrategy: 'CurrentOrOlder',
    versionFailureStrategy: 'Reject',
  });
  expect(host.extensions.queues.maxDequeueCount).toBe(5);
  // a failed message is visible again after this backoff (the host's default 0 spends all five
  // dequeues back to back, so a brief store outage poisons a start)
  expect(host.extensions.queues.visibilityTimeout).toBe('00:00:30');
  // Host.Results feeds Application Insights' requests table and logs at Information only: at Error or
  // Warning, successful invocations never reach it (Azure Functions docs, "Configure monitoring").
  expect(host.logging.logLevel['Host.Results']).toBe('Information');
});

// ---------------------------------------------------------------------------------------------------
// The Durable backend: Azure Storage by default, the Durable Task Scheduler when durableBackend says so.
// infra/arm/main.dts.json is main compiled with durableBackend = 'durableTaskScheduler'.
// ---------------------------------------------------------------------------------------------------

const durableTaskDataContributor = '0ad04412-c4d5-4796-b79c-f76d14c8d402';
let compiledDts: ArmTemplate | undefined;
/** main as the DTS entry point deploys it: the nested template and the parameters bound to it. */
const dtsMain = () => {
  compiledDts ??= loadArmTemplate(root, 'infra/arm/main.dts.json');
  const main = moduleNamed(compiledDts, 'main');
  return { template: main.template, bound: main.parameters };
};

/** Whether main, with these parameters bound (the rest at their defaults), deploys the scheduler. */
function schedulerChosen(template: ArmTemplate, bound: Record<string, unknown>): boolean {
  const deployment = resourceIn(template, 'Microsoft.Resources/deployments', 'durableTaskScheduler');
  expect(deployment.condition).toBe("[variables('useDurableTaskScheduler')]");
  const [param, value] = callArgs(String(template.variables?.useDurableTaskScheduler), 'equals');
  if (param === undefined || value?.kind !== 'string') throw new Error('unexpected useDurableTaskScheduler');
  const [name] = callArgs(param, 'parameters');
  const key = String(evaluateNode(name, { template }));
  return ({ ...mainDefaults(template), ...bound } as Record<string, unknown>)[key] === value.value;
}

/**
 * The Durable settings the app gets: main passes the app module `durableSettings` =
 * if(useDurableTaskScheduler, the scheduler module's appSettings output, a variable of main's); this
 * follows the branch.
 */
function durableSettingsAsDeployed(
  template: ArmTemplate,
  bound: Record<string, unknown> = {},
): Record<string, unknown> {
  const api = moduleNamed(template, 'api');
  const passed = (api.deployment.properties as { parameters: Record<string, unknown> }).parameters
    .durableSettings;
  const [condition, chosen, otherwise] = callArgs(String(passed), 'if');
  expect(exprText(condition as Expr)).toBe("variables('useDurableTaskScheduler')");
  const [, value] = callArgs((schedulerChosen(template, bound) ? chosen : otherwise) as Expr, 'createObject');
  const text = `[${exprText(value as Expr)}]`;
  if (exprText(value as Expr) === 'createObject()') return {};
  const output = moduleOutput(text);
  if (output === undefined) {
    // a literal main declares (variables('…')): evaluated in main's scope, or throws on anything else
    const literal = evaluateNode(value as Expr, { template });
    if (literal === null || typeof literal !== 'object' || Array.isArray(literal))
      throw new Error(`durableSettings is neither an object nor a module output: ${text}`);
    return literal as Record<string, unknown>;
  }
  const module = moduleNamed(template, output.module);
  return module.template.outputs?.[output.output]?.value as Record<string, unknown>;
}

const controlQueueVisibility =
  'AzureFunctionsJobHost__extensions__durableTask__storageProvider__controlQueueVisibilityTimeout';
const workItemQueueVisibility =
  'AzureFunctionsJobHost__extensions__durableTask__storageProvider__workItemQueueVisibilityTimeout';

/** A .NET time span as app settings write it (`hh:mm:ss`), in seconds. */
function timeSpanSeconds(text: unknown): number {
  const match = /^(\d{2}):(\d{2}):(\d{2})$/.exec(String(text));
  if (match === null) throw new Error(`not a time span (hh:mm:ss): ${String(text)}`);
  return Number(match[1]) * 3600 + Number(match[2]) * 60 + Number(match[3]);
}

test('Durable backend by default: Azure Storage, no scheduler, no role on one, its visibility timeouts', () => {
  expect(arm().parameters?.durableBackend).toMatchObject({
    allowedValues: ['azureStorage', 'durableTaskScheduler'],
    defaultValue: 'azureStorage',
  });
  expect(parameters.durableBackend?.value).toBe('${ROUTELOCK_DURABLE_BACKEND=azureStorage}');
  expect(schedulerChosen(arm(), {})).toBe(false);
  // the provider's queues hidden 1 min after a dequeue, not 5: what a forced stop holds a migration for
  expect(durableSettingsAsDeployed(arm())).toEqual({
    [controlQueueVisibility]: '00:01:00',
    [workItemQueueVisibility]: '00:01:00',
  });
  // the scheduler, its task hub and its role exist only inside the conditional module
  const durableTask = resourcesOfType(arm(), /^Microsoft\.DurableTask\//);
  expect(durableTask.map((r) => [r.module, r.resource.type]).sort()).toEqual([
    ['durableTaskScheduler', 'Microsoft.DurableTask/schedulers'],
    ['durableTaskScheduler', 'Microsoft.DurableTask/schedulers/taskHubs'],
  ]);
  expect(
    roleAssignments(arm())
      .filter((a) => a.role === durableTaskDataContributor)
      .map((a) => a.module),
  ).toEqual(['durableTaskScheduler']);
  // the settings the app gets name no scheduler and override no host.json value
  expect(bicepAppSettings().filter((k) => /DURABLE_TASK|^AzureFunctionsJobHost__/.test(k))).toEqual([]);
  // and host.json keeps the default provider (Azure Storage on AzureWebJobsStorage)
  const host = JSON.parse(read('host.json')) as { extensions: { durableTask: Record<string, unknown> } };
  expect(host.extensions.durableTask.storageProvider).toBeUndefined();
});

test('a forced stop holds a migration well inside the production write lease', () => {
  // A host that dies or is stopped (every deploy stops it forced) leaves the messages it had dequeued
  // hidden for these timeouts, and the migration stands still meanwhile: its dropped episode, and the
  // activities in flight, come back together once they pass. The workflow renews the write lock every
  // third of its lease (design §3.5), so a stop just before a renewal leaves two thirds of the lease; at
  // most a third spent waiting keeps the other third for the restarted host to replay and renew. The
  // 5 min defaults outlast the 300 s lease itself: the attempt would end as an overrun.
  const lease = Number(profiles.production.ROUTELOCK_WRITE_LEASE_SECONDS);
  const fits = (timeout: unknown) => timeSpanSeconds(timeout) <= lease / 3;
  const deployed = durableSettingsAsDeployed(arm());
  expect(fits(deployed[controlQueueVisibility])).toBe(true);
  expect(fits(deployed[workItemQueueVisibility])).toBe(true);
  // negative control: the extension's default
  expect(fits('00:05:00')).toBe(false);
});

/** The storage-provider defaults the local WebJobs host applies (hosts/webjobs/HostSettings.cs, AzureDefaults). */
function localHostProviderDefaults(source: string): Record<string, string | undefined> {
  const block = /AzureDefaults\s*=\s*\[([\s\S]*?)\];/.exec(source)?.[1];
  if (block === undefined) throw new Error('HostSettings.cs: no AzureDefaults block');
  const pairs = [...block.matchAll(/\(\$"\{StorageProvider\}:(\w+)",\s*"([^"]+)"\)/g)];
  return Object.fromEntries(
    pairs.map(([, key, value]) => [
      `AzureFunctionsJobHost__extensions__durableTask__storageProvider__${key}`,
      value,
    ]),
  );
}

test('the local real-engine host stops a migration as long as Azure does: its provider defaults are the deployed ones', () => {
  const local = localHostProviderDefaults(read('hosts/webjobs/HostSettings.cs'));
  expect(local).toEqual(durableSettingsAsDeployed(arm()));
  // negative control: a local default drifting from the template is caught
  const drifted = read('hosts/webjobs/HostSettings.cs').replace(
    'controlQueueVisibilityTimeout", "00:01:00"',
    'controlQueueVisibilityTimeout", "00:05:00"',
  );
  expect(localHostProviderDefaults(drifted)).not.toEqual(durableSettingsAsDeployed(arm()));
});

test('Durable backend durableTaskScheduler: scheduler, task hub, Data Contributor, the provider override', () => {
  const { template, bound } = dtsMain();
  expect(bound.durableBackend).toBe('durableTaskScheduler');
  expect(schedulerChosen(template, bound)).toBe(true);
  const dts = moduleNamed(template, 'durableTaskScheduler');
  const defaults = mainDefaults(template);
  // the scheduler: GA API version, a non-empty allow list (an empty one denies all traffic), the SKU
  const scheduler = resourceIn(dts.template, 'Microsoft.DurableTask/schedulers');
  expect(scheduler.apiVersion).toBe('2025-11-01');
  expect(props(scheduler)).toEqual({
    ipAllowlist: "[parameters('ipAllowlist')]",
    sku: "[if(equals(parameters('skuName'), 'Dedicated'), createObject('name', parameters('skuName'), 'capacity', parameters('capacity')), createObject('name', parameters('skuName')))]",
  });
  expect(dts.parameters).toMatchObject({
    ipAllowlist: "[parameters('durableTaskSchedulerIpAllowlist')]",
    skuName: "[parameters('durableTaskSchedulerSku')]",
    capacity: "[parameters('durableTaskSchedulerCapacity')]",
  });
  expect(defaults).toMatchObject({
    durableTaskSchedulerIpAllowlist: ['0.0.0.0/0'],
    durableTaskSchedulerSku: 'Dedicated',
    durableTaskSchedulerCapacity: 1,
  });
  expect(dts.template.parameters?.ipAllowlist).toMatchObject({ minLength: 1 });
  // the task hub is the one host.json names (%ROUTELOCK_TASK_HUB%)
  const hub = resourceIn(dts.template, 'Microsoft.DurableTask/schedulers/taskHubs');
  expect(nameSegments(hub, dts.template)).toEqual(["parameters('name')", "parameters('taskHubName')"]);
  const hubName = evaluate(dts.parameters.taskHubName, { template });
  expect(hubName).toBe('routelock');
  expect(evaluate(appSettingValues(template).ROUTELOCK_TASK_HUB, { template })).toBe(hubName);
  expect(JSON.parse(read('host.json')).extensions.durableTask.hubName).toBe('%ROUTELOCK_TASK_HUB%');
  // the app identity as Durable Task Data Contributor on the scheduler (all its task hubs)
  const grants = roleAssignments(template).filter((a) => a.module === 'durableTaskScheduler');
  expect(grants).toEqual([
    {
      module: 'durableTaskScheduler',
      role: durableTaskDataContributor,
      principalId: "[parameters('principalId')]",
      principalType: 'ServicePrincipal',
      scope: "[resourceId('Microsoft.DurableTask/schedulers', parameters('name'))]",
      condition: undefined,
    },
  ]);
  expect(moduleOutput(dts.parameters.principalId)).toEqual({ module: 'identity', output: 'principalId' });
  expect(moduleOutput(dts.parameters.identityClientId)).toEqual({ module: 'identity', output: 'clientId' });
  // the app settings: host.json's storage provider overridden to azureManaged, and the connection with
  // the scheduler's endpoint and the user-assigned identity's client id
  expect(durableSettingsAsDeployed(template, bound)).toEqual({
    AzureFunctionsJobHost__extensions__durableTask__storageProvider__type: 'azureManaged',
    AzureFunctionsJobHost__extensions__durableTask__storageProvider__connectionStringName:
      'DURABLE_TASK_SCHEDULER_CONNECTION_STRING',
    DURABLE_TASK_SCHEDULER_CONNECTION_STRING:
      "[format('Endpoint={0};Authentication=ManagedIdentity;ClientID={1}', reference(resourceId('Microsoft.DurableTask/schedulers', parameters('name')), '2025-11-01').endpoint, parameters('identityClientId'))]",
  });
  // the app starts on the scheduler only after the grant exists (the module deploys it)
  const api = moduleNamed(template, 'api');
  expect((api.deployment.dependsOn ?? []).map((d) => deploymentNamed(d))).toContain('durableTaskScheduler');
  // the Azure Storage settings stay: the Functions host and the migrations queue still use the account
  expect(appSettingValues(template)).toMatchObject({ AzureWebJobsStorage__credential: 'managedidentity' });
});

test('negative control: the Durable backend checks see the scheduler when the parameter selects it', () => {
  // main.json itself, with the parameter bound as main.dts.bicep binds it
  expect(schedulerChosen(arm(), { durableBackend: 'durableTaskScheduler' })).toBe(true);
  expect(Object.keys(durableSettingsAsDeployed(arm(), { durableBackend: 'durableTaskScheduler' }))).toContain(
    'DURABLE_TASK_SCHEDULER_CONNECTION_STRING',
  );
  expect(schedulerChosen(dtsMain().template, { durableBackend: 'azureStorage' })).toBe(false);
});

test('negative control: the settings check finds a setting that only the code knows', () => {
  const withExtra = [...configVariables, 'ROUTELOCK_SOMETHING_NEW'];
  expect(withExtra.filter((v) => !platform.has(v) && !localSettings.includes(v))).toEqual([
    'ROUTELOCK_SOMETHING_NEW',
  ]);
});

test('negative control: the ARM checks fail when the compiled template lacks what they assert', () => {
  // the Data Contributor grant removed from the compiled cosmos module
  const withoutGrant = structuredClone(arm());
  const cosmos = moduleNamed(withoutGrant, 'cosmos').template;
  cosmos.resources = cosmos.resources.filter(
    (r) => r.type !== 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments',
  );
  expect(() => expectCosmosAsDesigned(arm())).not.toThrow();
  expect(() => expectCosmosAsDesigned(withoutGrant)).toThrow(/sqlRoleAssignments, found 0/);
  // a second write region
  const multiWrite = structuredClone(arm());
  props(
    resourceIn(moduleNamed(multiWrite, 'cosmos').template, 'Microsoft.DocumentDB/databaseAccounts'),
  ).enableMultipleWriteLocations = true;
  expect(() => expectCosmosAsDesigned(multiWrite)).toThrow(/expect\(received\)\.toBe\(expected\)/);
  // an app setting main no longer passes
  const withoutSetting = structuredClone(arm());
  delete (moduleNamed(withoutSetting, 'api').parameters.appSettings as Record<string, unknown>)
    .ROUTELOCK_CACHE_TIERS;
  expect(bicepAppSettings()).toContain('ROUTELOCK_CACHE_TIERS');
  const withoutCacheTiers = bicepAppSettings(withoutSetting);
  expect(
    configVariables.filter(
      (v) => !platform.has(v) && !localOnly.has(v) && !azureDefaults.has(v) && !withoutCacheTiers.includes(v),
    ),
  ).toEqual(['ROUTELOCK_CACHE_TIERS']);
  // no compiled template at all: the message says how to get one
  const empty = mkdtempSync(join(tmpdir(), 'routelock-arm-'));
  try {
    expect(() => loadArmTemplate(empty)).toThrow('run `npm run infra:build`');
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});

// ---------------------------------------------------------------------------------------------------
// Who may call: App Service authentication (Easy Auth) with Microsoft Entra ID, and the app roles.
// ---------------------------------------------------------------------------------------------------

// The roles the app enforces (functions/http/auth.ts) are the ones the manifest must declare.
const appRoleValues: readonly string[] = appRoles;
const guid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface Manifest {
  appRoles: {
    id: string;
    value: string;
    displayName: string;
    description: string;
    allowedMemberTypes: string[];
  }[];
  oauth2PermissionScopes: { id: string; value: string; type: string }[];
}
const manifest = JSON.parse(read('infra/entra/app-roles.json')) as Manifest;

/** Every `route: '…'` declared with `role: 'anonymous'` in functions/*.ts (the HTTP endpoints). */
function endpointRoles(): { route: string; role: string }[] {
  return readdirSync(join(root, 'functions'))
    .filter((f) => f.endsWith('.ts'))
    .flatMap((f) => {
      const text = read(`functions/${f}`);
      return [...text.matchAll(/role: '([^']+)'/g)].map((m) => {
        const before = text.slice(Math.max(0, (m.index ?? 0) - 400), m.index);
        const routes = [...before.matchAll(/route: [`']([^`']+)[`']/g)];
        return { route: routes.at(-1)?.[1] ?? '?', role: m[1] as string };
      });
    });
}

test('the status page is excluded from the 401 (to sign a browser in) under appservice only', () => {
  const template = arm();
  // A conditional module parameter compiles to one expression for its whole `{value}` object.
  const deployment = moduleNamed(template, 'api').deployment.properties as {
    parameters: Record<string, unknown>;
  };
  const paths = (authMode: string) =>
    evaluate(deployment.parameters.browserPagePaths, { template, parameters: { authMode } });
  expect(paths('appservice')).toEqual({ value: ['/api/status'] });
  // entra serves no browser sign-in: the page keeps App Service's 401, and the postdeploy hook expects it
  expect(paths('entra')).toEqual({ value: [] });
  const hook = read('infra/hooks/postdeploy.sh');
  expect(hook).toMatch(/if \[\[ "\$auth_mode" == "entra" \]\]; then\n {2}\[\[ "\$page" == "401" \]\]/);
});

test('App Service authentication: Entra ID, 401 without a token, only /api/health open', () => {
  const api = moduleNamed(arm(), 'api');
  const auth = resourceIn(api.template, 'Microsoft.Web/sites/config', 'authsettingsV2');
  expect(nameSegments(auth, api.template)).toEqual(["parameters('name')", 'authsettingsV2']);
  expect(props(auth)).toMatchObject({
    platform: { enabled: true },
    globalValidation: {
      requireAuthentication: true,
      unauthenticatedClientAction: 'Return401',
      excludedPaths: "[concat(parameters('unauthenticatedPaths'), parameters('browserPagePaths'))]",
    },
    // browser sign-in for the status page: no token store, no external post_login_redirect_uri
    login: {
      tokenStore: { enabled: false },
      allowedExternalRedirectUrls: [],
      preserveUrlFragmentsForLogins: true,
    },
    identityProviders: {
      azureActiveDirectory: {
        enabled: true,
        registration: {
          clientId: "[parameters('entraClientId')]",
          // https://login.microsoftonline.com/<tenant>/v2.0 in the public cloud
          openIdIssuer:
            "[format('{0}{1}/v2.0', environment().authentication.loginEndpoint, parameters('entraTenantId'))]",
        },
        validation: { allowedAudiences: "[parameters('entraAudiences')]" },
      },
    },
  });
  // the default applies: main passes no other paths
  expect(api.template.parameters?.unauthenticatedPaths?.defaultValue).toEqual(['/api/health']);
  expect(api.parameters).not.toHaveProperty('unauthenticatedPaths');
  // the app starts with its settings only after authentication is on
  const settings = resourceIn(api.template, 'Microsoft.Web/sites/config', 'appsettings');
  expect(settings.dependsOn).toContain(
    "[resourceId('Microsoft.Web/sites/config', parameters('name'), 'authsettingsV2')]",
  );

  // every endpoint the code leaves anonymous is an excluded path, and no other
  const anonymous = endpointRoles()
    .filter((e) => e.role === 'anonymous')
    .map((e) => `/api/${e.route}`);
  expect(anonymous).toEqual(['/api/health']);
  // the pages that send a browser to sign in are excluded from the 401, and nothing else is: the page's
  // reads, its files and the API keep App Service's 401
  expect(api.template.parameters?.browserPagePaths?.defaultValue).toEqual(browserPages());
  // main passes them under appservice only (the test above): the same list
  expect(browserPages()).toEqual(['/api/status']);
  const excluded = [...unauthenticatedDefault(api), ...browserPages()];
  for (const e of functionEndpoints) {
    const path = `/api/${e.route}`;
    const isExcluded = excluded.some((p) => path === p || path.startsWith(`${p}/`));
    expect([path, isExcluded]).toEqual([path, e.role === 'anonymous' || e.browserSignIn !== undefined]);
  }
});

/** The pages that send a browser to sign in (`browserSignIn`), as App Service paths. */
const browserPages = (endpoints: readonly EndpointDeclaration[] = functionEndpoints): string[] =>
  endpoints.filter((e) => e.browserSignIn).map((e) => `/api/${e.route}`);
const unauthenticatedDefault = (api: { template: ArmTemplate }): string[] =>
  api.template.parameters?.unauthenticatedPaths?.defaultValue as string[];

test('negative control: a sign-in page missing from the excluded paths is caught', () => {
  const extra = {
    ...functionEndpoints[0]!,
    route: 'another-page',
    browserSignIn: { returnTo: '/api/another-page' },
  };
  expect(browserPages([...functionEndpoints, extra])).not.toEqual(
    moduleNamed(arm(), 'api').template.parameters?.browserPagePaths?.defaultValue,
  );
});

test('ROUTELOCK_AUTH and the Entra settings the app reads come from the same parameters as Easy Auth', () => {
  const main = arm().parameters ?? {};
  expect(main.entraClientId).toMatchObject({ type: 'string', minLength: 36, maxLength: 36 });
  expect(main.entraClientId?.metadata?.description).toEqual(expect.any(String));
  expect(main.entraClientId).not.toHaveProperty('defaultValue');
  expect(main.entraTenantId?.defaultValue).toBe('[subscription().tenantId]');
  expect(main.entraAudiences?.defaultValue).toEqual(["[format('api://{0}', parameters('entraClientId'))]"]);
  expect(main.authMode).toMatchObject({ allowedValues: ['appservice', 'entra'], defaultValue: 'appservice' });
  expect(main.authMode?.metadata?.description).toEqual(expect.any(String));
  // v2 access tokens carry the client id as aud: accepted in both modes, like Easy Auth does implicitly
  expect(arm().variables?.audiences).toBe(
    "[union(parameters('entraAudiences'), createArray(parameters('entraClientId')))]",
  );
  const api = moduleNamed(arm(), 'api');
  expect(api.parameters).toMatchObject({
    entraClientId: "[parameters('entraClientId')]",
    entraTenantId: "[parameters('entraTenantId')]",
    entraAudiences: "[variables('audiences')]",
  });
  expect(appSettingValues()).toMatchObject({
    ROUTELOCK_AUTH: "[parameters('authMode')]",
    ROUTELOCK_ENTRA_TENANT_ID: "[parameters('entraTenantId')]",
    ROUTELOCK_ENTRA_AUDIENCES: "[join(variables('audiences'), ',')]",
  });
  expect(parameters.entraClientId?.value).toBe('${ENTRA_CLIENT_ID}');
  expect(parameters.authMode?.value).toBe('${ROUTELOCK_AUTH=appservice}');
});

test('the app-role manifest: exactly the seven roles, unique stable GUIDs, and every role an endpoint needs', () => {
  expect(manifest.appRoles.map((r) => r.value).sort()).toEqual([...appRoleValues].sort());
  const ids = [...manifest.appRoles.map((r) => r.id), ...manifest.oauth2PermissionScopes.map((s) => s.id)];
  for (const id of ids) expect(id).toMatch(guid);
  expect(new Set(ids).size).toBe(ids.length);
  for (const role of manifest.appRoles) {
    expect(role.description.length).toBeGreaterThan(10);
    expect(role.displayName.length).toBeGreaterThan(0);
    expect(role.allowedMemberTypes.length).toBeGreaterThan(0);
    for (const t of role.allowedMemberTypes) expect(['User', 'Application']).toContain(t);
  }
  // force-release is for people: the two approvals are two people
  for (const value of ['Ops.Operator', 'Ops.Approver']) {
    expect(manifest.appRoles.find((r) => r.value === value)?.allowedMemberTypes).toEqual(['User']);
  }
  expect(manifest.oauth2PermissionScopes.map((s) => s.value)).toEqual(['user_impersonation']);
  // the code and the manifest agree: each endpoint's role exists in the registration
  const used = new Set(endpointRoles().map((e) => e.role));
  used.delete('anonymous');
  expect(used.size).toBeGreaterThan(3);
  expect([...used].filter((r) => !appRoleValues.includes(r))).toEqual([]);
});

test('azd hooks: the app registration and the key set before provisioning, the staged key dropped after', () => {
  const azd = parseYaml(read('azure.yaml')) as {
    hooks: Record<string, { posix: { shell: string; run: string; continueOnError: boolean } }>;
  };
  expect(azd.hooks.preprovision?.posix).toMatchObject({
    run: 'bash ./infra/hooks/preprovision.sh',
    continueOnError: false,
  });
  expect(azd.hooks.postprovision?.posix).toMatchObject({
    run: 'bash ./infra/hooks/postprovision.sh',
    continueOnError: false,
  });
  const pre = read('infra/hooks/preprovision.sh');
  expect(pre.indexOf('entra-app.sh')).toBeGreaterThan(0);
  expect(pre.indexOf('token-keys.sh')).toBeGreaterThan(pre.indexOf('entra-app.sh'));
  // and after every deployment, proof that a caller without a token gets 401
  expect(azd.hooks.postdeploy?.posix).toMatchObject({
    run: 'bash ./infra/hooks/postdeploy.sh',
    continueOnError: false,
  });
  expect(read('infra/hooks/postdeploy.sh')).toMatch(/== "401"/);
  // the status page's excluded path: a forged principal must be stripped there too (302 to sign in)
  expect(read('infra/hooks/postdeploy.sh')).toMatch(
    /"\$uri\/api\/status"\)"\nif \[\[ "\$auth_mode" == "entra" \]\]; then[^]*?\nfi\n\[\[ "\$page" == "302" \]\]/,
  );
  for (const script of [
    'preprovision',
    'postprovision',
    'postdeploy',
    'entra-app',
    'token-keys',
    'rotate-token-keys',
  ]) {
    const path = `infra/hooks/${script}.sh`;
    expect(read(path)).toMatch(/^#!\/usr\/bin\/env bash\n/);
    expect(read(path)).toMatch(/\nset -euo pipefail\n/);
    expect({ path, executable: (statSync(join(root, path)).mode & 0o111) !== 0 }).toEqual({
      path,
      executable: true,
    });
    expect({
      path,
      syntax: spawnSync('bash', ['-n', join(root, path)], { encoding: 'utf8' }).stderr,
    }).toEqual({
      path,
      syntax: '',
    });
  }
  const entra = read('infra/hooks/entra-app.sh');
  expect(entra).toMatch(/azd env set ENTRA_CLIENT_ID/);
  expect(entra).toMatch(/api:\/\/\$\{process\.env\.CLIENT_ID\}/);
  expect(entra).toMatch(/requestedAccessTokenVersion: 2/);
  expect(entra).toMatch(/appRoleAssignmentRequired=true/);
  expect(parameters.tokenKeysBase64?.value).toBe('${ROUTELOCK_TOKEN_KEYS_B64}');
});

// A stand-in for `az` and `azd` (no Azure here): the resource group, vault and secret names it knows
// come from $STUB_STATE, and `azd env` reads and writes $STUB_ENV.
const stubAz = `#!/usr/bin/env node
const fs = require('fs');
const state = JSON.parse(fs.readFileSync(process.env.STUB_STATE, 'utf8'));
const a = process.argv.slice(2);
const opt = (n) => a[a.indexOf(n) + 1];
const out = (s) => { process.stdout.write(s + '\\n'); process.exit(0); };
if (state.fail && a.join(' ').includes(state.fail)) { console.error('ERROR: unavailable'); process.exit(1); }
if (a[0] === 'group' && a[1] === 'exists') out(String(state.group === opt('--name')));
if (a[0] === 'keyvault' && a[1] === 'list') out(state.vault ?? '');
if (a[0] === 'keyvault' && a[1] === 'show') { if (opt('--name') !== state.vault) process.exit(3); out('/sub/rg/vaults/' + state.vault); }
if (a[0] === 'rest') out((state.secrets ?? []).join('\\n'));
process.exit(2);
`;
const stubAzd = `#!/usr/bin/env node
const fs = require('fs');
const env = JSON.parse(fs.readFileSync(process.env.STUB_ENV, 'utf8'));
const [, op, key, value] = process.argv.slice(2);
if (op === 'get-value') { if (!env[key]) process.exit(1); process.stdout.write(env[key] + '\\n'); process.exit(0); }
if (op === 'set') { env[key] = value; fs.writeFileSync(process.env.STUB_ENV, JSON.stringify(env)); process.exit(0); }
process.exit(2);
`;

test('token-keys.sh generates the key set once, and never over a vault that has one or cannot be read', () => {
  const dir = mkdtempSync(join(tmpdir(), 'routelock-hooks-'));
  try {
    for (const [name, text] of [
      ['az', stubAz],
      ['azd', stubAzd],
    ] as const) {
      writeFileSync(join(dir, name), text);
      chmodSync(join(dir, name), 0o755);
    }
    const run = (state: object, env: Record<string, string> = {}) => {
      writeFileSync(join(dir, 'state.json'), JSON.stringify(state));
      writeFileSync(join(dir, 'env.json'), JSON.stringify(env));
      const result = spawnSync('bash', [join(root, 'infra/hooks/token-keys.sh')], {
        encoding: 'utf8',
        env: {
          PATH: `${dir}:${process.env.PATH ?? ''}`,
          HOME: dir,
          AZURE_ENV_NAME: 'prod',
          STUB_STATE: join(dir, 'state.json'),
          STUB_ENV: join(dir, 'env.json'),
          ...env,
        },
      });
      const after = JSON.parse(readFileSync(join(dir, 'env.json'), 'utf8')) as Record<string, string>;
      return { status: result.status, staged: after.ROUTELOCK_TOKEN_KEYS_B64, stderr: result.stderr };
    };

    // the first provision: no resource group yet → one fresh key, staged for Bicep
    const first = run({});
    expect(first.status).toBe(0);
    const set = JSON.parse(Buffer.from(first.staged ?? '', 'base64').toString('utf8')) as {
      current: string;
      keys: Record<string, string>;
    };
    expect(Object.keys(set.keys)).toEqual([set.current]);
    expect(Buffer.from(set.keys[set.current] ?? '', 'base64url')).toHaveLength(32);
    expect(set.keys[set.current]).toMatch(/^[A-Za-z0-9_-]{43}$/);

    // a staged set is kept as it is
    expect(run({}, { ROUTELOCK_TOKEN_KEYS_B64: first.staged ?? '' })).toMatchObject({
      status: 0,
      staged: first.staged,
    });
    // the vault already holds the secret → nothing generated
    const provisioned = { group: 'rg-prod', vault: 'kv-x', secrets: ['routelock-token-keys'] };
    expect(run(provisioned)).toMatchObject({ status: 0, staged: undefined });
    // a vault without the secret → generated
    expect(run({ ...provisioned, secrets: [] }).staged).toMatch(/^[A-Za-z0-9+/]+=*$/);
    // cannot tell → stop, generate nothing
    expect(run({ ...provisioned, fail: 'rest' })).toMatchObject({ status: 1, staged: undefined });
    expect(run({ ...provisioned, fail: 'group exists' })).toMatchObject({ status: 1, staged: undefined });
    expect(run(provisioned, { AZURE_KEY_VAULT_NAME: 'kv-gone' })).toMatchObject({
      status: 1,
      staged: undefined,
    });
    // CI (read-only): never generates
    expect(run({ ...provisioned, secrets: [] }, { ROUTELOCK_HOOKS_READONLY: 'true' })).toMatchObject({
      status: 1,
      staged: undefined,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// ---------------------------------------------------------------------------------------------------
// Regions, the token key set in Key Vault.
// ---------------------------------------------------------------------------------------------------

test('ROUTELOCK_REGIONS: the declared migration target regions, by default the two deployment regions', () => {
  const main = arm().parameters ?? {};
  expect(main.secondaryRegion?.defaultValue).toBe("[parameters('cosmosLocations')[1]]");
  expect(main.allowedRegions).toMatchObject({
    type: 'array',
    minLength: 1,
    defaultValue: ["[parameters('location')]", "[parameters('secondaryRegion')]"],
  });
  expect(main.allowedRegions?.metadata?.description).toEqual(expect.any(String));
  expect(appSettingValues().ROUTELOCK_REGIONS).toBe("[join(parameters('allowedRegions'), ',')]");
  expect(parameters.secondaryRegion?.value).toBe('${ROUTELOCK_SECONDARY_REGION=northeurope}');
  expect(parameters.cosmosLocations?.value).toEqual([
    '${AZURE_LOCATION}',
    '${ROUTELOCK_SECONDARY_REGION=northeurope}',
  ]);
});

test('Key Vault: RBAC only, purge protection, Secrets User for the app identity, a KV reference for the key set', () => {
  const keyvault = moduleNamed(arm(), 'keyvault');
  const kv = keyvault.template;
  const vault = props(resourceIn(kv, 'Microsoft.KeyVault/vaults'));
  expect(vault).toMatchObject({
    enableRbacAuthorization: true,
    enableSoftDelete: true,
    enablePurgeProtection: true,
  });
  expect(vault).not.toHaveProperty('accessPolicies');
  // the same public-endpoint posture as the storage account
  expect(vault.publicNetworkAccess).toBe('Enabled');

  // Key Vault Secrets User, for the app's user-assigned identity, on this vault only
  const grants = roleAssignments(arm()).filter((a) => a.module === 'keyvault');
  expect(grants).toEqual([
    {
      module: 'keyvault',
      role: '4633458b-17de-408a-b874-0445c86b69e6',
      principalId: "[parameters('appPrincipalId')]",
      principalType: 'ServicePrincipal',
      scope: "[resourceId('Microsoft.KeyVault/vaults', parameters('name'))]",
      condition: undefined,
    },
  ]);
  expect(resourceIn(kv, 'Microsoft.KeyVault/vaults').name).toBe("[parameters('name')]");
  expect(moduleOutput(keyvault.parameters.appPrincipalId)).toEqual({
    module: 'identity',
    output: 'principalId',
  });

  // the secret only when a key set is passed: a later deployment leaves the secret and its versions alone
  const secret = resourceIn(kv, 'Microsoft.KeyVault/vaults/secrets');
  expect(secret.condition).toBe("[not(empty(parameters('tokenKeysBase64')))]");
  expect(nameSegments(secret, kv)).toEqual(["parameters('name')", "parameters('tokenKeysSecretName')"]);
  expect(keyvault.parameters.tokenKeysSecretName).toBe("[variables('tokenKeysSecretName')]");
  expect(arm().variables?.tokenKeysSecretName).toBe('routelock-token-keys');
  expect(keyvault.parameters.tokenKeysBase64).toBe("[parameters('tokenKeysBase64')]");

  // the app setting is a Key Vault reference to that vault and secret, resolved with the user-assigned identity
  const [format, vaultName, secretName, ...more] = callArgs(
    String(arm().variables?.tokenKeysReference),
    'format',
  );
  expect(format).toEqual({ kind: 'string', value: '@Microsoft.KeyVault(VaultName={0};SecretName={1})' });
  expect(more).toEqual([]);
  expect(`[${exprText(vaultName ?? missingValue('no vault name'))}]`).toBe(keyvault.parameters.name);
  expect(evaluateNode(secretName, { template: arm() })).toBe('routelock-token-keys');
  expect(appSettingValues().ROUTELOCK_TOKEN_KEYS).toBe("[variables('tokenKeysReference')]");
  const api = moduleNamed(arm(), 'api');
  expect(props(resourceIn(api.template, 'Microsoft.Web/sites')).keyVaultReferenceIdentity).toBe(
    "[parameters('identityResourceId')]",
  );
  // the grant and the secret exist before the app resolves the reference
  expect((api.deployment.dependsOn ?? []).map((d) => deploymentNamed(d))).toContain('keyvault');
});

test('the outputs azd records: what the hooks read, from the modules that own them', () => {
  const outputs = arm().outputs ?? {};
  expect(moduleOutput(outputs.SERVICE_API_URI?.value)).toEqual({ module: 'api', output: 'uri' });
  expect(moduleOutput(outputs.SERVICE_API_NAME?.value)).toEqual({ module: 'api', output: 'name' });
  expect(moduleOutput(outputs.AZURE_KEY_VAULT_NAME?.value)).toEqual({ module: 'keyvault', output: 'name' });
  expect(moduleOutput(outputs.ROUTELOCK_TOKEN_KEYS_SECRET?.value)).toEqual({
    module: 'keyvault',
    output: 'tokenKeysSecretName',
  });
  expect(outputs.AZURE_RESOURCE_GROUP?.value).toBe(
    resourceIn(arm(), 'Microsoft.Resources/resourceGroups').name,
  );
  // every value a hook reads (azd_value NAME) is an output, or set by azd or by a hook itself
  const setElsewhere = new Set([
    'AZURE_ENV_NAME',
    'AZURE_SUBSCRIPTION_ID',
    'ENTRA_CLIENT_ID',
    'ROUTELOCK_TOKEN_KEYS_B64',
  ]);
  const hookReads = readdirSync(join(root, 'infra/hooks'))
    .filter((f) => f.endsWith('.sh'))
    .flatMap((f) =>
      [...read(`infra/hooks/${f}`).matchAll(/azd_value ([A-Z0-9_]+)/g)].map((m) => m[1] as string),
    );
  expect(hookReads.length).toBeGreaterThan(0);
  expect([...new Set(hookReads)].filter((v) => !setElsewhere.has(v) && !(v in outputs))).toEqual([]);
});

// ---------------------------------------------------------------------------------------------------
// Hardening.
// ---------------------------------------------------------------------------------------------------

test('the deploying principal: its type from azd, and no data-plane access unless asked for', () => {
  const rbac = moduleNamed(arm(), 'rbac');
  expect(rbac.template.parameters?.userPrincipalType).toMatchObject({
    allowedValues: ['User', 'ServicePrincipal', 'Group'],
    defaultValue: 'User',
  });
  expect(rbac.template.parameters?.grantDeveloperDataAccess?.defaultValue).toBe(false);
  expect(rbac.template.variables?.developerAccess).toBe(
    "[and(parameters('grantDeveloperDataAccess'), not(empty(parameters('userPrincipalId'))))]",
  );
  const user = roleAssignments(arm()).filter((a) => a.principalId === "[parameters('userPrincipalId')]");
  expect(user.length).toBeGreaterThan(0);
  for (const grant of user) {
    expect(grant).toMatchObject({
      module: 'rbac',
      condition: "[variables('developerAccess')]",
      principalType: "[parameters('userPrincipalType')]",
    });
  }
  // the user's principal type is never hard-coded
  expect(roleAssignments(arm()).filter((a) => a.principalType === 'User')).toEqual([]);
  expect(arm().parameters?.grantDeveloperDataAccess?.defaultValue).toBe(false);
  expect(rbac.parameters).toMatchObject({
    userPrincipalType: "[parameters('principalType')]",
    grantDeveloperDataAccess: "[parameters('grantDeveloperDataAccess')]",
  });
  expect(parameters.principalType?.value).toBe('${AZURE_PRINCIPAL_TYPE=User}');
  expect(parameters.grantDeveloperDataAccess?.value).toBe('${ROUTELOCK_GRANT_DEVELOPER_DATA_ACCESS=false}');
});

test('the site: no basic-auth publishing, TLS 1.2, no FTP setting on Flex Consumption', () => {
  const api = moduleNamed(arm(), 'api').template;
  const policies = api.resources.filter(
    (r) => r.type === 'Microsoft.Web/sites/basicPublishingCredentialsPolicies',
  );
  expect(policies.map((p) => nameSegments(p, api))).toEqual([
    ["parameters('name')", 'ftp'],
    ["parameters('name')", 'scm'],
  ]);
  for (const policy of policies) expect(policy.properties).toEqual({ allow: false });
  const site = props(resourceIn(api, 'Microsoft.Web/sites'));
  expect(site.siteConfig).toMatchObject({ minTlsVersion: '1.2', scmMinTlsVersion: '1.2' });
  expect(site.httpsOnly).toBe(true);
  // ftpsState is a deprecated site property on Flex Consumption ("FTPS not supported")
  expect(jsonKeys(resourceIn(api, 'Microsoft.Web/sites'))).not.toContain('ftpsState');
  const cosmos = moduleNamed(arm(), 'cosmos').template;
  expect(
    props(resourceIn(cosmos, 'Microsoft.DocumentDB/databaseAccounts')).disableKeyBasedMetadataWriteAccess,
  ).toBe(true);
});

/** Priority-based execution on the account (docs/design.md §5.7); throws when the template lacks it. */
function expectPriorityBasedExecution(template: ArmTemplate): void {
  const account = resourceIn(
    moduleNamed(template, 'cosmos').template,
    'Microsoft.DocumentDB/databaseAccounts',
  );
  expect(props(account)).toMatchObject({ enablePriorityBasedExecution: true, defaultPriorityLevel: 'High' });
  // The first GA API version whose account type has these properties (the compiler refuses them before).
  expect(String(account.apiVersion) >= '2025-10-15').toBe(true);
}

test('Cosmos DB priority-based execution is on, requests without a priority High', () => {
  expectPriorityBasedExecution(arm());
  // negative control: the account without the property fails the check
  const without = structuredClone(arm());
  const account = resourceIn(
    moduleNamed(without, 'cosmos').template,
    'Microsoft.DocumentDB/databaseAccounts',
  );
  delete props(account).enablePriorityBasedExecution;
  expect(() => expectPriorityBasedExecution(without)).toThrow();
});

test('diagnostic settings to Log Analytics: Cosmos DB, the storage services, the function app, Key Vault', () => {
  const settings = resourcesOfType(arm(), 'Microsoft.Insights/diagnosticSettings');
  const byScope = Object.fromEntries(
    settings.map((s) => [`${s.module}:${resourceIdOf(String(s.resource.scope)).type}`, s]),
  );
  expect(Object.keys(byScope).sort()).toEqual(
    [
      'cosmos:Microsoft.DocumentDB/databaseAccounts',
      'api:Microsoft.Web/sites',
      'keyvault:Microsoft.KeyVault/vaults',
      'storage:Microsoft.Storage/storageAccounts/blobServices',
      'storage:Microsoft.Storage/storageAccounts/queueServices',
      'storage:Microsoft.Storage/storageAccounts',
      'storage:Microsoft.Storage/storageAccounts/tableServices',
    ].sort(),
  );
  expect(settings).toHaveLength(Object.keys(byScope).length);
  for (const { resource } of settings)
    expect(props(resource).workspaceId).toBe("[parameters('logAnalyticsWorkspaceId')]");
  const logs = (key: string) => {
    const s = byScope[key] ?? missingValue(`no diagnostic setting ${key}`);
    return evaluate(props(s.resource).logs, { template: s.template }) as
      Record<string, unknown>[] | undefined;
  };
  expect(logs('cosmos:Microsoft.DocumentDB/databaseAccounts')).toContainEqual({
    category: 'DataPlaneRequests',
    enabled: true,
  });
  expect(logs('api:Microsoft.Web/sites')).toContainEqual({ category: 'FunctionAppLogs', enabled: true });
  expect(logs('keyvault:Microsoft.KeyVault/vaults')).toContainEqual({
    categoryGroup: 'allLogs',
    enabled: true,
  });
  // the account itself has metrics only; the logs are per service
  expect(logs('storage:Microsoft.Storage/storageAccounts')).toBeUndefined();
  for (const service of ['blobServices', 'queueServices', 'tableServices'])
    expect(logs(`storage:Microsoft.Storage/storageAccounts/${service}`)).toEqual(
      ['StorageRead', 'StorageWrite', 'StorageDelete'].map((category) => ({ category, enabled: true })),
    );
  // every module that has one gets the workspace from monitoring
  for (const module of ['storage', 'cosmos', 'keyvault', 'api']) {
    expect(moduleOutput(moduleNamed(arm(), module).parameters.logAnalyticsWorkspaceId)).toEqual({
      module: 'monitoring',
      output: 'workspaceId',
    });
  }
});

test('an action group, with or without an email, on every alert rule', () => {
  const monitoring = moduleNamed(arm(), 'monitoring');
  const group = resourceIn(monitoring.template, 'Microsoft.Insights/actionGroups');
  expect(group).not.toHaveProperty('condition'); // unconditional
  const [condition, none] = callArgs(String(props(group).emailReceivers), 'if');
  expect(condition && exprText(condition)).toBe("empty(parameters('alertEmail'))");
  expect(evaluateNode(none, { template: monitoring.template })).toEqual([]);
  expect(monitoring.template.parameters?.alertEmail?.defaultValue).toBe('');
  expect(monitoring.parameters.alertEmail).toBe("[parameters('alertEmail')]");
  expect(parameters.alertEmail?.value).toBe('${ROUTELOCK_ALERT_EMAIL}');
  const groupId = `[resourceId('Microsoft.Insights/actionGroups', ${exprText(parseExpression(group.name))})]`;
  const rules = resourcesOfType(
    arm(),
    /^Microsoft\.Insights\/(scheduledQueryRules|metricAlerts|activityLogAlerts)$/,
  );
  expect(rules.length).toBeGreaterThanOrEqual(2);
  for (const { module, resource } of rules) {
    expect({ rule: resource.name, module, actions: props(resource).actions }).toEqual({
      rule: resource.name,
      module: 'monitoring',
      actions: { actionGroups: [groupId] },
    });
  }
});

// ---------------------------------------------------------------------------------------------------
// Workflows: pinned actions, and an OIDC token only where Azure is reached.
// ---------------------------------------------------------------------------------------------------

interface Workflow {
  permissions?: Record<string, string>;
  jobs: Record<
    string,
    {
      needs?: string | string[];
      environment?: string;
      permissions?: Record<string, string>;
      concurrency?: { group: string; 'cancel-in-progress'?: boolean };
      env?: Record<string, string>;
      steps: { uses?: string; run?: string }[];
    }
  >;
}
const workflowFiles = readdirSync(join(root, '.github/workflows')).filter((f) => /\.ya?ml$/.test(f));
const workflow = (file: string) => parseYaml(read(`.github/workflows/${file}`)) as Workflow;
const pinned = /^\s*(?:-\s+)?uses:\s+[\w.-]+\/[\w./-]+@[0-9a-f]{40} # v\d+(\.\d+)*\s*$/;

test('every action is pinned to a full commit SHA, with its version as a comment', () => {
  expect(workflowFiles.sort()).toEqual(['ci.yml', 'deploy.yml']);
  for (const file of workflowFiles) {
    const lines = read(`.github/workflows/${file}`)
      .split('\n')
      .filter((l) => /^\s*(-\s+)?uses:/.test(l));
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines)
      expect({ file, line, pinned: pinned.test(line) }).toEqual({ file, line, pinned: true });
  }
  // negative control: a tag or a short SHA is not a pin
  expect(pinned.test('      - uses: actions/checkout@v4')).toBe(false);
  expect(pinned.test('      - uses: actions/checkout@11d5960 # v4.4.0')).toBe(false);
});

test('only the deploy job can mint an OIDC token; tests run first, in a job that cannot', () => {
  for (const file of workflowFiles) {
    const wf = workflow(file);
    expect(wf.permissions).toEqual({ contents: 'read' });
    for (const [name, job] of Object.entries(wf.jobs)) {
      const idToken = job.permissions?.['id-token'];
      expect({ file, name, idToken }).toEqual({
        file,
        name,
        idToken: file === 'deploy.yml' && name === 'deploy' ? 'write' : undefined,
      });
    }
  }
  const { jobs } = workflow('deploy.yml');
  expect(jobs.test?.permissions).toEqual({ contents: 'read' });
  expect(jobs.test?.steps.map((s) => s.run).filter(Boolean)).toEqual(['npm ci', 'npm test']);
  const deploy = jobs.deploy;
  expect(deploy?.needs).toBe('test');
  expect(deploy?.environment).toBe('production');
  expect(deploy?.concurrency).toEqual({ group: 'deploy-production', 'cancel-in-progress': false });
  expect(deploy?.permissions).toEqual({ contents: 'read', 'id-token': 'write' });
  // the job holding the token installs nothing itself (azd builds the package), and its hooks only check
  expect(deploy?.steps.filter((s) => /\bnpm\b/.test(s.run ?? ''))).toEqual([]);
  expect(deploy?.env?.ROUTELOCK_HOOKS_READONLY).toBe('true');
  expect(deploy?.env?.AZURE_PRINCIPAL_TYPE).toBe('ServicePrincipal');
  expect(deploy?.env?.ENTRA_CLIENT_ID).toBe('${{ vars.ENTRA_CLIENT_ID }}');
  // checkouts keep no credentials in .git/config
  for (const file of workflowFiles) {
    for (const job of Object.values(workflow(file).jobs)) {
      for (const step of job.steps.filter((s) => s.uses?.startsWith('actions/checkout@'))) {
        expect(step).toMatchObject({ with: { 'persist-credentials': false } });
      }
    }
  }
});
