import type { Location, StoredDocument } from '../core/lock/document';
import type { CutoverWindow, PreflightCheck, PreflightCheckName, PreflightTiming } from '../migration/types';

/**
 * Campaigns (design §6.9): many resources moved to one target as one thing an operator starts,
 * watches, slows down, pauses and stops. Its migrations are ordinary migrations (same start path, one per
 * resource, `campaignId` on their records); the campaign only decides when each one starts.
 *
 * State lives in the store (port campaign/store/ports/campaigns): one campaign record (ETag
 * compare-and-swap) and one member row per resource. The runner (in-process loop, or a Durable
 * orchestration) only calls `campaignTick` again and again; a tick is idempotent, so a crashed runner
 * resumes by ticking again.
 */

export const campaignStates = ['Running', 'Paused', 'Cancelling', 'Cancelled', 'Completed'] as const;
export type CampaignState = (typeof campaignStates)[number];
/** A campaign in one of these never changes again. */
export const endedCampaignStates: ReadonlySet<CampaignState> = new Set(['Cancelled', 'Completed']);

/**
 * A member's state: `pending` (not started), `running` (its migration started and not ended), then
 * its migration's outcome; `skipped` when its start was refused for good (no route, region not allowed).
 */
export const memberStates = [
  'pending',
  'running',
  'completed',
  'noOp',
  'failed',
  'conflict',
  'cancelled',
  'skipped',
] as const;
export type MemberState = (typeof memberStates)[number];

/** How many members are in each state; `total` is their sum. */
export type CampaignCounts = Record<MemberState, number> & { total: number };

/** At most this many ids in one request (POST /campaigns, POST /campaigns/{id}/resources). */
export const MAX_IDS_PER_REQUEST = 1000;
/** At most this many resources in one campaign, over all its pages. */
export const MAX_CAMPAIGN_RESOURCES = 100_000;
/**
 * Kept for the contract; no longer a cap: members are numbered from the record's `reserved` counter
 * (seq = reserved + index), so requests and selected route pages of any size share the 100,000.
 */
export const MAX_CAMPAIGN_PAGES = MAX_CAMPAIGN_RESOURCES / MAX_IDS_PER_REQUEST;

export interface CampaignLimits {
  /** Never more than this many of its migrations running at once (1..10,000; default 10). */
  maxConcurrent: number;
  /** Never more than this many starts in any 60 s (absent: no rate limit). */
  startsPerMinute?: number;
  /** Each migration's attempts (1..ROUTELOCK_MIGRATION_ATTEMPTS; absent: the configured value). */
  migrationAttempts?: number;
}

export const DEFAULT_MAX_CONCURRENT = 10;
export const MAX_MAX_CONCURRENT = 10_000;

/** Where a campaign's resources come from: the ids it was given, or routes now at a region. */
export type CampaignSource =
  | { kind: 'ids' }
  | {
      kind: 'from';
      region: string;
      /** Select at most this many (absent: every route at the region, up to MAX_CAMPAIGN_RESOURCES). */
      limit?: number;
      /** The route list's continuation where selection goes on (absent: from the start). */
      continuation?: string;
      /** Routes selected so far. */
      selected: number;
      /** True once the route list has been read to its end or `limit` is reached. */
      done: boolean;
    };

/** One batch of starts: when (epoch ms) and how many; the record keeps those of the last 60 s. */
export interface StartBatch {
  at: number;
  count: number;
}

/** Start back-off while the store throttles (429), the paper's hot-partition lesson. */
export interface CampaignThrottle {
  /** No start before this (epoch ms). */
  until: number;
  /** The back-off that set `until`; doubled on the next throttled start, up to 60 s. */
  backoffMs: number;
  reason: string;
}

/**
 * The tick under way (ticks are at-least-once and may overlap): taken by compare-and-swap at a tick's
 * start, checked by each of its record writes, released by its save; a crashed tick's runs out.
 */
export interface TickLease {
  /** A random id of that one tick execution. */
  owner: string;
  /** Epoch ms, by the taking tick's clock. */
  until: number;
}

export interface CampaignRecord {
  campaignId: string;
  target: Location;
  limits: CampaignLimits;
  status: CampaignState;
  source: CampaignSource;
  /** ISO instants. */
  createdAt: string;
  updatedAt: string;
  endedAt?: string;
  /** The actor id that created it. */
  createdBy: string;
  /** Member batches reserved so far (a request's ids, or one selected page of routes), for operators. */
  pages: number;
  /**
   * Member slots reserved so far (ids given, before duplicates are dropped): at most 100,000. A batch's
   * seqs are reserved + index, taken in the same compare-and-swap that raises it: every seq is one member's.
   */
  reserved: number;
  /** As of the last tick (or the create). */
  counts: CampaignCounts;
  /** Start batches of the last 60 s (startsPerMinute is checked against them). */
  recentStarts: StartBatch[];
  throttle?: CampaignThrottle;
  /** Write-lock hold times of its ended migrations, a fixed log-bucket histogram (campaign/plan). */
  writeLockHistogram: number[];
  /** Ended members over time, for the ETA: the first start (epoch ms) and members ended since. */
  firstStartAt?: number;
  /** Its ended migrations (start to end), for the ETA: how many and their summed duration. */
  endedMigrations?: { count: number; totalMs: number };
  /** The mean start (epoch ms) of its running members as of the last tick, for the ETA. */
  runningStartedAt?: number;
  tickLease?: TickLease;
  /** SHA-256 of the create's ids (page 0): a repeated create with the same ids re-adds them at their seqs. */
  firstPageDigest?: string;
  pausedAt?: string;
  cancelRequestedAt?: string;
  cancelRequestedBy?: string;
  /** Why the last tick could not do all it wanted (a store outage, a throttle), for operators. */
  lastTickError?: string;
  /** Every member's cutover window, passed to each start. */
  window?: CutoverWindow;
}

export interface CampaignMember {
  campaignId: string;
  /** Its place in start order: the record's `reserved` when its batch was reserved, + its index in it. */
  seq: number;
  resourceId: string;
  state: MemberState;
  /**
   * Set once its start was asked: a deterministic id (`memberMigrationId`) or the migration it joined
   * (another's, to the same target: plan `isJoined`; watched and counted, never cancelled by the campaign).
   */
  migrationId?: string;
  /** Consecutive retriable start failures; at MAX_START_FAILURES it is skipped (plan `afterStartError`). */
  startFailures?: number;
  /** Why it was skipped, or its migration's error. */
  reason?: string;
  /** A skipped member: the refusal's error code (`NotFound`, `RegionNotAllowed`, …), `StartFailed` otherwise. */
  reasonCode?: string;
  /** Epoch ms. */
  startedAt?: number;
  endedAt?: number;
  /** Its migration's write-lock hold (writeAt → swap or release), ms. */
  writeLockMs?: number;
  /** A cancel was sent to its migration. */
  cancelSent?: boolean;
  /**
   * The route as the selection listed it (`carriedVersion`: document and ETag; design §6.7),
   * until its start is made: the start passes it on, which saves the start's existence read and the
   * pre-lock's read. The start seals it into the migration's input (migration/listedSeal) and
   * the pre-lock decides on it only under a seal that holds; here, before the start, it is not sealed, so
   * a writer of the campaign store could still hand the start a forged copy (design §6.7).
   */
  listed?: StoredDocument;
}

/** GET /campaigns/{id}: what an operator watches. */
export interface CampaignStatus {
  campaignId: string;
  status: CampaignState;
  target: Location;
  limits: CampaignLimits;
  source: { kind: 'ids' } | { kind: 'from'; region: string; limit?: number; selected: number; done: boolean };
  counts: CampaignCounts;
  createdAt: string;
  startedAt: string | null;
  updatedAt: string;
  endedAt?: string;
  /**
   * Seconds until every member has ended, from its ended migrations' mean duration and its limits
   * (campaign/plan `etaSeconds`); null before one has ended.
   */
  etaSeconds: number | null;
  /** Percentiles of its ended migrations' write-lock holds; null before one has ended. */
  writeLockSeconds: { p50: number; p99: number } | null;
  /** While starts are held back because the store throttles. */
  throttledUntil?: string;
  pausedAt?: string;
  cancelRequestedAt?: string;
  cancelRequestedBy?: string;
  lastTickError?: string;
  /** Its members' cutover window (design §6.10). */
  window?: CutoverWindow;
  /** Where its migrations are listed. */
  migrationsUrl: string;
  /**
   * GET /campaigns/{id} only, when members were skipped (never started: no migration lists them): how
   * many, by the refusal's error code.
   */
  skipped?: CampaignSkipped;
}

export interface CampaignSkipped {
  total: number;
  byReason: Record<string, number>;
  /** More were skipped than were read to count (the first SKIPS_COUNTED). */
  truncated?: boolean;
}

/** At most this many skipped members are read to count their reasons on a status read. */
export const SKIPS_COUNTED = 10_000;

/** POST /campaigns. */
export interface CampaignRequest {
  campaignId?: string;
  target: Location;
  resources?: string[];
  from?: { region: string; limit?: number };
  maxConcurrent?: number;
  startsPerMinute?: number;
  migrationAttempts?: number;
  /** Every member migration's cutover window. */
  window?: CutoverWindow;
}

/** PATCH /campaigns/{id}: new limits while it runs (`startsPerMinute: null` removes the rate limit). */
export interface CampaignLimitsPatch {
  maxConcurrent?: number;
  startsPerMinute?: number | null;
}

/** A member's migration id: the same on every try, so a start repeated after a crash joins, never duplicates. */
export const memberMigrationId = (campaignId: string, seq: number): string => `${campaignId}.${seq}`;

// ---------------------------------------------------------------------------------------------
// The dry run (design §6.2): POST /campaigns {dryRun: true}, campaign/preflight
// ---------------------------------------------------------------------------------------------

/** Why a dry run counts a resource out: the first failing route check of its migration preflight. */
export type CampaignSkipReason = Exclude<PreflightCheckName, 'participant' | 'windowReachable'>;

export interface CampaignSkip {
  resourceId: string;
  reason: CampaignSkipReason;
  detail: string;
}

/** At most this many skipped resources are named in a report (every one is counted). */
export const MAX_SKIPS_LISTED = 100;

/**
 * A campaign-wide check: the campaign id free (`campaignIdFree`), a resource to start
 * (`resourcesToStart`), and, for the first resource that would start, each participant asked once
 * (`participant`) and the cutover window (`windowReachable`, with a window).
 */
export type CampaignPreflightCheck = Omit<PreflightCheck, 'check'> & {
  check: 'campaignIdFree' | 'resourcesToStart' | 'participant' | 'windowReachable';
  /** Participant checks: the resource they were asked about. */
  resourceId?: string;
};

/**
 * How long the campaign takes at least, under its limits (campaign/plan `campaignDurationEstimate`).
 * Every migration is taken at its floor: the convergence wait and the in-flight grace (the dry run's
 * timing), no bulk copy (its duration is unknown) and a write phase of no time (`lowerBoundSeconds`) or
 * of its whole write budget (`withWriteBudgetSeconds`); starts as early as maxConcurrent and
 * startsPerMinute let them, ticks taking no time, no wait for a cutover window's slots.
 */
export interface CampaignEstimate {
  /** The resources it would start. */
  migrations: number;
  /** One migration's floor: convergence wait + in-flight grace. */
  perMigrationMinimumSeconds: number;
  writeBudgetSeconds: number;
  /** On top of every migration's floor: 'unknown' with participants in scope, 'none' for a lock-only move. */
  bulkCopyDuration: 'unknown' | 'none';
  /** Rounds of maxConcurrent migrations: ceil(migrations / maxConcurrent). */
  waves: number;
  /** The limit that sets the bound ('none': every one starts at once). */
  limitedBy: 'maxConcurrent' | 'startsPerMinute' | 'none';
  lowerBoundSeconds: number;
  withWriteBudgetSeconds: number;
}

/** POST /campaigns {dryRun: true}: what a create would meet, nothing written. */
export interface CampaignPreflightReport {
  dryRun: true;
  campaignId?: string;
  target: Location;
  /** Every campaign-wide check passes (skipped resources do not fail it: a campaign skips them). */
  ok: boolean;
  source: { kind: 'ids'; duplicates: number } | { kind: 'from'; region: string; limit?: number };
  /** Distinct resources the campaign would hold: its ids, or the routes its selection would take now. */
  resourceCount: number;
  wouldStart: number;
  skipped: {
    count: number;
    byReason: Partial<Record<CampaignSkipReason, number>>;
    /** The first MAX_SKIPS_LISTED, in start order. */
    resources: CampaignSkip[];
    truncated: boolean;
  };
  checks: CampaignPreflightCheck[];
  /** One migration's timing (the first resource that would start); null when none would. */
  timing: PreflightTiming | null;
  estimate: CampaignEstimate;
  limits: CampaignLimits;
  window?: CutoverWindow;
}
