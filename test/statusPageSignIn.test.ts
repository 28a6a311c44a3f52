import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { HttpRequest, InvocationContext } from '@azure/functions';
import { appRoles } from '../functions/http/auth';
import { bindEndpoint } from '../functions/http/endpoint';
import { SIGNED_IN_MARKER, signInAnswer, signInLocation } from '../functions/http/signIn';
import { HttpProblem } from '../functions/http/problem';
import { PAGE_PATH, contentSecurityPolicy, statusPageDocument } from '../functions/pages/statusPage';
import { statusPageEndpoints } from '../functions/statusPage';
import { ConfigError, parseConfig } from '../shared/config';
import { call, handlerServices } from './support/handlers';
import { clientPrincipal } from './support/principals';

/**
 * The status page the way Azure serves it, without Core Tools: the registered (wrapped) handlers under
 * ROUTELOCK_AUTH=appservice, called with requests shaped as App Service authentication forwards them
 * (`x-ms-client-principal`, or nothing for a browser that has not signed in). Redirect vs 403 vs 200,
 * the reads' 401, and the attacks: forged principal headers, a missing role, an open redirect through
 * post_login_redirect_uri, and credentials in the HTML.
 */

const SIGN_IN = '/.auth/login/aad?post_login_redirect_uri=%2Fapi%2Fstatus%3FsignedIn%3D1';
const reader = { oid: '00000000-0000-4000-8000-0000000000a1', name: 'reader', roles: ['Ops.Read'] };
const everyRoleButRead = {
  oid: '00000000-0000-4000-8000-0000000000a2',
  roles: appRoles.filter((r) => r !== 'Ops.Read'),
};
const reads = [
  'viewListMigrations',
  'viewListRoutes',
  'viewGetAudit',
  'viewListCampaigns',
  'viewGetCampaign',
  'statusPageAsset',
];
const readParams = { id: 'conv-1', file: 'uplot-js', campaignId: 'c-1' };

beforeEach(async () => {
  await handlerServices({ ROUTELOCK_AUTH: 'appservice' });
});

describe('GET /api/status under App Service authentication', () => {
  test('no identity: 302 to /.auth/login/aad, back to the page; nothing else in the answer', async () => {
    const res = await call('statusPage', { principal: null });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe(SIGN_IN);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.text).toBe('');
    // App Service decodes it: the return path is the page, marked as back from sign-in
    const back = new URL(res.headers.get('location')!, 'https://app.example').searchParams.get(
      'post_login_redirect_uri',
    );
    expect(back).toBe(`${PAGE_PATH}?${SIGNED_IN_MARKER}=1`);
  });

  test('signed in without Ops.Read: 403 Forbidden (every other role held), never the page', async () => {
    const res = await call('statusPage', { principal: everyRoleButRead });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ code: 'Forbidden' });
    expect(res.text).not.toContain('<html');
  });

  test('signed in with Ops.Read: 200, the page, its CSP, and where to sign in again', async () => {
    const res = await call('statusPage', { principal: reader, query: `${SIGNED_IN_MARKER}=1` });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('content-security-policy')).toBe(contentSecurityPolicy);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.text).toContain(`data-sign-in="${SIGN_IN}"`);
  });

  test('back from sign-in and still no identity: 401 saying so, not a second redirect (no loop)', async () => {
    const res = await call('statusPage', { principal: null, query: `${SIGNED_IN_MARKER}=1` });
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ code: 'Unauthenticated' });
    expect(res.headers.get('location')).toBeNull();
  });

  test("the page's reads and the API answer 401 (never a redirect) without an identity, 403 without the role", async () => {
    for (const name of [...reads, 'listMigrations', 'getAudit']) {
      const nobody = await call(name, { principal: null, params: readParams });
      expect([name, nobody.status, nobody.headers.get('location')]).toEqual([name, 401, null]);
      const without = await call(name, { principal: everyRoleButRead, params: readParams });
      expect([name, without.status]).toEqual([name, 403]);
      // (the migration lists need Durable's client binding, which this harness has not: past the check is enough)
      const holder = await call(name, { principal: reader, params: readParams });
      expect([name, holder.status === 401 || holder.status === 403]).toEqual([name, false]);
    }
  });

  test('only the page signs a browser in; the reads keep the API rules', () => {
    expect(statusPageEndpoints.filter((e) => e.browserSignIn).map((e) => e.name)).toEqual(['statusPage']);
    expect(statusPageEndpoints.every((e) => e.role === 'Ops.Read' && e.methods.join() === 'GET')).toBe(true);
  });
});

describe('forged principals', () => {
  test('headers App Service also sets (-name, -id, -idp) are never read: still no identity, so sign in', async () => {
    const res = await call('statusPage', {
      principal: null,
      headers: {
        'x-ms-client-principal-name': 'admin@contoso.example',
        'x-ms-client-principal-id': reader.oid,
        'x-ms-client-principal-idp': 'aad',
      },
    });
    expect(res.status).toBe(302);
    const read = await call('viewListMigrations', {
      principal: null,
      headers: { 'x-ms-client-principal-name': 'admin@contoso.example' },
    });
    expect(read.status).toBe(401);
  });

  test.each([
    ['not base64', '%%%not-base64%%%'],
    ['base64 of text', Buffer.from('Ops.Read').toString('base64')],
    [
      'no object id',
      Buffer.from(JSON.stringify({ claims: [{ typ: 'roles', val: 'Ops.Read' }] })).toString('base64'),
    ],
    ['two object ids', clientPrincipalWithTwoOids()],
  ])(
    'a malformed x-ms-client-principal (%s) is a 401: not the page, not a redirect',
    async (_why, header) => {
      const res = await call('statusPage', { principal: null, headers: { 'x-ms-client-principal': header } });
      expect(res.status).toBe(401);
      expect(res.headers.get('location')).toBeNull();
      expect(res.text).not.toContain('<html');
    },
  );

  test('under ROUTELOCK_AUTH=entra a well-formed principal header from anyone is ignored: 401, no sign-in', async () => {
    await handlerServices({
      ROUTELOCK_AUTH: 'entra',
      ROUTELOCK_ENTRA_TENANT_ID: '00000000-0000-4000-8000-00000000000f',
      ROUTELOCK_ENTRA_AUDIENCES: 'api://routelock',
    });
    for (const name of ['statusPage', 'viewListMigrations']) {
      const res = await call(name, { principal: reader });
      expect([name, res.status, res.headers.get('location')]).toEqual([name, 401, null]);
    }
  });

  test('in Azure, appservice (which trusts the header) is refused unless App Service authentication strips it', () => {
    const azure = {
      WEBSITE_INSTANCE_ID: 'abc',
      ROUTELOCK_REGIONS: 'westeurope',
      ROUTELOCK_AUTH: 'appservice',
    };
    expect(() => parseConfig({ ...azure, WEBSITE_AUTH_ENABLED: 'False' })).toThrow(ConfigError);
    expect(() => parseConfig({ ...azure })).toThrow(/WEBSITE_AUTH_ENABLED/);
  });
});

describe('no open redirect through post_login_redirect_uri', () => {
  test.each([
    ['a query naming another site', { query: 'post_login_redirect_uri=https%3A%2F%2Fevil.example%2F' }],
    ['a hostile Host', { headers: { host: 'evil.example' } }],
    [
      'forwarded host and proto',
      { headers: { 'x-forwarded-host': 'evil.example', 'x-original-url': '//evil.example/' } },
    ],
    ['a Referer', { headers: { referer: 'https://evil.example/phish' } }],
  ])('%s: the sign-in returns to the page, on this app', async (_why, init) => {
    const res = await call('statusPage', { principal: null, ...init });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe(SIGN_IN);
  });

  test('a page declared with a return path that is not a plain local path is refused when it is built', () => {
    for (const bad of [
      '//evil.example/x',
      'https://evil.example/',
      '/api/status?next=//evil',
      '/a\\b',
      'api/status',
    ])
      expect(() => signInLocation(bad)).toThrow(/plain local path/);
    expect(signInLocation(PAGE_PATH)).toBe(SIGN_IN);
  });

  test('negative control: a sign-in built from the request would point at the attacker, and the check sees it', () => {
    const request = new HttpRequest({
      method: 'GET',
      url: 'https://evil.example/api/status?post_login_redirect_uri=https://evil.example',
    });
    const fromRequest = `/.auth/login/aad?post_login_redirect_uri=${encodeURIComponent(request.url)}`;
    expect(fromRequest).not.toBe(SIGN_IN);
    const answer = signInAnswer(new HttpProblem('Unauthenticated', 'x'), request, PAGE_PATH);
    expect(answer?.headers).toMatchObject({ Location: SIGN_IN });
  });

  test('only a refusal for want of an identity signs in: a 403 or another error is answered as it is', () => {
    const request = new HttpRequest({ method: 'GET', url: 'https://app.example/api/status' });
    expect(signInAnswer(new HttpProblem('Forbidden', 'x'), request, PAGE_PATH)).toBeNull();
    expect(signInAnswer(new Error('boom'), request, PAGE_PATH)).toBeNull();
  });
});

/** What must never be in the page: the credentials a request to it may carry. */
const planted = {
  cookie: 'AppServiceAuthSession=SESSION-COOKIE-5f1d',
  idToken: 'ID-TOKEN-eyJhbGciOi-7c2a',
  bearer: 'BEARER-TOKEN-9e41',
  functionKey: 'FUNCTION-KEY-0b77',
  hostKey: 'HOST-KEY-3e19',
};
function leaks(text: string): string[] {
  const secrets = [
    'SESSION-COOKIE-5f1d',
    planted.idToken,
    planted.bearer,
    planted.functionKey,
    planted.hostKey,
    clientPrincipal(reader),
    reader.oid,
  ];
  return secrets.filter((s) => text.includes(s));
}

describe('credentials in the HTML', () => {
  test('the page carries none of the credentials its request did, nor who asked', async () => {
    const res = await call('statusPage', {
      principal: { ...reader, name: 'Mallory <script>alert(1)</script>' },
      query: `code=${planted.functionKey}`,
      headers: {
        cookie: planted.cookie,
        'x-ms-token-aad-id-token': planted.idToken,
        'x-ms-token-aad-access-token': planted.bearer,
        authorization: `Bearer ${planted.bearer}`,
        'x-functions-key': planted.hostKey,
      },
    });
    expect(res.status).toBe(200);
    expect(leaks(res.text)).toEqual([]);
    expect(res.text).not.toContain('Mallory');
    // the same document for every caller: nothing of the request is in it
    expect(res.text).toBe(statusPageDocument({ signIn: SIGN_IN }));
  });

  test('negative control: the scan finds a credential planted in a page', () => {
    const page = statusPageDocument({ signIn: SIGN_IN }).replace(
      '</body>',
      `<!-- ${planted.functionKey} --></body>`,
    );
    expect(leaks(page)).toEqual([planted.functionKey]);
  });

  test('a strict CSP: no inline code but the one script and style it hashes, nothing from another origin', () => {
    const page = statusPageDocument({ signIn: SIGN_IN });
    const csp = Object.fromEntries(
      contentSecurityPolicy.split('; ').map((d) => [d.split(' ')[0], d.split(' ').slice(1)]),
    );
    expect(csp['default-src']).toEqual(["'none'"]);
    expect(csp['frame-ancestors']).toEqual(["'none'"]);
    expect(contentSecurityPolicy).not.toMatch(/unsafe-|https?:|\*|data:/);
    const hash = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;
    const scripts = [...page.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]!);
    const styles = [...page.matchAll(/<style>([\s\S]*?)<\/style>/g)].map((m) => m[1]!);
    expect(scripts).toHaveLength(1);
    // it is JavaScript (an escape lost in the TypeScript template would break it, and the page with it)
    expect(() => new Function(scripts[0]!)).not.toThrow();
    expect(styles).toHaveLength(1);
    expect(csp['script-src']).toEqual(["'self'", hash(scripts[0]!)]);
    expect(csp['style-src']).toEqual(["'self'", hash(styles[0]!)]);
    // nothing the CSP would block: no inline handlers or style attributes, no script or sheet from elsewhere
    expect(page).not.toMatch(/\son[a-z]+=/i);
    expect(page).not.toMatch(/\sstyle=/i);
    const markup = page.replace(/<script>[\s\S]*?<\/script>/, '');
    const sources = [...markup.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(sources).toEqual([
      '/api/ops/view/assets/favicon.svg',
      '/api/ops/view/assets/uplot-css',
      '/api/ops/view/assets/uplot-js',
    ]);
  });

  test('uPlot is served from the installed package, by this app; any other file name is a 404', async () => {
    const js = await call('statusPageAsset', { principal: reader, params: { file: 'uplot-js' } });
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.text).toBe(readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8'));
    const css = await call('statusPageAsset', { principal: reader, params: { file: 'uplot-css' } });
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
    for (const file of ['../package.json', 'uPlot.iife.min.js', '__proto__', 'constructor']) {
      const res = await call('statusPageAsset', { principal: reader, params: { file } });
      expect([file, res.status]).toEqual([file, 404]);
    }
  });
});

test('bound outside the harness too: the Functions registration carries the sign-in with the page', async () => {
  const { services } = await handlerServices({ ROUTELOCK_AUTH: 'appservice' });
  const page = bindEndpoint(statusPageEndpoints[0]!, () => Promise.resolve(services));
  const res = await page.handler(
    new HttpRequest({ method: 'GET', url: 'https://routelock.azurewebsites.net/api/status' }),
    new InvocationContext({ functionName: 'statusPage' }),
  );
  expect(res.status).toBe(302);
  expect((res.headers as Record<string, string>).Location).toBe(SIGN_IN);
});

function clientPrincipalWithTwoOids(): string {
  const claims = [
    { typ: 'oid', val: '00000000-0000-4000-8000-0000000000b1' },
    { typ: 'oid', val: '00000000-0000-4000-8000-0000000000b2' },
    { typ: 'roles', val: 'Ops.Read' },
  ];
  return Buffer.from(JSON.stringify({ claims })).toString('base64');
}
