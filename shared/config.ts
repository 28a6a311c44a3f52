import { dirname, join } from 'node:path';
import { deepFreeze } from './core/freeze';
import { z } from 'zod';
import { earliestEscalationAt } from './core/lock/state';
import { COALESCE_GRACE_SHARE } from './core/inflight';
import { isLoopbackHostname } from './core/loopback';
import { MAX_ORCHESTRATION_ACTIONS, renewEveryMs } from './migration/workflow/copy';
import { worstCaseAttemptActions } from './migration/workflow/bound';
import {
  DEFAULT_PARTICIPANT_POLL_MAX_SECONDS,
  DEFAULT_PARTICIPANT_POLL_MIN_SECONDS,
  DEFAULT_PARTICIPANT_TIMEOUT_SECONDS,
  MAX_PARTICIPANT_TIMEOUT_SECONDS,
} from './migration/participantContract';
import { type ProfileVariable, type ServingProfile, profiles } from './core/profiles';
import { TokenKeyring, parseTokenKeySet } from './core/security/tokenKeys';
import { DEFAULT_RECONCILE_GRACE_SECONDS, retryHorizonSeconds } from './migration/telemetry/changeFeedRetry';

/**
 * Configuration, parsed once at start-up from the environment (docs/design.md §3), over the defaults of the
 * profile table (shared/core/profiles.ts). A bad value stops start-up with a message that names the variable
 * and the expected form.
 */

import type { CacheTier, TimingConfig } from './core/timing';

export type { CacheTier, TimingConfig };

export type StoreConfig =
  | { kind: 'sqlite'; path: string }
  | {
      kind: 'cosmos';
      endpoint: string;
      /** Present only for local emulators; in Azure the managed identity is used. */
      key: string | undefined;
      disableTlsVerify: boolean;
      database: string;
      container: string;
      /** Container for migration records (id → instance, final status). */
      migrationsContainer: string;
      /** Container for the audit ledger and force-release requests. */
      auditContainer: string;
      /** Container for campaigns and their members (partition key /campaignId). */
      campaignsContainer: string;
      /** Region whose replica counts as "nearest" (defaults to the Functions host's REGION_NAME). */
      preferredRegion: string | undefined;
    };

export interface Participant {
  name: string;
  /**
   * Where the participant contract's POST goes (docs/design.md §6.5): 200 done, or 202 + Location to poll.
   * https:// (http:// only to a loopback host), with no credentials, query or fragment: it is copied into
   * every migration's stored input.
   */
  url: string;
  /**
   * Entra ID audience (an app ID URI or client id) of the participant's API: when set, each call
   * carries `Authorization: Bearer <managed-identity token for it>` (scope `<audience>/.default`).
   */
  audience?: string;
  /**
   * The resource ids this participant owns, as patterns where `*` matches any run of characters (nothing
   * else is special). Absent: every resource. A migration calls only the participants `participantsFor`
   * picks for its resource, chosen once at start.
   */
  resources?: string[];
}

/** Whether a resource id matches one `resources` pattern: `*` is any run of characters, the rest literal. */
export function matchesResourcePattern(resourceId: string, pattern: string): boolean {
  const [first = '', ...rest] = pattern.split('*');
  if (rest.length === 0) return resourceId === first;
  const last = rest.pop() as string;
  if (!resourceId.startsWith(first) || resourceId.length < first.length + last.length) return false;
  // The middle pieces in order, each after the one before, all before the suffix (leftmost match suffices).
  let at = first.length;
  const end = resourceId.length - last.length;
  for (const piece of rest) {
    const found = resourceId.indexOf(piece, at);
    if (found < 0 || found + piece.length > end) return false;
    at = found + piece.length;
  }
  return resourceId.endsWith(last);
}

/** The participants a migration of this resource calls: those without `resources`, and those it matches. */
export function participantsFor(resourceId: string, participants: readonly Participant[]): Participant[] {
  return participants.filter(
    (p) =>
      p.resources === undefined || p.resources.some((pattern) => matchesResourcePattern(resourceId, pattern)),
  );
}

export interface MigrationConfig {
  participants: Participant[];
  /** Write-lock attempts at the delta copy before the migration aborts. */
  deltaAttempts: number;
  /** Pause between a downgraded write lock and the next delta attempt. */
  deltaRetryDelaySeconds: number;
  /**
   * The longest a service request takes from resolving its route to landing its write or delete. Each
   * copy starts this long after the lock that guards it commits, so a request decided just before the
   * lock has landed before the copy takes its snapshot.
   */
  inFlightGraceSeconds: number;
  /** Attempts of a migration, each with a fresh lock, and the delay before the next (× 2^(n−1)). */
  migrationAttempts: number;
  migrationRetryDelaySeconds: number;
  /** Attempts for a transient failure (store 503, participant 5xx), and the first retry interval. */
  retryAttempts: number;
  retryIntervalSeconds: number;
  /** Each participant request's timeout (at most 240 s, the Durable HTTP client's limit). */
  participantTimeoutSeconds: number;
  /** The poll wait's floor and cap: the n-th poll waits min(max, max(Retry-After, min × 2^(n−1))). */
  participantPollMinSeconds: number;
  participantPollMaxSeconds: number;
  /** Every participant must implement `verify` (a 404 to it fails the attempt), ROUTELOCK_REQUIRE_VERIFY. */
  requireVerify: boolean;
}

export interface OperationsConfig {
  /** Region whose `probe-{region}` resource the synthetic probe cycles. */
  probeRegion: string;
  /** NCRONTAB schedules the Functions host reads (validated here so a typo stops start-up). */
  probeSchedule: string;
  sweepSchedule: string;
  /** The telemetry reconciliation (docs/design.md §8). */
  reconciliation: ReconciliationConfig;
}

export interface ReconciliationConfig {
  /** ROUTELOCK_RECONCILE_SCHEDULE: the Functions timer's NCRONTAB. */
  schedule: string;
  /** ROUTELOCK_RECONCILE_INTERVAL_SECONDS: the embedded host's interval between runs. */
  intervalSeconds: number;
  /** ROUTELOCK_RECONCILE_WINDOW_SECONDS: how far back a run looks (runs overlap: a window above the interval). */
  windowSeconds: number;
  /** ROUTELOCK_RECONCILE_GRACE_SECONDS: changes younger than this are left to the next run (the feed's lag). */
  graceSeconds: number;
}

/** Campaigns (docs/design.md §6.9). */
export interface CampaignConfig {
  /** Between a campaign's ticks: how soon a start follows an ended migration, or a pause its request. */
  tickSeconds: number;
}

export interface Config {
  timing: TimingConfig;
  store: StoreConfig;
  migration: MigrationConfig;
  campaign: CampaignConfig;
  operations: OperationsConfig;
  security: SecurityConfig;
  auth: AuthConfig;
  regions: RegionsConfig;
}

/**
 * Who may call (`ROUTELOCK_AUTH`; enforced by functions/http/auth.ts). `appservice` trusts only the
 * `x-ms-client-principal` header App Service authentication sets; `entra` validates bearer access tokens
 * in the app; `none` lets every caller do everything (the embedded host on loopback only; never in Azure).
 */
export type AuthConfig =
  | { mode: 'none' }
  | { mode: 'appservice' }
  | {
      mode: 'entra';
      /** Directory (tenant) id, lower case: the tokens' `tid` and the issuers' path. */
      tenantId: string;
      /** Accepted `aud` values (the API's application id URI and/or client id). */
      audiences: string[];
      /** v2.0 and v1 issuers of the tenant. */
      issuers: string[];
      /** Where the tenant's signing keys are fetched (https, or http on loopback for tests). */
      jwksUri: string;
    };

export interface RegionsConfig {
  /** ROUTELOCK_REGIONS: the regions a route may be placed in or moved to; null = unrestricted. */
  allowed: string[] | null;
}

/** Where the workflow's token key ring comes from (shared/core/security/tokenKeys.ts). */
export type TokenKeySource =
  | { kind: 'ring'; ring: TokenKeyring }
  | { kind: 'file'; path: string }
  /** In-memory stores only: a key ring that dies with the process, as their data does. */
  | { kind: 'ephemeral' };

export interface SecurityConfig {
  tokenKeys: TokenKeySource;
}

/** True on an Azure Functions / App Service worker (the platform sets these). */
export function runsInAzure(env: Record<string, string | undefined>): boolean {
  return Boolean(env.WEBSITE_SITE_NAME || env.WEBSITE_INSTANCE_ID);
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
const seconds = (min: number) => wholeNumber(min, 'a whole number of seconds');
const milliseconds = (min: number) => wholeNumber(min, 'a whole number of milliseconds');
/** How many times something is tried (ROUTELOCK_*_ATTEMPTS): a count, not a duration. */
const count = (min: number) => wholeNumber(min, 'a whole number of attempts');

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

const flag = z
  .string()
  .trim()
  .regex(/^(1|0|true|false)$/i, { message: 'expected 1, 0, true or false' })
  .transform((v) => v === '1' || v.toLowerCase() === 'true');

/** NCRONTAB as the Functions timer trigger takes it: six fields, seconds first. */
const ncrontab = z
  .string()
  .trim()
  .regex(/^(\S+\s+){5}\S+$/, {
    message: 'expected an NCRONTAB expression with six fields, e.g. "0 */5 * * * *"',
  });

/** The timing variables the inequalities relate (seconds, counts), as parsed. */
export type TimingNumbers = Pick<
  z.infer<typeof timingSchema>,
  | 'ROUTELOCK_CLOCK_SKEW_SECONDS'
  | 'ROUTELOCK_PRELOCK_MAX_SECONDS'
  | 'ROUTELOCK_HARD_DELETE_LEASE_SECONDS'
  | 'ROUTELOCK_WRITE_LEASE_SECONDS'
  | 'ROUTELOCK_WRITE_BUDGET_SECONDS'
  | 'ROUTELOCK_DELTA_ATTEMPTS'
  | 'ROUTELOCK_DELTA_RETRY_DELAY_SECONDS'
  | 'ROUTELOCK_INFLIGHT_GRACE_SECONDS'
  | 'ROUTELOCK_COALESCE_JOIN_MS'
>;

/** The write lock's window: it is renewed up to its budget, a lease at a time. */
const writeWindowOf = (
  t: Pick<TimingNumbers, 'ROUTELOCK_WRITE_LEASE_SECONDS' | 'ROUTELOCK_WRITE_BUDGET_SECONDS'>,
): number => Math.min(t.ROUTELOCK_WRITE_LEASE_SECONDS, t.ROUTELOCK_WRITE_BUDGET_SECONDS);

/**
 * The inequalities a timing profile must satisfy, or no migration could finish (docs/design.md §3.5, the
 * README's Configuration section): one message per broken one, naming the variables. Start-up refuses a
 * profile that breaks any; the shipped profiles satisfy them all (test/config.test.ts).
 *
 * 1. the pre-lock cap exceeds the earliest escalation (convergence delay + safety buffer + skew);
 * 2. the skew is under a third of the write window (min of write lease and budget): the holder stops
 *    each phase `skew` early and renews every third of a lease;
 * 3. the skew is under a third of the hard-delete lease;
 * 4. with more than one delta attempt, the hard-delete lease outlives an overrun delta attempt: after
 *    the bulk copy's last renewal (a third of the lease before its end at worst) the lease must still
 *    cover the in-flight grace, the write budget, the retry delay and the skew until the renewal
 *    between attempts (workflow/write.ts) — else it lapses and every later attempt is refused;
 * 5. the coalescing join bound is at most a tenth of the in-flight grace (docs/design.md §5.8): a request
 *    that joins a read begun `join` ago decides on the store as it was then, so its time from that
 *    answer to landing its write is `join` + its own in-flight time, and the copies only wait out the
 *    grace. The request keeps nine tenths of the grace (what services are told to land within, §5.6):
 *    join + 0.9 × grace ≤ grace, i.e. 10 × join ≤ grace (in ms). A grace of 0 allows only 0.
 */
export function timingInequalities(t: TimingNumbers, earliestEscalationSeconds: number): string[] {
  const problems: string[] = [];
  const skew = t.ROUTELOCK_CLOCK_SKEW_SECONDS;
  if (t.ROUTELOCK_PRELOCK_MAX_SECONDS <= earliestEscalationSeconds) {
    problems.push(
      `ROUTELOCK_PRELOCK_MAX_SECONDS: must exceed the convergence delay plus the safety buffer and the clock skew (${earliestEscalationSeconds} s), got ${t.ROUTELOCK_PRELOCK_MAX_SECONDS}`,
    );
  }
  const writeWindow = writeWindowOf(t);
  if (3 * skew >= writeWindow) {
    problems.push(
      `ROUTELOCK_CLOCK_SKEW_SECONDS: must be under a third of the write lease and budget (${writeWindow} s), got ${skew}`,
    );
  }
  const lease = t.ROUTELOCK_HARD_DELETE_LEASE_SECONDS;
  if (3 * skew >= lease) {
    problems.push(
      `ROUTELOCK_CLOCK_SKEW_SECONDS: must be under a third of ROUTELOCK_HARD_DELETE_LEASE_SECONDS (${lease} s), got ${skew}`,
    );
  }
  const leaseLeft = lease - renewEveryMs(lease) / 1000;
  const overrun =
    t.ROUTELOCK_INFLIGHT_GRACE_SECONDS +
    t.ROUTELOCK_WRITE_BUDGET_SECONDS +
    t.ROUTELOCK_DELTA_RETRY_DELAY_SECONDS +
    skew;
  if (t.ROUTELOCK_DELTA_ATTEMPTS > 1 && leaseLeft <= overrun) {
    problems.push(
      `ROUTELOCK_HARD_DELETE_LEASE_SECONDS: two thirds of it (${leaseLeft} s, what is left after the last renewal) must outlast an overrun delta attempt, ROUTELOCK_INFLIGHT_GRACE_SECONDS + ROUTELOCK_WRITE_BUDGET_SECONDS + ROUTELOCK_DELTA_RETRY_DELAY_SECONDS + ROUTELOCK_CLOCK_SKEW_SECONDS (${overrun} s), or the hard-delete lock lapses between delta attempts: raise the lease, or lower the budget or the delay`,
    );
  }
  const graceMs = t.ROUTELOCK_INFLIGHT_GRACE_SECONDS * 1000;
  if (t.ROUTELOCK_COALESCE_JOIN_MS * COALESCE_GRACE_SHARE > graceMs) {
    problems.push(
      `ROUTELOCK_COALESCE_JOIN_MS: must be at most a tenth of ROUTELOCK_INFLIGHT_GRACE_SECONDS (${graceMs / COALESCE_GRACE_SHARE} ms), so that a request that joins a read and then takes its own in-flight time (nine tenths of the grace) still lands before the copies start; got ${t.ROUTELOCK_COALESCE_JOIN_MS}`,
    );
  }
  return problems;
}

export { COALESCE_GRACE_SHARE };

/**
 * A migration's attempts with a fresh lock (docs/design.md §6.3): each one may record a whole copy's history.
 */
export const MAX_MIGRATION_ATTEMPTS = 10;

const timingSchema = z.object({
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
  ROUTELOCK_DELTA_ATTEMPTS: count(1),
  ROUTELOCK_DELTA_RETRY_DELAY_SECONDS: seconds(0),
  ROUTELOCK_INFLIGHT_GRACE_SECONDS: seconds(0),
  ROUTELOCK_COALESCE_JOIN_MS: milliseconds(0),
  ROUTELOCK_RETRY_ATTEMPTS: count(1),
  ROUTELOCK_RETRY_INTERVAL_SECONDS: seconds(1),
  ROUTELOCK_MIGRATION_ATTEMPTS: count(1).refine((n) => n <= MAX_MIGRATION_ATTEMPTS, {
    message: `expected a whole number of attempts, at most ${MAX_MIGRATION_ATTEMPTS}`,
  }),
  ROUTELOCK_MIGRATION_RETRY_DELAY_SECONDS: seconds(0),
  ROUTELOCK_CAMPAIGN_TICK_SECONDS: seconds(1),
} satisfies Record<ProfileVariable, z.ZodType>);

/**
 * A participant's URL. Every migration's stored input (Durable history, the in-process journal) holds a
 * copy, so it must carry no secret: no `user:password@`, no query string (API keys, SAS tokens) and no
 * fragment — a participant that needs credentials gets an `audience` and a managed-identity token. Plain
 * http:// only to a loopback host: elsewhere the copy requests (and any token) would travel in clear.
 */
const participantUrl = z.url({ protocol: /^https?$/ }).superRefine((raw, ctx) => {
  const url = new URL(raw);
  if (url.username !== '' || url.password !== '')
    ctx.addIssue({
      code: 'custom',
      message:
        'must not carry credentials (user:password@): give the participant an "audience" and let it check the identity token',
    });
  if (raw.includes('?') || raw.includes('#'))
    ctx.addIssue({
      code: 'custom',
      message:
        'must not carry a query string or fragment: the URL is copied into every migration\'s stored input, so secrets belong in an identity token ("audience"), not the URL',
    });
  if (url.protocol === 'http:' && !isLoopbackHostname(url.hostname))
    ctx.addIssue({
      code: 'custom',
      message: `must use https:// (plain http:// only to a loopback host such as 127.0.0.1), not http://${url.host}`,
    });
});

/** An Entra ID audience: an app ID URI (api://…, https://…) or a client id, printable, no spaces. */
const participantAudience = z.string().regex(/^[\x21-\x7e]{1,512}$/, {
  message: 'expected an app ID URI (api://…) or client id, without spaces',
});

/**
 * A participant's `resources`: resource-id patterns (`*` = any run of characters). An empty list would
 * silently scope the participant out of every migration, so it is refused: omit the field for "all".
 */
const participantResources = z
  .array(z.string().min(1, { message: 'a pattern must not be empty (use "*" for every resource)' }).max(1024))
  .min(1, { message: 'must list at least one pattern (omit "resources" for every resource)' });

/** "entry 2 (\"media\"): " for an issue inside the array's third entry, so the message names it. */
function describeEntry(value: unknown, path: readonly PropertyKey[]): string {
  const index = path[0];
  if (typeof index !== 'number' || !Array.isArray(value)) return '';
  const name: unknown = (value[index] as { name?: unknown } | null)?.name;
  return typeof name === 'string' ? `entry "${name}": ` : '';
}

const participantsSchema = z
  .string()
  .trim()
  .transform((raw, ctx): Participant[] => {
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch {
      ctx.addIssue({
        code: 'custom',
        message: 'expected JSON: [{"name":"messages","url":"https://…/migrate"}]',
      });
      return z.NEVER;
    }
    const parsed = z
      .array(
        z.strictObject({
          name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
          url: participantUrl,
          audience: participantAudience.optional(),
          resources: participantResources.optional(),
        }),
      )
      .safeParse(value);
    if (!parsed.success) {
      ctx.addIssue({
        code: 'custom',
        message: `expected [{"name": "<letters, digits, - or _>", "url": "https://…", "audience"?: "api://…", "resources"?: ["tenant-*", …]}]: ${parsed.error.issues
          .map((i) => `${describeEntry(value, i.path)}${i.path.join('.')}: ${i.message}`)
          .join('; ')}`,
      });
      return z.NEVER;
    }
    const names = parsed.data.map((p) => p.name);
    const duplicate = names.find((n, i) => names.indexOf(n) !== i);
    if (duplicate) {
      ctx.addIssue({ code: 'custom', message: `participant "${duplicate}" is declared twice` });
      return z.NEVER;
    }
    return parsed.data;
  });

const storeSchema = z.object({
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
  COSMOS_CONTAINER: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,255}$/, { message: 'expected a container name' })
    .default('locations'),
  COSMOS_MIGRATIONS_CONTAINER: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,255}$/, { message: 'expected a container name' })
    .default('migrations'),
  COSMOS_PREFERRED_REGION: z.string().min(1).optional(),
  REGION_NAME: z.string().min(1).optional(),
  ROUTELOCK_PARTICIPANTS: participantsSchema.default([]),
  // Workflow version 4: a participant answering 404 to `verify` fails the attempt, instead of counting
  // as "not verified" (docs/design.md §6.5).
  ROUTELOCK_REQUIRE_VERIFY: flag.default(false),
  COSMOS_AUDIT_CONTAINER: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,255}$/, { message: 'expected a container name' })
    .default('audit'),
  COSMOS_CAMPAIGNS_CONTAINER: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,255}$/, { message: 'expected a container name' })
    .default('campaigns'),
  ROUTELOCK_PROBE_REGION: z
    .string()
    .regex(/^[a-z][a-z0-9-]{1,49}$/, { message: 'expected a region like westeurope' })
    .optional(),
  ROUTELOCK_PROBE_SCHEDULE: ncrontab.default('0 */5 * * * *'),
  // The key ring the workflow's lock credentials are derived under (shared/core/security/tokenKeys.ts). In Azure
  // a Key Vault reference; the embedded host keeps a 0600 key file beside its database.
  ROUTELOCK_TOKEN_KEYS: z
    .string()
    .trim()
    .transform((raw, ctx) => {
      try {
        return new TokenKeyring(parseTokenKeySet(raw));
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message });
        return z.NEVER;
      }
    })
    .optional(),
  ROUTELOCK_TOKEN_KEY_FILE: z.string().trim().min(1).optional(),
  ROUTELOCK_SWEEP_SCHEDULE: ncrontab.default('0 */15 * * * *'),
  ROUTELOCK_RECONCILE_SCHEDULE: ncrontab.default('0 */15 * * * *'),
  ROUTELOCK_RECONCILE_INTERVAL_SECONDS: seconds(1).default(900),
  ROUTELOCK_RECONCILE_WINDOW_SECONDS: seconds(60).default(3600),
  ROUTELOCK_RECONCILE_GRACE_SECONDS: seconds(0).default(DEFAULT_RECONCILE_GRACE_SECONDS),
});

/**
 * The period of an NCRONTAB schedule of the simple kinds ("every N seconds / minutes / hours", or once a
 * minute / hour at fixed offsets), in seconds; null for anything else (lists, ranges, days), which the
 * operator must check against the window by hand (docs/design.md §8.2).
 */
export function simpleSchedulePeriodSeconds(schedule: string): number | null {
  const fields = schedule.trim().split(/\s+/);
  if (fields.length !== 6 || fields.slice(3).some((f) => f !== '*')) return null;
  const [sec, min, hour] = fields as [string, string, string];
  const fixed = (f: string) => /^\d+$/.test(f);
  const step = (f: string, unit: number, whole: number) => {
    const n = /^(?:\*|0)\/(\d+)$/.exec(f)?.[1];
    // a step that does not divide its unit leaves a longer gap at the wrap (*/25 minutes: 25, 25, 10)
    return n && Number(n) > 0 && whole % Number(n) === 0 ? Number(n) * unit : null;
  };
  if (fields.slice(0, 3).every((f) => f === '*')) return 1;
  if (hour === '*' && min === '*') return step(sec, 1, 60) ?? (fixed(sec) ? 60 : null);
  if (!fixed(sec)) return null;
  if (hour === '*') return step(min, 60, 60) ?? (fixed(min) ? 3600 : null);
  if (!fixed(min)) return null;
  return step(hour, 3600, 24) ?? (fixed(hour) ? 86_400 : null);
}

/**
 * The reconciliation's settings against each other (docs/design.md §8.2), for the host that runs it: the
 * window must cover the gap between two runs plus the grace (a run late by up to the grace, a cold start or
 * a restart, still leaves no change unchecked). The Functions host runs it on its schedule (checked when a
 * simple period), after a change-feed trigger whose retries the grace must outlast on Cosmos DB (a batch
 * still being retried is no loss); the embedded host on its interval, after a stream that runs with each
 * write (no retries: any grace). Neither is held to the other's setting.
 */
function reconciliationProblems(
  r: ReconciliationConfig,
  storeKind: StoreConfig['kind'],
  host: 'functions' | 'embedded',
): string[] {
  const problems: string[] = [];
  const horizon = retryHorizonSeconds();
  if (host === 'embedded') {
    if (r.windowSeconds < r.intervalSeconds + r.graceSeconds)
      problems.push(
        `ROUTELOCK_RECONCILE_WINDOW_SECONDS: must be at least ROUTELOCK_RECONCILE_INTERVAL_SECONDS + ROUTELOCK_RECONCILE_GRACE_SECONDS (${r.intervalSeconds + r.graceSeconds} s), or changes between two runs go unchecked; got ${r.windowSeconds}`,
      );
    return problems;
  }
  if (storeKind === 'cosmos' && r.graceSeconds < horizon)
    problems.push(
      `ROUTELOCK_RECONCILE_GRACE_SECONDS: must be at least the change-feed trigger's retry horizon (${horizon} s: functions/lockTelemetry.ts retries a failed batch 10 times, 5 s doubling to 5 min), or a batch still being retried is reported a TelemetryGap; got ${r.graceSeconds}`,
    );
  const period = simpleSchedulePeriodSeconds(r.schedule);
  if (period !== null && r.windowSeconds < period + r.graceSeconds)
    problems.push(
      `ROUTELOCK_RECONCILE_SCHEDULE: runs every ${period} s, so ROUTELOCK_RECONCILE_WINDOW_SECONDS (${r.windowSeconds}) must be at least that + ROUTELOCK_RECONCILE_GRACE_SECONDS (${period + r.graceSeconds} s), or changes between two runs go unchecked`,
    );
  return problems;
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

const accessSchema = z.object({
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
});

/**
 * Participant call timing (docs/design.md §6.5), the same under every profile. The timeout's ceiling is
 * the Durable HTTP client's own 240 s, so a participant's answer limit is the same on either runner.
 */
const participantTimingSchema = z.object({
  ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: seconds(1)
    .refine((n) => n <= MAX_PARTICIPANT_TIMEOUT_SECONDS, {
      message: `expected at most ${MAX_PARTICIPANT_TIMEOUT_SECONDS} seconds (the Durable HTTP client's limit; answer 202 + Location for long work)`,
    })
    // default: DEFAULT_PARTICIPANT_TIMEOUT_SECONDS, or less when the lock renewals come sooner (below)
    .optional(),
  ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS: seconds(1).default(DEFAULT_PARTICIPANT_POLL_MIN_SECONDS),
  ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS: seconds(1).default(DEFAULT_PARTICIPANT_POLL_MAX_SECONDS),
});

/** Every environment variable this schema reads (the Bicep and local settings are checked against it). */
export const configVariables: readonly string[] = [
  'ROUTELOCK_PROFILE',
  ...Object.keys(timingSchema.shape),
  ...Object.keys(storeSchema.shape),
  ...Object.keys(accessSchema.shape),
  ...Object.keys(participantTimingSchema.shape),
];

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  ${problems.join('\n  ')}`);
  }
}

type Env = Record<string, string | undefined>;

/** Never echoed in an error message: a bad value still names its variable, not its content. */
const secretVariables = new Set(['COSMOS_KEY', 'ROUTELOCK_TOKEN_KEYS', 'ROUTELOCK_PARTICIPANTS']);
/** A value pasted into the wrong variable may still be a credential (a connection string, a SAS URL). */
const looksSecret = /AccountKey=|SharedAccessSignature|[?&]sig=|password=|:\/\/[^/\s]*:[^/\s]*@/i;

function issues(error: z.ZodError, env: Env): string[] {
  return error.issues.map((issue) => {
    const variable = String(issue.path[0] ?? '(environment)');
    const value = env[variable];
    const got = secretVariables.has(variable) || (value && looksSecret.test(value)) ? undefined : value;
    return `${variable}: ${issue.message}${got === undefined ? '' : ` (got "${got}")`}`;
  });
}

/** Parse and check the whole configuration. Throws ConfigError naming every bad variable. */
export function parseConfig(env: Env = process.env): Config {
  const profileRaw = env.ROUTELOCK_PROFILE?.trim() || 'production';
  if (profileRaw !== 'production' && profileRaw !== 'dev') {
    throw new ConfigError([`ROUTELOCK_PROFILE: expected "production" or "dev" (got "${profileRaw}")`]);
  }
  const defaults = profiles[profileRaw];
  const merged: Env = { ...defaults };
  for (const key of Object.keys(defaults)) {
    const value = env[key];
    if (value !== undefined && value.trim() !== '') merged[key] = value;
  }

  const problems: string[] = [];
  const timing = timingSchema.safeParse(merged);
  if (!timing.success) problems.push(...issues(timing.error, merged));
  const storeEnv = Object.fromEntries(
    Object.keys(storeSchema.shape).map((k) => [k, env[k]?.trim() === '' ? undefined : env[k]]),
  );
  const store = storeSchema.safeParse(storeEnv);
  if (!store.success) problems.push(...issues(store.error, storeEnv));
  const access = parseAccess(env, profileRaw, problems);
  const participantEnv = Object.fromEntries(
    Object.keys(participantTimingSchema.shape).map((k) => [k, env[k]?.trim() === '' ? undefined : env[k]]),
  );
  const participantTiming = participantTimingSchema.safeParse(participantEnv);
  if (!participantTiming.success) problems.push(...issues(participantTiming.error, participantEnv));
  if (!timing.success || !store.success || !access || !participantTiming.success)
    throw new ConfigError(problems);
  const p = participantTiming.data;
  if (p.ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS > p.ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS) {
    problems.push(
      `ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS: must not exceed ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS (${p.ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS} s), got ${p.ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS}`,
    );
  }

  const t = timing.data;
  const maxTtl = Math.max(...t.ROUTELOCK_CACHE_TIERS.map((tier) => tier.ttlSeconds));
  const convergenceDelaySeconds = maxTtl + t.ROUTELOCK_REPLICATION_BOUND_SECONDS;
  const localTier =
    t.ROUTELOCK_CACHE_TIERS.find((tier) => tier.name === 'local') ??
    t.ROUTELOCK_CACHE_TIERS.reduce((a, b) => (b.ttlSeconds < a.ttlSeconds ? b : a));

  // A pre-lock must be able to outlive its own convergence wait, or no migration could ever escalate.
  // (the lock rules let it escalate only from startsAt + the clock-skew margin): counted in seconds
  // after a pre-lock taken at instant 0.
  const skew = t.ROUTELOCK_CLOCK_SKEW_SECONDS;
  const earliestEscalation =
    earliestEscalationAt(
      {
        acquiredAt: new Date(0).toISOString(),
        startsAt: new Date(convergenceDelaySeconds * 1000).toISOString(),
      },
      {
        replicationBoundSeconds: t.ROUTELOCK_REPLICATION_BOUND_SECONDS,
        safetyBufferSeconds: t.ROUTELOCK_SAFETY_BUFFER_SECONDS,
        clockSkewSeconds: skew,
      },
    ) / 1000;
  problems.push(...timingInequalities(t, earliestEscalation));

  const s = store.data;
  let storeConfig: StoreConfig;
  if (s.ROUTELOCK_STORE === 'cosmos') {
    if (!s.COSMOS_ENDPOINT) {
      problems.push('COSMOS_ENDPOINT: required when ROUTELOCK_STORE=cosmos (an https:// account endpoint)');
    } else if (s.COSMOS_DISABLE_TLS_VERIFY && !isLoopbackHostname(new URL(s.COSMOS_ENDPOINT).hostname)) {
      problems.push(
        `COSMOS_DISABLE_TLS_VERIFY: only allowed for a loopback emulator endpoint, not ${new URL(s.COSMOS_ENDPOINT).host}`,
      );
    }
    storeConfig = {
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
  } else {
    storeConfig = { kind: 'sqlite', path: s.ROUTELOCK_SQLITE_PATH };
  }
  problems.push(
    ...reconciliationProblems(
      {
        schedule: s.ROUTELOCK_RECONCILE_SCHEDULE,
        intervalSeconds: s.ROUTELOCK_RECONCILE_INTERVAL_SECONDS,
        windowSeconds: s.ROUTELOCK_RECONCILE_WINDOW_SECONDS,
        graceSeconds: s.ROUTELOCK_RECONCILE_GRACE_SECONDS,
      },
      storeConfig.kind,
      // The Functions host sets FUNCTIONS_WORKER_RUNTIME (func start too); in Azure it is always that host.
      runsInAzure(env) || Boolean(env.FUNCTIONS_WORKER_RUNTIME?.trim()) ? 'functions' : 'embedded',
    ),
  );
  let tokenKeys: TokenKeySource;
  if (s.ROUTELOCK_TOKEN_KEYS) tokenKeys = { kind: 'ring', ring: s.ROUTELOCK_TOKEN_KEYS };
  else if (s.ROUTELOCK_TOKEN_KEY_FILE) tokenKeys = { kind: 'file', path: s.ROUTELOCK_TOKEN_KEY_FILE };
  else if (runsInAzure(env)) {
    problems.push(
      'ROUTELOCK_TOKEN_KEYS: required in Azure (a Key Vault reference to the token key set; see the README)',
    );
    tokenKeys = { kind: 'ephemeral' };
  } else if (storeConfig.kind === 'sqlite' && storeConfig.path === ':memory:')
    tokenKeys = { kind: 'ephemeral' };
  else {
    // Beside the database it protects: a restarted host resumes its migrations with the same keys.
    const dir = storeConfig.kind === 'sqlite' ? dirname(storeConfig.path) : '.routelock';
    tokenKeys = { kind: 'file', path: join(dir, 'token-keys.json') };
  }
  // A participant request must end before the phase lock's next renewal is due, or the copy round
  // abandons it at every renewal and a slow answer is never seen (docs/design.md §6.4).
  const renewalSeconds = Math.floor(
    Math.min(renewEveryMs(writeWindowOf(t)), renewEveryMs(t.ROUTELOCK_HARD_DELETE_LEASE_SECONDS)) / 1000,
  );
  // (leases of a few seconds, as drills and tests use, renew every second: 1 s is the least there is)
  const timeoutLimit = Math.max(1, renewalSeconds - 1);
  const participantTimeoutSeconds =
    p.ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS ?? Math.min(DEFAULT_PARTICIPANT_TIMEOUT_SECONDS, timeoutLimit);
  if (participantTimeoutSeconds > timeoutLimit) {
    problems.push(
      `ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: must be under the lock renewal cadence (a third of min(ROUTELOCK_WRITE_LEASE_SECONDS, ROUTELOCK_WRITE_BUDGET_SECONDS) and of ROUTELOCK_HARD_DELETE_LEASE_SECONDS: ${renewalSeconds} s) by 1 s, so a request always ends before the next renewal; got ${participantTimeoutSeconds}`,
    );
  }
  const attemptActions = worstCaseAttemptActions({
    participants: s.ROUTELOCK_PARTICIPANTS.length,
    prelockMaxSeconds: t.ROUTELOCK_PRELOCK_MAX_SECONDS,
    hardDeleteLeaseSeconds: t.ROUTELOCK_HARD_DELETE_LEASE_SECONDS,
    writeLeaseSeconds: t.ROUTELOCK_WRITE_LEASE_SECONDS,
    writeBudgetSeconds: t.ROUTELOCK_WRITE_BUDGET_SECONDS,
    deltaAttempts: t.ROUTELOCK_DELTA_ATTEMPTS,
    pollMinSeconds: p.ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS,
    pollMaxSeconds: p.ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS,
    retryAttempts: t.ROUTELOCK_RETRY_ATTEMPTS,
  });
  if (attemptActions > MAX_ORCHESTRATION_ACTIONS) {
    problems.push(
      `ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS: ${s.ROUTELOCK_PARTICIPANTS.length} participants polled every ${p.ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS} s through a bulk copy as long as ROUTELOCK_PRELOCK_MAX_SECONDS (${t.ROUTELOCK_PRELOCK_MAX_SECONDS} s), with its cutover-window waits, confirmation and end notices, could record ${attemptActions} orchestration actions in one attempt, over the Durable extension's ${MAX_ORCHESTRATION_ACTIONS}: raise the poll cap or lower the pre-lock cap`,
    );
  }
  if (problems.length > 0) throw new ConfigError(problems);

  return deepFreeze({
    timing: {
      profile: profileRaw,
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
      convergenceDelaySeconds,
      localCacheTtlSeconds: localTier.ttlSeconds,
      coalesceJoinMs: t.ROUTELOCK_COALESCE_JOIN_MS,
    },
    store: storeConfig,
    migration: {
      participants: s.ROUTELOCK_PARTICIPANTS,
      deltaAttempts: t.ROUTELOCK_DELTA_ATTEMPTS,
      deltaRetryDelaySeconds: t.ROUTELOCK_DELTA_RETRY_DELAY_SECONDS,
      inFlightGraceSeconds: t.ROUTELOCK_INFLIGHT_GRACE_SECONDS,
      retryAttempts: t.ROUTELOCK_RETRY_ATTEMPTS,
      retryIntervalSeconds: t.ROUTELOCK_RETRY_INTERVAL_SECONDS,
      migrationAttempts: t.ROUTELOCK_MIGRATION_ATTEMPTS,
      migrationRetryDelaySeconds: t.ROUTELOCK_MIGRATION_RETRY_DELAY_SECONDS,
      participantTimeoutSeconds,
      participantPollMinSeconds: p.ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS,
      participantPollMaxSeconds: p.ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS,
      requireVerify: s.ROUTELOCK_REQUIRE_VERIFY,
    },
    campaign: { tickSeconds: t.ROUTELOCK_CAMPAIGN_TICK_SECONDS },
    operations: {
      probeRegion: s.ROUTELOCK_PROBE_REGION ?? probeRegionFrom(s.REGION_NAME),
      probeSchedule: s.ROUTELOCK_PROBE_SCHEDULE,
      sweepSchedule: s.ROUTELOCK_SWEEP_SCHEDULE,
      reconciliation: {
        schedule: s.ROUTELOCK_RECONCILE_SCHEDULE,
        intervalSeconds: s.ROUTELOCK_RECONCILE_INTERVAL_SECONDS,
        windowSeconds: s.ROUTELOCK_RECONCILE_WINDOW_SECONDS,
        graceSeconds: s.ROUTELOCK_RECONCILE_GRACE_SECONDS,
      },
    },
    security: { tokenKeys },
    auth: access.auth,
    regions: access.regions,
  });
}

/**
 * ROUTELOCK_AUTH, ROUTELOCK_ENTRA_* and ROUTELOCK_REGIONS. Pushes every problem found and returns
 * undefined when the variables themselves do not parse.
 */
function parseAccess(
  env: Env,
  profile: ServingProfile,
  problems: string[],
): { auth: AuthConfig; regions: RegionsConfig } | undefined {
  const accessEnv = Object.fromEntries(
    Object.keys(accessSchema.shape).map((k) => [k, env[k]?.trim() === '' ? undefined : env[k]]),
  );
  const parsed = accessSchema.safeParse(accessEnv);
  if (!parsed.success) {
    problems.push(...issues(parsed.error, accessEnv));
    return undefined;
  }
  const a = parsed.data;
  const inAzure = runsInAzure(env);
  let auth: AuthConfig = { mode: a.ROUTELOCK_AUTH } as AuthConfig;
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
  if (a.ROUTELOCK_AUTH === 'entra') {
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
    auth = {
      mode: 'entra',
      tenantId: tenant ?? '',
      audiences: a.ROUTELOCK_ENTRA_AUDIENCES ?? [],
      issuers: [`https://login.microsoftonline.com/${tenant}/v2.0`, `https://sts.windows.net/${tenant}/`],
      jwksUri: jwks?.href ?? `https://login.microsoftonline.com/${tenant}/discovery/v2.0/keys`,
    };
  }
  if (!a.ROUTELOCK_REGIONS && profile === 'production' && inAzure) {
    problems.push(
      'ROUTELOCK_REGIONS: required in Azure under the production profile (the regions a route may move to, comma-separated, e.g. "westeurope,eastus")',
    );
  }
  return { auth, regions: { allowed: a.ROUTELOCK_REGIONS ?? null } };
}

/** "West Europe" (the host's REGION_NAME) → "westeurope"; "local" off Azure. */
function probeRegionFrom(regionName: string | undefined): string {
  const compact = (regionName ?? '').toLowerCase().replace(/[^a-z0-9]/g, '');
  return /^[a-z][a-z0-9]{1,49}$/.test(compact) ? compact : 'local';
}

let loaded: Config | undefined;

/** The process-wide configuration, parsed on first use and never again. */
export function getConfig(): Config {
  loaded ??= parseConfig(process.env);
  return loaded;
}
