import type { Actor } from '../core/audit';
import { RouteLockError } from '../core/errors';
import { type Location, type StoredDocument, sameLocation } from '../core/lock/document';
import type { Router } from '../core/router';
import type { LockSeed } from '../core/security/tokenKeys';
import { type MigrationRecord, newMigrationInput } from './records';
import { sameWindow } from './window';
import {
  type CancelRequest,
  type CutoverWindow,
  type MigrationAttempt,
  type MigrationInput,
  type MigrationListQuery,
  type MigrationSettings,
  type MigrationStatus,
  pendingStatus,
  terminalStates,
} from './types';
import { supportsVersion } from './workflow/capabilities';

/**
 * Starting and reading migrations, whoever runs them: Durable Functions in Azure, the in-process
 * runner on the embedded host. `POST /migrations` and the queue trigger both go through this.
 */
export interface MigrationRequest {
  resourceId: string;
  target: Location;
  migrationId?: string | undefined;
  /** The campaign starting it (docs/design.md §6.9): kept on its record, listed by `GET /migrations?campaignId=`. */
  campaignId?: string | undefined;
  /** Fewer attempts than configured (a campaign's `migrationAttempts`); more are capped (the history room). */
  migrationAttempts?: number | undefined;
  /** The write lock only inside this window (validated by shared/migration/window.ts). */
  window?: CutoverWindow | undefined;
  /**
   * The route as a campaign's list gave it (`carriedVersion`: document and ETag), never from a request
   * body or a queue message: the start skips its existence read, and the migration's first pre-lock is
   * decided on it under If-Match (a stale one costs a 412 and a read, a deleted route fails the migration
   * NotFound instead of the start's 404). Without it the start reads the route as always.
   */
  listed?: StoredDocument | undefined;
}

/**
 * The settings one migration is started with: the host's, with a campaign's lower attempt count. A
 * higher count is capped to the configured one (start-up checked that against the history room): a
 * campaign created before ROUTELOCK_MIGRATION_ATTEMPTS was lowered keeps starting its members.
 */
export function settingsFor(settings: MigrationSettings, request: MigrationRequest): MigrationSettings {
  const asked = request.migrationAttempts;
  if (asked === undefined) return settings;
  const configured = settings.migrationAttempts ?? 1;
  if (!Number.isInteger(asked) || asked < 1) {
    throw new RouteLockError('BadRequest', 'migrationAttempts: must be a whole number from 1.');
  }
  // capped, not refused: a campaign created under a higher ROUTELOCK_MIGRATION_ATTEMPTS keeps starting
  // (its create checked the value against the configuration of the time; campaigns.ts checkedLimits)
  return { ...settings, migrationAttempts: Math.min(asked, configured) };
}

export interface StartedMigration {
  migrationId: string;
  instanceId: string;
  /** False when the resource was already migrating to this target: that migration is returned. */
  created: boolean;
}

export interface MigrationService {
  start(request: MigrationRequest): Promise<StartedMigration>;
  status(migrationId: string): Promise<MigrationStatus>;
  /**
   * Ask a migration to cancel (docs/design.md §6.8): 200 with the status as it stands, `cancelRequestedAt`
   * set; the migration stops at its next step, releases its lock and ends Cancelled (poll for it).
   * 404 NotFound when unknown; 409 AlreadySwapped after the swap; an ended migration answers its status
   * unchanged; 409 MigrationNotCancellable for a migration of a workflow version this code does not run.
   */
  cancel(migrationId: string, actor: Actor): Promise<MigrationStatus>;
  /**
   * An operator's retry (docs/design.md §6.3): a new attempt of an ended, Failed migration, same migrationId,
   * through the same per-resource claim as a start; its status keeps the earlier attempts. 409
   * MigrationNotRetriable for any other migration (running, Completed, NoOp, Conflict, Cancelled), 409
   * MigrationInProgress while another migration of the resource runs, 404 when unknown.
   */
  retry(migrationId: string, actor: Actor): Promise<StartedMigration>;
  /** Migration statuses, newest first (createdAt, then migrationId), a page at a time. */
  list(query: MigrationListQuery): Promise<MigrationList>;
  // Every status either answers carries `stopped` when it stopped (shared/migration/stopped.ts withStopped).
}

/** Only an ended, Failed migration can be retried. */
export function assertRetriable(record: MigrationRecord | null, migrationId: string): MigrationRecord {
  if (!record) throw new RouteLockError('NotFound', `No migration ${migrationId}.`);
  if (!record.done || record.status.status !== 'Failed') {
    throw new RouteLockError(
      'MigrationNotRetriable',
      `Migration ${migrationId} is ${record.status.status}; only an ended, Failed migration can be retried.`,
      { resourceId: record.resourceId },
    );
  }
  return record;
}

/**
 * The record of a retry: the same migration (id, instance, resource, target) with today's settings, a
 * fresh lock seed, and the attempts it made before (one made before attempts were recorded counts as
 * attempt 1, its error the reason), so the new run numbers its attempts after them.
 */
export function retryRecord(
  failed: MigrationRecord,
  settings: MigrationSettings,
  lock: LockSeed,
  now: string,
): MigrationRecord {
  const earlierAttempts: MigrationAttempt[] = failed.status.attempts ?? [
    {
      attempt: 1,
      startedAt: failed.createdAt,
      endedAt: now,
      outcome: 'Failed',
      ...(failed.status.error === undefined ? {} : { reason: failed.status.error }),
    },
  ];
  const input = {
    ...newMigrationInput({
      migrationId: failed.migrationId,
      instanceId: failed.instanceId,
      resourceId: failed.resourceId,
      target: failed.target,
      settings,
      lock,
      // a retry keeps the migration's cutover window
      window: failed.input.window,
    }),
    earlierAttempts,
  };
  return {
    ...failed,
    input,
    status: { ...pendingStatus(input), attempt: earlierAttempts.length + 1, attempts: earlierAttempts },
    done: false,
    claimedAt: now,
  };
}

/** A retry that did not win the claim: the migration itself no longer Failed (a retry won), or a rival. */
export function retryLost(standing: MigrationRecord, migrationId: string): never {
  if (standing.migrationId === migrationId) assertRetriable(standing, migrationId);
  throw new RouteLockError(
    'MigrationInProgress',
    `Resource ${standing.resourceId} is migrating (${standing.migrationId}); retry ${migrationId} after it ends.`,
    { resourceId: standing.resourceId },
  );
}

export type { MigrationListQuery } from './types';

export interface MigrationList {
  items: MigrationStatus[];
  /** Absent on the last page. */
  continuation?: string;
}

export const defaultListLimit = 50;
export const maxListLimit = 1000;

/** A page's size: the limit asked for, else the default; outside 1 to 1000 is the caller's 400. */
export function listLimit(limit: number | undefined): number {
  if (limit === undefined) return defaultListLimit;
  if (!Number.isInteger(limit) || limit < 1 || limit > maxListLimit) {
    throw new RouteLockError('BadRequest', `limit: must be a whole number from 1 to ${maxListLimit}.`);
  }
  return limit;
}

/**
 * The one rule of what a cancel answers before any request is sent, on both runners: a swapped
 * migration (Completed, or about to publish it) is past cancelling; an ended one, or one already asked,
 * answers its status unchanged (a cancel is idempotent); a migration of a workflow version this code
 * does not replay (workflow/capabilities.ts) is refused: no runner here would take the request, and a
 * terminate would leave its lock to lapse. Null: send the request.
 */
export function cancelAnswer(status: MigrationStatus, input: MigrationInput): MigrationStatus | null {
  if (status.phase === 'swapped' || status.status === 'Completed') {
    throw new RouteLockError(
      'AlreadySwapped',
      `Migration ${status.migrationId} has already swapped the route of ${status.resourceId}; it can no longer be cancelled.`,
    );
  }
  if (terminalStates.has(status.status) || status.cancelRequestedAt !== undefined) return status;
  if (!supportsVersion(input.workflowVersion)) {
    throw new RouteLockError(
      'MigrationNotCancellable',
      `Migration ${status.migrationId} was started by workflow version ${input.workflowVersion ?? 1}, which this deployment does not run; it cannot be cancelled here.`,
    );
  }
  return null;
}

/** The status as a cancel leaves it: the request's time and who asked (an actor id). */
export const withCancelRequest = (status: MigrationStatus, request: CancelRequest): MigrationStatus => ({
  ...status,
  cancelRequestedAt: request.requestedAt,
  cancelRequestedBy: request.by,
});

/** The route must exist before a migration is accepted (404 otherwise). */
export async function assertRouteExists(
  router: Router,
  resourceId: string,
  listed?: StoredDocument | undefined,
): Promise<void> {
  // A listed copy: the route existed at it, and the pre-lock decides on it (If-Match).
  if (listed !== undefined && listed.doc.id === resourceId) return;
  await router.backgroundView(resourceId);
}

/** A resource already migrating: the same target gets that migration back; another target is a 409. */
export function joinRunning(
  running: { migrationId: string; instanceId: string; target: Location; window?: CutoverWindow | undefined },
  request: MigrationRequest,
): StartedMigration {
  if (!sameLocation(running.target, request.target)) {
    throw new RouteLockError(
      'MigrationInProgress',
      `Resource ${request.resourceId} is already migrating (${running.migrationId}) to another target.`,
      { resourceId: request.resourceId },
    );
  }
  // a start that names a window never joins one that takes its write lock at other times (docs/design.md §6.10)
  if (request.window !== undefined && !sameWindow(running.window, request.window)) {
    throw new RouteLockError(
      'MigrationInProgress',
      `Resource ${request.resourceId} is already migrating (${running.migrationId}) to that target ${running.window === undefined ? 'without a cutover window' : 'with another cutover window'}: cancel it first, or start without a window to join it.`,
      { resourceId: request.resourceId },
    );
  }
  return { migrationId: running.migrationId, instanceId: running.instanceId, created: false };
}
