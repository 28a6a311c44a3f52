import type { AddressInfo } from 'node:net';
import { type AppRole, type EndpointRole, appRoles } from '../../functions/http/auth';
import type { HttpEndpoint } from '../../functions/http/endpoint';
import { type LocalHost, allEndpoints, extraRoutes } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { createLocalServer } from '../../local/server';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { signInLocation } from '../../functions/http/signIn';
import { asPrincipal } from '../support/principals';

/**
 * Every role rule over real HTTP: the embedded host on loopback under ROUTELOCK_AUTH=appservice, so
 * callers are `x-ms-client-principal` headers. For each endpoint (and the status page): no identity →
 * 401 (a page that signs a browser in: 302 to App Service's sign-in), an identity holding every role but the declared one → 403, the declared role alone → neither.
 */

interface Target {
  label: string;
  method: string;
  path: string;
  role: EndpointRole;
  /** A page that sends a browser with no identity to sign in (302) instead of a 401. */
  signIn?: string;
}

const params: Record<string, string> = { id: 'conv-walk', migrationId: 'm-walk', requestId: 'fr-none' };

function targets(
  endpoints: readonly Pick<HttpEndpoint, 'methods' | 'route' | 'role' | 'browserSignIn'>[],
  extras: readonly { path: string; role: EndpointRole }[],
): Target[] {
  return [
    ...endpoints.flatMap((e) =>
      e.methods.map((method) => ({
        label: `${method} /api/${e.route}`,
        method,
        path: `/api/${e.route.replace(/\{(\w+)\}/g, (_, p: string) => params[p] ?? 'x')}`,
        role: e.role,
        ...(e.browserSignIn ? { signIn: signInLocation(e.browserSignIn.returnTo) } : {}),
      })),
    ),
    ...extras.map((r) => ({ label: `GET ${r.path}`, method: 'GET', path: r.path, role: r.role })),
  ];
}

async function send(base: string, target: Target, headers: Record<string, string>): Promise<Response> {
  const withBody = target.method === 'POST' || target.method === 'PUT';
  return fetch(`${base}${target.path}`, {
    method: target.method,
    headers: { ...(withBody ? { 'content-type': 'application/json' } : {}), ...headers },
    redirect: 'manual',
    ...(withBody ? { body: '{}' } : {}),
  });
}

/** Walk the table; returns every rule broken (empty when all hold). */
async function walk(base: string, list: Target[]): Promise<string[]> {
  const broken: string[] = [];
  for (const target of list) {
    if (target.role === 'anonymous') {
      const res = await send(base, target, {});
      await res.arrayBuffer();
      if (res.status === 401 || res.status === 403)
        broken.push(`${target.label}: anonymous but ${res.status}`);
      continue;
    }
    const role: AppRole = target.role;
    const nobody = await send(base, target, {});
    const problem = (await nobody.json().catch(() => null)) as { code?: string } | null;
    if (target.signIn) {
      if (nobody.status !== 302 || nobody.headers.get('location') !== target.signIn)
        broken.push(`${target.label}: no identity → ${nobody.status}, expected 302 to ${target.signIn}`);
    } else if (nobody.status !== 401 || problem?.code !== 'Unauthenticated') {
      broken.push(`${target.label}: no identity → ${nobody.status}, expected 401 Unauthenticated`);
    }
    const others = appRoles.filter((r) => r !== role);
    const without = await send(base, target, asPrincipal({ oid: 'oid-without', roles: others }));
    const refused = (await without.json().catch(() => null)) as { code?: string } | null;
    if (without.status !== 403 || refused?.code !== 'Forbidden') {
      broken.push(`${target.label}: every role but ${role} → ${without.status}, expected 403 Forbidden`);
    }
    const holder = await send(base, target, asPrincipal({ oid: 'oid-holder', roles: [role] }));
    await holder.arrayBuffer();
    if (holder.status === 401 || holder.status === 403) {
      broken.push(`${target.label}: holding ${role} → ${holder.status}`);
    }
  }
  return broken;
}

let host: LocalHost;
beforeAll(async () => {
  host = await startLocalHost({
    env: { PORT: '0', ROUTELOCK_AUTH: 'appservice' },
    store: new SqliteStore(':memory:'),
    log: () => undefined,
  });
});
afterAll(async () => {
  await host.close();
});

test('the embedded host runs appservice on loopback, and its table covers every endpoint and the status page', () => {
  expect(host.config.auth.mode).toBe('appservice');
  const list = targets(allEndpoints, extraRoutes);
  expect(list).toHaveLength(allEndpoints.reduce((n, e) => n + e.methods.length, 0) + extraRoutes.length);
  expect(list.filter((t) => t.role === 'anonymous').map((t) => t.label)).toEqual(['GET /api/health']);
});

test('every endpoint: no identity 401, without its role 403, with its role neither', async () => {
  expect(await walk(host.url, targets(allEndpoints, extraRoutes))).toEqual([]);
}, 30_000);

test('negative control: an endpoint whose handler skips the wrapper breaks the walk', async () => {
  const leaky: HttpEndpoint = {
    name: 'leaky',
    methods: ['GET'],
    route: 'leaky',
    authLevel: 'function',
    role: 'Ops.Read', // declared, but the handler is not wrapped by handle()
    handler: async () => ({ status: 200, headers: { 'content-type': 'application/json' }, body: '{}' }),
  };
  const server = createLocalServer({ endpoints: [leaky], log: () => undefined });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    expect(await walk(base, targets([leaky], []))).toEqual([
      'GET /api/leaky: no identity → 200, expected 401 Unauthenticated',
      'GET /api/leaky: every role but Ops.Read → 200, expected 403 Forbidden',
    ]);
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});
