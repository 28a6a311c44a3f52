import type { TimingConfig } from '../core/settings';
import type { MigrationConfig } from './settings';
import { announcedWaitUntil, convergenceWaitUntil } from '../core/lock/state';
import type { MigrationInput, MigrationSettings, MigrationStatus, Step } from './types';
import { attemptingMigration } from './workflow/attempts';
import { workflowCapabilities } from './workflow/capabilities';
import { convergencePhase } from './workflow/converge';
import { announcedHardDeletePhase, isAnnouncedGrant } from './workflow/announced';
import { hardDeletePhase } from './workflow/hardDelete';
import type { Ending, Prelocked } from './workflow/state';
import { writePhase } from './workflow/write';
import { worstCaseAttemptActions } from './workflow/bound';

export { renewEveryMs } from './workflow/copy';
export { confirmAndNoticeActions, worstCaseAttemptActions } from './workflow/bound';
export { cancelMigration } from './workflow/cancel';
export { afterFailedAttempt, attemptVerdict, attemptingMigration, retryDelayMs } from './workflow/attempts';
export {
  CAPABILITIES,
  type Capabilities,
  type Capability,
  UnsupportedWorkflowVersion,
  WORKFLOW_FLOOR,
  workflowCapabilities,
} from './workflow/capabilities';
export { convergencePhase } from './workflow/converge';
export { hardDeletePhase } from './workflow/hardDelete';
export { releaseUnseenPrelock, tryPrelock } from './workflow/prelock';
export type {
  Cancelled,
  Ending,
  Escalated,
  Failure,
  Moving,
  PhaseResult,
  Prelocked,
  WorkflowState,
} from './workflow/state';
export { swapPhase } from './workflow/swap';
export { writePhase } from './workflow/write';

/**
 * The migration, written once (docs/design.md §6). A generator over `Step`s: it never reads a clock, draws a
 * random number or does I/O; the runner performs each step and sends its result back. Durable Functions
 * replays it from history; the in-process runner replays it from its journal.
 *
 * 1. pre-lock. Its token and Idempotency-Key derive from the input's random `lock` seed under a key
 *    only the activities hold, so a retried activity replays its own lock and no one else can
 * 2. where the route was: the pre-lock's answer (one already at the target was refused there, NoOp)
 * 3. durable timer until max(startsAt, acquiredAt + replication bound) + safety buffer
 * 4. confirm the lock is visible on a replica (a lock-only migration skips it)
 * 5. hard-delete lock; every participant's bulkCopy, renewing the hard-delete lease on a timer
 * 6. write lock; deltaCopy, renewing the write lock; swap. A delta that overruns the write budget:
 *    release the write lock (writes resume), wait, try again; after the last attempt, abort
 * 7. any failure: release with the token; Failed with the reason. Never a partial cutover: the swap is
 *    one conditional write. A transient failure ends one attempt; after a delay the migration
 *    starts over at step 1 with a fresh lock (workflow/attempts.ts), Failed once none are left.
 * 8. the swap confirmed on a replica, then the end notices to every participant.
 *
 * Each step is a phase generator in workflow/, taking the state the one before returned and answering
 * the next state or how the migration ends; `migrationWorkflow` only runs them in order.
 */

export type Workflow = Generator<Step, MigrationStatus, unknown>;

/** The parts of the configuration a migration's settings come from. */
export interface MigrationConfigParts {
  timing: TimingConfig;
  migration: MigrationConfig;
}

export function migrationSettings(config: MigrationConfigParts): MigrationSettings {
  return {
    replicationBoundSeconds: config.timing.replicationBoundSeconds,
    clockSkewSeconds: config.timing.clockSkewSeconds,
    safetyBufferSeconds: config.timing.safetyBufferSeconds,
    hardDeleteLeaseSeconds: config.timing.hardDeleteLeaseSeconds,
    writeLeaseSeconds: config.timing.writeLeaseSeconds,
    writeBudgetSeconds: config.timing.writeBudgetSeconds,
    deltaAttempts: config.migration.deltaAttempts,
    deltaRetryDelaySeconds: config.migration.deltaRetryDelaySeconds,
    inFlightGraceSeconds: config.migration.inFlightGraceSeconds,
    retryAttempts: config.migration.retryAttempts,
    retryIntervalSeconds: config.migration.retryIntervalSeconds,
    participants: config.migration.participants,
    participantTimeoutSeconds: config.migration.participantTimeoutSeconds,
    participantPollMinSeconds: config.migration.participantPollMinSeconds,
    participantPollMaxSeconds: config.migration.participantPollMaxSeconds,
    migrationAttempts: config.migration.migrationAttempts,
    migrationRetryDelaySeconds: config.migration.migrationRetryDelaySeconds,
    attemptActionsBound: attemptActionsBound(config),
    prelockMaxSeconds: config.timing.prelockMaxSeconds,
    requireVerify: config.migration.requireVerify,
    // fixed into the input at the start, so a later flag change never moves a running instance
    ...(config.timing.announcedLocks
      ? { announcedLocks: true as const, announceLeadSeconds: config.timing.announceLeadSeconds }
      : {}),
  };
}

/** One attempt's worst-case history under this configuration (workflow/bound.ts). */
export function attemptActionsBound(config: MigrationConfigParts): number {
  const t = config.timing;
  const m = config.migration;
  return worstCaseAttemptActions({
    participants: m.participants.length,
    prelockMaxSeconds: t.prelockMaxSeconds,
    hardDeleteLeaseSeconds: t.hardDeleteLeaseSeconds,
    writeLeaseSeconds: t.writeLeaseSeconds,
    writeBudgetSeconds: t.writeBudgetSeconds,
    deltaAttempts: m.deltaAttempts,
    pollMinSeconds: m.participantPollMinSeconds,
    pollMaxSeconds: m.participantPollMaxSeconds,
    retryAttempts: m.retryAttempts,
    announcedLocks: t.announcedLocks,
  });
}

/**
 * The migration of one input. Its capabilities are fixed here, at its start, from the version it
 * recorded: an instance of a version this code does not replay fails at once (UnsupportedWorkflowVersion)
 * instead of running steps its history never held. A phase branches on a capability by name
 * (workflow/capabilities.ts: the live ones, and how one is added and retired).
 */
export function* migrationWorkflow(input: MigrationInput): Workflow {
  workflowCapabilities(input);
  return yield* attemptingMigration(input, withPrelock);
}

/**
 * Steps 2–6 with the pre-lock held, each phase on the state the one before returned. An announced
 * grant (asked for by an instance with `announcedEscalations` and `settings.announcedLocks`) is the
 * hard-delete lock itself: one wait, to its start on every clock, serves both, and there is nothing to
 * escalate before the bulk copy (docs/design.md §6, announced locks).
 */
function* withPrelock(prelocked: Prelocked): Generator<Step, Ending, unknown> {
  const { grant, input } = prelocked;
  const announced = isAnnouncedGrant(grant);
  const waitUntil = announced
    ? announcedWaitUntil(grant, input.settings.clockSkewSeconds ?? 0)
    : convergenceWaitUntil(grant, input.settings);
  const converged = yield* convergencePhase(prelocked, waitUntil);
  if (converged.kind !== 'next') return converged;
  const copied = announced
    ? yield* announcedHardDeletePhase(converged.state, grant)
    : yield* hardDeletePhase(converged.state);
  if (copied.kind !== 'next') return copied;
  return yield* writePhase(copied.state, announced);
}
