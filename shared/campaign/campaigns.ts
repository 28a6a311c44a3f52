import { randomUUID } from 'node:crypto';
import type { Actor } from '../audit';
import { RouteLockError } from '../errors';
import { sameLocation } from '../lock/document';
import { listLimit } from '../migration/service';
import { isProbeId } from '../probe';
import { assertAllowedRegion } from '../regions';
import type { Router } from '../router';
import type { CampaignRecords, VersionedCampaign } from '../store/ports/campaigns';
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
import { casLoop } from './tick';
import {
  type CampaignLimitsPatch,
  type CampaignRecord,
  type CampaignRequest,
  type CampaignSource,
  type CampaignStatus,
  MAX_CAMPAIGN_PAGES,
  MAX_CAMPAIGN_RESOURCES,
  MAX_IDS_PER_REQUEST,
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
 * The campaign service on both runners (issue 18 §3): the HTTP endpoints, the queue trigger and the
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
    };
    const { created, record: standing } = await this.deps.campaigns.create(record);
    if (!created) {
      if (!sameLocation(standing.record.target, request.target)) {
        throw new RouteLockError(
          'CampaignExists',
          `Campaign ${campaignId} exists with another target (${standing.record.target.region}/${standing.record.target.account}).`,
        );
      }
      // a repeated create: the runner may be what failed the first time (launch is idempotent)
      if (!isEnded(standing.record.status)) await this.deps.launcher.launch(campaignId);
      return { campaignId, created: false, status: this.view(standing.record) };
    }
    // page 0 is this request's (a crash before this line leaves a campaign of no members, which completes)
    if (ids.length > 0)
      await this.deps.campaigns.addMembers(
        campaignId,
        ids.map((resourceId, i) => ({ seq: i, resourceId })),
      );
    const saved = await this.saveCounts(standing);
    await this.deps.launcher.launch(campaignId);
    return { campaignId, created: true, status: this.view(saved.record) };
  }

  async status(campaignId: string): Promise<CampaignStatus> {
    return this.view((await this.read(campaignId)).record);
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
      if (r.pages >= MAX_CAMPAIGN_PAGES || r.reserved + ids.length > MAX_CAMPAIGN_RESOURCES) {
        throw new RouteLockError(
          'CampaignFull',
          `Campaign ${campaignId} has ${r.reserved} of its ${MAX_CAMPAIGN_RESOURCES} resources in ${r.pages} of its ${MAX_CAMPAIGN_PAGES} pages; ${ids.length} more do not fit.`,
        );
      }
      return { ...r, pages: r.pages + 1, reserved: r.reserved + ids.length, updatedAt: this.at() };
    });
    if (!reserved) throw new RouteLockError('NotFound', `No campaign ${campaignId}.`);
    const page = reserved.before.pages;
    const added = await this.deps.campaigns.addMembers(
      campaignId,
      ids.map((resourceId, i) => ({ seq: page * MAX_IDS_PER_REQUEST + i, resourceId })),
    );
    const saved = await this.saveCounts(reserved.after, added);
    if (saved.reopened) await this.deps.launcher.launch(campaignId);
    else await this.deps.launcher.wake(campaignId);
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
      return { ...r, limits, updatedAt: this.at() };
    });
    if (!saved) throw new RouteLockError('NotFound', `No campaign ${campaignId}.`);
    await this.deps.launcher.wake(campaignId);
    return this.view(saved.after.record);
  }

  /** A pause, resume or cancel: commandOutcome's state, `stamp` when it changes; unchanged writes nothing. */
  private async command(
    campaignId: string,
    command: CampaignCommand,
    stamp: (record: CampaignRecord) => CampaignRecord,
  ): Promise<CampaignStatus> {
    let unchanged: CampaignRecord | undefined;
    const saved = await casLoop(this.deps, await this.read(campaignId), (r) => {
      const status = commandOutcome(r.status, command, campaignId);
      if (status === r.status) {
        unchanged = r;
        return null;
      }
      return { ...stamp(r), status, updatedAt: this.at() };
    });
    if (!saved) return this.view(unchanged as CampaignRecord);
    if (command === 'resume') await this.deps.launcher.launch(campaignId);
    else await this.deps.launcher.wake(campaignId);
    return this.view(saved.after.record);
  }

  /**
   * The members' counts on the record; a campaign completed meanwhile reopens for new members (its
   * runner had stopped: `reopened` says to launch it again).
   */
  private async saveCounts(
    versioned: VersionedCampaign,
    added = 0,
  ): Promise<{ record: CampaignRecord; reopened: boolean }> {
    const counts = countsFrom(await this.deps.campaigns.countMembers(versioned.record.campaignId));
    let reopened = false;
    const saved = await casLoop(this.deps, versioned, (r) => {
      const status = afterResourcesAdded(r.status, added);
      reopened = status !== r.status;
      const { endedAt: _e, ...open } = r;
      return { ...(reopened ? open : r), status, counts, updatedAt: this.at() };
    });
    return { record: (saved as { after: VersionedCampaign }).after.record, reopened };
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

/** Exactly one of `resources` and `from`. */
function sourceOf(request: CampaignRequest): CampaignSource {
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
function checkedIds(ids: readonly string[], field: string): string[] {
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
