/**
 * The profile table: every timing and migration variable's value under each profile (design §3), written
 * once. `config` (parseConfig) takes its defaults from here (ROUTELOCK_PROFILE picks the column; an explicit
 * variable overrides it), and the tests hold the rest to it: the Bicep parameters (production),
 * the sample local settings (dev) and the README's configuration table.
 *
 * Units are in the names: `_SECONDS` are whole seconds, `_MS` whole milliseconds, `_ATTEMPTS` are counts, `ROUTELOCK_CACHE_TIERS`
 * is `name=seconds` pairs.
 */

const production = {
  ROUTELOCK_CACHE_TIERS: 'edge=7200,regional=1800,local=60',
  ROUTELOCK_REPLICATION_BOUND_SECONDS: '300',
  ROUTELOCK_SAFETY_BUFFER_SECONDS: '600',
  ROUTELOCK_CLOCK_SKEW_SECONDS: '5',
  ROUTELOCK_PRELOCK_LEASE_SECONDS: '172800',
  ROUTELOCK_PRELOCK_MAX_SECONDS: '259200',
  ROUTELOCK_HARD_DELETE_LEASE_SECONDS: '21600',
  ROUTELOCK_WRITE_LEASE_SECONDS: '300',
  ROUTELOCK_WRITE_BUDGET_SECONDS: '900',
  ROUTELOCK_RETRY_AFTER_MAX_SECONDS: '5',
  ROUTELOCK_DELTA_ATTEMPTS: '3',
  ROUTELOCK_DELTA_RETRY_DELAY_SECONDS: '60',
  ROUTELOCK_INFLIGHT_GRACE_SECONDS: '5',
  // A tenth of the grace at most (migration/settings timingInequalities); 50 ms is ten 5 ms reads.
  ROUTELOCK_COALESCE_JOIN_MS: '50',
  ROUTELOCK_RETRY_ATTEMPTS: '5',
  ROUTELOCK_RETRY_INTERVAL_SECONDS: '5',
  ROUTELOCK_MIGRATION_ATTEMPTS: '3',
  ROUTELOCK_MIGRATION_RETRY_DELAY_SECONDS: '300',
  ROUTELOCK_CAMPAIGN_TICK_SECONDS: '5',
} as const;

export type ProfileVariable = keyof typeof production;
export type Profile = Readonly<Record<ProfileVariable, string>>;

export const profiles = {
  /** Azure: what the Bicep deploys. */
  production,
  /** The embedded host's default: one-second tiers, so a migration finishes in seconds. */
  dev: {
    ROUTELOCK_CACHE_TIERS: 'local=2',
    ROUTELOCK_REPLICATION_BOUND_SECONDS: '1',
    ROUTELOCK_SAFETY_BUFFER_SECONDS: '1',
    ROUTELOCK_CLOCK_SKEW_SECONDS: '0',
    ROUTELOCK_PRELOCK_LEASE_SECONDS: '600',
    ROUTELOCK_PRELOCK_MAX_SECONDS: '3600',
    ROUTELOCK_HARD_DELETE_LEASE_SECONDS: '120',
    ROUTELOCK_WRITE_LEASE_SECONDS: '30',
    ROUTELOCK_WRITE_BUDGET_SECONDS: '60',
    ROUTELOCK_RETRY_AFTER_MAX_SECONDS: '1',
    ROUTELOCK_DELTA_ATTEMPTS: '3',
    ROUTELOCK_DELTA_RETRY_DELAY_SECONDS: '1',
    ROUTELOCK_INFLIGHT_GRACE_SECONDS: '1',
    // Embedded reads finish in microseconds, so there is no read in flight worth joining (the 1 s grace
    // would allow up to 100 ms: migration/settings timingInequalities).
    ROUTELOCK_COALESCE_JOIN_MS: '0',
    ROUTELOCK_RETRY_ATTEMPTS: '5',
    ROUTELOCK_RETRY_INTERVAL_SECONDS: '1',
    ROUTELOCK_MIGRATION_ATTEMPTS: '3',
    ROUTELOCK_MIGRATION_RETRY_DELAY_SECONDS: '10',
    ROUTELOCK_CAMPAIGN_TICK_SECONDS: '1',
  },
  /**
   * The synthetic probe's own timing on `probe-` resources (one-second convergence), whatever profile
   * serves: parsed when the probe runs (migration/probe), never selectable with ROUTELOCK_PROFILE.
   */
  probe: {
    ...production,
    ROUTELOCK_CACHE_TIERS: 'local=1',
    ROUTELOCK_REPLICATION_BOUND_SECONDS: '0',
    ROUTELOCK_SAFETY_BUFFER_SECONDS: '0',
    ROUTELOCK_CLOCK_SKEW_SECONDS: '0',
    ROUTELOCK_PRELOCK_LEASE_SECONDS: '120',
    ROUTELOCK_PRELOCK_MAX_SECONDS: '300',
    // Two thirds of the hard-delete lease outlast an overrun delta attempt (migration/settings timingInequalities).
    ROUTELOCK_HARD_DELETE_LEASE_SECONDS: '120',
    ROUTELOCK_WRITE_LEASE_SECONDS: '30',
    ROUTELOCK_WRITE_BUDGET_SECONDS: '60',
    ROUTELOCK_RETRY_AFTER_MAX_SECONDS: '1',
    ROUTELOCK_DELTA_RETRY_DELAY_SECONDS: '1',
    // The probe measures health: a retry would hide the failure it exists to see.
    ROUTELOCK_MIGRATION_ATTEMPTS: '1',
    ROUTELOCK_MIGRATION_RETRY_DELAY_SECONDS: '1',
  },
} as const satisfies Record<string, Profile>;

export type { ServingProfile } from './settings';
