import { z } from 'zod';
import { earliestEscalationAt } from '../core/lock/state';
import { COALESCE_GRACE_SHARE } from '../core/inflight';
import { isLoopbackHostname } from '../core/loopback';
import type { StoreConfig, TimingConfig } from '../core/settings';
import { count, flag, ncrontab, seconds } from '../core/settingsSchema';
import {
  DEFAULT_PARTICIPANT_POLL_MAX_SECONDS,
  DEFAULT_PARTICIPANT_POLL_MIN_SECONDS,
  DEFAULT_PARTICIPANT_TIMEOUT_SECONDS,
  MAX_PARTICIPANT_TIMEOUT_SECONDS,
} from './participantContract';
import type { Participant } from './participants';
import { DEFAULT_RECONCILE_GRACE_SECONDS, retryHorizonSeconds } from './telemetry/changeFeedRetry';
import { worstCaseAttemptActions } from './workflow/bound';
import { MAX_ORCHESTRATION_ACTIONS, TIMER_EARLY_SECONDS, renewEveryMs } from './workflow/copy';

/**
 * The migration layer's part of the configuration (design §3): the migration's attempts and
 * retries, the participants and their call timing, the probe, sweep and telemetry reconciliation, and
 * the checks that hold them to the lock timing core parsed (a migration must be able to finish, and an
 * attempt must fit under the Durable extension's history cap). config assembles it with the
 * other layers' parts.
 */

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
  /** The telemetry reconciliation (design §8). */
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

/** The timing variables the inequalities relate (seconds, counts), as parsed. */
export type TimingNumbers = Record<
  | 'ROUTELOCK_CLOCK_SKEW_SECONDS'
  | 'ROUTELOCK_PRELOCK_MAX_SECONDS'
  | 'ROUTELOCK_HARD_DELETE_LEASE_SECONDS'
  | 'ROUTELOCK_WRITE_LEASE_SECONDS'
  | 'ROUTELOCK_WRITE_BUDGET_SECONDS'
  | 'ROUTELOCK_DELTA_ATTEMPTS'
  | 'ROUTELOCK_DELTA_RETRY_DELAY_SECONDS'
  | 'ROUTELOCK_INFLIGHT_GRACE_SECONDS'
  | 'ROUTELOCK_COALESCE_JOIN_MS',
  number
>;

/** The write lock's window: it is renewed up to its budget, a lease at a time. */
const writeWindowOf = (
  t: Pick<TimingNumbers, 'ROUTELOCK_WRITE_LEASE_SECONDS' | 'ROUTELOCK_WRITE_BUDGET_SECONDS'>,
): number => Math.min(t.ROUTELOCK_WRITE_LEASE_SECONDS, t.ROUTELOCK_WRITE_BUDGET_SECONDS);

/**
 * The inequalities a timing profile must satisfy, or no migration could finish (design §3.5, the
 * README's Configuration section): one message per broken one, naming the variables. Start-up refuses a
 * profile that breaks any; the shipped profiles satisfy them all (the config tests check it).
 *
 * 1. the pre-lock cap exceeds the earliest escalation (convergence delay + safety buffer + skew);
 * 2. the skew is under a third of the write window (min of write lease and budget): the holder stops
 *    each phase `skew` early and renews every third of a lease;
 * 3. the skew is under a third of the hard-delete lease;
 * 4. with more than one delta attempt, the hard-delete lease outlives an overrun delta attempt: after
 *    the bulk copy's last renewal (a third of the lease before its end at worst) the lease must still
 *    cover the in-flight grace, the write budget, the retry delay and the skew until the renewal
 *    between attempts (workflow/write) — else it lapses and every later attempt is refused;
 * 5. the coalescing join bound is at most a tenth of the in-flight grace (design §5.8): a request
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

/** How the announcement lead L is named in a message: its value and the variables it is made of. */
const leadNamed = (lead: number): string =>
  `the announcement lead L (${lead} s: the convergence delay + ROUTELOCK_CLOCK_SKEW_SECONDS + ROUTELOCK_SAFETY_BUFFER_SECONDS)`;

/**
 * The inequalities under announced locks (ROUTELOCK_ANNOUNCED_LOCKS; design §3.7), checked
 * besides `timingInequalities` (whose 1 and 4 they tighten); L = `lead`, k = delta attempts:
 *
 * 1. the pre-lock cap holds one attempt with an empty bulk copy: L to the hard-delete lock, S + G to the
 *    copy, then per write-lock attempt L + S to the window and the budget, and the holder's S;
 * 4. (k > 1) what a renewal leaves (⅔ of the hard-delete lease) outlasts an overrun attempt and still
 *    finds L left: L + G + budget + delay + S;
 * 6. a renewal lands at least L before the lease's end (the rule refuses it otherwise): the bulk copy's
 *    first renewal comes a third of the lease after the copy starts, S + G after the lease's start, on a
 *    clock up to S from the rule's, so ⅔ lease ≥ L + 2S + G. (Later ones, a third of the lease after the
 *    one before, leave more.)
 */
export function announcedInequalities(t: TimingNumbers, lead: number): string[] {
  const problems: string[] = [];
  const skew = t.ROUTELOCK_CLOCK_SKEW_SECONDS;
  const grace = t.ROUTELOCK_INFLIGHT_GRACE_SECONDS;
  const budget = t.ROUTELOCK_WRITE_BUDGET_SECONDS;
  const k = t.ROUTELOCK_DELTA_ATTEMPTS;
  const attempt = lead + skew + grace + k * (lead + skew + budget) + skew;
  if (t.ROUTELOCK_PRELOCK_MAX_SECONDS <= attempt)
    problems.push(
      `ROUTELOCK_PRELOCK_MAX_SECONDS: under announced locks must exceed ${leadNamed(lead)} + ROUTELOCK_CLOCK_SKEW_SECONDS + ROUTELOCK_INFLIGHT_GRACE_SECONDS + ROUTELOCK_DELTA_ATTEMPTS × (L + ROUTELOCK_CLOCK_SKEW_SECONDS + ROUTELOCK_WRITE_BUDGET_SECONDS) + ROUTELOCK_CLOCK_SKEW_SECONDS (${attempt} s), got ${t.ROUTELOCK_PRELOCK_MAX_SECONDS}`,
    );
  const lease = t.ROUTELOCK_HARD_DELETE_LEASE_SECONDS;
  const leaseLeft = lease - renewEveryMs(lease) / 1000;
  const overrun = lead + grace + budget + t.ROUTELOCK_DELTA_RETRY_DELAY_SECONDS + skew;
  if (k > 1 && leaseLeft <= overrun)
    problems.push(
      `ROUTELOCK_HARD_DELETE_LEASE_SECONDS: under announced locks two thirds of it (${leaseLeft} s) must outlast ${leadNamed(lead)} + ROUTELOCK_INFLIGHT_GRACE_SECONDS + ROUTELOCK_WRITE_BUDGET_SECONDS + ROUTELOCK_DELTA_RETRY_DELAY_SECONDS + ROUTELOCK_CLOCK_SKEW_SECONDS (${overrun} s), or the renewal after an overrun delta attempt is refused for the lead`,
    );
  const renewal = lead + 2 * skew + grace;
  if (leaseLeft < renewal)
    problems.push(
      `ROUTELOCK_HARD_DELETE_LEASE_SECONDS: under announced locks two thirds of it (${leaseLeft} s, what a renewal leaves) must be at least ${leadNamed(lead)} + 2 × ROUTELOCK_CLOCK_SKEW_SECONDS + ROUTELOCK_INFLIGHT_GRACE_SECONDS (${renewal} s), or each renewal is refused for the lead`,
    );
  return problems;
}

/**
 * A migration's attempts with a fresh lock (design §6.3): each one may record a whole copy's history.
 */
export const MAX_MIGRATION_ATTEMPTS = 10;

/** The profile-table variables the migration reads (core/profiles gives their defaults). */
export const migrationProfileShape = {
  ROUTELOCK_DELTA_ATTEMPTS: count(1),
  ROUTELOCK_DELTA_RETRY_DELAY_SECONDS: seconds(0),
  ROUTELOCK_INFLIGHT_GRACE_SECONDS: seconds(0),
  ROUTELOCK_RETRY_ATTEMPTS: count(1),
  ROUTELOCK_RETRY_INTERVAL_SECONDS: seconds(1),
  ROUTELOCK_MIGRATION_ATTEMPTS: count(1).refine((n) => n <= MAX_MIGRATION_ATTEMPTS, {
    message: `expected a whole number of attempts, at most ${MAX_MIGRATION_ATTEMPTS}`,
  }),
  ROUTELOCK_MIGRATION_RETRY_DELAY_SECONDS: seconds(0),
};

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

/**
 * Participant call timing (design §6.5), the same under every profile. The timeout's ceiling is
 * the Durable HTTP client's own 240 s, so a participant's answer limit is the same on either runner.
 */
const participantTimingShape = {
  ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: seconds(1)
    .refine((n) => n <= MAX_PARTICIPANT_TIMEOUT_SECONDS, {
      message: `expected at most ${MAX_PARTICIPANT_TIMEOUT_SECONDS} seconds (the Durable HTTP client's limit; answer 202 + Location for long work)`,
    })
    // default: DEFAULT_PARTICIPANT_TIMEOUT_SECONDS, or less when the lock renewals come sooner (below)
    .optional(),
  ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS: seconds(1).default(DEFAULT_PARTICIPANT_POLL_MIN_SECONDS),
  // above the engine's early timer wake (TIMER_EARLY_SECONDS), or polls at the cap would have no floor
  ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS: seconds(TIMER_EARLY_SECONDS + 1).default(
    DEFAULT_PARTICIPANT_POLL_MAX_SECONDS,
  ),
};

/** The participants, the probe, the sweep and the reconciliation (no profile default). */
export const migrationEnvShape = {
  ROUTELOCK_PARTICIPANTS: participantsSchema.default([]),
  // Workflow version 4: a participant answering 404 to `verify` fails the attempt, instead of counting
  // as "not verified" (design §6.5).
  ROUTELOCK_REQUIRE_VERIFY: flag.default(false),
  ROUTELOCK_PROBE_REGION: z
    .string()
    .regex(/^[a-z][a-z0-9-]{1,49}$/, { message: 'expected a region like westeurope' })
    .optional(),
  ROUTELOCK_PROBE_SCHEDULE: ncrontab.default('0 */5 * * * *'),
  ROUTELOCK_SWEEP_SCHEDULE: ncrontab.default('0 */15 * * * *'),
  ROUTELOCK_RECONCILE_SCHEDULE: ncrontab.default('0 */15 * * * *'),
  ROUTELOCK_RECONCILE_INTERVAL_SECONDS: seconds(1).default(900),
  ROUTELOCK_RECONCILE_WINDOW_SECONDS: seconds(60).default(3600),
  ROUTELOCK_RECONCILE_GRACE_SECONDS: seconds(0).default(DEFAULT_RECONCILE_GRACE_SECONDS),
  ...participantTimingShape,
};

/** The migration's variables whose values are never echoed in an error message. */
export const migrationSecretVariables = ['ROUTELOCK_PARTICIPANTS'];

/**
 * The period of an NCRONTAB schedule of the simple kinds ("every N seconds / minutes / hours", or once a
 * minute / hour at fixed offsets), in seconds; null for anything else (lists, ranges, days), which the
 * operator must check against the window by hand (design §8.2).
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
 * The reconciliation's settings against each other (design §8.2), for the host that runs it: the
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

type MigrationProfileValues = z.infer<z.ZodObject<typeof migrationProfileShape>>;
type MigrationEnvValues = z.infer<z.ZodObject<typeof migrationEnvShape>>;

/** What the migration's settings and checks read of core's part. */
export interface CoreSettingsSeen {
  timing: TimingConfig;
  store: StoreConfig;
  /** Which host runs the reconciliation: the Functions runtime's, or the embedded one. */
  host: 'functions' | 'embedded';
  /** The host's REGION_NAME, the probe's default region. */
  regionName: string | undefined;
}

/**
 * The migration layer's settings from its parsed variables, with the problems found among them and
 * against core's timing (a migration must be able to finish; an attempt must fit the history cap).
 */
export function migrationLayerSettings(
  m: MigrationProfileValues,
  e: MigrationEnvValues,
  core: CoreSettingsSeen,
): { migration: MigrationConfig; operations: OperationsConfig; problems: string[] } {
  const problems: string[] = [];
  if (e.ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS > e.ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS) {
    problems.push(
      `ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS: must not exceed ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS (${e.ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS} s), got ${e.ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS}`,
    );
  }
  const t = core.timing;
  const numbers: TimingNumbers = {
    ROUTELOCK_CLOCK_SKEW_SECONDS: t.clockSkewSeconds,
    ROUTELOCK_PRELOCK_MAX_SECONDS: t.prelockMaxSeconds,
    ROUTELOCK_HARD_DELETE_LEASE_SECONDS: t.hardDeleteLeaseSeconds,
    ROUTELOCK_WRITE_LEASE_SECONDS: t.writeLeaseSeconds,
    ROUTELOCK_WRITE_BUDGET_SECONDS: t.writeBudgetSeconds,
    ROUTELOCK_DELTA_ATTEMPTS: m.ROUTELOCK_DELTA_ATTEMPTS,
    ROUTELOCK_DELTA_RETRY_DELAY_SECONDS: m.ROUTELOCK_DELTA_RETRY_DELAY_SECONDS,
    ROUTELOCK_INFLIGHT_GRACE_SECONDS: m.ROUTELOCK_INFLIGHT_GRACE_SECONDS,
    ROUTELOCK_COALESCE_JOIN_MS: t.coalesceJoinMs,
  };
  problems.push(...timingInequalities(numbers, earliestEscalationSeconds(t)));
  if (t.announcedLocks) problems.push(...announcedInequalities(numbers, t.announceLeadSeconds));
  const reconciliation: ReconciliationConfig = {
    schedule: e.ROUTELOCK_RECONCILE_SCHEDULE,
    intervalSeconds: e.ROUTELOCK_RECONCILE_INTERVAL_SECONDS,
    windowSeconds: e.ROUTELOCK_RECONCILE_WINDOW_SECONDS,
    graceSeconds: e.ROUTELOCK_RECONCILE_GRACE_SECONDS,
  };
  problems.push(...reconciliationProblems(reconciliation, core.store.kind, core.host));
  const participantTimeoutSeconds = participantTimeout(numbers, e, problems);
  problems.push(...historyBoundProblems(numbers, m, e, t.announcedLocks));
  return {
    migration: {
      participants: e.ROUTELOCK_PARTICIPANTS,
      deltaAttempts: m.ROUTELOCK_DELTA_ATTEMPTS,
      deltaRetryDelaySeconds: m.ROUTELOCK_DELTA_RETRY_DELAY_SECONDS,
      inFlightGraceSeconds: m.ROUTELOCK_INFLIGHT_GRACE_SECONDS,
      retryAttempts: m.ROUTELOCK_RETRY_ATTEMPTS,
      retryIntervalSeconds: m.ROUTELOCK_RETRY_INTERVAL_SECONDS,
      migrationAttempts: m.ROUTELOCK_MIGRATION_ATTEMPTS,
      migrationRetryDelaySeconds: m.ROUTELOCK_MIGRATION_RETRY_DELAY_SECONDS,
      participantTimeoutSeconds,
      participantPollMinSeconds: e.ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS,
      participantPollMaxSeconds: e.ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS,
      requireVerify: e.ROUTELOCK_REQUIRE_VERIFY,
    },
    operations: {
      probeRegion: e.ROUTELOCK_PROBE_REGION ?? probeRegionFrom(core.regionName),
      probeSchedule: e.ROUTELOCK_PROBE_SCHEDULE,
      sweepSchedule: e.ROUTELOCK_SWEEP_SCHEDULE,
      reconciliation,
    },
    problems,
  };
}

/**
 * A pre-lock must be able to outlive its own convergence wait, or no migration could ever escalate
 * (the lock rules let it escalate only from startsAt + the clock-skew margin): counted in seconds after
 * a pre-lock taken at instant 0.
 */
function earliestEscalationSeconds(t: TimingConfig): number {
  return (
    earliestEscalationAt(
      {
        acquiredAt: new Date(0).toISOString(),
        startsAt: new Date(t.convergenceDelaySeconds * 1000).toISOString(),
      },
      {
        replicationBoundSeconds: t.replicationBoundSeconds,
        safetyBufferSeconds: t.safetyBufferSeconds,
        clockSkewSeconds: t.clockSkewSeconds,
      },
    ) / 1000
  );
}

/**
 * A participant request must end before the phase lock's next renewal is due, or the copy round
 * abandons it at every renewal and a slow answer is never seen (design §6.4). The timeout, its
 * default bounded so; pushes the problem of a configured one that is not.
 */
function participantTimeout(t: TimingNumbers, e: MigrationEnvValues, problems: string[]): number {
  const renewalSeconds = Math.floor(
    Math.min(renewEveryMs(writeWindowOf(t)), renewEveryMs(t.ROUTELOCK_HARD_DELETE_LEASE_SECONDS)) / 1000,
  );
  // (leases of a few seconds, as drills and tests use, renew every second: 1 s is the least there is)
  const timeoutLimit = Math.max(1, renewalSeconds - 1);
  const timeout =
    e.ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS ?? Math.min(DEFAULT_PARTICIPANT_TIMEOUT_SECONDS, timeoutLimit);
  if (timeout > timeoutLimit) {
    problems.push(
      `ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: must be under the lock renewal cadence (a third of min(ROUTELOCK_WRITE_LEASE_SECONDS, ROUTELOCK_WRITE_BUDGET_SECONDS) and of ROUTELOCK_HARD_DELETE_LEASE_SECONDS: ${renewalSeconds} s) by 1 s, so a request always ends before the next renewal; got ${timeout}`,
    );
  }
  return timeout;
}

/** A whole attempt's worst-case orchestration actions must fit under the Durable extension's cap. */
function historyBoundProblems(
  t: TimingNumbers,
  m: MigrationProfileValues,
  e: MigrationEnvValues,
  announcedLocks: boolean,
): string[] {
  const attemptActions = worstCaseAttemptActions({
    announcedLocks,
    participants: e.ROUTELOCK_PARTICIPANTS.length,
    prelockMaxSeconds: t.ROUTELOCK_PRELOCK_MAX_SECONDS,
    hardDeleteLeaseSeconds: t.ROUTELOCK_HARD_DELETE_LEASE_SECONDS,
    writeLeaseSeconds: t.ROUTELOCK_WRITE_LEASE_SECONDS,
    writeBudgetSeconds: t.ROUTELOCK_WRITE_BUDGET_SECONDS,
    deltaAttempts: t.ROUTELOCK_DELTA_ATTEMPTS,
    pollMinSeconds: e.ROUTELOCK_PARTICIPANT_POLL_MIN_SECONDS,
    pollMaxSeconds: e.ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS,
    retryAttempts: m.ROUTELOCK_RETRY_ATTEMPTS,
  });
  if (attemptActions <= MAX_ORCHESTRATION_ACTIONS) return [];
  return [
    `ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS: ${e.ROUTELOCK_PARTICIPANTS.length} participants polled every ${e.ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS} s through a bulk copy as long as ROUTELOCK_PRELOCK_MAX_SECONDS (${t.ROUTELOCK_PRELOCK_MAX_SECONDS} s), with its cutover-window waits, confirmation and end notices, could record ${attemptActions} orchestration actions in one attempt, over the Durable extension's ${MAX_ORCHESTRATION_ACTIONS}: raise the poll cap or lower the pre-lock cap`,
  ];
}

/** "West Europe" (the host's REGION_NAME) → "westeurope"; "local" off Azure. */
function probeRegionFrom(regionName: string | undefined): string {
  const compact = (regionName ?? '').toLowerCase().replace(/[^a-z0-9]/g, '');
  return /^[a-z][a-z0-9]{1,49}$/.test(compact) ? compact : 'local';
}
