import { RouteLockError } from '../errors';
import { type Location, sameLocation } from '../lock/document';
import { assertAllowedRegion } from '../regions';
import type { Router } from '../router';
import type { InProcessRunner } from './inProcess';
import type { MigrationStatus } from './types';

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
}

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
}
