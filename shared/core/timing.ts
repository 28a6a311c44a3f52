import type { ServingProfile } from './profiles';

/**
 * The timing every read-path and lock rule works from, as config.ts parses it (docs/design.md §3). Kept
 * apart from config.ts so the rules' and views' types reach no schema library: the client package's
 * declarations import this file, never zod.
 */

export interface CacheTier {
  name: string;
  ttlSeconds: number;
}

export interface TimingConfig {
  profile: ServingProfile;
  cacheTiers: CacheTier[];
  replicationBoundSeconds: number;
  safetyBufferSeconds: number;
  clockSkewSeconds: number;
  prelockLeaseSeconds: number;
  prelockMaxSeconds: number;
  hardDeleteLeaseSeconds: number;
  writeLeaseSeconds: number;
  writeBudgetSeconds: number;
  retryAfterMaxSeconds: number;
  /** max cache TTL across the declared tiers + replication bound. */
  convergenceDelaySeconds: number;
  /** TTL of the service-local tier: what a route view may be cached for, and the router's own cache. */
  localCacheTtlSeconds: number;
  /**
   * ROUTELOCK_COALESCE_JOIN_MS: how long after a store read began a concurrent resolve of the same id may
   * still join it (shared/core/inflight.ts; docs/design.md §5.8). At most a tenth of the in-flight grace.
   */
  coalesceJoinMs: number;
}
