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
import { appRoles } from '../functions/http/auth';
import { configVariables } from '../shared/config';
import { type Profile, type ProfileVariable, profiles } from '../shared/profiles';

/**
 * Keeps the deployment files honest (there is no Bicep CLI on the CI machines, so this reads them):
 * every setting the code reads is in local.settings.sample.json and in the Bicep app settings, and no
 * stale one is; every trigger's connection has its settings; package.json `main` matches the compiled
 * functions; no key material; Cosmos DB is bounded staleness with a single write region; who may call
 * (App Service authentication, the app roles); the token key set in Key Vault; the hardening; the
 * workflows' pinning and token permissions.
 */

const root = join(__dirname, '..');
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const bicepFiles = [
  'infra/bicep/main.bicep',
  ...readdirSync(join(root, 'infra/bicep/modules')).map((f) => `infra/bicep/modules/${f}`),
];
const bicep = bicepFiles.map(read).join('\n');
const localSettingValues = (
  JSON.parse(read('local.settings.sample.json')) as { Values: Record<string, string> }
).Values;
const localSettings = Object.keys(localSettingValues);

/** The text of the `{...}` (or `[...]`) that opens at or after `from` in `text`, brackets balanced. */
function balanced(text: string, from: number, open = '{', close = '}'): string {
  const start = text.indexOf(open, from);
  if (start < 0) throw new Error(`no ${open} after ${from}`);
  let depth = 0;
  for (let i = start; i < text.length; i += 1) {
    if (text[i] === open) depth += 1;
    else if (text[i] === close && (depth -= 1) === 0) return text.slice(start, i + 1);
  }
  throw new Error(`unbalanced ${open} at ${start}`);
}

/** Top-level keys of a Bicep object literal (one property a line, as this repository writes them). */
function objectKeys(block: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  for (const line of block.split('\n')) {
    const m = depth === 1 ? /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*:/.exec(line) : null;
    if (m) keys.push(m[1] as string);
    for (const ch of line.replace(/'[^']*'/g, "''").replace(/\/\/.*$/, '')) {
      if (ch === '{' || ch === '[') depth += 1;
      else if (ch === '}' || ch === ']') depth -= 1;
    }
  }
  return keys;
}

/** App settings the Bicep assigns: the appSettings object in main.bicep and the union in the app module. */
function bicepAppSettings(): string[] {
  const main = read('infra/bicep/main.bicep');
  const app = read('infra/bicep/modules/functionapp.bicep');
  return [
    ...objectKeys(balanced(main, main.indexOf('appSettings: {'))),
    ...objectKeys(balanced(app, app.indexOf('union(appSettings, {') + 'union(appSettings, '.length)),
  ];
}

/** The declaration and body of `resource <symbol> '…'` (or `module <symbol> '…'`) in one Bicep file. */
function resourceBlock(text: string, symbol: string): string {
  const at = text.search(new RegExp(`(resource|module) ${symbol} '`));
  if (at < 0) throw new Error(`no resource or module ${symbol}`);
  return text.slice(at, at + text.slice(at).indexOf('{')) + balanced(text, at);
}

/** Every `resource <symbol> '<type>@…'` of the given types in the Bicep files, with its body. */
function resourcesOfType(pattern: RegExp): { file: string; symbol: string; body: string }[] {
  return bicepFiles.flatMap((file) => {
    const text = read(file);
    return [...text.matchAll(/^\s*resource (\w+) '([^'@]+)@[^']+'/gm)]
      .filter((m) => pattern.test(m[2] as string))
      .map((m) => ({ file, symbol: m[1] as string, body: resourceBlock(text, m[1] as string) }));
  });
}

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
]);
// Read in Azure too, but left at the default there (the JWKS is the tenant's, derived from its id).
const azureDefaults = new Set(['ROUTELOCK_ENTRA_JWKS_URI']);
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
    (v) => !platform.has(v) && !localOnly.has(v) && !azureDefaults.has(v) && !appSettings.includes(v),
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

/** `param <name> <type> = <default>` in main.bicep, the default as the app setting's string. */
function bicepParamDefaults(): Record<string, string> {
  const main = read('infra/bicep/main.bicep');
  return Object.fromEntries(
    [...main.matchAll(/^param (\w+) \w+ = (?:'([^']*)'|(\S+))$/gm)].map((m) => [
      m[1] as string,
      (m[2] ?? m[3]) as string,
    ]),
  );
}

/** What main.bicep's appSettings assign to each setting (the expression, as written). */
function bicepAppSettingExpressions(): Record<string, string> {
  const main = read('infra/bicep/main.bicep');
  const block = balanced(main, main.indexOf('appSettings: {'));
  return Object.fromEntries(
    [...block.matchAll(/^\s*([A-Z][A-Za-z0-9_]*)\s*:\s*(.+?)\s*$/gm)].map((m) => [
      m[1] as string,
      m[2] as string,
    ]),
  );
}

/** Each profile variable whose Bicep default differs from `profile`: `VAR: bicep …, profile …`. */
function bicepDisagreements(profile: Profile): string[] {
  const defaults = bicepParamDefaults();
  const expressions = bicepAppSettingExpressions();
  return Object.entries(profile).flatMap(([variable, expected]) => {
    const expression = expressions[variable];
    const param = expression === undefined ? undefined : /^(?:string\((\w+)\)|(\w+))$/.exec(expression);
    const name = param?.[1] ?? param?.[2];
    const value = name === undefined ? undefined : defaults[name];
    return value === expected
      ? []
      : [`${variable}: bicep ${expression ?? '(unset)'} = ${value}, profile ${expected}`];
  });
}

test('the Bicep app settings default to the production profile (shared/profiles.ts)', () => {
  expect(bicepDisagreements(profiles.production)).toEqual([]);
  // the replication bound the convergence delay uses is the store's own staleness bound
  const main = read('infra/bicep/main.bicep');
  expect(main).toMatch(/ROUTELOCK_REPLICATION_BOUND_SECONDS: string\(maxStalenessIntervalSeconds\)/);
});

test('negative control: a Bicep default that differs from the profile is caught', () => {
  expect(bicepDisagreements({ ...profiles.production, ROUTELOCK_WRITE_LEASE_SECONDS: '301' })).toEqual([
    'ROUTELOCK_WRITE_LEASE_SECONDS: bicep string(writeLeaseSeconds) = 300, profile 301',
  ]);
});

/** Each profile variable local.settings.sample.json sets otherwise than `profile`. */
function sampleDisagreements(values: Record<string, string>, profile: Profile): string[] {
  return Object.entries(profile)
    .filter(([variable, expected]) => values[variable] !== expected)
    .map(
      ([variable, expected]) => `${variable}: sample ${values[variable] ?? '(unset)'}, profile ${expected}`,
    );
}

test('local.settings.sample.json selects the dev profile and sets its values (shared/profiles.ts)', () => {
  expect(localSettingValues.ROUTELOCK_PROFILE).toBe('dev');
  expect(sampleDisagreements(localSettingValues, profiles.dev)).toEqual([]);
  expect(sampleDisagreements({ ...localSettingValues, ROUTELOCK_DELTA_ATTEMPTS: '4' }, profiles.dev)).toEqual(
    ['ROUTELOCK_DELTA_ATTEMPTS: sample 4, profile 3'],
  );
});

/** The README configuration table's rows: variable → [production, dev] as written (backticks dropped). */
function readmeProfileTable(): Record<string, [string, string]> {
  const readme = read('README.md');
  const rows = [
    ...readme.matchAll(/^\| `(ROUTELOCK_[A-Z_]+)`\s*\|[^|]*\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|$/gm),
  ];
  const plain = (cell: string) => cell.replace(/`/g, '');
  return Object.fromEntries(
    rows.map((m) => [m[1] as string, [plain(m[2] as string), plain(m[3] as string)]]),
  );
}

test("the README's configuration table is the profile table", () => {
  const expected = Object.fromEntries(
    Object.keys(profiles.production).map((v) => [
      v,
      [profiles.production[v as ProfileVariable], profiles.dev[v as ProfileVariable]],
    ]),
  );
  expect(readmeProfileTable()).toEqual(expected);
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

test('the Bicep holds no key material; the one secret is the token key set, from a secure parameter', () => {
  for (const pattern of [
    /listKeys/i,
    /primaryMasterKey/i,
    /AccountKey=/i,
    /SharedAccessKey/i,
    /\bkey\s*:/i,
    /listConnectionStrings/i,
    /listSecrets/i,
    /clientSecret/i,
    /'[A-Za-z0-9+/_-]{40,}={0,2}'/, // a literal that looks like key material
  ]) {
    expect({ pattern: String(pattern), found: pattern.test(bicep) }).toEqual({
      pattern: String(pattern),
      found: false,
    });
  }
  expect(read('infra/bicep/modules/storage.bicep')).toMatch(/allowSharedKeyAccess: false/);
  expect(read('infra/bicep/modules/cosmos.bicep')).toMatch(/disableLocalAuth: true/);
  expect(read('infra/bicep/modules/monitoring.bicep')).toMatch(/DisableLocalAuth: true/);

  // The only secret is the Key Vault secret for the token key set, written from a @secure() parameter
  // that defaults to empty and appears in no output.
  const secrets = resourcesOfType(/^Microsoft\.KeyVault\/vaults\/secrets$/);
  expect(secrets.map((r) => `${r.file}:${r.symbol}`)).toEqual([
    'infra/bicep/modules/keyvault.bicep:tokenKeysSecret',
  ]);
  expect(secrets[0]?.body).toMatch(/value: base64ToString\(tokenKeysBase64\)/);
  for (const file of bicepFiles) {
    const text = read(file);
    const secureParams = [
      ...text.matchAll(/@secure\(\)\s*\n(?:@description\([^\n]*\)\s*\n)?param (\w+) (\w+)( = '')?/g),
    ];
    expect(secureParams.map((m) => `${m[1]} ${m[2]}${m[3] ?? ''}`)).toEqual(
      file.endsWith('main.bicep') || file.endsWith('keyvault.bicep') ? ["tokenKeysBase64 string = ''"] : [],
    );
    expect(text.split('\n').filter((l) => /^output /.test(l) && /tokenKeysBase64/.test(l))).toEqual([]);
  }
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
  // Node 20 left Functions support in April 2026
  expect(app).toMatch(/runtime: \{ name: 'node', version: '22' \}/);
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

test('App Service authentication: Entra ID, 401 without a token, only /api/health open', () => {
  const app = read('infra/bicep/modules/functionapp.bicep');
  const auth = resourceBlock(app, 'auth');
  expect(auth).toMatch(/resource auth 'config'/);
  expect(auth).toMatch(/name: 'authsettingsV2'/);
  expect(auth).toMatch(/platform: \{ enabled: true \}/);
  expect(auth).toMatch(/requireAuthentication: true/);
  expect(auth).toMatch(/unauthenticatedClientAction: 'Return401'/);
  expect(auth).toMatch(/excludedPaths: unauthenticatedPaths/);
  expect(app).toMatch(/param unauthenticatedPaths array = \['\/api\/health'\]/);
  expect(auth).toMatch(/azureActiveDirectory: \{\s*enabled: true/);
  expect(auth).toMatch(/clientId: entraClientId/);
  // https://login.microsoftonline.com/<tenant>/v2.0 in the public cloud
  expect(auth).toMatch(
    /openIdIssuer: '\$\{environment\(\)\.authentication\.loginEndpoint\}\$\{entraTenantId\}\/v2\.0'/,
  );
  expect(auth).toMatch(/validation: \{ allowedAudiences: entraAudiences \}/);
  expect(auth).toMatch(/tokenStore: \{ enabled: false \}/);
  // the app starts with its settings only after authentication is on
  expect(resourceBlock(app, 'settings')).toMatch(/dependsOn: \[auth\]/);

  // every endpoint the code leaves anonymous is an excluded path, and no other
  const anonymous = endpointRoles()
    .filter((e) => e.role === 'anonymous')
    .map((e) => `/api/${e.route}`);
  expect(anonymous).toEqual(['/api/health']);
});

test('ROUTELOCK_AUTH and the Entra settings the app reads come from the same parameters as Easy Auth', () => {
  const main = read('infra/bicep/main.bicep');
  expect(main).toMatch(
    /@minLength\(36\)\s*\n@maxLength\(36\)\s*\n@description\([^\n]*\)\s*\nparam entraClientId string\n/,
  );
  expect(main).toMatch(/param entraTenantId string = subscription\(\)\.tenantId/);
  expect(main).toMatch(/param entraAudiences array = \['api:\/\/\$\{entraClientId\}'\]/);
  expect(main).toMatch(
    /@allowed\(\['appservice', 'entra'\]\)\s*\n@description\([^\n]*\)\s*\nparam authMode string = 'appservice'/,
  );
  // v2 access tokens carry the client id as aud: accepted in both modes, like Easy Auth does implicitly
  expect(main).toMatch(/var audiences = union\(entraAudiences, \[entraClientId\]\)/);
  expect(main).toMatch(/entraAudiences: audiences/);
  expect(main).toMatch(/ROUTELOCK_AUTH: authMode/);
  expect(main).toMatch(/ROUTELOCK_ENTRA_TENANT_ID: entraTenantId/);
  expect(main).toMatch(/ROUTELOCK_ENTRA_AUDIENCES: join\(audiences, ','\)/);
  expect(bicepAppSettings()).toEqual(
    expect.arrayContaining(['ROUTELOCK_AUTH', 'ROUTELOCK_ENTRA_TENANT_ID', 'ROUTELOCK_ENTRA_AUDIENCES']),
  );
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
  const main = read('infra/bicep/main.bicep');
  expect(main).toMatch(/param secondaryRegion string = cosmosLocations\[1\]/);
  expect(main).toMatch(
    /@minLength\(1\)\s*\n@description\([^\n]*\)\s*\nparam allowedRegions array = \[location, secondaryRegion\]/,
  );
  expect(main).toMatch(/ROUTELOCK_REGIONS: join\(allowedRegions, ','\)/);
  expect(bicepAppSettings()).toContain('ROUTELOCK_REGIONS');
  expect(parameters.secondaryRegion?.value).toBe('${ROUTELOCK_SECONDARY_REGION=northeurope}');
  expect(parameters.cosmosLocations?.value).toEqual([
    '${AZURE_LOCATION}',
    '${ROUTELOCK_SECONDARY_REGION=northeurope}',
  ]);
});

test('Key Vault: RBAC only, purge protection, Secrets User for the app identity, a KV reference for the key set', () => {
  const kv = read('infra/bicep/modules/keyvault.bicep');
  const vault = resourceBlock(kv, 'vault');
  expect(vault).toMatch(/resource vault 'Microsoft\.KeyVault\/vaults@/);
  expect(vault).toMatch(/enableRbacAuthorization: true/);
  expect(vault).toMatch(/enableSoftDelete: true/);
  expect(vault).toMatch(/enablePurgeProtection: true/);
  expect(vault).not.toMatch(/accessPolicies/);
  // the same public-endpoint posture as the storage account
  expect(vault).toMatch(/publicNetworkAccess: 'Enabled'/);

  // Key Vault Secrets User, for the app's user-assigned identity, on this vault only
  const grant = resourceBlock(kv, 'appSecretsUser');
  expect(kv).toMatch(/var keyVaultSecretsUser = '4633458b-17de-408a-b874-0445c86b69e6'/);
  expect(grant).toMatch(/scope: vault/);
  expect(grant).toMatch(/roleDefinitions', keyVaultSecretsUser\)/);
  expect(grant).toMatch(/principalId: appPrincipalId/);
  expect(grant).toMatch(/principalType: 'ServicePrincipal'/);
  const main = read('infra/bicep/main.bicep');
  expect(resourceBlock(main, 'keyvault')).toMatch(/appPrincipalId: identity\.outputs\.principalId/);

  // the secret only when a key set is passed: a later deployment leaves the secret and its versions alone
  const secret = resourceBlock(kv, 'tokenKeysSecret');
  expect(secret).toMatch(/= if \(!empty\(tokenKeysBase64\)\) \{/);
  expect(secret).toMatch(/name: tokenKeysSecretName/);
  expect(main).toMatch(/var tokenKeysSecretName = 'routelock-token-keys'/);
  expect(resourceBlock(main, 'keyvault')).toMatch(/tokenKeysBase64: tokenKeysBase64/);

  // the app setting is a Key Vault reference, resolved with the user-assigned identity
  expect(main).toMatch(
    /var tokenKeysReference = '@Microsoft\.KeyVault\(VaultName=\$\{keyVaultName\};SecretName=\$\{tokenKeysSecretName\}\)'/,
  );
  expect(main).toMatch(/ROUTELOCK_TOKEN_KEYS: tokenKeysReference/);
  expect(bicepAppSettings()).toContain('ROUTELOCK_TOKEN_KEYS');
  const app = read('infra/bicep/modules/functionapp.bicep');
  expect(app).toMatch(/keyVaultReferenceIdentity: identityResourceId/);
  // the grant and the secret exist before the app resolves the reference
  expect(resourceBlock(main, 'api')).toMatch(/dependsOn: \[keyvault\]/);
});

// ---------------------------------------------------------------------------------------------------
// Hardening.
// ---------------------------------------------------------------------------------------------------

test('the deploying principal: its type from azd, and no data-plane access unless asked for', () => {
  const rbac = read('infra/bicep/modules/rbac.bicep');
  expect(rbac).toMatch(
    /@allowed\(\['User', 'ServicePrincipal', 'Group'\]\)\s*\nparam userPrincipalType string = 'User'/,
  );
  expect(rbac).toMatch(/param grantDeveloperDataAccess bool = false/);
  expect(rbac).toMatch(/var developerAccess = grantDeveloperDataAccess && !empty\(userPrincipalId\)/);
  const user = resourceBlock(rbac, 'userStorageAccess');
  expect(user).toMatch(/if \(developerAccess\)/);
  expect(user).toMatch(/principalType: userPrincipalType/);
  // the user's principal type is never hard-coded
  expect(rbac.match(/principalType: 'User'/g)).toBeNull();
  const main = read('infra/bicep/main.bicep');
  expect(main).toMatch(/param grantDeveloperDataAccess bool = false/);
  expect(resourceBlock(main, 'rbac')).toMatch(/userPrincipalType: principalType/);
  expect(resourceBlock(main, 'rbac')).toMatch(/grantDeveloperDataAccess: grantDeveloperDataAccess/);
  expect(parameters.principalType?.value).toBe('${AZURE_PRINCIPAL_TYPE=User}');
  expect(parameters.grantDeveloperDataAccess?.value).toBe('${ROUTELOCK_GRANT_DEVELOPER_DATA_ACCESS=false}');
});

test('the site: no basic-auth publishing, TLS 1.2, no FTP setting on Flex Consumption', () => {
  const app = read('infra/bicep/modules/functionapp.bicep');
  for (const policy of ['ftpPublishing', 'scmPublishing']) {
    const block = resourceBlock(app, policy);
    expect(block).toMatch(/'basicPublishingCredentialsPolicies'/);
    expect(block).toMatch(/properties: \{ allow: false \}/);
  }
  expect(resourceBlock(app, 'ftpPublishing')).toMatch(/name: 'ftp'/);
  expect(resourceBlock(app, 'scmPublishing')).toMatch(/name: 'scm'/);
  expect(app).toMatch(/minTlsVersion: '1\.2'/);
  expect(app).toMatch(/scmMinTlsVersion: '1\.2'/);
  expect(app).toMatch(/httpsOnly: true/);
  // ftpsState is a deprecated site property on Flex Consumption ("FTPS not supported")
  expect(app).not.toMatch(/^\s*ftpsState\s*:/m);
  expect(read('infra/bicep/modules/cosmos.bicep')).toMatch(/disableKeyBasedMetadataWriteAccess: true/);
});

test('diagnostic settings to Log Analytics: Cosmos DB, the storage services, the function app, Key Vault', () => {
  const settings = resourcesOfType(/^Microsoft\.Insights\/diagnosticSettings$/);
  const byScope = Object.fromEntries(
    settings.map((s) => [`${s.file.replace(/^.*\//, '')}:${/scope: (\w+)/.exec(s.body)?.[1]}`, s.body]),
  );
  expect(Object.keys(byScope).sort()).toEqual(
    [
      'cosmos.bicep:account',
      'functionapp.bicep:app',
      'keyvault.bicep:vault',
      'storage.bicep:blobs',
      'storage.bicep:queues',
      'storage.bicep:storage',
      'storage.bicep:tables',
    ].sort(),
  );
  for (const body of Object.values(byScope)) expect(body).toMatch(/workspaceId: logAnalyticsWorkspaceId/);
  expect(byScope['cosmos.bicep:account']).toMatch(/category: 'DataPlaneRequests'/);
  expect(byScope['functionapp.bicep:app']).toMatch(/category: 'FunctionAppLogs'/);
  expect(byScope['keyvault.bicep:vault']).toMatch(/categoryGroup: 'allLogs'/);
  // the account itself has metrics only; the logs are per service
  expect(byScope['storage.bicep:storage']).not.toMatch(/logs:/);
  const storage = read('infra/bicep/modules/storage.bicep');
  for (const category of ['StorageRead', 'StorageWrite', 'StorageDelete'])
    expect(storage).toContain(category);
  for (const service of ['blobs', 'queues', 'tables'])
    expect(byScope[`storage.bicep:${service}`]).toMatch(/logs: storageLogs/);
  // every module that has one gets the workspace from monitoring
  const main = read('infra/bicep/main.bicep');
  for (const module of ['storage', 'cosmos', 'keyvault', 'api']) {
    expect(resourceBlock(main, module)).toMatch(/logAnalyticsWorkspaceId: monitoring\.outputs\.workspaceId/);
  }
});

test('an action group, with or without an email, on every alert rule', () => {
  const monitoring = read('infra/bicep/modules/monitoring.bicep');
  const group = resourceBlock(monitoring, 'actionGroup');
  expect(group).toMatch(/resource actionGroup 'Microsoft\.Insights\/actionGroups@[^']+' = \{/); // unconditional
  expect(group).toMatch(/emailReceivers: empty\(alertEmail\)\s*\?\s*\[\]/);
  expect(monitoring).toMatch(/param alertEmail string = ''/);
  expect(parameters.alertEmail?.value).toBe('${ROUTELOCK_ALERT_EMAIL}');
  const rules = resourcesOfType(
    /^Microsoft\.Insights\/(scheduledQueryRules|metricAlerts|activityLogAlerts)$/,
  );
  expect(rules.length).toBeGreaterThanOrEqual(2);
  for (const rule of rules) {
    expect({
      rule: rule.symbol,
      attached: /actions: \{ actionGroups: \[actionGroup\.id\] \}/.test(rule.body),
    }).toEqual({
      rule: rule.symbol,
      attached: true,
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
