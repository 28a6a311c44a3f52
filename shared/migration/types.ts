import type { Participant } from './participants';
import type { Location, StoredDocument } from '../core/lock/document';
import type { LockSeed, Seal } from '../core/security/tokenKeys';
import type { LockGrant, RouteView } from '../core/lock/view';
import type { EndStep, ParticipantRequest } from '../core/participantWire';

/**
 * The migration workflow's vocabulary (design §6). The workflow is a generator that yields `Step`s;
 * a runner (Durable Functions, or the in-process runner of the embedded host) performs each step and
 * sends back its result. Steps are plain JSON so both runners can record and replay them.
 */

export interface MigrationSettings {
  replicationBoundSeconds: number;
  /** The declared clock skew: the holder ends each phase this much early (absent: none). */
  clockSkewSeconds?: number;
  safetyBufferSeconds: number;
  hardDeleteLeaseSeconds: number;
  writeLeaseSeconds: number;
  writeBudgetSeconds: number;
  deltaAttempts: number;
  deltaRetryDelaySeconds: number;
  /** The wait before the first copy for requests routed just before a lock (absent: none). */
  inFlightGraceSeconds?: number;
  retryAttempts: number;
  retryIntervalSeconds: number;
  participants: Participant[];
  /**
   * Participant calls (participantContract). Absent: the defaults (`participantTiming`).
   */
  participantTimeoutSeconds?: number;
  participantPollMinSeconds?: number;
  participantPollMaxSeconds?: number;
  /**
   * Automatic retry with a fresh lock: attempts per series, and the delay before attempt n+1
   * (× 2^(n−1)). Absent: one attempt.
   */
  migrationAttempts?: number;
  migrationRetryDelaySeconds?: number;
  /** The most history actions one attempt may record (its copies at their worst, and its other steps). */
  attemptActionsBound?: number;
  /**
   * A participant that answers 404 to `verify` fails the attempt instead of counting as "not
   * verified" (ROUTELOCK_REQUIRE_VERIFY). Absent: false.
   */
  requireVerify?: boolean;
  /**
   * ROUTELOCK_PRELOCK_MAX_SECONDS, a new lock's cap from its pre-lock: a cutover window beyond it
   * fails the attempt before its pre-lock. Absent: not checked before the pre-lock.
   */
  prelockMaxSeconds?: number;
  /**
   * Take announced locks (lock rule 2, design §3.7): decided at the migration's start from
   * ROUTELOCK_ANNOUNCED_LOCKS, so a flag change never changes a running instance. Only an instance of a
   * version with `announcedEscalations` (migration/workflow/capabilities) asks for them. Absent: legacy locks.
   */
  announcedLocks?: true;
  /** The announcement lead L (seconds) the workflow plans its waits with; set with `announcedLocks`. */
  announceLeadSeconds?: number;
}

/**
 * The workflow version new migrations start with. A running instance replays the steps of the version
 * it started with, so a redeploy never changes a history under way; which versions this code replays,
 * and what each may do, is workflow/capabilities (design §6.7).
 */
export const WORKFLOW_VERSION = 7;

/** What starts a migration: a queue message or `POST /migrations`, completed by the starter. */
export interface MigrationInput {
  migrationId: string;
  instanceId: string;
  resourceId: string;
  target: Location;
  /** Captured at start so a redeploy with other settings cannot change a running migration's replay. */
  settings: MigrationSettings;
  /**
   * Made at start, outside the orchestrator: what the lock's token and Idempotency-Key derive from. The
   * workflow hands each attempt after the first this seed with its `attempt`.
   */
  lock: AttemptLockSeed;
  /**
   * The workflow version that started it (`WORKFLOW_VERSION`). Absent on inputs of version 1, which
   * this code no longer replays (workflow/capabilities refuses them).
   */
  workflowVersion?: number;
  /**
   * An operator's retry of a Failed migration: the attempts it already made, kept in the
   * status; this run numbers its attempts after them.
   */
  earlierAttempts?: MigrationAttempt[];
  /** The write lock is only taken inside this window (migration/window). */
  window?: CutoverWindow;
  /**
   * The route as a campaign's list gave it (`carriedVersion`: no credential, no hash of a caller's key
   * or identity): the first attempt's pre-lock decides on it (workflow/prelock). Absent: that
   * pre-lock decides on the version the router holds, as every start without one does.
   */
  listed?: StoredDocument;
  /**
   * The starter's seal over `listed`, bound to this migration (migration/listedSeal): the
   * pre-lock decides on `listed` only when it holds, so a copy rewritten in the task hub or the journal
   * is never decided on. No secret: an HMAC under a key only the starter and the activities hold.
   */
  listedSeal?: Seal;
}

/**
 * When a migration may hold the write lock (design §6.10). All optional; an absent field does not limit.
 * `notBefore`/`notAfter`: RFC 3339 instants. `daily`: local wall-clock times "HH:MM" in an IANA time
 * zone; `end` before `start` spans midnight. The whole write budget must fit inside the window.
 */
export interface CutoverWindow {
  notBefore?: string;
  notAfter?: string;
  daily?: { start: string; end: string; timeZone: string };
}

/**
 * A lock seed as the activities get it: the migration's seed and, from attempt 2 on, the
 * attempt whose lock it stands for (the activities derive a fresh seed for it: `attemptSeed`).
 */
export type AttemptLockSeed = LockSeed & { attempt?: number };

/** One attempt of a migration: its own lock, from pre-lock to release or swap. */
export interface MigrationAttempt {
  /** 1-based, across an operator's retries too. */
  attempt: number;
  startedAt: string;
  endedAt: string;
  outcome: MigrationState;
  reason?: string;
  /**
   * On an attempt that did not complete: the stable code it ended with (a lock error's, or the
   * workflow's own: StepFailed, WriteBudgetExceeded, Cancelled…) and the furthest phase it reached
   * (migration/stopped phaseReached). Absent on a Completed attempt.
   */
  code?: string;
  stoppedAt?: MigrationPhase;
}

/** `GET /migrations`'s query, as the service and the command line send it. */
export interface MigrationListQuery {
  status?: MigrationState | undefined;
  resourceId?: string | undefined;
  campaignId?: string | undefined;
  /** 1 to 1000; absent: 50 (`defaultListLimit`, migration/service). */
  limit?: number | undefined;
  /** Opaque, from the previous page. */
  continuation?: string | undefined;
}

/** Every migration state, in the order a migration meets them (query validation, the OpenAPI document's enum). */
export const migrationStates = [
  'Pending',
  'Running',
  'Completed',
  'Failed',
  'Conflict',
  'NoOp',
  'Cancelled',
] as const;
export type MigrationState = (typeof migrationStates)[number];
/**
 * An operator's cancel (design §6.8), as the workflow receives it: Durable's `cancel` external event's
 * payload, or the in-process runner's request. Who asked is an actor id, never a credential.
 */
export interface CancelRequest {
  requestedAt: string;
  by: string;
}

/** The Durable external event that carries a cancel (`client.raiseEvent(instanceId, CANCEL_EVENT, request)`). */
export const CANCEL_EVENT = 'cancel';
export type MigrationPhase =
  'starting' | 'prelock' | 'converging' | 'hardDelete' | 'write' | 'swapped' | 'released';

export interface MigrationTimeline {
  prelockAt: string | null;
  hardDeleteAt: string | null;
  writeAt: string | null;
  swappedAt: string | null;
  /**
   * An announced lock's write window (its `writeWindowAt`), as last announced: readers read the write
   * region from it (less the skew margin), and the write lock is taken from it plus the margin. Present
   * only on a migration that takes announced locks.
   */
  writeWindowAt?: string | null;
}

/** design §6 status, as `GET /migrations/{id}` returns it. */
export interface MigrationStatus {
  migrationId: string;
  resourceId: string;
  status: MigrationState;
  phase: MigrationPhase;
  target: Location;
  timeline: MigrationTimeline;
  error?: string;
  /** Write-lock attempts used at the delta copy (more than one when a delta overran the budget). */
  deltaAttempts?: number;
  /** When an operator asked to cancel (set on any status after the request: a Completed one was too late). */
  cancelRequestedAt?: string;
  /** Who asked to cancel: the actor's id. */
  cancelRequestedBy?: string;
  /** The attempt running or last run (1-based). */
  attempt?: number;
  /** Every attempt that ended, oldest first, each with its reason. */
  attempts?: MigrationAttempt[];
  /** Every verification run, oldest first (one entry per participant per verify round). */
  verifications?: Verification[];
  /** Set while the workflow waits for its cutover window to open (removed once it has). */
  waitingForWindow?: { nextOpening: string };
  /** The end notices sent to participants, one per participant, once the migration ended. */
  notices?: EndNotice[];
  /**
   * On a Failed, Conflict or Cancelled migration, where it stopped (the phase it had
   * reached, the stable code, a human reason with no credential, when). Derived when the status is read
   * (migration/stopped `withStopped`): the workflow never publishes it, and a copy saved
   * with a status read back is derived afresh.
   */
  stopped?: Stopped;
}

/** Where a migration stopped (`MigrationStatus.stopped`; migration/stopped). */
export interface Stopped {
  phase: MigrationPhase;
  /** A stable code (core/errors, or the workflow's own: StepFailed, WriteBudgetExceeded…); '' if none. */
  code: string;
  /** Human text: bounded, with credential-like runs redacted. */
  reason: string;
  at: string;
}

/** One participant's answer to one verify round (design §6.5). */
export interface Verification {
  participant: string;
  /** The migration attempt and the write-lock (delta) attempt it verified. */
  migrationAttempt: number;
  deltaAttempt: number;
  at: string;
  outcome: 'match' | 'mismatch' | 'notImplemented';
  sourceCount?: number;
  targetCount?: number;
  digest?: string;
  detail?: string;
}

export type { EndStep, VerifyAnswer } from '../core/participantWire';

export interface EndNotice {
  participant: string;
  step: EndStep;
  /** delivered: 200/202/204; notImplemented: 404; undelivered: still failing after the retries. */
  outcome: 'delivered' | 'notImplemented' | 'undelivered';
  at: string;
}

export const terminalStates: ReadonlySet<MigrationState> = new Set([
  'Completed',
  'Failed',
  'Conflict',
  'NoOp',
  'Cancelled',
]);

/** A migration's status before its first step. */
export function pendingStatus(input: MigrationInput): MigrationStatus {
  return {
    migrationId: input.migrationId,
    resourceId: input.resourceId,
    status: 'Pending',
    phase: 'starting',
    target: input.target,
    timeline: { prelockAt: null, hardDeleteAt: null, writeAt: null, swappedAt: null },
  };
}

// ---------------------------------------------------------------------------------------------
// Activities: the lock operations, run against the routing library by either runner
// ---------------------------------------------------------------------------------------------

/**
 * No activity input or output carries a fencing token or an Idempotency-Key: they hold the migration's
 * `LockSeed`, from which only the activities (which hold the key ring) derive both. Inputs and outputs
 * are what Durable Functions stores in its task hub and the in-process runner in its journal.
 */
export interface ActivityInputs {
  prelock: {
    resourceId: string;
    migrationId: string;
    owner: string;
    target: Location;
    lock: AttemptLockSeed;
    /**
     * Answer where the route was (`PrelockGrant.location`), and decide on the version of the route the
     * router holds, conditional on its ETag (a read saved; a stale one costs a 412 and a read).
     */
    withLocation?: true;
    /**
     * A version of the route to decide on instead, conditional on its ETag (the input's `listed`).
     * Optional: Durable replays by activity name, so histories scheduled without it replay unchanged.
     */
    known?: StoredDocument;
    /** `known`'s seal (the input's `listedSeal`): without one that holds, `known` is not decided on. */
    knownSeal?: Seal;
    /**
     * Take an announced lock (lock rule 2): the hard-delete lock, in force a lead after the grant.
     * Optional: histories scheduled without it replay unchanged.
     */
    announced?: true;
  };
  escalate: { resourceId: string; lock: AttemptLockSeed; phase: 'hardDelete' | 'write'; ifMatch?: string };
  /**
   * Announce an announced lock's write window: from `writeWindowAt` the write lock may be taken (plus the
   * skew margin). `at`: the earliest window start wanted (ISO), a cutover window's slot less the margin.
   */
  announce: { resourceId: string; lock: AttemptLockSeed; ifMatch?: string; at?: string };
  renew: {
    resourceId: string;
    lock: AttemptLockSeed;
    phase?: 'prelock' | 'hardDelete' | 'write';
    ifMatch?: string;
  };
  /**
   * `writeAt` names the write-lock attempt a swap or downgrade belongs to: deciding again after a 412,
   * the activity refuses to act on another attempt's write lock.
   */
  swap: { resourceId: string; lock: AttemptLockSeed; ifMatch?: string; writeAt?: string | undefined };
  /**
   * `reason`: why the lock ends, bounded and credential-free (`releaseReason`,
   * workflow/cleanUp), stamped on the version for the audit ledger. Optional: Durable replays by
   * activity name, so histories scheduled without it replay unchanged.
   */
  release: {
    resourceId: string;
    lock: AttemptLockSeed;
    phase?: 'write';
    ifMatch?: string;
    writeAt?: string | undefined;
    reason?: string;
  };
  /**
   * `writeRegion`: the authoritative copy. `readPath`: what a service resolving the route sees.
   * `replica`: the store's nearest replica, uncached (a read region's copy: is a swap there?).
   */
  readRoute: { resourceId: string; from: 'writeRegion' | 'readPath' | 'replica' };
  /** Durable only: the final status, kept after the instance id is reused by a later migration. */
  recordOutcome: { status: MigrationStatus };
  /** One request to a participant: the job's POST, or a GET of its poll Location. */
  callParticipant: ParticipantCall;
}

export interface SwapOutcome {
  view: RouteView;
  swappedAt: string | null;
}

/** A lock grant as an activity returns it: never with the token. */
export type SeededGrant = Omit<LockGrant, 'token'>;

/**
 * The pre-lock's grant and where the route was when the pre-lock committed: the write region's copy it
 * was decided on, under that copy's ETag, so the workflow does not read it again.
 */
export type PrelockGrant = SeededGrant & { location?: Location };

export interface ActivityOutputs {
  prelock: PrelockGrant;
  escalate: SeededGrant;
  announce: SeededGrant;
  renew: SeededGrant;
  swap: SwapOutcome;
  release: RouteView;
  readRoute: RouteView;
  recordOutcome: null;
  callParticipant: HttpAnswer;
}

export type ActivityName = keyof ActivityInputs;

/** A `callParticipant` activity the runner gave up on (a crashed worker): no answer, as status 0 is. */
export const participantCallFailed = (error: unknown): ActivityResult<HttpAnswer> => ({
  ok: true,
  value: {
    status: 0,
    body: `the callParticipant activity failed: ${(error as Error)?.message ?? String(error)}`,
  },
});

/**
 * Lock errors come back as values, so a runner's retry policy only ever sees transient failures
 * (a store outage is thrown and retried; a 410 or 423 is an answer, never retried blindly).
 */
export type ActivityResult<T> =
  { ok: true; value: T } | { ok: false; code: string; message: string; retryAfterSeconds?: number };

// ---------------------------------------------------------------------------------------------
// Participants
// ---------------------------------------------------------------------------------------------

export type { CopyStep, ParticipantRequest, ParticipantStep } from '../core/participantWire';

/**
 * The `callParticipant` activity's input: one request. It is stored in the history, so it names the
 * participant's audience, never a token. `participantUrl` is the configured URL: the bearer token goes
 * only to its origin, and a relative Location resolves against the request's own URL.
 */
export type ParticipantCall = {
  participant: string;
  participantUrl: string;
  audience?: string;
  timeoutSeconds: number;
} & ({ method: 'POST'; body: ParticipantRequest } | { method: 'GET'; url: string });

/** A dry run's one POST to a participant: not a workflow step, never in a history. */
export type PreflightCall = Omit<ParticipantCall, 'method' | 'body' | 'url'> & {
  method: 'POST';
  body: PreflightRequest;
};

/**
 * A dry run's question to a participant (an optional step): the copy request's fields
 * without the lock-derived ones (no lock, so no attempt, sequence or lockAcquiredAt).
 */
export interface PreflightRequest {
  migrationId?: string;
  resourceId: string;
  from: Location;
  to: Location;
  step: 'preflight';
}

/**
 * What one request answered: the status (0: no answer — transport failure, timeout, no token — with
 * the reason as `body`), the Location resolved to an absolute URL (or why it was refused), Retry-After
 * in seconds, and the body (JSON, or text cut to a few KB: it is stored in the history).
 */
export interface HttpAnswer {
  status: number;
  body: unknown;
  location?: string;
  locationRefused?: string;
  retryAfterSeconds?: number;
}

/** A participant job's POST as the in-process runner's test seam (`http`) is handed it. */
export interface HttpCall {
  method: 'POST';
  url: string;
  body: ParticipantRequest;
  /**
   * The participant's Entra ID audience (config `audience`): the call carries a managed-identity bearer
   * token for it (Durable: `ManagedIdentityTokenSource`; in-process: `@azure/identity`). Never a token.
   */
  audience?: string;
}

/**
 * What the in-process test seam answers a POST: the participant's answer, or a transport failure
 * (status 0), with a Location (relative or absolute) and Retry-After when it answered 202.
 */
export interface HttpResult {
  status: number;
  body: unknown;
  location?: string;
  retryAfterSeconds?: number;
}

// ---------------------------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------------------------

export type TaskStep =
  | { kind: 'activity'; name: ActivityName; input: ActivityInputs[ActivityName] }
  /**
   * `cancellable`: the timer also ends on a cancel request, and answers it (`CancelRequest`);
   * otherwise it answers null.
   */
  | { kind: 'timer'; fireAt: number; cancellable?: true };

/**
 * What a race answers: whether the deadline came first, and the result of every task that had
 * finished by then (`null` for one still running, which the workflow abandons).
 */
export interface RaceResult {
  deadlineFirst: boolean;
  settled: unknown[];
  /** A cancellable race that a cancel request ended first. */
  cancelled?: CancelRequest;
}

export type Step =
  | TaskStep
  /** Current time, from the runner (Durable: currentUtcDateTime). */
  | { kind: 'now' }
  | { kind: 'status'; status: MigrationStatus }
  /**
   * Run these tasks together against a timer (Durable: Task.any([Task.all(tasks), timer]), the timer
   * cancelled when the tasks win). Every race uses fresh tasks: Durable Functions for JavaScript would
   * schedule a task again if it were raced a second time.
   */
  | { kind: 'race'; tasks: TaskStep[]; deadline: number; cancellable?: true }
  /**
   * Has a cancel been requested? Answers the `CancelRequest` or null, without waiting
   * (Durable: whether the `cancel` event has arrived; the in-process runner: its journaled request).
   */
  | { kind: 'cancelRequested' }
  /**
   * Run these tasks together, no timer (Durable: Task.all): requests that end well before the next
   * deadline (their timeout is far shorter), so the history does not hold a timer per poll. Answers as
   * a race the tasks won (`settled`: `null` for a task that failed while another was still running).
   */
  | { kind: 'all'; tasks: TaskStep[] };

/** A migration's dry run (migration/preflight): the API's 200 answer. */
export type PreflightCheckName =
  | 'routeExists'
  | 'notLocked'
  | 'notAtTarget'
  | 'regionAllowed'
  | 'noRetiredSourceWindow'
  | 'noMigrationRunning'
  /** The cutover window has a slot a new lock's cap reaches. */
  | 'windowReachable'
  | 'participant';

export interface PreflightCheck {
  check: PreflightCheckName;
  ok: boolean;
  detail: string;
  /** Participant checks: its name, and what its answer meant. */
  participant?: string;
  /**
   * Participant checks: what its answer meant. `notConfigured`: a check with nothing to check against
   * (regionAllowed with no ROUTELOCK_REGIONS); ok, and not a pass.
   */
  outcome?: 'ready' | 'notImplemented' | 'transient' | 'failed' | 'notConfigured';
}

export interface PreflightTiming {
  /**
   * The workflow's convergence wait after the pre-lock (convergenceWaitUntil, escalation rule included);
   * under announced locks, to the hard-delete lock in force on every clock (L + S).
   */
  convergenceWaitSeconds: number;
  /** now + convergence wait + in-flight grace: the bulk copy's duration comes on top, and is unknown. */
  earliestWriteLockAt: string;
  bulkCopyDuration: 'unknown' | 'none';
  writeBudgetSeconds: number;
  migrationAttempts: number;
  /**
   * With a cutover window: its first slot at or after `earliestWriteLockAt` that holds the write budget
   * (migration/window nextWriteSlot); null when it has none.
   */
  nextWriteSlotAt?: string | null;
  /**
   * Under announced locks (ROUTELOCK_ANNOUNCED_LOCKS): the write window the write lock would be taken
   * in, at the earliest (or at the cutover slot), less the skew margin. Absent without them.
   */
  writeWindowAt?: string;
}

export interface PreflightReport {
  dryRun: true;
  resourceId: string;
  target: Location;
  ok: boolean;
  checks: PreflightCheck[];
  timing: PreflightTiming;
}
