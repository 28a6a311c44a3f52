/**
 * The settings types: what the parsed configuration holds that core code works from (design §3).
 * Imports nothing, so the rules', views' and client's types reach no schema library and no layer above
 * core: the client package's declarations import this file, never zod. The schema that fills them is
 * core/settingsSchema; `config` assembles every layer's part.
 */

/** The profiles ROUTELOCK_PROFILE may select. */
export type ServingProfile = 'production' | 'dev';

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
  /**
   * The announcement lead L (design §3.7): convergence delay + clock skew + safety buffer. An announced
   * lock writes each tightening at least this long before it takes effect.
   */
  announceLeadSeconds: number;
  /**
   * ROUTELOCK_ANNOUNCED_LOCKS: whether this host's migrations and pre-lock callers take announced locks
   * (design §3.7). Off by default while libraries that cannot change a version-2 document may still run.
   */
  announcedLocks: boolean;
  /** TTL of the service-local tier: what a route view may be cached for, and the router's own cache. */
  localCacheTtlSeconds: number;
  /**
   * ROUTELOCK_COALESCE_JOIN_MS: how long after a store read began a concurrent resolve of the same id may
   * still join it (core/inflight; design §5.8). At most a tenth of the in-flight grace.
   */
  coalesceJoinMs: number;
}

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

/**
 * Who may call (`ROUTELOCK_AUTH`; enforced by the HTTP layer). `appservice` trusts only the
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
