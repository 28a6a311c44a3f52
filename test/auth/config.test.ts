import { ConfigError, parseConfig } from '../../shared/config';
import { assertHostAuth } from '../../local/config';
import { localEnv } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';

/** ROUTELOCK_AUTH, ROUTELOCK_ENTRA_*, ROUTELOCK_REGIONS: parsed once, bad values name their variable. */

const TENANT = '11111111-2222-4333-8444-555555555555';
/** What the platform sets on an Azure worker. */
const azure = { WEBSITE_SITE_NAME: 'routelock-prod' };

function problemsOf(env: Record<string, string | undefined>): string[] {
  try {
    parseConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

const mentions = (env: Record<string, string | undefined>, pattern: RegExp) =>
  problemsOf(env).some((p) => pattern.test(p));

describe('ROUTELOCK_AUTH', () => {
  test('default appservice; none; entra with tenant, audiences and the tenant key set', () => {
    expect(parseConfig({}).auth).toEqual({ mode: 'appservice' });
    expect(parseConfig({ ROUTELOCK_AUTH: 'none' }).auth).toEqual({ mode: 'none' });
    expect(
      parseConfig({
        ROUTELOCK_AUTH: 'entra',
        ROUTELOCK_ENTRA_TENANT_ID: TENANT.toUpperCase(),
        ROUTELOCK_ENTRA_AUDIENCES: 'api://routelock, 00000000-0000-0000-0000-0000000000aa',
      }).auth,
    ).toEqual({
      mode: 'entra',
      tenantId: TENANT,
      audiences: ['api://routelock', '00000000-0000-0000-0000-0000000000aa'],
      issuers: [`https://login.microsoftonline.com/${TENANT}/v2.0`, `https://sts.windows.net/${TENANT}/`],
      jwksUri: `https://login.microsoftonline.com/${TENANT}/discovery/v2.0/keys`,
    });
  });

  test.each<[Record<string, string | undefined>, RegExp]>([
    [
      { ROUTELOCK_AUTH: 'basic' },
      /^ROUTELOCK_AUTH: expected "appservice", "entra" or "none" \(got "basic"\)/,
    ],
    [{ ROUTELOCK_AUTH: 'entra' }, /^ROUTELOCK_ENTRA_TENANT_ID: required when ROUTELOCK_AUTH=entra/],
    [{ ROUTELOCK_AUTH: 'entra', ROUTELOCK_ENTRA_TENANT_ID: TENANT }, /^ROUTELOCK_ENTRA_AUDIENCES: required/],
    [
      { ROUTELOCK_AUTH: 'entra', ROUTELOCK_ENTRA_TENANT_ID: 'contoso' },
      /^ROUTELOCK_ENTRA_TENANT_ID: expected .* GUID/,
    ],
    [
      { ROUTELOCK_ENTRA_AUDIENCES: 'api://a,api://a' },
      /^ROUTELOCK_ENTRA_AUDIENCES: "api:\/\/a" is listed twice/,
    ],
    [{ ROUTELOCK_ENTRA_AUDIENCES: 'api://a,,b' }, /^ROUTELOCK_ENTRA_AUDIENCES: expected comma-separated/],
    [
      {
        ROUTELOCK_AUTH: 'entra',
        ROUTELOCK_ENTRA_TENANT_ID: TENANT,
        ROUTELOCK_ENTRA_AUDIENCES: 'api://a',
        ROUTELOCK_ENTRA_JWKS_URI: 'http://keys.example.com/keys',
      },
      /^ROUTELOCK_ENTRA_JWKS_URI: must be https:\/\/ \(http only for a loopback address\)/,
    ],
    [
      { ...azure, ROUTELOCK_AUTH: 'none', ROUTELOCK_REGIONS: 'westeurope' },
      /^ROUTELOCK_AUTH: "none" .* refused in Azure/,
    ],
    [
      { ...azure, ROUTELOCK_AUTH: 'appservice', ROUTELOCK_REGIONS: 'westeurope' },
      /^ROUTELOCK_AUTH: "appservice" trusts the x-ms-client-principal header.*WEBSITE_AUTH_ENABLED is not True/,
    ],
    [
      { WEBSITE_INSTANCE_ID: 'abc', WEBSITE_AUTH_ENABLED: 'False', ROUTELOCK_REGIONS: 'westeurope' },
      /^ROUTELOCK_AUTH: "appservice"/,
    ],
  ])('%j is refused, naming the variable', (env, message) => {
    expect(problemsOf(env)).toEqual(expect.arrayContaining([expect.stringMatching(message)]));
  });

  test('appservice in Azure is accepted once App Service authentication is on; a loopback http JWKS is accepted', () => {
    const on = { ...azure, WEBSITE_AUTH_ENABLED: 'True', ROUTELOCK_REGIONS: 'westeurope' };
    expect(mentions(on, /^ROUTELOCK_AUTH/)).toBe(false);
    // negative control: the same environment without the platform flag is refused
    expect(mentions({ ...on, WEBSITE_AUTH_ENABLED: undefined }, /^ROUTELOCK_AUTH/)).toBe(true);
    expect(
      parseConfig({
        ROUTELOCK_AUTH: 'entra',
        ROUTELOCK_ENTRA_TENANT_ID: TENANT,
        ROUTELOCK_ENTRA_AUDIENCES: 'api://a',
        ROUTELOCK_ENTRA_JWKS_URI: 'http://127.0.0.1:8080/keys',
      }).auth,
    ).toMatchObject({ jwksUri: 'http://127.0.0.1:8080/keys' });
  });
});

describe('ROUTELOCK_REGIONS', () => {
  test('a declared list; unset is unrestricted off Azure and under the dev profile', () => {
    expect(parseConfig({ ROUTELOCK_REGIONS: 'westeurope, eastus' }).regions).toEqual({
      allowed: ['westeurope', 'eastus'],
    });
    expect(parseConfig({}).regions).toEqual({ allowed: null });
    expect(mentions({ ...azure, ROUTELOCK_PROFILE: 'dev' }, /^ROUTELOCK_REGIONS/)).toBe(false);
  });

  test('required in Azure under the production profile, naming the variable', () => {
    expect(
      mentions({ ...azure, WEBSITE_AUTH_ENABLED: 'True' }, /^ROUTELOCK_REGIONS: required in Azure/),
    ).toBe(true);
    expect(
      mentions(
        { ...azure, WEBSITE_AUTH_ENABLED: 'True', ROUTELOCK_REGIONS: 'westeurope' },
        /^ROUTELOCK_REGIONS/,
      ),
    ).toBe(false);
  });

  test.each([
    ['West Europe', /expected comma-separated regions.*got "West Europe"/],
    ['westeurope,westeurope', /"westeurope" is listed twice/],
    ['westeurope,', /expected comma-separated regions.*got ""/],
  ])('%s is refused', (value, message) => {
    expect(problemsOf({ ROUTELOCK_REGIONS: value })).toEqual([
      expect.stringMatching(new RegExp(`^ROUTELOCK_REGIONS: ${message.source}`)),
    ]);
  });
});

describe('the embedded host', () => {
  test('defaults to none; none and appservice need a loopback bind, entra does not', () => {
    expect(parseConfig(localEnv({})).auth.mode).toBe('none');
    const entra = parseConfig({
      ROUTELOCK_AUTH: 'entra',
      ROUTELOCK_ENTRA_TENANT_ID: TENANT,
      ROUTELOCK_ENTRA_AUDIENCES: 'api://a',
    }).auth;
    for (const host of ['127.0.0.1', 'localhost', '::1']) {
      expect(() => assertHostAuth({ host, port: 0 }, { mode: 'none' })).not.toThrow();
    }
    for (const mode of ['none', 'appservice'] as const) {
      expect(() => assertHostAuth({ host: '0.0.0.0', port: 0 }, { mode })).toThrow(
        /^Invalid configuration:\n {2}ROUTELOCK_AUTH: .*ROUTELOCK_HOST \(0\.0\.0\.0\) is not a loopback address/,
      );
    }
    expect(() => assertHostAuth({ host: '0.0.0.0', port: 0 }, entra)).not.toThrow();
  });

  test('startLocalHost refuses none on a non-loopback address before it listens', async () => {
    await expect(
      startLocalHost({ env: { PORT: '0', ROUTELOCK_HOST: '0.0.0.0' }, store: new SqliteStore(':memory:') }),
    ).rejects.toBeInstanceOf(ConfigError);
  });
});
