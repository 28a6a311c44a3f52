import * as df from 'durable-functions';
import type { DurableClient, DurableOrchestrationStatus } from 'durable-functions';
import { randomUUID } from 'node:crypto';
import { RouteLockError } from '../../shared/core/errors';
import { instanceIdFor } from '../../shared/migration/instanceId';
import { checkedWindow } from '../../shared/migration/window';
import { migrationEndedEvent, withStopped } from '../../shared/migration/stopped';
import type { TelemetrySink } from '../../shared/migration/telemetry/sink';
import {
  type MigrationRecord,
  claimedAtOf,
  newMigrationInput,
  newMigrationRecord,
  runsRecord,
} from '../../shared/migration/records';
import type { MigrationRecords } from '../../shared/migration/store/ports/migrations';
import type { Actor } from '../../shared/core/audit';
import {
  type MigrationList,
  type MigrationListQuery,
  type MigrationRequest,
  type MigrationService,
  type StartedMigration,
  assertRetriable,
  assertRouteExists,
  cancelAnswer,
  joinRunning,
  listLimit,
  withCancelRequest,
  retryLost,
  retryRecord,
  settingsFor,
} from '../../shared/migration/service';
import {
  CANCEL_EVENT,
  type CancelRequest,
  type MigrationInput,
  type MigrationSettings,
  type MigrationState,
  type MigrationStatus,
  migrationStates,
  pendingStatus,
  terminalStates,
} from '../../shared/migration/types';
import type { TokenKeyring } from '../../shared/core/security/tokenKeys';
import { assertAllowedRegion } from '../../shared/core/regions';
import type { Router } from '../../shared/core/router';

export const ORCHESTRATOR = 'migrationOrchestrator';

/**
 * How long a claimed migration may go without its instance before a later start takes it for a starter
 * that died between the claim and `startNew` (a live starter takes milliseconds), and ends it Failed.
 */
export const unstartedGraceMs = 5 * 60_000;

const running = new Set(['Pending', 'Running', 'ContinuedAsNew', 'Suspended']);

/** The states an unfinished record may hold (its live status is its instance's). */
const unfinishedStates: readonly MigrationState[] = migrationStates.filter((s) => !terminalStates.has(s));

/**
 * Migrations on Durable Functions: one instance per resource ({@link instanceIdFor}). A check-and-start
 * alone is not safe: the extension's docs warn that two concurrent `startNew` calls for one instance id
 * can both succeed while one instance starts, leaving the loser's record Pending. So the records port's
 * per-resource claim (`createIfNoActive`) picks the one start that calls `startNew`; the others answer
 * with the migration that holds the claim. `getStatus` first (its 404 means absent) joins a running one.
 */
/** How many unfinished migrations' statuses a list page reads from the task hub at once. */
const LIVE_STATUS_CONCURRENCY = 16;

export class DurableMigrationService implements MigrationService {
  constructor(
    private readonly client: DurableClient,
    private readonly records: MigrationRecords,
    private readonly router: Router,
    private readonly settings: MigrationSettings,
    private readonly now: () => number,
    private readonly keyring: TokenKeyring,
    /** Where an end no orchestration recorded sends its `MigrationEnded` (docs/design.md §6.12). */
    private readonly sink?: TelemetrySink,
  ) {}

  /**
   * Save the final status of a run no orchestration recorded (its instance failed, was terminated or
   * never started) and send its `MigrationEnded`, as `recordOutcome` does for a run that returned. Its
   * key is the run's (`MigrationEnded:<id>:<attempt>`): a second save of the same end sends the same one.
   * Telemetry never fails the save.
   */
  private async saveUnrecordedEnd(record: MigrationRecord, status: MigrationStatus): Promise<void> {
    await this.records.saveStatus(record.migrationId, status, true);
    try {
      const event = migrationEndedEvent(record, status, this.now());
      if (event) this.sink?.event(event);
    } catch {
      // the status is saved; the reconciliation's gaps are for documents, a lost event only undercounts
    }
  }

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
    return joinRunning(
      { migrationId: input.migrationId, instanceId, target: input.target, window: input.window },
      request,
    );
  }

  async start(request: MigrationRequest): Promise<StartedMigration> {
    assertAllowedRegion(this.router.allowedRegions, request.target, 'the migration', request.resourceId);
    await assertRouteExists(this.router, request.resourceId, request.listed);
    const instanceId = instanceIdFor(request.resourceId);
    const joined = await this.joinIfRunning(instanceId, request);
    if (joined) return joined;

    const migrationId = request.migrationId ?? `m-${randomUUID()}`;
    const input = newMigrationInput({
      migrationId,
      instanceId,
      resourceId: request.resourceId,
      target: request.target,
      settings: settingsFor(this.settings, request),
      lock: this.keyring.newSeed(),
      window: checkedWindow(request.window, this.now()),
      listed: { copy: request.listed, keyring: this.keyring },
    });
    const record = newMigrationRecord(input, new Date(this.now()).toISOString(), request.campaignId);
    // The claim decides, not getStatus + startNew: of concurrent starts only its winner calls startNew.
    let claim = await this.records.createIfNoActive(record);
    if (!claim.created && claim.record.migrationId !== migrationId && (await this.endIfStale(claim.record))) {
      claim = await this.records.createIfNoActive(record);
    }
    if (!claim.created) return this.answerStanding(claim.record, request, migrationId);
    try {
      await this.client.startNew(ORCHESTRATOR, { instanceId, input });
      return { migrationId, instanceId, created: true };
    } catch (error) {
      // Never leave the claim holding the resource: the record ends (done releases the claim), as
      // Conflict when an instance started without a claim (before claims existed) runs, else Failed.
      const current = await this.instance(instanceId).catch(() => null);
      const other = current?.input as MigrationInput | undefined;
      const raced =
        current && running.has(String(current.runtimeStatus)) && other && other.migrationId !== migrationId
          ? other
          : null;
      const reason = raced
        ? { status: 'Conflict' as const, error: `superseded by ${raced.migrationId}` }
        : { status: 'Failed' as const, error: 'the orchestration could not be started' };
      await this.saveUnrecordedEnd(record, { ...pendingStatus(input), ...reason });
      if (raced) return joinRunning(raced, request);
      throw error;
    }
  }

  /**
   * An operator's retry: the failed record reopened under the resource's claim (`reopenIfNoActive`, as
   * a start claims), then the same instance id started again (host.json lets a non-running instance be
   * started anew) with the new input: a fresh seed, the earlier attempts. A `startNew` that throws ends
   * the record Failed again, releasing the claim.
   */
  async retry(migrationId: string, _actor: Actor): Promise<StartedMigration> {
    const failed = assertRetriable(await this.records.get(migrationId), migrationId);
    assertAllowedRegion(this.router.allowedRegions, failed.target, 'the migration', failed.resourceId);
    await assertRouteExists(this.router, failed.resourceId);
    // the retry keeps its window: one already over could only fail it again (WindowClosed)
    checkedWindow(failed.input.window, this.now());
    const record = retryRecord(
      failed,
      this.settings,
      this.keyring.newSeed(),
      new Date(this.now()).toISOString(),
    );
    let claim = await this.records.reopenIfNoActive(record);
    if (!claim.created && claim.record.migrationId !== migrationId && (await this.endIfStale(claim.record))) {
      claim = await this.records.reopenIfNoActive(record);
    }
    if (!claim.created) retryLost(claim.record, migrationId);
    try {
      await this.client.startNew(ORCHESTRATOR, { instanceId: record.instanceId, input: record.input });
      return { migrationId, instanceId: record.instanceId, created: true };
    } catch (error) {
      await this.records.saveStatus(
        migrationId,
        { ...failed.status, error: `the retry could not be started; ${failed.status.error ?? ''}` },
        true,
      );
      throw error;
    }
  }

  /** A start that did not win the claim: the record that stands answers, as a second start always did. */
  private answerStanding(
    standing: MigrationRecord,
    request: MigrationRequest,
    migrationId: string,
  ): StartedMigration {
    if (standing.migrationId === migrationId) {
      if (standing.resourceId !== request.resourceId) {
        throw new RouteLockError('BadRequest', `Migration id ${migrationId} is already used.`);
      }
      return { migrationId, instanceId: standing.instanceId, created: false };
    }
    return joinRunning({ ...standing, window: standing.input.window }, request);
  }

  /**
   * End an unfinished record that no orchestration will finish, so its claim stops holding the resource:
   * its instance ended without recording the outcome, or it never started (its starter died between the
   * claim and `startNew`) and is older than {@link unstartedGraceMs}. True when it ended it.
   */
  private async endIfStale(standing: MigrationRecord): Promise<boolean> {
    const current = await this.instance(standing.instanceId);
    // the instance of this run (a retry's reopened record is not its first run's ended instance)
    const ours = runsRecord(current?.input as MigrationInput | undefined, standing);
    if (ours && running.has(String(current!.runtimeStatus))) return false;
    if (!ours && this.now() - Date.parse(claimedAtOf(standing)) < unstartedGraceMs) return false;
    const status = ours ? await this.status(standing.migrationId) : standing.status;
    const final = terminalStates.has(status.status)
      ? status
      : {
          ...status,
          status: 'Failed' as const,
          error: ours
            ? `orchestration ${String(current!.runtimeStatus).toLowerCase()} without a recorded outcome`
            : 'the orchestration never started',
        };
    await this.saveUnrecordedEnd(standing, final);
    return true;
  }

  /**
   * Cancel (docs/design.md §6.8) is the orchestration's `cancel` external event, never a terminate: a
   * terminated orchestration runs nothing, so it could not release its lock. The request is then kept on the
   * record, so `status` shows it before the workflow has published it (and a second cancel answers the same
   * without raising it again).
   */
  async cancel(migrationId: string, actor: Actor): Promise<MigrationStatus> {
    const record = await this.records.get(migrationId);
    if (!record) throw new RouteLockError('NotFound', `No migration ${migrationId}.`);
    const standing = await this.status(migrationId);
    const answered = cancelAnswer(standing, record.input);
    if (answered) return answered;
    const request: CancelRequest = { requestedAt: new Date(this.now()).toISOString(), by: actor.id };
    try {
      await this.client.raiseEvent(record.instanceId, CANCEL_EVENT, request);
    } catch (error) {
      throw new RouteLockError(
        'OrchestrationStatusUnavailable',
        'The Durable Functions task hub did not take the cancel; retry shortly.',
        { retryAfterSeconds: 1, cause: error },
      );
    }
    // After the event only: a request kept here is one the workflow will hear. Only on a record still
    // unfinished: the event may have woken the workflow, which may have saved its final status meanwhile.
    await this.records.amendUnfinished(migrationId, {
      cancelRequestedAt: request.requestedAt,
      cancelRequestedBy: request.by,
    });
    return withCancelRequest(standing, request);
  }

  async status(migrationId: string): Promise<MigrationStatus> {
    const record = await this.records.get(migrationId);
    if (!record) throw new RouteLockError('NotFound', `No migration ${migrationId}.`);
    return this.statusOf(record);
  }

  /** A record's status: an ended one's own, an unfinished one's from its instance; `stopped` derived. */
  private async statusOf(record: MigrationRecord): Promise<MigrationStatus> {
    if (record.done) return withStopped(record.status, record);
    const { cancelRequestedAt: requestedAt, cancelRequestedBy: by } = record.status;
    const live = await this.liveStatus(record);
    // a request the workflow has not published yet (or never will: it came after the last check)
    return withStopped(
      requestedAt !== undefined && live.cancelRequestedAt === undefined
        ? withCancelRequest(live, { requestedAt, by: by ?? '' })
        : live,
      record,
    );
  }

  /** An unfinished record's status from its instance (its custom status), or the record's own. */
  private async liveStatus(record: MigrationRecord): Promise<MigrationStatus> {
    const current = await this.instance(record.instanceId);
    const input = current?.input as MigrationInput | undefined;
    if (!current || !runsRecord(input, record)) return record.status;
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
   * A page of the records, newest first. An ended record holds its final status; an unfinished one
   * holds what its start wrote, so its live status comes from its instance (as `status` answers). A
   * status filter therefore reads the records in that state and the unfinished ones, and keeps those
   * whose status is it: a page may hold fewer than `limit` items, never a wrong one, and the
   * continuation follows the records read.
   */
  async list(query: MigrationListQuery): Promise<MigrationList> {
    const wanted = query.status;
    const page = await this.records.list({
      states: wanted === undefined ? undefined : [...new Set([wanted, ...unfinishedStates])],
      resourceId: query.resourceId,
      campaignId: query.campaignId,
      limit: listLimit(query.limit),
      continuation: query.continuation,
    });
    // At most LIVE_STATUS_CONCURRENCY task-hub reads at once: a page may hold 1,000 unfinished records.
    const statuses: MigrationStatus[] = [];
    for (let i = 0; i < page.records.length; i += LIVE_STATUS_CONCURRENCY) {
      const batch = page.records.slice(i, i + LIVE_STATUS_CONCURRENCY);
      statuses.push(...(await Promise.all(batch.map((record) => this.statusOf(record)))));
    }
    const items = statuses.filter((status) => wanted === undefined || status.status === wanted);
    return page.continuation === undefined ? { items } : { items, continuation: page.continuation };
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
        await this.saveUnrecordedEnd(record, await this.status(input.migrationId));
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
