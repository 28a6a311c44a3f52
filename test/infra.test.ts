import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { configVariables } from '../shared/config';

/**
 * Keeps the deployment files honest (there is no Bicep CLI on these machines, so this reads them):
 * every setting the code reads is in local.settings.sample.json and in the Bicep app settings, and no
 * stale one is; every trigger's connection has its settings; package.json `main` matches the compiled
 * functions; no key material; Cosmos DB is bounded staleness with a single write region.
 */

const root = join(__dirname, '..');
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const bicepFiles = [
  'infra/bicep/main.bicep',
  ...readdirSync(join(root, 'infra/bicep/modules')).map((f) => `infra/bicep/modules/${f}`),
];
const bicep = bicepFiles.map(read).join('\n');
const localSettings = Object.keys(
  (JSON.parse(read('local.settings.sample.json')) as { Values: Record<string, string> }).Values,
);

/** App settings the Bicep assigns: keys of the appSettings object in main.bicep and the union in the app module. */
function bicepAppSettings(): string[] {
  const main = read('infra/bicep/main.bicep');
  const block = main.slice(
    main.indexOf('appSettings: {'),
    main.indexOf('}', main.indexOf('appSettings: {') + 20) + 1,
  );
  const app = read('infra/bicep/modules/functionapp.bicep');
  const union = app.slice(
    app.indexOf('union(appSettings, {'),
    app.indexOf('})', app.indexOf('union(appSettings, {')),
  );
  return [...`${block}\n${union}`.matchAll(/^\s*([A-Za-z_][A-Za-z0-9_]*)\s*:/gm)]
    .map((m) => m[1] as string)
    .filter((k) => k !== 'appSettings');
}

// Set by the platform, or meaningful only to the embedded host / a local emulator.
const platform = new Set(['REGION_NAME']);
const localOnly = new Set(['COSMOS_KEY', 'COSMOS_DISABLE_TLS_VERIFY', 'ROUTELOCK_SQLITE_PATH']);
// Read outside shared/config.ts: the telemetry sink, host.json (%ROUTELOCK_TASK_HUB%), the Functions host.
const readElsewhere = ['APPLICATIONINSIGHTS_CONNECTION_STRING', 'ROUTELOCK_TASK_HUB'];

test('every setting the code reads is in local.settings.sample.json', () => {
  const missing = [...configVariables, ...readElsewhere].filter(
    (v) => !platform.has(v) && !localSettings.includes(v),
  );
  expect(missing).toEqual([]);
});

test('every setting the code reads in Azure is a Bicep app setting', () => {
  const appSettings = bicepAppSettings();
  const missing = [...configVariables, ...readElsewhere, 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING'].filter(
    (v) => !platform.has(v) && !localOnly.has(v) && !appSettings.includes(v),
  );
  expect(missing).toEqual([]);
  // and Azure runs the production profile on Cosmos DB, never an emulator key or TLS bypass
  expect(read('infra/bicep/main.bicep')).toMatch(/ROUTELOCK_PROFILE: 'production'/);
  expect(read('infra/bicep/main.bicep')).toMatch(/ROUTELOCK_STORE: 'cosmos'/);
  for (const v of localOnly) expect(appSettings).not.toContain(v);
});

test('no stale settings: every ROUTELOCK_/COSMOS_ setting in the files is one the code reads', () => {
  const known = new Set([...configVariables, ...readElsewhere]);
  const isOurs = (k: string) => /^(ROUTELOCK|COSMOS)_[A-Z]/.test(k); // COSMOS__* is the trigger's connection
  expect(bicepAppSettings().filter((k) => isOurs(k) && !known.has(k))).toEqual([]);
  expect(localSettings.filter((k) => isOurs(k) && !known.has(k))).toEqual([]);
});

test('the timing defaults in Bicep are DESIGN §3 production defaults', () => {
  const main = read('infra/bicep/main.bicep');
  expect(main).toMatch(/param cacheTiers string = 'edge=7200,regional=1800,local=60'/);
  expect(main).toMatch(/param safetyBufferSeconds int = 600/);
  expect(main).toMatch(/param prelockLeaseSeconds int = 172800/);
  expect(main).toMatch(/param prelockMaxSeconds int = 259200/);
  expect(main).toMatch(/param hardDeleteLeaseSeconds int = 21600/);
  expect(main).toMatch(/param writeLeaseSeconds int = 300/);
  expect(main).toMatch(/param writeBudgetSeconds int = 900/);
  expect(main).toMatch(/param retryAfterMaxSeconds int = 5/);
  // the replication bound the convergence delay uses is the store's own staleness bound
  expect(main).toMatch(/ROUTELOCK_REPLICATION_BOUND_SECONDS: string\(maxStalenessIntervalSeconds\)/);
});

test("every trigger's connection has its settings", () => {
  const functionFiles = readdirSync(join(root, 'functions')).filter((f) => f.endsWith('.ts'));
  const connections = new Set(
    functionFiles.flatMap((f) =>
      [...read(`functions/${f}`).matchAll(/connection: '([^']+)'/g)].map((m) => m[1] as string),
    ),
  );
  expect([...connections].sort()).toEqual(['AzureWebJobsStorage', 'COSMOS']);
  const appSettings = bicepAppSettings();
  // identity-based connections: the service URI (or endpoint), the credential and the client id
  expect(appSettings).toEqual(
    expect.arrayContaining(['COSMOS__accountEndpoint', 'COSMOS__credential', 'COSMOS__clientId']),
  );
  expect(appSettings).toEqual(
    expect.arrayContaining([
      'AzureWebJobsStorage__blobServiceUri',
      'AzureWebJobsStorage__queueServiceUri',
      'AzureWebJobsStorage__tableServiceUri',
      'AzureWebJobsStorage__credential',
      'AzureWebJobsStorage__clientId',
    ]),
  );
  expect(localSettings).toEqual(expect.arrayContaining(['AzureWebJobsStorage', 'COSMOS__accountEndpoint']));
  // the queues and the lease container the triggers use are created by the Bicep
  expect(bicep).toMatch(/name: 'migrations'/);
  expect(bicep).toMatch(/name: 'migrations-poison'/);
  expect(read('infra/bicep/modules/cosmos.bicep')).toMatch(/'locations', 'leases', 'audit', 'migrations'/);
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

test('the Bicep holds no key material', () => {
  for (const pattern of [
    /listKeys/i,
    /primaryMasterKey/i,
    /AccountKey=/i,
    /SharedAccessKey/i,
    /\bkey\s*:/i,
    /secret/i,
    /listConnectionStrings/i,
  ]) {
    expect({ pattern: String(pattern), found: pattern.test(bicep) }).toEqual({
      pattern: String(pattern),
      found: false,
    });
  }
  expect(read('infra/bicep/modules/storage.bicep')).toMatch(/allowSharedKeyAccess: false/);
  expect(read('infra/bicep/modules/cosmos.bicep')).toMatch(/disableLocalAuth: true/);
  expect(read('infra/bicep/modules/monitoring.bicep')).toMatch(/DisableLocalAuth: true/);
});

test('Cosmos DB: bounded staleness with a single write region, and the app identity as Data Contributor', () => {
  const cosmos = read('infra/bicep/modules/cosmos.bicep');
  expect(cosmos).toMatch(/defaultConsistencyLevel: 'BoundedStaleness'/);
  expect(cosmos).toMatch(/enableMultipleWriteLocations: false/);
  expect(cosmos).toMatch(
    /@minLength\(2\)\s*\n@description\('Regions of the account; the first is the single write region.'\)\s*\nparam locations array/,
  );
  expect(cosmos).toMatch(/param maxStalenessIntervalSeconds int = 300/);
  expect(cosmos).toMatch(/param maxStalenessPrefix int = 100000/);
  expect(cosmos).toMatch(/var dataContributor = '00000000-0000-0000-0000-000000000002'/);
  expect(cosmos).toMatch(/sqlRoleDefinitions\/\$\{dataContributor\}/);
});

test('Flex Consumption, Node, a user-assigned identity, the azd service tag, and the four role assignments', () => {
  const app = read('infra/bicep/modules/functionapp.bicep');
  expect(app).toMatch(/sku: \{ name: 'FC1', tier: 'FlexConsumption' \}/);
  expect(app).toMatch(/runtime: \{ name: 'node', version: '20' \}/);
  expect(app).toMatch(/type: 'UserAssigned'/);
  expect(app).toMatch(/'azd-service-name': 'api'/);
  expect(app).toMatch(/maximumInstanceCount: maximumInstanceCount/);
  const rbac = read('infra/bicep/modules/rbac.bicep');
  for (const role of [
    'b7e6dc6d-f1e8-4753-8033-0f276bb0955b',
    '974c5e8b-45b9-4653-ba55-5f855dd0fb88',
    '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3',
    '3913510d-42f4-4e42-8a64-420c390055eb',
  ]) {
    expect(rbac).toContain(role);
  }
  expect(read('azure.yaml')).toMatch(/api:\s*\n\s*project: \.\s*\n\s*language: ts\s*\n\s*host: function/);
});

test('host.json: extension bundle [4.*, 5.0.0), task hub from a setting, 5 dequeues, no instance overwrite', () => {
  const host = JSON.parse(read('host.json')) as {
    extensionBundle: { version: string };
    extensions: {
      queues: { maxDequeueCount: number };
      durableTask: { hubName: string; overridableExistingInstanceStates: string };
    };
  };
  expect(host.extensionBundle.version).toBe('[4.*, 5.0.0)');
  expect(host.extensions.durableTask).toEqual({
    hubName: '%ROUTELOCK_TASK_HUB%',
    overridableExistingInstanceStates: 'NonRunningStates',
  });
  expect(host.extensions.queues.maxDequeueCount).toBe(5);
});

test('negative control: the settings check finds a setting that only the code knows', () => {
  const withExtra = [...configVariables, 'ROUTELOCK_SOMETHING_NEW'];
  expect(withExtra.filter((v) => !platform.has(v) && !localSettings.includes(v))).toEqual([
    'ROUTELOCK_SOMETHING_NEW',
  ]);
});
