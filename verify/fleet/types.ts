import type { ScenarioResult } from '../scenarios';

export type FleetControl =
  | 'none'
  | 'convergenceShorterThanCacheTtl'
  | 'noReadThrough'
  | 'noInFlightGrace'
  | 'regionOnlyDecide'
  | 'noSkewMargins'
  | 'deleteDuringRetiredWindow'
  | 'serverCacheNoAge'
  /** A campaign's start rule that ignores maxConcurrent (the tick reads a record allowing 10,000). */
  | 'campaignIgnoresMaxConcurrent'
  /** A campaign's start rule that ignores startsPerMinute (the tick reads a record without it). */
  | 'campaignIgnoresStartsPerMinute'
  /** The participants' delta now and then drops an item; they verify: the workflow must refuse those swaps. */
  | 'deltaDropsItem'
  /** The same bug, the participants answering 404 to `verify`: the data oracle must see the loss. */
  | 'deltaDropsItemUnverified'
  /**
   * The participants ignore supersession: a copy a newer job superseded (an overrun delta attempt) still
   * lands when it finishes, over a target that may be live by then.
   */
  | 'participantIgnoresSupersede'
  /**
   * Confirmation switched off (docs/design.md §6.11): the swap's own answer taken for the replica's, so the
   * `completed` notice (and the participants' clean-up of the source) follows a swap a failover dropped.
   */
  | 'cleanUpAtOnce'
  /**
   * Coalescing with a join bound longer than the in-flight grace (2 × grace, which config refuses): a
   * request joins a slow read begun before a lock committed, and lands after the copies started.
   */
  | 'joinLongerThanGrace'
  /**
   * Announced locks whose lead is shorter than the convergence delay (the edge tier's TTL short of it):
   * a copy taken before the pre-lock or the window's announcement is served past the instant it starts.
   */
  | 'shortAnnouncement'
  /**
   * Renewals of an announced lock's hard-delete lease accepted with less than the lead left (the rule's
   * lead check dropped), landing late (at 0.95 of an hour's lease): a copy showing the old end stops
   * enforcing before the renewal reaches it.
   */
  | 'lateRenewal'
  /** The read policies of testkit/readPolicyBugs.ts, planted in every service's routers. */
  | 'leaveOnOwnTimestamps'
  | 'replicaInWindow'
  | 'servedPastTtl';

export interface FleetOptions {
  migrations: number;
  concurrency: number;
  resources: number;
  /** Share of store calls that fail. */
  faultRate: number;
  seed: number;
  control?: FleetControl;
  /** Controls stop at their first violation: being caught is all they have to show. */
  stopAtFirstViolation?: boolean;
  /**
   * Instead of the driver's migrations, one campaign over every resource (verify/fleet/campaign.ts);
   * `migrations` and `concurrency` are then unused.
   */
  campaign?: { maxConcurrent: number; startsPerMinute?: number };
}

/** The campaign's run (FleetOptions.campaign). */
export interface FleetCampaignStats {
  maxConcurrent: number;
  startsPerMinute?: number;
  /** Its members by state at the end. */
  members: Record<string, number>;
  status: string;
  /** Starts that created a migration. */
  starts: number;
  /** The most of its migrations unfinished at one virtual instant. */
  peakRunning: number;
  /** The most starts in one window of 60 s less the declared skew. */
  peakStartsInWindow: number;
  ticks: number;
  /** Process deaths at a campaign store call (mid-tick); the orchestrator's crashes are counted apart. */
  crashes: number;
  /** Faults injected into campaign store calls. */
  faults: number;
  rivalStarts: number;
}

export interface FleetStats {
  migrations: number;
  outcomes: Record<string, number>;
  /** Why migrations ended Failed or Conflict (numbers elided), with counts. */
  reasons: Record<string, number>;
  /**
   * Automatic retry with a fresh lock (docs/design.md §6.3), over the orchestrator's own migrations (not the
   * rival's): Completed or NoOp on attempt 1, or on a later one; Failed after all attempts, or before.
   */
  attempts: {
    firstAttempt: number;
    afterRetry: number;
    failedAfterAll: number;
    failedEarly: number;
    max: number;
  };
  virtualHours: number;
  userOps: Record<
    | 'reads'
    | 'writes'
    | 'deletes'
    | 'refused'
    | 'tombstoned'
    | 'redirected'
    | 'unavailable'
    | 'raced'
    | 'landedUnderLock'
    | 'noRoute'
    /** Requests whose resolve joined a slow read in flight (a hot resource's burst), judged as it began. */
    | 'joined'
    /** Requests that gave up: their resolve outlasted their in-flight budget (nine tenths of the grace). */
    | 'gaveUp'
    /** Slow reads of hot resources that the bursts' requests arrived during. */
    | 'bursts',
    number
  >;
  faults: Record<
    'throttled' | 'unavailable' | 'readTimeout' | 'writeTimeoutLost' | 'writeTimeoutCommitted' | 'conflict',
    number
  >;
  storeCalls: number;
  crashes: number;
  /** Distinct journal positions (1..30) right after which a migration's process died. */
  crashSteps: number;
  /** Journaled steps per migration run by the crashing orchestrator. */
  journalSteps: { median: number; max: number };
  /** Phases the migrations were in when their process died, with counts. */
  crashPhases: Record<string, number>;
  /** Restarts that came after a lease could lapse. */
  longOutages: number;
  /** Restarts timed to come around the end of a phase lease of a migration in flight. */
  boundaryRestarts: number;
  /** Orchestrator stalls, each until around the end of a write lease. */
  stallFors: number;
  copies: number;
  /**
   * Verification before the swap (docs/design.md §6.5): `verify` answered by the participants, mismatches
   * among them, the verify rounds with a mismatch in the migrations' statuses (each a swap refused), and the
   * items the delta controls dropped.
   */
  verification: { run: number; mismatches: number; swapsRefused: number; itemsDropped: number };
  /** Migrations between two accounts of one region: started, and swapped. */
  accountMoves: { started: number; swapped: number };
  /** The route-deleting actor (DELETE shortly after a swap, then re-create at the same location). */
  routeDeletes: {
    attempts: number;
    refusedConvergencePending: number;
    refusedLocked: number;
    deleted: number;
    recreated: number;
  };
  /**
   * The client tier (each service's RoutingClient behind its edge tier): writes and deletes decided on
   * its views at the location that served them (judged by the decision oracles), reads, redirects,
   * requests that reached the edge, and the largest Age the edge sent.
   */
  clientTier: {
    decisions: number;
    reads: number;
    redirects: number;
    requests: number;
    maxAgeSeconds: number;
  };
  campaign?: FleetCampaignStats;
  /** Write-region failovers (verify/fleet/faults.ts WriteRegionFailover), and the swaps they took back. */
  failovers?: { count: number; swapsLost: number };
  /**
   * Announced locks (lock rule 2): migrations started asking for them, and legacy ones; and the services'
   * restarts (every tier's copies forgotten at once: a reader that first sees a resource mid-migration).
   */
  announced: { migrations: number; legacy: number; serviceRestarts: number };
  /**
   * The services' write-region reads on the request path, by what the write region showed when each was
   * made (readStats.ts): in an announced lock's write window, and outside it by the reason design note
   * §4 gives (or `unexplained`).
   */
  writeRegionReads: Record<WriteRegionReadKind, number>;
  /** Clock offsets drawn (ms): per service, and per orchestrator instance (each restart draws anew). */
  clockOffsetsMs: { services: number[]; orchestrators: { min: number; max: number; count: number } };
}

/** Why a request-path write-region read was made (readStats.ts classifies it against the write region). */
export type WriteRegionReadKind =
  /** An announced lock's write window (from its `writeWindowAt` less the skew) or its write lock. */
  | 'inWindow'
  /** A legacy lock (today's rule: from its start). */
  | 'legacyLock'
  /** The old-version service (every lock read by the legacy rule). */
  | 'oldReader'
  /** Within the replication bound (and the skew) after a lock, write lock or window left the write region. */
  | 'afterWindow'
  /** A write lock or window past its end still on the document (a dead workflow's, until reclaimed). */
  | 'deadWindow'
  /** No lock on the write region (and none left it within R): counted, not checked. */
  | 'noLock'
  /** An announced lock outside its window and none of the above: none is expected (a violation). */
  | 'unexplained';

export interface FleetResult extends ScenarioResult {
  stats: FleetStats;
}

/**
 * What a violation is about: a service's decision at one request, the data at a committed location, a
 * committed document version, a migration's end, or the harness itself. A control is caught only by the
 * kinds its bug must produce.
 */
export type ViolationKind =
  | 'decision'
  | 'data'
  | 'version'
  | 'window'
  | 'lifecycle'
  | 'harness'
  /** A campaign limit exceeded, or two campaign migrations of one resource. */
  | 'campaign'
  /** A request-path write-region read of an announced resource outside its write window (readStats.ts). */
  | 'reads';
