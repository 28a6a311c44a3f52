import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type JWK, type KeyLike, SignJWT, UnsecuredJWT, exportJWK, generateKeyPair } from 'jose';
import type { Services } from '../../functions/services';
import { startLocalHost } from '../support/localHost';
import { RoutingClient } from '../../shared/core/client';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { type Called, call, handlerServices } from '../support/handlers';

/**
 * ROUTELOCK_AUTH=entra through the registered handlers: tokens signed with locally generated RSA keys,
 * the key set served by a loopback JWKS server, validated by the app with jose (no mocks).
 */

const TENANT = '11111111-2222-4333-8444-555555555555';
const OTHER_TENANT = '99999999-2222-4333-8444-555555555555';
const AUDIENCE = 'api://routelock';
const V2_ISSUER = `https://login.microsoftonline.com/${TENANT}/v2.0`;
const V1_ISSUER = `https://sts.windows.net/${TENANT}/`;
const OID = 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee';

interface KeyPair {
  kid: string;
  privateKey: KeyLike;
  jwk: JWK;
}

async function keyPair(kid: string): Promise<KeyPair> {
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}

/** A loopback JWKS endpoint, as login.microsoftonline.com/{tenant}/discovery/v2.0/keys serves it. */
async function jwksServer(
  keys: JWK[],
): Promise<{ url: string; hits: () => number; close: () => Promise<void> }> {
  let hits = 0;
  const server: Server = createServer((req, res) => {
    hits += 1;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ keys }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/discovery/v2.0/keys`,
    hits: () => hits,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

interface TokenOptions {
  key?: KeyPair;
  kid?: string;
  issuer?: string;
  audience?: string;
  expiresAt?: number;
  notBefore?: number;
  claims?: Record<string, unknown>;
}

let trusted: KeyPair;
let stranger: KeyPair;
let jwks: Awaited<ReturnType<typeof jwksServer>>;

async function token(options: TokenOptions = {}): Promise<string> {
  const key = options.key ?? trusted;
  const now = nowSeconds();
  return new SignJWT({ tid: TENANT, oid: OID, name: 'Alice', roles: ['Routes.Read'], ...options.claims })
    .setProtectedHeader({ alg: 'RS256', kid: options.kid ?? key.kid, typ: 'JWT' })
    .setIssuer(options.issuer ?? V2_ISSUER)
    .setAudience(options.audience ?? AUDIENCE)
    .setIssuedAt(now - 10)
    .setNotBefore(options.notBefore ?? now - 10)
    .setExpirationTime(options.expiresAt ?? now + 3600)
    .sign(key.privateKey);
}

async function entraServices(jwksUri: string): Promise<Services> {
  const { services } = await handlerServices({
    ROUTELOCK_AUTH: 'entra',
    ROUTELOCK_ENTRA_TENANT_ID: TENANT,
    ROUTELOCK_ENTRA_AUDIENCES: `${AUDIENCE},00000000-0000-0000-0000-0000000000aa`,
    ROUTELOCK_ENTRA_JWKS_URI: jwksUri,
  });
  await services.router.createRoute('conv-1', { region: 'westeurope' });
  return services;
}

const getRoute = (authorization?: string): Promise<Called> =>
  call('getRoute', {
    params: { id: 'conv-1' },
    principal: null,
    headers: authorization === undefined ? {} : { authorization },
  });

function expectUnauthenticated(res: Called, detail: RegExp) {
  expect(res.status).toBe(401);
  expect(res.headers.get('content-type')).toBe('application/problem+json');
  expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
  expect(res.body).toMatchObject({
    status: 401,
    code: 'Unauthenticated',
    detail: expect.stringMatching(detail),
  });
}

beforeAll(async () => {
  trusted = await keyPair('key-1');
  stranger = await keyPair('key-2');
  jwks = await jwksServer([trusted.jwk]);
});
afterAll(async () => {
  await jwks.close();
});
beforeEach(async () => {
  await entraServices(jwks.url);
});

test('a valid token carrying the role: 200 (v2.0 issuer, and the v1 issuer too)', async () => {
  expect((await getRoute(`Bearer ${await token()}`)).status).toBe(200);
  expect((await getRoute(`Bearer ${await token({ issuer: V1_ISSUER })}`)).status).toBe(200);
  // any audience listed in ROUTELOCK_ENTRA_AUDIENCES
  const byClientId = await token({ audience: '00000000-0000-0000-0000-0000000000aa' });
  expect((await getRoute(`bearer ${byClientId}`)).status).toBe(200);
  expect(jwks.hits()).toBeGreaterThan(0);
});

test('a valid token without the role: 403 Forbidden, naming the role', async () => {
  const res = await getRoute(`Bearer ${await token({ claims: { roles: ['Ops.Read', 'Locks.Write'] } })}`);
  expect(res.status).toBe(403);
  expect(res.body).toMatchObject({ code: 'Forbidden', detail: expect.stringContaining('Routes.Read') });
  const none = await getRoute(`Bearer ${await token({ claims: { roles: undefined } })}`);
  expect(none.status).toBe(403);
});

test('no Authorization header: 401 with WWW-Authenticate: Bearer', async () => {
  const res = await getRoute();
  expectUnauthenticated(res, /Bearer/);
  expect(res.headers.get('www-authenticate')).toBe('Bearer');
});

test.each<[string, () => Promise<string>, RegExp]>([
  ['expired (beyond the 60 s tolerance)', () => token({ expiresAt: nowSeconds() - 120 }), /expired/],
  [
    'not yet valid (nbf beyond the tolerance)',
    () => token({ notBefore: nowSeconds() + 600 }),
    /not valid yet/,
  ],
  ['for another audience', () => token({ audience: 'api://someone-else' }), /"aud"/],
  [
    'from another issuer',
    () => token({ issuer: `https://login.microsoftonline.com/${OTHER_TENANT}/v2.0` }),
    /"iss"/,
  ],
  [
    'with the tenant issuer but another tid',
    () => token({ claims: { tid: OTHER_TENANT } }),
    /another tenant/,
  ],
  ['without an oid', () => token({ claims: { oid: undefined } }), /oid/],
  ['signed by a key not in the JWKS', () => token({ key: stranger }), /key set/],
  [
    "signed by another key under the trusted key's kid",
    () => token({ key: stranger, kid: trusted.kid }),
    /signature/,
  ],
  [
    'alg: none',
    async () =>
      new UnsecuredJWT({ tid: TENANT, oid: OID, roles: ['Routes.Read'] })
        .setIssuer(V2_ISSUER)
        .setAudience(AUDIENCE)
        .setExpirationTime('1h')
        .encode(),
    /RS256|malformed/,
  ],
  [
    'HS256 with a shared secret',
    () =>
      new SignJWT({ tid: TENANT, oid: OID, roles: ['Routes.Read'] })
        .setProtectedHeader({ alg: 'HS256', kid: trusted.kid })
        .setIssuer(V2_ISSUER)
        .setAudience(AUDIENCE)
        .setExpirationTime('1h')
        .sign(new TextEncoder().encode('a-shared-secret-of-at-least-32-bytes!!')),
    /RS256/,
  ],
  ['not a JWT', async () => 'not-a-token', /Bearer/],
])('a token %s: 401', async (_name, make, detail) => {
  expectUnauthenticated(await getRoute(`Bearer ${await make()}`), detail);
});

test('within the clock tolerance an expired-by-30-s token still passes (the tolerance is small, not zero)', async () => {
  expect((await getRoute(`Bearer ${await token({ expiresAt: nowSeconds() - 30 })}`)).status).toBe(200);
});

test('negative control: the stranger key is refused only because the JWKS lacks it', async () => {
  const both = await jwksServer([trusted.jwk, stranger.jwk]);
  try {
    await entraServices(both.url);
    expect((await getRoute(`Bearer ${await token({ key: stranger })}`)).status).toBe(200);
  } finally {
    await both.close();
  }
});

test('an unreachable key set is 503 AuthUnavailable with Retry-After, not 401 and not 500', async () => {
  const gone = await jwksServer([]);
  await gone.close();
  await entraServices(gone.url);
  const res = await getRoute(`Bearer ${await token()}`);
  expect(res.status).toBe(503);
  expect(res.body).toMatchObject({ code: 'AuthUnavailable' });
  expect(res.headers.get('retry-after')).toBe('5');
});

test('the anonymous health endpoint needs no token', async () => {
  expect((await call('health', { principal: null })).status).toBe(200);
});

test('the embedded host under entra (it may bind beyond loopback): RoutingClient sends its access token', async () => {
  const host = await startLocalHost({
    env: {
      PORT: '0',
      ROUTELOCK_AUTH: 'entra',
      ROUTELOCK_ENTRA_TENANT_ID: TENANT,
      ROUTELOCK_ENTRA_AUDIENCES: AUDIENCE,
      ROUTELOCK_ENTRA_JWKS_URI: jwks.url,
    },
    store: new SqliteStore(':memory:'),
    log: () => undefined,
  });
  try {
    await host.services.router.createRoute('conv-9', { region: 'westeurope' });
    const withToken = new RoutingClient({ baseUrl: `${host.url}/api`, accessToken: () => token() });
    expect(await withToken.resolve('conv-9')).toMatchObject({ location: { region: 'westeurope' } });
    const without = new RoutingClient({ baseUrl: `${host.url}/api` });
    await expect(without.resolve('conv-9')).rejects.toMatchObject({ status: 401, code: 'Unauthenticated' });
  } finally {
    await host.close();
  }
});
