import { HttpRequest } from '@azure/functions';
import {
  type Authenticator,
  anonymousCaller,
  appServiceAuthenticator,
  authorize,
  localCaller,
  noneAuthenticator,
  parseClientPrincipal,
} from '../../functions/http/auth';
import { HttpProblem } from '../../functions/http/problem';
import { call, handlerServices } from '../support/handlers';
import { NAME_TYPE, OID_TYPE, ROLE_TYPE, asPrincipal, clientPrincipal } from '../support/principals';

/** ROUTELOCK_AUTH=appservice: only x-ms-client-principal, identity = the object id claim. */

const OID = '3f2504e0-4f89-41d3-9a0c-0305e82c3301';
const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');

function codeOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    return (error as HttpProblem).code;
  }
  return 'ok';
}

describe('parsing x-ms-client-principal', () => {
  test('an object id is compared in one case: an upper-case copy is the same principal', () => {
    const of = (oid: string) => parseClientPrincipal(b64({ claims: [{ typ: 'oid', val: oid }] })).objectId;
    expect(of(OID.toUpperCase())).toBe(of(OID));
    expect(of(OID.toUpperCase())).toBe(OID);
  });

  test('object id from the oid claim (either spelling), roles from role_typ and "roles", name from name_typ', () => {
    const header = b64({
      auth_typ: 'aad',
      name_typ: NAME_TYPE,
      role_typ: ROLE_TYPE,
      claims: [
        { typ: OID_TYPE, val: OID },
        { typ: NAME_TYPE, val: 'Alice Example' },
        { typ: ROLE_TYPE, val: 'Ops.Read' },
        { typ: 'roles', val: 'Routes.Read' },
        { typ: 'name', val: 'not the name claim this principal declared' },
        { typ: 'groups', val: 'Routes.Write' },
      ],
    });
    expect(parseClientPrincipal(header)).toEqual({
      objectId: OID,
      name: 'Alice Example',
      roles: ['Ops.Read', 'Routes.Read'],
    });
    expect(parseClientPrincipal(b64({ claims: [{ typ: 'oid', val: OID }] }))).toEqual({
      objectId: OID,
      roles: [],
    });
  });

  test.each<[string, string]>([
    ['not base64', '!!!'],
    ['base64 of something that is not JSON', Buffer.from('hello').toString('base64')],
    ['JSON without claims', b64({ auth_typ: 'aad' })],
    ['claims of the wrong shape', b64({ claims: [{ type: 'oid', value: OID }] })],
    ['no object id', b64({ claims: [{ typ: NAME_TYPE, val: 'Alice' }], name_typ: NAME_TYPE })],
    [
      'two different object ids',
      b64({
        claims: [
          { typ: 'oid', val: OID },
          { typ: OID_TYPE, val: 'ffffffff-0000-4000-8000-000000000000' },
        ],
      }),
    ],
    ['an object id that is not an id', b64({ claims: [{ typ: 'oid', val: 'alice, bob' }] })],
    ['an oversized header', 'A'.repeat(20_000)],
  ])('%s: Unauthenticated', (_name, header) => {
    expect(codeOf(() => parseClientPrincipal(header))).toBe('Unauthenticated');
  });
});

describe('authorize: the one enforcement point', () => {
  const request = (headers: Record<string, string> = {}) =>
    new HttpRequest({ method: 'GET', url: 'http://localhost/api/routes/r', headers });
  const entraLike: Authenticator = { mode: 'entra', challenge: 'Bearer', authenticate: async () => null };

  test('anonymous endpoints skip authentication; none is the local identity with every role', async () => {
    expect(await authorize('anonymous', request(), appServiceAuthenticator)).toBe(anonymousCaller);
    expect(await authorize('Ops.Approver', request(), noneAuthenticator)).toBe(localCaller);
  });

  test('no identity: 401 (WWW-Authenticate only under entra); without the role: 403', async () => {
    await expect(authorize('Routes.Read', request(), appServiceAuthenticator)).rejects.toMatchObject({
      code: 'Unauthenticated',
      extra: {},
    });
    await expect(authorize('Routes.Read', request(), entraLike)).rejects.toMatchObject({
      code: 'Unauthenticated',
      extra: { headers: { 'WWW-Authenticate': 'Bearer' } },
    });
    const reader = asPrincipal({ oid: OID, roles: ['Routes.Read'] });
    await expect(authorize('Routes.Write', request(reader), appServiceAuthenticator)).rejects.toMatchObject({
      code: 'Forbidden',
    });
    await expect(authorize('Routes.Read', request(reader), appServiceAuthenticator)).resolves.toMatchObject({
      objectId: OID,
    });
  });

  test('x-ms-client-principal-name alone is no identity (a caller can forge it)', async () => {
    await expect(
      authorize(
        'Ops.Read',
        request({ 'x-ms-client-principal-name': 'admin@contoso' }),
        appServiceAuthenticator,
      ),
    ).rejects.toMatchObject({ code: 'Unauthenticated' });
  });
});

describe('over the registered handlers (appservice is the default mode)', () => {
  beforeEach(async () => {
    const { services } = await handlerServices();
    await services.router.createRoute('conv-1', { region: 'westeurope' });
  });

  test('no identity, a malformed one, a missing role, the role: 401, 401, 403, 200 — all problem+json', async () => {
    const get = (headers: Record<string, string>) =>
      call('getRoute', { params: { id: 'conv-1' }, principal: null, headers });
    const none = await get({});
    expect(none).toMatchObject({ status: 401, body: { code: 'Unauthenticated' } });
    expect(none.headers.get('content-type')).toBe('application/problem+json');
    expect(none.headers.get('www-authenticate')).toBeNull();
    expect(await get({ 'x-ms-client-principal': 'e30=' })).toMatchObject({ status: 401 });
    expect(await get(asPrincipal({ oid: OID, roles: ['Routes.Write', 'Ops.Read'] }))).toMatchObject({
      status: 403,
      body: { code: 'Forbidden' },
    });
    expect(
      (await get({ 'x-ms-client-principal': clientPrincipal({ oid: OID, roles: ['Routes.Read'] }) })).status,
    ).toBe(200);
  });

  test('the handler never runs without the role: a refused PUT creates nothing', async () => {
    const put = await call('putRoute', {
      params: { id: 'conv-2' },
      body: { location: { region: 'westeurope' } },
      principal: { oid: OID, roles: ['Routes.Read'] },
    });
    expect(put.status).toBe(403);
    expect((await call('getRoute', { params: { id: 'conv-2' } })).status).toBe(404);
  });
});
