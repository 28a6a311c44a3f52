import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { appRoles } from '../../functions/http/auth';
import { type EndpointDeclaration, registerHttp } from '../../functions/http/endpoint';
import { statusByCode } from '../../functions/http/problem';
import { functionEndpoints } from '../../functions/endpoints';
import { allEndpoints, extraRoutes } from '../../local/host';

/** The declared routes, openapi.yaml and the Functions registration agree. */

interface Operation {
  operationId: string;
  'x-routelock-role'?: string;
  security?: unknown[];
  responses: Record<string, unknown>;
}

interface OpenApi {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: { Problem: { properties: { code: { enum: string[] } } } } };
}

const spec = parse(readFileSync(join(__dirname, '../../openapi.yaml'), 'utf8')) as OpenApi;
const methods = ['get', 'put', 'post', 'delete', 'patch'];

function declared(endpoints: readonly EndpointDeclaration[]): string[] {
  return endpoints.flatMap((e) => e.methods.map((m) => `${m} /${e.route}`)).sort();
}

function documented(): string[] {
  return Object.entries(spec.paths)
    .flatMap(([path, item]) =>
      Object.keys(item)
        .filter((k) => methods.includes(k))
        .map((m) => `${m.toUpperCase()} ${path}`),
    )
    .sort();
}

test('every declared route is in openapi.yaml and every documented route is declared', () => {
  expect(documented()).toEqual(declared(allEndpoints));
});

test('negative control: a route missing from either side is caught', () => {
  const extra: EndpointDeclaration = {
    ...allEndpoints[0]!,
    name: 'x',
    route: 'routes/{id}/teleport',
    methods: ['POST'],
  };
  expect(documented()).not.toEqual(declared([...allEndpoints, extra]));
  expect(documented()).not.toEqual(declared(allEndpoints.slice(1)));
});

test('the Problem schema lists exactly the codes the server can send', () => {
  expect([...spec.components.schemas.Problem.properties.code.enum].sort()).toEqual(
    Object.keys(statusByCode).sort(),
  );
});

test('every operation documents a success and at least one problem response', () => {
  for (const item of Object.values(spec.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (!methods.includes(method)) continue;
      const statuses = Object.keys(op.responses);
      expect(statuses.some((s) => s.startsWith('2'))).toBe(true);
      expect(statuses.some((s) => /^[45]/.test(s))).toBe(true);
    }
  }
});

test('registration hands every endpoint to app.http with its auth level', () => {
  const registered: { name: string; route?: string; authLevel?: string; methods?: string[] }[] = [];
  const count = registerHttp(functionEndpoints, ((
    name: string,
    options: { route?: string; authLevel?: string; methods?: string[] },
  ) => {
    registered.push({ name, route: options.route, authLevel: options.authLevel, methods: options.methods });
  }) as never);
  expect(count).toBe(functionEndpoints.length);
  const auth = Object.fromEntries(registered.map((r) => [r.name, r.authLevel]));
  expect(auth).toEqual({
    health: 'anonymous',
    putRoute: 'function',
    getRoute: 'function',
    deleteRoute: 'function',
    listRoutes: 'function',
    prelock: 'function',
    escalate: 'function',
    announce: 'function',
    renew: 'function',
    swap: 'function',
    release: 'function',
    startMigration: 'function',
    getMigration: 'function',
    listMigrations: 'function',
    cancelMigration: 'function',
    retryMigration: 'function',
    startCampaign: 'function',
    listCampaigns: 'function',
    getCampaign: 'function',
    updateCampaign: 'function',
    addCampaignResources: 'function',
    pauseCampaign: 'function',
    resumeCampaign: 'function',
    cancelCampaign: 'function',
    getAudit: 'function',
    openForceRelease: 'function',
    approveForceRelease: 'function',
    getForceRelease: 'function',
    runProbe: 'function',
    // the status page and its reads: a browser holds no function key (functions/statusPage.ts)
    statusPage: 'anonymous',
    statusPageAsset: 'anonymous',
    viewListMigrations: 'anonymous',
    viewListRoutes: 'anonymous',
    viewGetAudit: 'anonymous',
    viewListCampaigns: 'anonymous',
    viewGetCampaign: 'anonymous',
  });
  // The Functions host reserves routes that start with "admin" (azure-functions-host#1781).
  for (const r of registered) {
    expect(r.route).not.toMatch(/^admin/i);
    expect(r.name).not.toMatch(/^admin/i);
  }
  expect(new Set(registered.map((r) => r.name)).size).toBe(registered.length);
});

/** The role table (README / notes): one app role per endpoint, declared beside its route. */
const roleTable: Record<string, string> = {
  health: 'anonymous',
  putRoute: 'Routes.Write',
  getRoute: 'Routes.Read',
  deleteRoute: 'Routes.Write',
  listRoutes: 'Ops.Read',
  getAudit: 'Ops.Read',
  prelock: 'Locks.Write',
  escalate: 'Locks.Write',
  announce: 'Locks.Write',
  renew: 'Locks.Write',
  swap: 'Locks.Write',
  release: 'Locks.Write',
  startMigration: 'Migrations.Write',
  getMigration: 'Ops.Read',
  listMigrations: 'Ops.Read',
  cancelMigration: 'Migrations.Write',
  retryMigration: 'Migrations.Write',
  startCampaign: 'Migrations.Write',
  listCampaigns: 'Ops.Read',
  getCampaign: 'Ops.Read',
  updateCampaign: 'Migrations.Write',
  addCampaignResources: 'Migrations.Write',
  pauseCampaign: 'Migrations.Write',
  resumeCampaign: 'Migrations.Write',
  cancelCampaign: 'Migrations.Write',
  metrics: 'Ops.Read',
  openForceRelease: 'Ops.Operator',
  approveForceRelease: 'Ops.Approver',
  getForceRelease: 'Ops.Read',
  runProbe: 'Ops.Operator',
  statusPage: 'Ops.Read',
  statusPageAsset: 'Ops.Read',
  viewListMigrations: 'Ops.Read',
  viewListRoutes: 'Ops.Read',
  viewGetAudit: 'Ops.Read',
  viewListCampaigns: 'Ops.Read',
  viewGetCampaign: 'Ops.Read',
};

test('every endpoint declares an app role; health is the only anonymous one; the table is as documented', () => {
  const known = new Set<string>([...appRoles, 'anonymous']);
  for (const e of allEndpoints) expect(known.has(e.role)).toBe(true);
  expect(
    allEndpoints.filter((e) => e.role === 'anonymous').map((e) => `${e.methods.join()} ${e.route}`),
  ).toEqual(['GET health']);
  expect(Object.fromEntries(allEndpoints.map((e) => [e.name, e.role]))).toEqual(roleTable);
  // the embedded host's status page (outside /api) is a read-only operator view
  expect(extraRoutes.map((r) => [r.path, r.role])).toEqual([['/', 'Ops.Read']]);
});

/** Mismatches between the declared roles and openapi.yaml (x-routelock-role, 401 and 403 documented). */
function roleMismatches(endpoints: readonly EndpointDeclaration[], api: OpenApi): string[] {
  const problems: string[] = [];
  for (const e of endpoints) {
    for (const method of e.methods) {
      const op = api.paths[`/${e.route}`]?.[method.toLowerCase()];
      const where = `${method} /${e.route}`;
      if (!op) {
        problems.push(`${where}: not documented`);
        continue;
      }
      if (op['x-routelock-role'] !== e.role) {
        problems.push(`${where}: x-routelock-role ${String(op['x-routelock-role'])}, declared ${e.role}`);
      }
      const statuses = Object.keys(op.responses);
      const guarded = e.role !== 'anonymous';
      if (guarded && (!statuses.includes('401') || !statuses.includes('403'))) {
        problems.push(`${where}: 401 and 403 not both documented`);
      }
      if (!guarded && statuses.includes('401')) problems.push(`${where}: anonymous but documents 401`);
    }
  }
  return problems;
}

test("openapi.yaml documents each operation's declared role (x-routelock-role) and its 401 and 403", () => {
  expect(roleMismatches(allEndpoints, spec)).toEqual([]);
});

test('negative control: a role that differs from openapi.yaml, or a missing 401, is caught', () => {
  const relabelled = allEndpoints.map((e) => (e.name === 'swap' ? { ...e, role: 'Ops.Read' as const } : e));
  expect(roleMismatches(relabelled, spec)).toEqual([
    'POST /routes/{id}/swap: x-routelock-role Locks.Write, declared Ops.Read',
  ]);
  const without401 = structuredClone(spec);
  delete without401.paths['/routes/{id}']!.get!.responses['401'];
  expect(roleMismatches(allEndpoints, without401)).toEqual([
    'GET /routes/{id}: 401 and 403 not both documented',
  ]);
});

test('outside the Functions host, importing a functions/ file registers nothing (the embedded host serves them)', () => {
  expect(registerHttp(allEndpoints)).toBe(0);
});

test('an operation that needs a role offers no anonymous alternative, and the page routes take a bearer token', () => {
  const anonymous = (op: Operation) => (op.security ?? []).some((s) => Object.keys(s as object).length === 0);
  const offers = (op: Operation, scheme: string) =>
    (op.security ?? []).some((s) => Object.keys(s as object).includes(scheme));
  for (const [path, item] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (!methods.includes(method) || op['x-routelock-role'] === undefined) continue;
      expect({ path, anonymous: anonymous(op) }).toEqual({ path, anonymous: false });
      // functions/statusPage.ts authenticates its routes as the API does: a bearer token is accepted
      if (offers(op, 'appServiceSession'))
        expect({ path, entraBearer: offers(op, 'entraBearer') }).toEqual({ path, entraBearer: true });
    }
  }
  // negative control: an anonymous `{}` alternative on /status is caught
  expect(anonymous({ ...spec.paths['/status']!.get!, security: [{ appServiceSession: [] }, {}] })).toBe(true);
});
