import type { Actor } from '../audit';
import { RouteLockError } from '../errors';
import { type Location, sameLocation } from '../lock/document';
import { assertAllowedRegion } from '../regions';
import type { Router } from '../router';
import type { InProcessRunner } from './inProcess';
import {
  type CancelRequest,
  type MigrationInput,
  type MigrationStatus,
  terminalStates,
  workflowVersionOf,
} from './types';

/**
 * Starting and reading migrations, whoever runs them: Durable Functions in Azure, the in-process
 * runner on the embedded host. `POST /migrations` and the queue trigger both go through this.
 */
export interface MigrationRequest {
  resourceId: string;
  target: Location;
  migrationId?: string | undefined;
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
   * Ask a migration to cancel (issue 18 §2): 200 with the status as it stands, `cancelRequestedAt`
   * set; the migration stops at its next step, releases its lock and ends Cancelled (poll for it).
   * 404 NotFound when unknown; 409 AlreadySwapped after the swap; an ended migration answers its status
   * unchanged; 409 MigrationNotCancellable for a migration started before workflow version 3.
   */
  cancel(migrationId: string, actor: Actor): Promise<MigrationStatus>;
}

/**
 * The one rule of what a cancel answers before any request is sent, on both runners: a swapped
 * migration (Completed, or about to publish it) is past cancelling; an ended one, or one already asked,
 * answers its status unchanged (a cancel is idempotent); a migration started before workflow version 3
 * never listens for the request (its steps are recorded without the waits), so it is refused rather
 * than terminated, which would leave its lock to lapse. Null: send the request.
 */
export function cancelAnswer(status: MigrationStatus, input: MigrationInput): MigrationStatus | null {
  if (status.phase === 'swapped' || status.status === 'Completed') {
    throw new RouteLockError(
      'AlreadySwapped',
      `Migration ${status.migrationId} has already swapped the route of ${status.resourceId}; it can no longer be cancelled.`,
    );
  }
  if (terminalStates.has(status.status) || status.cancelRequestedAt !== undefined) return status;
  if (workflowVersionOf(input) < 3) {
    throw new RouteLockError(
      'MigrationNotCancellable',
      `Migration ${status.migrationId} was started by workflow version ${workflowVersionOf(input)}, which cannot be cancelled; it ends on its own.`,
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
export async function assertRouteExists(router: Router, resourceId: string): Promise<void> {
  await router.backgroundView(resourceId);
}

/** A resource already migrating: the same target gets that migration back; another target is a 409. */
export function joinRunning(
  running: { migrationId: string; instanceId: string; target: Location },
  request: MigrationRequest,
): StartedMigration {
  if (!sameLocation(running.target, request.target)) {
    throw new RouteLockError(
      'MigrationInProgress',
      `Resource ${request.resourceId} is already migrating (${running.migrationId}) to another target.`,
      { resourceId: request.resourceId },
    );
  }
  return { migrationId: running.migrationId, instanceId: running.instanceId, created: false };
}

export class InProcessMigrationService implements MigrationService {
  constructor(
    private readonly runner: InProcessRunner,
    private readonly router: Router,
  ) {}

  async start(request: MigrationRequest): Promise<StartedMigration> {
    assertAllowedRegion(this.router.allowedRegions, request.target, 'the migration', request.resourceId);
    await assertRouteExists(this.router, request.resourceId);
    const { record, created } = this.runner.start(request);
    if (created) return { migrationId: record.migrationId, instanceId: record.instanceId, created };
    if (
      request.migrationId !== undefined &&
      record.migrationId === request.migrationId &&
      record.resourceId !== request.resourceId
    ) {
      throw new RouteLockError(
        'BadRequest',
        `Migration id ${request.migrationId} belongs to resource ${record.resourceId}.`,
      );
    }
    return joinRunning(record, request);
  }

  status(migrationId: string): Promise<MigrationStatus> {
    return this.runner.status(migrationId);
  }

  cancel(migrationId: string, actor: Actor): Promise<MigrationStatus> {
    return this.runner.cancel(migrationId, actor);
  }
}
