import type { Actor } from '../audit';
import { RouteLockError } from '../errors';
import { type Location, sameLocation } from '../lock/document';
import { assertAllowedRegion } from '../regions';
import type { Router } from '../router';
import type { InProcessRunner } from './inProcess';
import type { MigrationState, MigrationStatus } from './types';

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
   * Stop a migration at its next step, its lock released with its token, ending `Cancelled`; 404
   * NotFound when unknown, 409 `AlreadySwapped` after the swap; an ended one answers its status unchanged.
   */
  cancel(migrationId: string, actor: Actor): Promise<MigrationStatus>;
  /**
   * A new attempt of an ended, Failed migration (same migrationId); 409 `MigrationNotRetriable`
   * otherwise, 409 MigrationInProgress when another migration of the resource runs.
   */
  retry(migrationId: string, actor: Actor): Promise<StartedMigration>;
  /** Migration statuses, newest first (createdAt, then migrationId), a page at a time. */
  list(query: MigrationListQuery): Promise<MigrationList>;
}

export interface MigrationListQuery {
  status?: MigrationState | undefined;
  resourceId?: string | undefined;
  campaignId?: string | undefined;
  /** 1 to 1000; absent: {@link defaultListLimit}. */
  limit?: number | undefined;
  /** Opaque, from the previous page. */
  continuation?: string | undefined;
}

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

  /** The runner saves every step's status on its record, so the records answer as they are. */
  async list(query: MigrationListQuery): Promise<MigrationList> {
    const page = await this.runner.list({
      states: query.status === undefined ? undefined : [query.status],
      resourceId: query.resourceId,
      campaignId: query.campaignId,
      limit: listLimit(query.limit),
      continuation: query.continuation,
    });
    const items = page.records.map((record) => record.status);
    return page.continuation === undefined ? { items } : { items, continuation: page.continuation };
  }

  // Stubs on the list's branch (issue 18 §2): the cancel and retry helpers' implementations replace them.
  async cancel(migrationId: string, _actor: Actor): Promise<MigrationStatus> {
    await this.status(migrationId); // 404 for an unknown one, as the real one answers
    throw new RouteLockError('InvalidTransition', `Cancelling ${migrationId} is not available yet.`);
  }

  async retry(migrationId: string, _actor: Actor): Promise<StartedMigration> {
    await this.status(migrationId);
    throw new RouteLockError('MigrationNotRetriable', `Retrying ${migrationId} is not available yet.`);
  }
}
