import type { Actor } from '../core/audit';
import { RouteLockError } from '../core/errors';
import { assertAllowedRegion } from '../core/regions';
import type { Router } from '../core/router';
import type { InProcessRunner } from './inProcess';
import {
  type MigrationList,
  type MigrationRequest,
  type MigrationService,
  type StartedMigration,
  assertRetriable,
  assertRouteExists,
  joinRunning,
  listLimit,
  retryLost,
} from './service';
import { needsRecordToDate, withStopped } from './stopped';
import type { MigrationListQuery, MigrationStatus } from './types';

/**
 * The migration service of the embedded host, over the in-process runner. Apart from service.ts, which
 * the runner itself uses (settings, retries, cancels), so that neither imports the other.
 */
export class InProcessMigrationService implements MigrationService {
  constructor(
    private readonly runner: InProcessRunner,
    private readonly router: Router,
  ) {}

  async start(request: MigrationRequest): Promise<StartedMigration> {
    assertAllowedRegion(this.router.allowedRegions, request.target, 'the migration', request.resourceId);
    await assertRouteExists(this.router, request.resourceId, request.listed);
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
    return joinRunning({ ...record, window: record.input.window }, request);
  }

  async status(migrationId: string): Promise<MigrationStatus> {
    return this.shown(await this.runner.status(migrationId));
  }

  /** `withStopped`, with the record's claim to date a status that dates nothing (read only then). */
  private async shown(status: MigrationStatus): Promise<MigrationStatus> {
    const record = needsRecordToDate(status)
      ? ((await this.runner.record(status.migrationId)) ?? undefined)
      : undefined;
    return withStopped(status, record);
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
    const items = page.records.map((record) => withStopped(record.status, record));
    return page.continuation === undefined ? { items } : { items, continuation: page.continuation };
  }

  async cancel(migrationId: string, actor: Actor): Promise<MigrationStatus> {
    return this.shown(await this.runner.cancel(migrationId, actor));
  }

  async retry(migrationId: string, _actor: Actor): Promise<StartedMigration> {
    const failed = assertRetriable(await this.runner.record(migrationId), migrationId);
    assertAllowedRegion(this.router.allowedRegions, failed.target, 'the migration', failed.resourceId);
    await assertRouteExists(this.router, failed.resourceId);
    const { record, created } = this.runner.retry(failed);
    if (!created) retryLost(record, migrationId);
    return { migrationId, instanceId: record.instanceId, created: true };
  }
}
