import { type TimingConfig, parseConfig } from '../../shared/config';

/** Production timing (docs/design.md §3 defaults): the numbers the lock-rule tables are written against. */
export const productionTiming: TimingConfig = parseConfig({}).timing;
/** The dev profile: what the embedded host runs with. */
export const devTiming: TimingConfig = parseConfig({ ROUTELOCK_PROFILE: 'dev' }).timing;

export const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);
export const seconds = (n: number): number => n * 1000;

/** An embedded host on a free port with a 1-second convergence delay: migrations finish in seconds. */
export const fastHostEnv = {
  PORT: '0',
  ROUTELOCK_PROFILE: 'dev',
  ROUTELOCK_CACHE_TIERS: 'local=1',
  ROUTELOCK_REPLICATION_BOUND_SECONDS: '0',
  ROUTELOCK_SAFETY_BUFFER_SECONDS: '0',
  // a failed attempt is tried again after 1 s, not the dev profile's 10 s
  ROUTELOCK_MIGRATION_RETRY_DELAY_SECONDS: '1',
} as const;

/**
 * The jest timeout of a fleet simulation. It bounds a hang, it does not check speed (benchmarks do): a
 * fleet is CPU-bound, takes under a minute alone, and several times that on a loaded 2-core machine
 * running another suite beside it.
 */
export const FLEET_TIMEOUT_MS = 900_000;
