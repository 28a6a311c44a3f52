import { type JWK, SignJWT, exportJWK, generateKeyPair } from 'jose';
import { entraCaller } from '../../shared/participant/entra';

/**
 * `entraCaller` (`@routelock/participant/entra`): routelock's managed-identity token validated as an
 * Entra access token, against a key set held locally (the tenant's, as the tests sign it): each claim it
 * checks has a token that fails it.
 */

const TENANT = '11111111-2222-3333-4444-555555555555';
const AUDIENCE = 'api://messages';
const ROUTELOCK_MI = 'aaaaaaaa-0000-0000-0000-000000000001';

let sign: (claims: Record<string, unknown>, options?: { alg?: string; key?: 'other' }) => Promise<string>;
let keys: { keys: JWK[] };

beforeAll(async () => {
  const tenantKey = await generateKeyPair('RS256');
  const otherKey = await generateKeyPair('RS256');
  const hsKey = new TextEncoder().encode('a-shared-secret-of-at-least-32-bytes!!');
  keys = { keys: [{ ...(await exportJWK(tenantKey.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }] };
  sign = async (claims, options = {}) => {
    const now = Math.floor(Date.now() / 1000);
    const jwt = new SignJWT({
      iss: `https://login.microsoftonline.com/${TENANT}/v2.0`,
      aud: AUDIENCE,
      tid: TENANT,
      oid: ROUTELOCK_MI,
      iat: now,
      nbf: now,
      exp: now + 3600,
      ...claims,
    }).setProtectedHeader({ alg: options.alg ?? 'RS256', kid: 'k1' });
    if (options.alg === 'HS256') return jwt.sign(hsKey);
    return jwt.sign(options.key === 'other' ? otherKey.privateKey : tenantKey.privateKey);
  };
});

const request = (token?: string) => ({
  method: 'POST',
  url: '/migrate',
  headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
});

test("routelock's token for the audience, from its managed identity: accepted", async () => {
  const check = entraCaller({ tenantId: TENANT, audience: AUDIENCE, allowedCallers: [ROUTELOCK_MI], keys });
  await expect(check(request(await sign({})))).resolves.toBeUndefined();
  // the v1 issuer too
  await expect(
    check(request(await sign({ iss: `https://sts.windows.net/${TENANT}/` }))),
  ).resolves.toBeUndefined();
});

test.each<[string, () => Promise<string | undefined>, string, RegExp]>([
  ['no token', async () => undefined, 'CallerUnauthenticated', /Bearer/],
  ['another audience', () => sign({ aud: 'api://other' }), 'CallerUnauthenticated', /"aud"/],
  [
    'another issuer',
    () => sign({ iss: 'https://login.microsoftonline.com/evil/v2.0' }),
    'CallerUnauthenticated',
    /"iss"/,
  ],
  ['another tenant in tid', () => sign({ tid: 'evil' }), 'CallerUnauthenticated', /another tenant/],
  ['expired', () => sign({ exp: Math.floor(Date.now() / 1000) - 3600 }), 'CallerUnauthenticated', /expired/],
  [
    'signed by a key not of the tenant',
    () => sign({}, { key: 'other' }),
    'CallerUnauthenticated',
    /signature/,
  ],
  ['HS256', () => sign({}, { alg: 'HS256' }), 'CallerUnauthenticated', /RS256/],
  [
    'another identity of the tenant',
    () => sign({ oid: 'bbbbbbbb-0000-0000-0000-000000000002' }),
    'CallerForbidden',
    /not one/,
  ],
])('refused: %s', async (_, token, code, message) => {
  const check = entraCaller({ tenantId: TENANT, audience: AUDIENCE, allowedCallers: [ROUTELOCK_MI], keys });
  await expect(check(request(await token()))).rejects.toMatchObject({
    code,
    message: expect.stringMatching(message),
  });
});

test('a key set that cannot be fetched is 503 (CallerCheckUnavailable), not the caller’s fault', async () => {
  const check = entraCaller({
    tenantId: TENANT,
    audience: AUDIENCE,
    allowedCallers: [ROUTELOCK_MI],
    jwksUri: 'http://127.0.0.1:1/keys',
  });
  await expect(check(request(await sign({})))).rejects.toMatchObject({
    code: 'CallerCheckUnavailable',
    status: 503,
  });
});

test('allowedCallers is required: none, an empty list or a blank id is refused at build; anyInTenant is said out loud', async () => {
  const base = { tenantId: TENANT, audience: AUDIENCE, keys };
  for (const allowedCallers of [undefined, [], ['']])
    expect(() =>
      entraCaller({ ...base, allowedCallers } as unknown as Parameters<typeof entraCaller>[0]),
    ).toThrow(expect.objectContaining({ code: 'InvalidParticipantOption', option: 'allowedCallers' }));
  // with the opt-out, another identity of the tenant is accepted: what the required list prevents
  const other = await sign({ oid: 'bbbbbbbb-0000-0000-0000-000000000002' });
  await expect(
    entraCaller({ ...base, allowedCallers: 'anyInTenant' })(request(other)),
  ).resolves.toBeUndefined();
  await expect(
    entraCaller({ ...base, allowedCallers: [ROUTELOCK_MI] })(request(other)),
  ).rejects.toMatchObject({
    code: 'CallerForbidden',
  });
});
