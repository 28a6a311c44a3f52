import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { type HttpEndpoint, registerHttp } from '../../functions/http/endpoint';
import { statusByCode } from '../../functions/http/problem';
import { allEndpoints, functionEndpoints } from '../../local/host';

/** The declared routes, openapi.yaml and the Functions registration agree. */

interface OpenApi {
  paths: Record<string, Record<string, { security?: unknown[]; responses: Record<string, unknown> }>>;
  components: { schemas: { Problem: { properties: { code: { enum: string[] } } } } };
}

const spec = parse(readFileSync(join(__dirname, '../../openapi.yaml'), 'utf8')) as OpenApi;
const methods = ['get', 'put', 'post', 'delete', 'patch'];

function declared(endpoints: HttpEndpoint[]): string[] {
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
  const extra: HttpEndpoint = {
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
    listRoutes: 'admin',
    prelock: 'function',
    escalate: 'function',
    renew: 'function',
    swap: 'function',
    release: 'function',
    startMigration: 'function',
    getMigration: 'function',
    getAudit: 'admin',
    openForceRelease: 'admin',
    approveForceRelease: 'admin',
    getForceRelease: 'admin',
    runProbe: 'admin',
  });
  // The Functions host reserves routes that start with "admin" (azure-functions-host#1781).
  for (const r of registered) {
    expect(r.route).not.toMatch(/^admin/i);
    expect(r.name).not.toMatch(/^admin/i);
  }
  expect(new Set(registered.map((r) => r.name)).size).toBe(registered.length);
});

test('outside the Functions host, importing a functions/ file registers nothing (the embedded host serves them)', () => {
  expect(registerHttp(allEndpoints)).toBe(0);
});
