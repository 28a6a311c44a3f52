import { createHash, randomUUID } from 'node:crypto';
import type { Actor } from '../core/audit';
import { isRouteLockError, RouteLockError } from '../core/errors';
import { describeLocation, sameLocation } from '../core/lock/document';
import type { MigrationRecord } from '../migration/records';
import { listLimit } from '../migration/service';
import { checkedWindow } from '../migration/window';
import { isProbeId } from '../migration/probe';
import { assertAllowedRegion } from '../core/regions';
import type { Router } from '../core/router';
import type { CampaignRecords, VersionedCampaign } from './store/ports/campaigns';
import {
  afterResourcesAdded,
  assertAcceptsResources,
  campaignView,
  checkedLimits,
  commandOutcome,
  countsFrom,
  emptyHistogram,
  isEnded,
  patchedLimits,
  type CampaignCommand,
} from './plan';
import type {
  AddedResources,
  CampaignLauncher,
  CampaignListRequest,
  CampaignService,
  CreatedCampaign,
} from './service';
import { cancelPendingMembers, casLoop } from './tick';
import {
  type CampaignLimitsPatch,
  type CampaignRecord,
  type CampaignRequest,
  type CampaignSkipped,
  type CampaignSource,
  type CampaignStatus,
  MAX_CAMPAIGN_RESOURCES,
  MAX_IDS_PER_REQUEST,
  SKIPS_COUNTED,
} from './types';

export interface CampaignDeps {
  campaigns: CampaignRecords;
  router: Router;
  launcher: CampaignLauncher;
  now: () => number;
  /** ROUTELOCK_MIGRATION_ATTEMPTS: a campaign may ask fewer, never more. */
  maxMigrationAttempts: number;
}

/**
 * The campaign service on both runners (docs/design.md §6.9): the HTTP endpoints, the queue trigger and the
 * command line call it; only the launcher differs. Every write is a compare-and-swap on the record, and
 * the state rules are plan.ts's: this class checks what a request means, applies them and wakes the runner.
 */
export class Campaigns implements CampaignService {
  constructor(private readonly deps: CampaignDeps) {}

  async create(request: CampaignRequest, actor: Actor): Promise<CreatedCampaign> {
    assertAllowedRegion(this.deps.router.allowedRegions, request.target, 'the campaign');
    const limits = checkedLimits(request, this.deps.maxMigrationAttempts);
    const source = sourceOf(request);
    const ids = request.resources === undefined ? [] : checkedIds(request.resources, 'resources');
    const campaignId = request.campaignId ?? `c-${randomUUID()}`;
    const at = new Date(this.deps.now()).toISOString();
    const record: CampaignRecord = {
      campaignId,
      target: request.target,
      limits,
      status: 'Running',
      source,
      createdAt: at,
      updatedAt: at,
      createdBy: actor.id,
      pages: ids.length > 0 ? 1 : 0,
      reserved: ids.length,
      counts: countsFrom({ pending: ids.length }),
      recentStarts: [],
      writeLockHistogram: emptyHistogram(),
      ...(ids.length > 0 ? { firstPageDigest: digestOf(ids) } : {}),
      // checked once here (a bad one is a 400); each member's start checks it again, at its time
      ...(request.window === undefined ? {} : { window: checkedWindow(request.window, this.deps.now()) }),
    };
    const { created, record: standing } = await this.deps.campaigns.create(record);
    if (!created) {
      if (!sameLocation(standing.record.target, request.target)) {
        throw new RouteLockError(
          'CampaignExists',
          `Campaign ${campaignId} exists with another target (${describeLocation(standing.record.target)}).`,
        );
      }
      // a repeated create: the first may have crashed before its ids (or its runner) landed
      const again = await this.addAgain(standing, ids);
      if (!isEnded(again.status)) await this.kick(campaignId);
      return { campaignId, created: false, status: this.view(again) };
    }
    // page 0 is this request's (a crash before this line leaves an `ids` campaign of no members: it
    // stays Running, plan.ts sourceDone, until a repeated create adds them again)
    if (ids.length > 0)
      await this.deps.campaigns.addMembers(
        campaignId,
        ids.map((resourceId, i) => ({ seq: i, resourceId })),
      );
    const saved = await this.saveCounts(campaignId);
    await this.deps.launcher.launch(campaignId);
    return { campaignId, created: true, status: this.view(saved.record) };
  }

  /**
   * A repeated create of the same ids (a retried request, a redelivered queue message) adds them again
   * while the campaign is Running or Paused: the first may have crashed between its record and its
   * members. They go at their page-0 seqs, the page the create reserved, and addMembers keeps a resource
   * once, so a repeat after a create that landed adds nothing. Other ids are not added (append them with
   * addResources): that keeps every seq one member's.
   */
  private async addAgain(standing: VersionedCampaign, ids: readonly string[]): Promise<CampaignRecord> {
    const record = standing.record;
    const open = record.status === 'Running' || record.status === 'Paused';
    if (!open || ids.length === 0 || record.firstPageDigest !== digestOf(ids)) return record;
    const added = await this.deps.campaigns.addMembers(
      record.campaignId,
      ids.map((resourceId, i) => ({ seq: i, resourceId })),
    );
    return added === 0 ? record : (await this.saveCounts(record.campaignId)).record;
  }

  async status(campaignId: string): Promise<CampaignStatus> {
    const status = this.view((await this.read(campaignId)).record);
    return status.counts.skipped > 0
      ? { ...status, skipped: await this.skipReasons(campaignId, status.counts.skipped) }
      : status;
  }

  /** Skipped members by reason code: none has a migration, so this is the one place that says why. */
  private async skipReasons(campaignId: string, total: number): Promise<CampaignSkipped> {
    const byReason: Record<string, number> = {};
    let read = 0;
    let afterSeq: number | undefined;
    while (read < SKIPS_COUNTED) {
      const want = Math.min(1000, SKIPS_COUNTED - read);
      const page = await this.deps.campaigns.members(campaignId, {
        state: 'skipped',
        limit: want,
        ...(afterSeq === undefined ? {} : { afterSeq }),
      });
      for (const m of page) {
        // a member skipped before reason codes were kept: its reason text's leading code, if any
        const code = m.reasonCode ?? /^([A-Z][A-Za-z]+)\b/.exec(m.reason ?? '')?.[1] ?? 'unknown';
        byReason[code] = (byReason[code] ?? 0) + 1;
      }
      read += page.length;
      if (page.length < want) break;
      afterSeq = page.at(-1)?.seq;
    }
    return { total, byReason, ...(read < total ? { truncated: true } : {}) };
  }

  async list(query: CampaignListRequest): Promise<{ items: CampaignStatus[]; continuation?: string }> {
    const page = await this.deps.campaigns.list({
      status: query.status,
      limit: listLimit(query.limit),
      continuation: query.continuation,
    });
    const items = page.records.map((record) => this.view(record));
    return page.continuation === undefined ? { items } : { items, continuation: page.continuation };
  }

  async addResources(
    campaignId: string,
    resourceIds: readonly string[],
    _actor: Actor,
  ): Promise<AddedResources> {
    const ids = checkedIds(resourceIds, 'resources');
    const reserved = await casLoop(this.deps, await this.read(campaignId), (r) => {
      assertAcceptsResources(r.status, campaignId);
      if (r.reserved + ids.length > MAX_CAMPAIGN_RESOURCES) {
        throw new RouteLockError(
          'CampaignFull',
          `Campaign ${campaignId} has ${r.reserved} of its ${MAX_CAMPAIGN_RESOURCES} resources; ${ids.length} more do not fit.`,
        );
      }
      return {
        next: { ...r, pages: r.pages + 1, reserved: r.reserved + ids.length, updatedAt: this.at() },
        note: undefined,
      };
    });
    // seqs from the slots this reservation took: every seq one member's, whatever the batch sizes
    const first = reserved.before.reserved;
    const added = await this.deps.campaigns.addMembers(
      campaignId,
      ids.map((resourceId, i) => ({ seq: first + i, resourceId })),
    );
    const saved = await this.saveCounts(campaignId, added);
    await this.kick(campaignId);
    return { added, duplicates: ids.length - added, status: this.view(saved.record) };
  }

  pause(campaignId: string, _actor: Actor): Promise<CampaignStatus> {
    return this.command(campaignId, 'pause', (r) => ({ ...r, pausedAt: this.at() }));
  }

  resume(campaignId: string, _actor: Actor): Promise<CampaignStatus> {
    return this.command(campaignId, 'resume', (r) => {
      const { pausedAt: _p, ...rest } = r;
      return rest;
    });
  }

  cancel(campaignId: string, actor: Actor): Promise<CampaignStatus> {
    return this.command(campaignId, 'cancel', (r) => ({
      ...r,
      cancelRequestedAt: r.cancelRequestedAt ?? this.at(),
      cancelRequestedBy: r.cancelRequestedBy ?? actor.id,
    }));
  }

  async update(campaignId: string, patch: CampaignLimitsPatch, _actor: Actor): Promise<CampaignStatus> {
    const saved = await casLoop(this.deps, await this.read(campaignId), (r) => {
      if (isEnded(r.status))
        throw new RouteLockError(
          'CampaignEnded',
          `Campaign ${campaignId} is ${r.status}; its limits are final.`,
        );
      const limits = patchedLimits(r.limits, patch, this.deps.maxMigrationAttempts);
      return { next: { ...r, limits, updatedAt: this.at() }, note: undefined };
    });
    if (saved.after === null) throw new RouteLockError('NotFound', `No campaign ${campaignId}.`);
    await this.kick(campaignId);
    return this.view(saved.after.record);
  }

  /** A pause, resume or cancel: commandOutcome's state, `stamp` when it changes; unchanged writes nothing. */
  private async command(
    campaignId: string,
    command: CampaignCommand,
    stamp: (record: CampaignRecord) => CampaignRecord,
  ): Promise<CampaignStatus> {
    const saved = await casLoop(this.deps, await this.read(campaignId), (r) => {
      const status = commandOutcome(r.status, command, campaignId);
      return {
        next: status === r.status ? null : { ...stamp(r), status, updatedAt: this.at() },
        note: undefined,
      };
    });
    // unchanged: the record it was decided on stands
    if (saved.after === null) return this.view(saved.before);
    await this.kick(campaignId);
    return this.view(saved.after.record);
  }

  /**
   * After a command or new members: the runner launched (a no-op when it runs) and then woken, so it
   * ticks soon (a Durable launch of a running instance returns without a tick).
   */
  private async kick(campaignId: string): Promise<void> {
    await this.deps.launcher.launch(campaignId);
    await this.deps.launcher.wake(campaignId);
  }

  /**
   * The members' counts on the record, counted under the record they are written onto (a lost write
   * reads and counts again), so they are never older than the record. A campaign completed meanwhile
   * reopens for new members (`reopened`); an ended one otherwise gets no counts, except that members
   * an append landed after its cancel (reserved before it) are cancelled and counted.
   */
  private async saveCounts(
    campaignId: string,
    added = 0,
  ): Promise<{ record: CampaignRecord; reopened: boolean }> {
    for (let i = 0; ; i += 1) {
      const current = await this.read(campaignId);
      const r = current.record;
      const status = afterResourcesAdded(r.status, added);
      const reopened = status !== r.status;
      const late =
        r.status === 'Cancelled' &&
        (await cancelPendingMembers(this.deps.campaigns, campaignId, this.deps.now())) > 0;
      if (isEnded(status) && !late) return { record: r, reopened: false };
      const counts = countsFrom(await this.deps.campaigns.countMembers(campaignId));
      const { endedAt: _e, ...open } = r;
      const replaced = await this.deps.campaigns.replace(
        { ...(reopened ? open : r), status, counts, updatedAt: this.at() },
        current.etag,
      );
      if (replaced) return { record: replaced.record, reopened };
      if (i >= 50)
        throw new RouteLockError('PreconditionFailed', `Campaign ${campaignId} kept changing; try again.`);
    }
  }

  private async read(campaignId: string): Promise<VersionedCampaign> {
    const read = await this.deps.campaigns.get(campaignId);
    if (!read) throw new RouteLockError('NotFound', `No campaign ${campaignId}.`);
    return read;
  }

  private view(record: CampaignRecord): CampaignStatus {
    return campaignView(record, this.deps.now());
  }

  private at(): string {
    return new Date(this.deps.now()).toISOString();
  }
}

/**
 * An operator's retry of a campaign's migration waits for the campaign's end (409 MigrationNotRetriable):
 * while the campaign runs, a retry would run outside its limits and its cancel. Once it has ended the
 * retry is the operator's own, and the campaign's counts stay as of its end. POST /migrations/{id}/retry
 * (functions/migrations.ts) asks this before the migration service; the command line goes through it.
 */
export async function assertRetryOutsideCampaign(
  record: Pick<MigrationRecord, 'migrationId' | 'resourceId' | 'campaignId'> | null,
  /** Called only for a campaign's migration (the Durable composition needs the invocation's client). */
  campaigns: () => Pick<CampaignService, 'status'>,
): Promise<void> {
  const campaignId = record?.campaignId;
  if (record === null || campaignId === undefined) return;
  let status;
  try {
    status = (await campaigns().status(campaignId)).status;
  } catch (error) {
    if (isRouteLockError(error, 'NotFound')) return;
    throw error;
  }
  if (isEnded(status)) return;
  throw new RouteLockError(
    'MigrationNotRetriable',
    `Migration ${record.migrationId} belongs to campaign ${campaignId}, which is ${status}; retry it after the campaign ends.`,
    { resourceId: record.resourceId },
  );
}

/** The create's ids, named by content (no resource id is kept twice on the record). */
const digestOf = (ids: readonly string[]): string =>
  createHash('sha256').update(JSON.stringify(ids)).digest('hex');

/** Exactly one of `resources` and `from`. */
export function sourceOf(request: CampaignRequest): CampaignSource {
  if ((request.resources === undefined) === (request.from === undefined))
    throw new RouteLockError(
      'BadRequest',
      'Give exactly one of resources (a list of ids) and from ({region}).',
    );
  if (request.from === undefined) return { kind: 'ids' };
  const { region, limit } = request.from;
  if (typeof region !== 'string' || region.trim() === '')
    throw new RouteLockError('BadRequest', 'from.region: must name a region.');
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > MAX_CAMPAIGN_RESOURCES))
    throw new RouteLockError(
      'BadRequest',
      `from.limit: must be a whole number from 1 to ${MAX_CAMPAIGN_RESOURCES}.`,
    );
  return { kind: 'from', region, ...(limit === undefined ? {} : { limit }), selected: 0, done: false };
}

/** 1 to 1,000 ids, none of them the probe's (its routes move only under the probe). */
export function checkedIds(ids: readonly string[], field: string): string[] {
  if (ids.length === 0 || ids.length > MAX_IDS_PER_REQUEST)
    throw new RouteLockError(
      'BadRequest',
      `${field}: from 1 to ${MAX_IDS_PER_REQUEST} ids a request (append more with POST /campaigns/{campaignId}/resources).`,
    );
  const probe = ids.find((id) => typeof id !== 'string' || id === '' || isProbeId(id));
  if (probe !== undefined)
    throw new RouteLockError(
      'BadRequest',
      `${field}: "${String(probe)}" is not a resource a campaign may move.`,
    );
  return [...ids];
}
