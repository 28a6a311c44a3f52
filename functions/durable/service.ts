import * as df from 'durable-functions';
import type { DurableClient, DurableOrchestrationStatus } from 'durable-functions';
import { randomUUID } from 'node:crypto';
import { RouteLockError } from '../../shared/errors';
import { newMigrationRecord } from '../../shared/migration/records';
import type { MigrationRecords } from '../../shared/store/ports/migrations';
import {
  type MigrationRequest,
  type MigrationService,
  type StartedMigration,
  assertRouteExists,
  joinRunning,
} from '../../shared/migration/service';
import {
  type MigrationInput,
  type MigrationSettings,
  type MigrationStatus,
  instanceIdFor,
  pendingStatus,
} from '../../shared/migration/types';
import type { TokenKeyring } from '../../shared/security/tokenKeys';
import { assertAllowedRegion } from '../../shared/regions';
import type { Router } from '../../shared/router';

export const ORCHESTRATOR = 'migrationOrchestrator';

const running = new Set(['Pending', 'Running', 'ContinuedAsNew', 'Suspended']);

/**
 * Migrations on Durable Functions: one instance per resource (`migrate-{resourceId}`). `getStatus`
 * (its 404 means absent), then `startNew` only when absent or terminal. host.json sets
 * `overridableExistingInstanceStates: NonRunningStates`, so of two racing starts the second one's
 * `startNew` fails and it returns the running migration instead of replacing it.
 */
export class DurableMigrationService implements MigrationService {
  constructor(
    private readonly client: DurableClient,
    private readonly records: MigrationRecords,
    private readonly router: Router,
    private readonly settings: MigrationSettings,
    private readonly now: () => number,
    private readonly keyring: TokenKeyring,
  ) {}

  private async instance(instanceId: string): Promise<DurableOrchestrationStatus | null> {
    try {
      return await this.client.getStatus(instanceId);
    } catch (error) {
      if (/HTTP 404/.test((error as Error).message)) return null;
      throw new RouteLockError(
        'OrchestrationStatusUnavailable',
        'The Durable Functions task hub did not answer; retry shortly.', // its own text stays in `cause`
        {
          retryAfterSeconds: 1,
          cause: error,
        },
      );
    }
  }

  private async joinIfRunning(
    instanceId: string,
    request: MigrationRequest,
  ): Promise<StartedMigration | null> {
    const current = await this.instance(instanceId);
    if (!current || !running.has(String(current.runtimeStatus))) return null;
    const input = current.input as MigrationInput;
    return joinRunning({ migrationId: input.migrationId, instanceId, target: input.target }, request);
  }

  async start(request: MigrationRequest): Promise<StartedMigration> {
    assertAllowedRegion(this.router.allowedRegions, request.target, 'the migration', request.resourceId);
    await assertRouteExists(this.router, request.resourceId);
    const instanceId = instanceIdFor(request.resourceId);
    const joined = await this.joinIfRunning(instanceId, request);
    if (joined) return joined;

    const migrationId = request.migrationId ?? `m-${randomUUID()}`;
    const input: MigrationInput = {
      migrationId,
      instanceId,
      resourceId: request.resourceId,
      target: request.target,
      settings: this.settings,
      // Random, made here and not in the orchestrator: the orchestration carries the seed, never a token.
      lock: this.keyring.newSeed(),
    };
    const created = await this.records.create(newMigrationRecord(input, new Date(this.now()).toISOString()));
    if (!created) {
      const existing = await this.records.get(migrationId);
      if (existing && existing.resourceId === request.resourceId) {
        return { migrationId, instanceId: existing.instanceId, created: false };
      }
      throw new RouteLockError('BadRequest', `Migration id ${migrationId} is already used.`);
    }
    try {
      await this.client.startNew(ORCHESTRATOR, { instanceId, input });
      return { migrationId, instanceId, created: true };
    } catch (error) {
      // Lost a race with another start: the instance is running now, so answer with it.
      const raced = await this.joinIfRunning(instanceId, request);
      if (raced) {
        await this.records.saveStatus(
          migrationId,
          { ...pendingStatus(input), status: 'Conflict', error: `superseded by ${raced.migrationId}` },
          true,
        );
        return raced;
      }
      throw error;
    }
  }

  async status(migrationId: string): Promise<MigrationStatus> {
    const record = await this.records.get(migrationId);
    if (!record) throw new RouteLockError('NotFound', `No migration ${migrationId}.`);
    if (record.done) return record.status;
    const current = await this.instance(record.instanceId);
    const input = current?.input as MigrationInput | undefined;
    if (!current || input?.migrationId !== migrationId) return record.status;
    const custom = current.customStatus as MigrationStatus | undefined;
    if (String(current.runtimeStatus) === 'Failed' || String(current.runtimeStatus) === 'Terminated') {
      return {
        ...(custom ?? record.status),
        status: 'Failed',
        error: `orchestration ${String(current.runtimeStatus).toLowerCase()}`,
      };
    }
    return custom ?? record.status;
  }

  /**
   * Purge the task-hub history of every finished migration (the timer in functions/purgeHistory.ts).
   * The migration record already holds what an operator or a retry needs (inputs without secrets,
   * timeline, reasons): a Completed orchestration wrote its final status itself; a Failed or Terminated
   * one (an unhandled error, an operator's terminate) gets it written here first. So purging loses
   * nothing, and the task hub keeps no migration's lock seed past its end.
   */
  async purgeFinished(lookbackDays = 30): Promise<{ purged: number; recorded: number }> {
    const to = new Date(this.now());
    const from = new Date(to.getTime() - lookbackDays * 24 * 3600 * 1000);
    let recorded = 0;
    const broken = await this.client.getStatusBy({
      createdTimeFrom: from,
      createdTimeTo: to,
      runtimeStatus: [df.OrchestrationRuntimeStatus.Failed, df.OrchestrationRuntimeStatus.Terminated],
    });
    for (const instance of broken) {
      const input = instance.input as MigrationInput | undefined;
      if (!input?.migrationId) continue;
      const record = await this.records.get(input.migrationId);
      if (record && !record.done) {
        await this.records.saveStatus(input.migrationId, await this.status(input.migrationId), true);
        recorded += 1;
      }
    }
    const result = await this.client.purgeInstanceHistoryBy({
      createdTimeFrom: from,
      createdTimeTo: to,
      runtimeStatus: [
        df.OrchestrationRuntimeStatus.Completed,
        df.OrchestrationRuntimeStatus.Failed,
        df.OrchestrationRuntimeStatus.Terminated,
      ],
    });
    return { purged: result.instancesDeleted, recorded };
  }
}
