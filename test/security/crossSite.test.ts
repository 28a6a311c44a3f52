import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { type Server, createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { appRoles } from '../../functions/http/auth';
import { crossSiteRefusal } from '../../local/crossSite';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { allRoles, asPrincipal } from '../support/principals';
import { fastHostEnv } from '../support/timing';

/**
 * The embedded host refuses what a browser marks as sent from another site (Sec-Fetch-Site, Origin:
 * headers a page cannot set), under every ROUTELOCK_AUTH mode: a caller's identity and roles do not
 * make a cross-site request acceptable. A request without those headers (curl, the CLI, a service)
 * passes, body or no body.
 */

const TENANT = '11111111-2222-4333-8444-555555555555';
const AUDIENCE = 'api://routelock';

interface Answer {
  status: number;
  json: Record<string, unknown> | null;
}

function send(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<Answer> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const all = { ...headers, ...(body === undefined ? {} : { 'content-length': String(body.length) }) };
    const req = httpRequest({ host: url.hostname, port: url.port, method, path, headers: all }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => {
        let json: Record<string, unknown> | null = null;
        try {
          json = text ? (JSON.parse(text) as Record<string, unknown>) : null;
        } catch {
          // not JSON
        }
        resolve({ status: res.statusCode ?? 0, json });
      });
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/** What a page on https://evil.example gets its browser to send: no content type, no body. */
const evil = { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'no-cors' };

/** Every command a body-less POST (or a DELETE) can give, and one that takes a body. */
const commands: readonly [string, string][] = [
  ['POST', '/api/ops/probe'],
  ['POST', '/api/campaigns/camp-1/pause'],
  ['POST', '/api/campaigns/camp-1/resume'],
  ['POST', '/api/campaigns/camp-1/cancel'],
  ['POST', '/api/migrations/m-1/cancel'],
  ['POST', '/api/migrations/m-1/retry'],
  ['POST', '/api/ops/force-release/fr-1/approve'],
  ['POST', '/api/ops/routes/conv-1/force-release'],
  ['POST', '/api/routes/conv-1/prelock'],
  ['POST', '/api/migrations'],
  ['DELETE', '/api/routes/conv-1'],
];

/** A loopback JWKS endpoint and a token it vouches for, holding every role. */
async function entraFixture(): Promise<{ jwksUri: string; token: string; close: () => Promise<void> }> {
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  const server: Server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const now = Math.floor(Date.now() / 1000);
  const token = await new SignJWT({
    tid: TENANT,
    oid: 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee',
    roles: [...appRoles],
  })
    .setProtectedHeader({ alg: 'RS256', kid: 'k1', typ: 'JWT' })
    .setIssuer(`https://login.microsoftonline.com/${TENANT}/v2.0`)
    .setAudience(AUDIENCE)
    .setIssuedAt(now - 10)
    .setNotBefore(now - 10)
    .setExpirationTime(now + 3600)
    .sign(privateKey);
  return {
    jwksUri: `http://127.0.0.1:${port}/discovery/v2.0/keys`,
    token,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

let entra: Awaited<ReturnType<typeof entraFixture>>;
beforeAll(async () => {
  entra = await entraFixture();
});
afterAll(async () => {
  await entra.close();
});

const modes = () =>
  [
    ['none', {}, {}],
    ['appservice', { ROUTELOCK_AUTH: 'appservice' }, asPrincipal(allRoles)],
    [
      'entra',
      {
        ROUTELOCK_AUTH: 'entra',
        ROUTELOCK_ENTRA_TENANT_ID: TENANT,
        ROUTELOCK_ENTRA_AUDIENCES: AUDIENCE,
        ROUTELOCK_ENTRA_JWKS_URI: entra.jwksUri,
      },
      { authorization: `Bearer ${entra.token}` },
    ],
  ] as const;

describe.each(['none', 'appservice', 'entra'] as const)('ROUTELOCK_AUTH=%s', (mode) => {
  let host: LocalHost;
  let store: SqliteStore;
  let identity: Record<string, string>;

  beforeEach(async () => {
    const [, env, headers] = modes().find(([m]) => m === mode)!;
    identity = { ...headers };
    store = new SqliteStore(':memory:');
    host = await startLocalHost({ env: { ...fastHostEnv, ...env }, store, log: () => undefined });
    const put = await send(
      host.url,
      'PUT',
      '/api/routes/conv-1',
      { ...identity, 'content-type': 'application/json' },
      JSON.stringify({ location: { region: 'westeurope' } }),
    );
    expect(put.status).toBe(201);
  });
  afterEach(async () => {
    await host.close();
  });

  const snapshot = async () =>
    JSON.stringify([
      (await store.list({ lockedOnly: false, limit: 1000 })).items,
      store.counters.replaces,
      store.counters.creates,
      store.counters.deletes,
      await host.services.audit.list('conv-1', 1000),
    ]);

  test('a browser-shaped cross-site command (Origin evil.example, Sec-Fetch-Site cross-site, no type, no body) is 403 CrossSiteRequest and changes nothing', async () => {
    const before = await snapshot();
    for (const [method, path] of commands) {
      const res = await send(host.url, method, path, { ...identity, ...evil });
      expect({ method, path, status: res.status, code: res.json?.code }).toEqual({
        method,
        path,
        status: 403,
        code: 'CrossSiteRequest',
      });
    }
    expect(await snapshot()).toBe(before);
  });

  test('positive control: the same commands without the browser headers reach their handlers', async () => {
    const statuses = new Map<string, number>();
    for (const [method, path] of commands) {
      const res = await send(host.url, method, path, identity);
      expect(res.json?.code).not.toBe('CrossSiteRequest');
      expect(res.json?.code).not.toBe('UnsupportedMediaType');
      statuses.set(`${method} ${path}`, res.status);
    }
    expect(statuses.get('POST /api/ops/probe')).toBe(200);
    expect(statuses.get('POST /api/campaigns/camp-1/pause')).toBe(404);
    expect(statuses.get('POST /api/migrations/m-1/cancel')).toBe(404);
    expect(statuses.get('DELETE /api/routes/conv-1')).toBe(204);
  }, 20_000);
});

describe('each browser signal on its own', () => {
  let host: LocalHost;
  beforeAll(async () => {
    host = await startLocalHost({
      env: fastHostEnv,
      store: new SqliteStore(':memory:'),
      log: () => undefined,
    });
  });
  afterAll(async () => {
    await host.close();
  });

  test.each([
    ['Sec-Fetch-Site cross-site', { 'sec-fetch-site': 'cross-site' }],
    ['Sec-Fetch-Site same-site (another port of localhost)', { 'sec-fetch-site': 'same-site' }],
    ['a foreign Origin alone', { origin: 'http://localhost:3000' }],
    ['Origin null (a sandboxed frame or a file: page)', { origin: 'null' }],
    ['a cross-site JSON body', { ...evil, 'content-type': 'application/json' }],
  ])('%s is refused', async (_what, headers) => {
    const body = 'content-type' in headers ? '{}' : undefined;
    const res = await send(host.url, 'POST', '/api/ops/probe', headers, body);
    expect(res.status).toBe(403);
    expect(res.json).toMatchObject({ code: 'CrossSiteRequest', status: 403 });
  });

  test('a cross-site read that is not a page navigation (a script tag, a no-cors fetch) is refused', async () => {
    const res = await send(host.url, 'GET', '/api/routes', {
      'sec-fetch-site': 'cross-site',
      'sec-fetch-mode': 'no-cors',
      'sec-fetch-dest': 'script',
    });
    expect(res.json).toMatchObject({ code: 'CrossSiteRequest' });
  });

  test('positive controls: the page itself, a link followed to it, and clients without a browser', async () => {
    const own = `http://${new URL(host.url).host}`;
    const sameOrigin = await send(host.url, 'POST', '/api/ops/probe', {
      origin: own,
      'sec-fetch-site': 'same-origin',
      'sec-fetch-mode': 'cors',
    });
    expect(sameOrigin.status).toBe(200);
    const typed = await send(host.url, 'GET', '/api/health', { 'sec-fetch-site': 'none' });
    expect(typed.status).toBe(200);
    const link = await send(host.url, 'GET', '/api/health', {
      'sec-fetch-site': 'cross-site',
      'sec-fetch-mode': 'navigate',
      'sec-fetch-dest': 'document',
    });
    expect(link.status).toBe(200);
    expect((await send(host.url, 'POST', '/api/ops/probe')).status).toBe(200);
  }, 20_000);
});

describe('crossSiteRefusal (the rule)', () => {
  const base = {
    method: 'POST',
    host: '127.0.0.1:7071',
    origin: undefined,
    secFetchSite: undefined,
    secFetchMode: undefined,
    secFetchDest: undefined,
  };
  test.each([
    [{}, false],
    [{ origin: 'http://127.0.0.1:7071' }, false],
    [{ origin: 'HTTP://127.0.0.1:7071' }, false],
    [{ host: 'localhost:80', origin: 'http://localhost' }, false],
    [{ origin: 'https://127.0.0.1:7071' }, true],
    [{ origin: 'http://127.0.0.1:7072' }, true],
    [{ origin: 'http://localhost:7071' }, true],
    [{ origin: 'null' }, true],
    [{ origin: 'http://127.0.0.1:7071', host: undefined }, true],
    [{ secFetchSite: 'same-origin' }, false],
    [{ secFetchSite: 'none' }, false],
    [{ secFetchSite: 'Cross-Site' }, true],
    [{ secFetchSite: 'same-site' }, true],
    [
      { method: 'GET', secFetchSite: 'cross-site', secFetchMode: 'navigate', secFetchDest: 'document' },
      false,
    ],
    [{ method: 'GET', secFetchSite: 'cross-site', secFetchMode: 'navigate', secFetchDest: 'iframe' }, true],
    [{ method: 'POST', secFetchSite: 'cross-site', secFetchMode: 'navigate' }, true],
  ])('%j refused: %s', (input, refused) => {
    expect(crossSiteRefusal({ ...base, ...input }) !== null).toBe(refused);
  });
});
