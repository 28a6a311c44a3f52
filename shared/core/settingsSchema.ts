import { dirname, join } from 'node:path';
import { z } from 'zod';
import { isLoopbackHostname } from './loopback';
import type { Profile } from './profiles';
import { ConfiguredKeySet, type TokenKeySource, parseTokenKeySet } from './security/tokenKeys';
import type {
  AuthConfig,
  CacheTier,
  RegionsConfig,
  ServingProfile,
  StoreConfig,
  TimingConfig,
} from './settings';

/**
 * The core layer's part of the configuration (design §3): the variables the lock rules, the
 * router, the stores and the API's access read, their parsing and the checks among them alone. The
 * value helpers and the error type are shared with the layers above, whose parts `config`
 * assembles with this one. A bad value names its variable, never a secret's content.
 */

export type Env = Record<string, string | undefined>;

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  ${problems.join('\n  ')}`);
  }
}

/** A whole number, at least `min`; `expected` says what it counts ("a whole number of seconds"). */
const wholeNumber = (min: number, expected: string) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, { message: `expected ${expected}` })
    .transform(Number)
    .refine((n) => Number.isSafeInteger(n) && n >= min, {
      message: `expected ${expected}, at least ${min}`,
    });
export const seconds = (min: number) => wholeNumber(min, 'a whole number of seconds');
export const milliseconds = (min: number) => wholeNumber(min, 'a whole number of milliseconds');
/** How many times something is tried (ROUTELOCK_*_ATTEMPTS): a count, not a duration. */
export const count = (min: number) => wholeNumber(min, 'a whole number of attempts');

export const flag = z
  .string()
  .trim()
  .regex(/^(1|0|true|false)$/i, { message: 'expected 1, 0, true or false' })
  .transform((v) => v === '1' || v.toLowerCase() === 'true');

/** NCRONTAB as the Functions timer trigger takes it: six fields, seconds first. */
export const ncrontab = z
  .string()
  .trim()
  .regex(/^(\S+\s+){5}\S+$/, {
    message: 'expected an NCRONTAB expression with six fields, e.g. "0 */5 * * * *"',
  });

/** A value pasted into the wrong variable may still be a credential (a connection string, a SAS URL). */
const looksSecret = /AccountKey=|SharedAccessSignature|[?&]sig=|password=|:\/\/[^/\s]*:[^/\s]*@/i;

/**
 * Parse one part's variables from `env`. Each problem names its variable; the value is quoted unless the
 * variable is in `secret` or the value looks like a credential.
 */
export function parseVariables<S extends z.ZodRawShape>(
  shape: S,
  env: Env,
  secret: ReadonlySet<string>,
): { data: z.infer<z.ZodObject<S>> | undefined; problems: string[] } {
  const parsed = z.object(shape).safeParse(env);
  if (parsed.success) return { data: parsed.data, problems: [] };
  const problems = parsed.error.issues.map((issue) => {
    const variable = String(issue.path[0] ?? '(environment)');
    const value = env[variable];
    const got = secret.has(variable) || (value && looksSecret.test(value)) ? undefined : value;
    return `${variable}: ${issue.message}${got === undefined ? '' : ` (got "${got}")`}`;
  });
  return { data: undefined, problems };
}

/** The variables of `shape` as set in `env`, a blank one as absent (so its default applies). */
export function blankAsAbsent(shape: z.ZodRawShape, env: Env): Env {
  return Object.fromEntries(Object.keys(shape).map((k) => [k, env[k]?.trim() === '' ? undefined : env[k]]));
}

/** True on an Azure Functions / App Service worker (the platform sets these). */
export function runsInAzure(env: Env): boolean {
  return Boolean(env.WEBSITE_SITE_NAME || env.WEBSITE_INSTANCE_ID);
}

const tierName = /^[a-z][a-z0-9_-]{0,31}$/;
const cacheTiers = z
  .string()
  .trim()
  .transform((raw, ctx): CacheTier[] => {
    const tiers: CacheTier[] = [];
    for (const part of raw.split(',')) {
      const match = /^\s*([^=\s]+)\s*=\s*(\d+)\s*$/.exec(part);
      const name = match?.[1];
      const ttl = Number(match?.[2]);
      if (!match || name === undefined || !tierName.test(name) || !Number.isSafeInteger(ttl) || ttl < 1) {
        ctx.addIssue({
          code: 'custom',
          message: `expected comma-separated name=seconds pairs such as "edge=7200,local=60", got "${part.trim()}"`,
        });
        return z.NEVER;
      }
      if (tiers.some((t) => t.name === name)) {
        ctx.addIssue({ code: 'custom', message: `tier "${name}" is declared twice` });
        return z.NEVER;
      }
      tiers.push({ name, ttlSeconds: ttl });
    }
    return tiers;
  });

/** The profile-table variables core reads (core/profiles gives their defaults). */
export const coreProfileShape = {
  ROUTELOCK_CACHE_TIERS: cacheTiers,
  ROUTELOCK_REPLICATION_BOUND_SECONDS: seconds(0),
  ROUTELOCK_SAFETY_BUFFER_SECONDS: seconds(0),
  ROUTELOCK_CLOCK_SKEW_SECONDS: seconds(0),
  ROUTELOCK_PRELOCK_LEASE_SECONDS: seconds(1),
  ROUTELOCK_PRELOCK_MAX_SECONDS: seconds(1),
  ROUTELOCK_HARD_DELETE_LEASE_SECONDS: seconds(1),
  ROUTELOCK_WRITE_LEASE_SECONDS: seconds(1),
  ROUTELOCK_WRITE_BUDGET_SECONDS: seconds(1),
  ROUTELOCK_RETRY_AFTER_MAX_SECONDS: seconds(1),
  ROUTELOCK_COALESCE_JOIN_MS: milliseconds(0),
};

const containerName = z.string().regex(/^[A-Za-z0-9_-]{1,255}$/, { message: 'expected a container name' });

/** The store and token-key variables (no profile default). */
export const coreEnvShape = {
  ROUTELOCK_STORE: z
    .enum(['sqlite', 'cosmos'], { message: 'expected "sqlite" or "cosmos"' })
    .default('sqlite'),
  ROUTELOCK_SQLITE_PATH: z.string().trim().min(1).default('.routelock/routelock.db'),
  COSMOS_ENDPOINT: z.url({ protocol: /^https?$/, message: 'expected an https:// URL' }).optional(),
  COSMOS_KEY: z.string().min(1).optional(),
  COSMOS_DISABLE_TLS_VERIFY: flag.default(false),
  COSMOS_DATABASE: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,255}$/, { message: 'expected a database name' })
    .default('routelock'),
  COSMOS_CONTAINER: containerName.default('locations'),
  COSMOS_MIGRATIONS_CONTAINER: containerName.default('migrations'),
  COSMOS_AUDIT_CONTAINER: containerName.default('audit'),
  COSMOS_CAMPAIGNS_CONTAINER: containerName.default('campaigns'),
  COSMOS_PREFERRED_REGION: z.string().min(1).optional(),
  REGION_NAME: z.string().min(1).optional(),
  // Whether this host takes announced locks (design §3.7). Off until every library that changes routes
  // understands schema version 2: one that does not would refuse to change a route carrying one.
  ROUTELOCK_ANNOUNCED_LOCKS: flag.default(false),
  // The key ring the workflow's lock credentials are derived under (core/security/tokenKeys).
  // In Azure a Key Vault reference; the embedded host keeps a 0600 key file beside its database. Checked
  // here so a bad set names its variable; the ring is opened when the host composes its services.
  ROUTELOCK_TOKEN_KEYS: z
    .string()
    .trim()
    .transform((raw, ctx) => {
      try {
        return new ConfiguredKeySet(parseTokenKeySet(raw));
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message });
        return z.NEVER;
      }
    })
    .optional(),
  ROUTELOCK_TOKEN_KEY_FILE: z.string().trim().min(1).optional(),
};

/** Core's variables whose values are never echoed in an error message. */
export const coreSecretVariables = ['COSMOS_KEY', 'ROUTELOCK_TOKEN_KEYS'];

type CoreProfileValues = z.infer<z.ZodObject<typeof coreProfileShape>>;
type CoreEnvValues = z.infer<z.ZodObject<typeof coreEnvShape>>;

/** The read path's and the lock rules' timing, derived from the profile variables. */
export function timingSettings(profile: ServingProfile, t: CoreProfileValues): TimingConfig {
  const maxTtl = Math.max(...t.ROUTELOCK_CACHE_TIERS.map((tier) => tier.ttlSeconds));
  const localTier =
    t.ROUTELOCK_CACHE_TIERS.find((tier) => tier.name === 'local') ??
    t.ROUTELOCK_CACHE_TIERS.reduce((a, b) => (b.ttlSeconds < a.ttlSeconds ? b : a));
  return {
    profile,
    cacheTiers: t.ROUTELOCK_CACHE_TIERS,
    replicationBoundSeconds: t.ROUTELOCK_REPLICATION_BOUND_SECONDS,
    safetyBufferSeconds: t.ROUTELOCK_SAFETY_BUFFER_SECONDS,
    clockSkewSeconds: t.ROUTELOCK_CLOCK_SKEW_SECONDS,
    prelockLeaseSeconds: t.ROUTELOCK_PRELOCK_LEASE_SECONDS,
    prelockMaxSeconds: t.ROUTELOCK_PRELOCK_MAX_SECONDS,
    hardDeleteLeaseSeconds: t.ROUTELOCK_HARD_DELETE_LEASE_SECONDS,
    writeLeaseSeconds: t.ROUTELOCK_WRITE_LEASE_SECONDS,
    writeBudgetSeconds: t.ROUTELOCK_WRITE_BUDGET_SECONDS,
    retryAfterMaxSeconds: t.ROUTELOCK_RETRY_AFTER_MAX_SECONDS,
    convergenceDelaySeconds: maxTtl + t.ROUTELOCK_REPLICATION_BOUND_SECONDS,
    announceLeadSeconds:
      maxTtl +
      t.ROUTELOCK_REPLICATION_BOUND_SECONDS +
      t.ROUTELOCK_CLOCK_SKEW_SECONDS +
      t.ROUTELOCK_SAFETY_BUFFER_SECONDS,
    localCacheTtlSeconds: localTier.ttlSeconds,
    coalesceJoinMs: t.ROUTELOCK_COALESCE_JOIN_MS,
    announcedLocks: false,
  };
}

/**
 * The timing of a profile table's column alone (the probe's own profile), without the other layers'
 * variables. Throws ConfigError naming every bad variable.
 */
export function parseTimingSettings(profile: ServingProfile, column: Profile | Env): TimingConfig {
  const { data, problems } = parseVariables(coreProfileShape, { ...column }, new Set());
  if (!data) throw new ConfigError(problems);
  return timingSettings(profile, data);
}

/** The store the variables name; pushes the problems of a Cosmos DB endpoint. */
function storeSettings(s: CoreEnvValues, problems: string[]): StoreConfig {
  if (s.ROUTELOCK_STORE !== 'cosmos') return { kind: 'sqlite', path: s.ROUTELOCK_SQLITE_PATH };
  if (!s.COSMOS_ENDPOINT) {
    problems.push('COSMOS_ENDPOINT: required when ROUTELOCK_STORE=cosmos (an https:// account endpoint)');
  } else if (s.COSMOS_DISABLE_TLS_VERIFY && !isLoopbackHostname(new URL(s.COSMOS_ENDPOINT).hostname)) {
    problems.push(
      `COSMOS_DISABLE_TLS_VERIFY: only allowed for a loopback emulator endpoint, not ${new URL(s.COSMOS_ENDPOINT).host}`,
    );
  }
  return {
    kind: 'cosmos',
    endpoint: s.COSMOS_ENDPOINT ?? '',
    key: s.COSMOS_KEY,
    disableTlsVerify: s.COSMOS_DISABLE_TLS_VERIFY,
    database: s.COSMOS_DATABASE,
    container: s.COSMOS_CONTAINER,
    migrationsContainer: s.COSMOS_MIGRATIONS_CONTAINER,
    auditContainer: s.COSMOS_AUDIT_CONTAINER,
    campaignsContainer: s.COSMOS_CAMPAIGNS_CONTAINER,
    preferredRegion: s.COSMOS_PREFERRED_REGION ?? s.REGION_NAME,
  };
}

/** Where the token key ring comes from: the variable, the file, or (in-memory data) none kept. */
function tokenKeySource(s: CoreEnvValues, store: StoreConfig, env: Env, problems: string[]): TokenKeySource {
  if (s.ROUTELOCK_TOKEN_KEYS) return { kind: 'ring', keys: s.ROUTELOCK_TOKEN_KEYS };
  if (s.ROUTELOCK_TOKEN_KEY_FILE) return { kind: 'file', path: s.ROUTELOCK_TOKEN_KEY_FILE };
  if (runsInAzure(env)) {
    problems.push(
      'ROUTELOCK_TOKEN_KEYS: required in Azure (a Key Vault reference to the token key set; see the README)',
    );
    return { kind: 'ephemeral' };
  }
  if (store.kind === 'sqlite' && store.path === ':memory:') return { kind: 'ephemeral' };
  // Beside the database it protects: a restarted host resumes its migrations with the same keys.
  const dir = store.kind === 'sqlite' ? dirname(store.path) : '.routelock';
  return { kind: 'file', path: join(dir, 'token-keys.json') };
}

/** Core's settings from its parsed variables, with the problems found among them. */
export function coreSettings(
  profile: ServingProfile,
  t: CoreProfileValues,
  s: CoreEnvValues,
  env: Env,
): { timing: TimingConfig; store: StoreConfig; tokenKeys: TokenKeySource; problems: string[] } {
  const problems: string[] = [];
  const store = storeSettings(s, problems);
  const tokenKeys = tokenKeySource(s, store, env, problems);
  return {
    timing: { ...timingSettings(profile, t), announcedLocks: s.ROUTELOCK_ANNOUNCED_LOCKS },
    store,
    tokenKeys,
    problems,
  };
}

const guidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A comma-separated list: each item trimmed and checked, none twice, at least one. */
const commaList = (item: RegExp, expected: string) =>
  z
    .string()
    .trim()
    .transform((raw, ctx): string[] => {
      const items = raw.split(',').map((part) => part.trim());
      const bad = items.find((part) => !item.test(part));
      if (bad !== undefined) {
        ctx.addIssue({ code: 'custom', message: `expected ${expected}, got "${bad}"` });
        return z.NEVER;
      }
      const duplicate = items.find((part, i) => items.indexOf(part) !== i);
      if (duplicate !== undefined) {
        ctx.addIssue({ code: 'custom', message: `"${duplicate}" is listed twice` });
        return z.NEVER;
      }
      return items;
    });

/** ROUTELOCK_AUTH, ROUTELOCK_ENTRA_* and ROUTELOCK_REGIONS: who may call, and where routes may go. */
export const accessShape = {
  ROUTELOCK_AUTH: z
    .enum(['appservice', 'entra', 'none'], { message: 'expected "appservice", "entra" or "none"' })
    .default('appservice'),
  ROUTELOCK_ENTRA_TENANT_ID: z
    .string()
    .trim()
    .regex(guidPattern, { message: 'expected the directory (tenant) id, a GUID' })
    .optional(),
  ROUTELOCK_ENTRA_AUDIENCES: commaList(
    /^[\x21-\x2b\x2d-\x7e]{1,255}$/,
    'comma-separated audiences such as "api://routelock,00000000-0000-0000-0000-000000000000"',
  ).optional(),
  ROUTELOCK_ENTRA_JWKS_URI: z.url({ protocol: /^https?$/, message: 'expected an https:// URL' }).optional(),
  ROUTELOCK_REGIONS: commaList(
    /^[a-z][a-z0-9-]{1,49}$/,
    'comma-separated regions such as "westeurope,eastus"',
  ).optional(),
};

/**
 * ROUTELOCK_AUTH, ROUTELOCK_ENTRA_* and ROUTELOCK_REGIONS. Pushes every problem found and returns
 * undefined when the variables themselves do not parse.
 */
export function parseAccess(
  env: Env,
  profile: ServingProfile,
  problems: string[],
): { auth: AuthConfig; regions: RegionsConfig } | undefined {
  const parsed = parseVariables(accessShape, blankAsAbsent(accessShape, env), new Set());
  problems.push(...parsed.problems);
  const a = parsed.data;
  if (!a) return undefined;
  const inAzure = runsInAzure(env);
  if (a.ROUTELOCK_AUTH === 'none' && inAzure) {
    problems.push(
      'ROUTELOCK_AUTH: "none" lets every caller do everything and is refused in Azure; use "appservice" (with App Service authentication enabled) or "entra"',
    );
  }
  if (
    a.ROUTELOCK_AUTH === 'appservice' &&
    inAzure &&
    !/^true$/i.test(env.WEBSITE_AUTH_ENABLED?.trim() ?? '')
  ) {
    // Only the platform's authentication module strips x-ms-client-principal from outside requests.
    problems.push(
      'ROUTELOCK_AUTH: "appservice" trusts the x-ms-client-principal header, which only App Service authentication strips from outside requests, and it is not enabled on this app (WEBSITE_AUTH_ENABLED is not True); enable App Service authentication or use "entra"',
    );
  }
  const auth: AuthConfig =
    a.ROUTELOCK_AUTH === 'entra' ? entraAuth(a, problems) : ({ mode: a.ROUTELOCK_AUTH } as AuthConfig);
  if (!a.ROUTELOCK_REGIONS && profile === 'production' && inAzure) {
    problems.push(
      'ROUTELOCK_REGIONS: required in Azure under the production profile (the regions a route may move to, comma-separated, e.g. "westeurope,eastus")',
    );
  }
  return { auth, regions: { allowed: a.ROUTELOCK_REGIONS ?? null } };
}

/** ROUTELOCK_AUTH=entra: the tenant, audiences and key endpoint it needs, each problem pushed. */
function entraAuth(a: z.infer<z.ZodObject<typeof accessShape>>, problems: string[]): AuthConfig {
  const tenant = a.ROUTELOCK_ENTRA_TENANT_ID?.toLowerCase();
  if (!tenant) {
    problems.push(
      'ROUTELOCK_ENTRA_TENANT_ID: required when ROUTELOCK_AUTH=entra (the directory (tenant) id)',
    );
  }
  if (!a.ROUTELOCK_ENTRA_AUDIENCES) {
    problems.push(
      'ROUTELOCK_ENTRA_AUDIENCES: required when ROUTELOCK_AUTH=entra (comma-separated, e.g. "api://routelock")',
    );
  }
  const jwks = a.ROUTELOCK_ENTRA_JWKS_URI ? new URL(a.ROUTELOCK_ENTRA_JWKS_URI) : undefined;
  if (jwks && jwks.protocol !== 'https:' && !isLoopbackHostname(jwks.hostname)) {
    problems.push(
      `ROUTELOCK_ENTRA_JWKS_URI: must be https:// (http only for a loopback address), got ${jwks.protocol}//${jwks.host}`,
    );
  }
  return {
    mode: 'entra',
    tenantId: tenant ?? '',
    audiences: a.ROUTELOCK_ENTRA_AUDIENCES ?? [],
    issuers: [`https://login.microsoftonline.com/${tenant}/v2.0`, `https://sts.windows.net/${tenant}/`],
    jwksUri: jwks?.href ?? `https://login.microsoftonline.com/${tenant}/discovery/v2.0/keys`,
  };
}
