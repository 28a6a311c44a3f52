import {
  describeLocation,
  type Location,
  type LocationDocument,
  normalizeLocation,
  sameLocation,
} from '../core/lock/document';
import {
  askParticipants,
  type PreflightDeps,
  type PreflightFacts,
  type PreflightSettings,
  preflight,
  preflightSettings,
  readPreflightRoute,
  type RunningMigration,
  runningOf,
  unfinishedStates,
} from '../migration/preflight';
import type { CutoverWindow, PreflightReport } from '../migration/types';
import { checkedWindow } from '../migration/window';
import type { CampaignRecords } from './store/ports/campaigns';
import type { LocationStore } from '../core/store/ports/locations';
import { checkedIds, sourceOf } from './campaigns';
import { campaignEstimate, checkedLimits } from './plan';
import { inParallel, selectionPage } from './tick';
import {
  type CampaignPreflightCheck,
  type CampaignPreflightReport,
  type CampaignRequest,
  type CampaignSkip,
  type CampaignSkipReason,
  type CampaignState,
  MAX_CAMPAIGN_RESOURCES,
  MAX_IDS_PER_REQUEST,
  MAX_SKIPS_LISTED,
} from './types';

/**
 * A campaign's dry run (docs/design.md §6.2): what a create would meet, answered without writing anything (no
 * campaign record, member, migration record or lock). Each resource gets the migration dry run's own
 * pure `preflight` (shared/migration/preflight.ts): its first failing route check is why it would be
 * skipped. The participants are asked once, about the first resource that would start, as the migration
 * dry run asks them. The resources are the create's (its ids, or its `from` selection read as the
 * tick reads it: `selectionPage`), within the create's limits.
 */

/** What the shell read, for the pure core. */
export interface CampaignPreflightFacts {
  request: CampaignRequest;
  /** Distinct resources in start order: the route (null: none) and a migration of it that has not ended. */
  resources: readonly Pick<PreflightFacts, 'resourceId' | 'doc' | 'running'>[];
  /** Ids given more than once (kept once, as a create keeps them). */
  duplicates: number;
  /** The campaign the request's campaignId names, when one stands. */
  standing: { target: Location; status: CampaignState } | null;
  /** The participants' answers about the first resource that would start (absent: none would). */
  participants?: { resourceId: string; answers: PreflightFacts['participants'] };
}

export interface CampaignPreflightSettings extends PreflightSettings {
  /** ROUTELOCK_MIGRATION_ATTEMPTS: the create's bound on migrationAttempts. */
  maxMigrationAttempts: number;
}

/**
 * One resource's migration preflight, without its participants and window (campaign-wide: checked once,
 * for the first resource that would start).
 */
function memberReport(
  facts: CampaignPreflightFacts,
  member: CampaignPreflightFacts['resources'][number],
  now: number,
  s: PreflightSettings,
  participants: PreflightFacts['participants'] = [],
  window?: CutoverWindow,
): PreflightReport {
  const target = normalizeLocation(facts.request.target);
  return preflight({ ...member, target, participants, ...(window === undefined ? {} : { window }) }, now, s);
}

/** The first failing route check: why the campaign would not move the resource (null: it would start). */
function skipOf(report: PreflightReport): CampaignSkip | null {
  const failing = report.checks.find(
    (c) => !c.ok && c.check !== 'participant' && c.check !== 'windowReachable',
  );
  return failing === undefined
    ? null
    : { resourceId: report.resourceId, reason: failing.check as CampaignSkipReason, detail: failing.detail };
}

/** The first resource a create would start (the participants are asked about it); null when none. */
export function firstToStart(
  facts: CampaignPreflightFacts,
  now: number,
  s: PreflightSettings,
): CampaignPreflightFacts['resources'][number] | null {
  return facts.resources.find((m) => skipOf(memberReport(facts, m, now, s)) === null) ?? null;
}

/** The pure core: (facts, now, settings) → the report. The request is validated as a create validates it. */
export function campaignPreflight(
  facts: CampaignPreflightFacts,
  now: number,
  s: CampaignPreflightSettings,
): CampaignPreflightReport {
  const { request } = facts;
  const limits = checkedLimits(request, s.maxMigrationAttempts);
  const source = sourceOf(request);
  const target = normalizeLocation(request.target);
  const skips: CampaignSkip[] = [];
  const byReason: Partial<Record<CampaignSkipReason, number>> = {};
  for (const member of facts.resources) {
    const skip = skipOf(memberReport(facts, member, now, s));
    if (skip === null) continue;
    skips.push(skip);
    byReason[skip.reason] = (byReason[skip.reason] ?? 0) + 1;
  }
  const wouldStart = facts.resources.length - skips.length;
  const checks: CampaignPreflightCheck[] = [campaignIdCheck(request.campaignId, target, facts.standing)];
  checks.push(
    wouldStart > 0
      ? {
          check: 'resourcesToStart',
          ok: true,
          detail: `${wouldStart} of ${facts.resources.length} would start`,
        }
      : {
          check: 'resourcesToStart',
          ok: false,
          detail:
            facts.resources.length === 0
              ? 'no resource: the campaign would hold none'
              : `none of its ${facts.resources.length} resources would start`,
        },
  );
  // the campaign-wide checks, of the first migration that would start: its participants (asked about
  // it) and the cutover window (later members meet it later, maybe closed: each start checks it again)
  const first = firstToStart(facts, now, s);
  const answers = facts.participants?.resourceId === first?.resourceId ? facts.participants?.answers : [];
  const firstReport = first && memberReport(facts, first, now, s, answers, request.window);
  for (const c of firstReport?.checks ?? [])
    if (c.check === 'participant' || c.check === 'windowReachable')
      checks.push({
        ...c,
        check: c.check,
        ...(c.check === 'participant' ? { resourceId: first?.resourceId } : {}),
      });
  // one migration's timing: the first that would start (its participants in scope decide the grace)
  const timing = firstReport?.timing ?? null;
  return {
    dryRun: true,
    ...(request.campaignId === undefined ? {} : { campaignId: request.campaignId }),
    target,
    ok: checks.every((c) => c.ok),
    source:
      source.kind === 'ids'
        ? { kind: 'ids', duplicates: facts.duplicates }
        : {
            kind: 'from',
            region: source.region,
            ...(source.limit === undefined ? {} : { limit: source.limit }),
          },
    resourceCount: facts.resources.length,
    wouldStart,
    skipped: {
      count: skips.length,
      byReason,
      resources: skips.slice(0, MAX_SKIPS_LISTED),
      truncated: skips.length > MAX_SKIPS_LISTED,
    },
    checks,
    timing,
    estimate: campaignEstimate(wouldStart, limits, timing, now),
    limits,
    ...(request.window === undefined ? {} : { window: request.window }),
  };
}

/** A create with a standing campaign's id answers that campaign (same target) or is refused (another). */
function campaignIdCheck(
  campaignId: string | undefined,
  target: Location,
  standing: CampaignPreflightFacts['standing'],
): CampaignPreflightCheck {
  if (campaignId === undefined)
    return { check: 'campaignIdFree', ok: true, detail: 'no campaignId: a create names a new campaign' };
  if (standing === null)
    return { check: 'campaignIdFree', ok: true, detail: `no campaign ${campaignId} yet` };
  return sameLocation(standing.target, target)
    ? {
        check: 'campaignIdFree',
        ok: false,
        detail: `campaign ${campaignId} exists (${standing.status}, same target): a create would answer it and start nothing new`,
      }
    : {
        check: 'campaignIdFree',
        ok: false,
        detail: `campaign ${campaignId} exists with another target (${describeLocation(standing.target)}): a create would get 409 CampaignExists`,
      };
}

export interface CampaignPreflightDeps extends PreflightDeps {
  /** `from` selection pages through the routes here, as the tick does. */
  store: Pick<LocationStore, 'list'>;
  campaigns: Pick<CampaignRecords, 'get'>;
  maxMigrationAttempts: number;
}

/**
 * The I/O shell: reads only (routes, unfinished migration records, the standing campaign), then asks
 * the participants once. Validation first, as a create's: a bad request is a BadRequest before any read.
 */
export async function runCampaignPreflight(
  deps: CampaignPreflightDeps,
  request: CampaignRequest,
): Promise<CampaignPreflightReport> {
  const settings: CampaignPreflightSettings = {
    ...preflightSettings(deps),
    maxMigrationAttempts: deps.maxMigrationAttempts,
  };
  checkedLimits(request, deps.maxMigrationAttempts);
  checkedWindow(request.window, deps.now());
  const source = sourceOf(request);
  const ids = request.resources === undefined ? [] : checkedIds(request.resources, 'resources');
  const read =
    source.kind === 'from'
      ? await selectedResources(deps, source.region, source.limit)
      : await givenResources(deps, ids);
  const standing =
    request.campaignId === undefined
      ? null
      : ((await deps.campaigns.get(request.campaignId))?.record ?? null);
  const facts: CampaignPreflightFacts = {
    request,
    resources: read.resources,
    duplicates: read.duplicates,
    standing: standing === null ? null : { target: standing.target, status: standing.status },
  };
  const now = deps.now();
  const first = firstToStart(facts, now, settings);
  if (first?.doc) {
    const answers = await askParticipants(
      deps,
      { resourceId: first.resourceId },
      first.doc.location,
      normalizeLocation(request.target),
    );
    facts.participants = { resourceId: first.resourceId, answers };
  }
  return campaignPreflight(facts, deps.now(), settings);
}

type Resources = { resources: CampaignPreflightFacts['resources']; duplicates: number };

/** The create's ids (at most 1,000), once each: each route read as a start reads it, with its claim. */
async function givenResources(deps: CampaignPreflightDeps, ids: readonly string[]): Promise<Resources> {
  const distinct = [...new Set(ids)].slice(0, MAX_IDS_PER_REQUEST);
  const resources = await inParallel(distinct, async (resourceId) => {
    const [doc, page] = await Promise.all([
      readPreflightRoute(deps.router, resourceId),
      deps.records.list({ resourceId, states: unfinishedStates, limit: 1 }),
    ]);
    const record = page.records[0];
    return { resourceId, doc, running: record ? runningOf(record) : null };
  });
  return { resources, duplicates: ids.length - distinct.length };
}

/**
 * The routes a `from` selection would take now (the tick's `selectionPage`, to its limit or the
 * campaign's capacity), and the unfinished migrations read once as a map (newest first: the claim's).
 */
async function selectedResources(
  deps: CampaignPreflightDeps,
  region: string,
  limit: number | undefined,
): Promise<Resources> {
  const room = Math.min(limit ?? MAX_CAMPAIGN_RESOURCES, MAX_CAMPAIGN_RESOURCES);
  const docs: LocationDocument[] = [];
  let continuation: string | undefined;
  do {
    const page = await selectionPage(deps.store, region, continuation);
    docs.push(...page.routes.slice(0, room - docs.length));
    continuation = page.continuation ?? undefined;
  } while (continuation !== undefined && docs.length < room);
  const running = await unfinishedByResource(deps);
  const resources = docs.map((doc) => ({ resourceId: doc.id, doc, running: running.get(doc.id) ?? null }));
  return { resources, duplicates: 0 };
}

/** Every unfinished migration, newest first: the first of a resource is its claim's. */
async function unfinishedByResource(deps: CampaignPreflightDeps): Promise<Map<string, RunningMigration>> {
  const running = new Map<string, RunningMigration>();
  let continuation: string | undefined;
  do {
    const page = await deps.records.list({
      states: unfinishedStates,
      limit: MAX_IDS_PER_REQUEST,
      continuation,
    });
    for (const record of page.records)
      if (!running.has(record.resourceId)) running.set(record.resourceId, runningOf(record));
    continuation = page.continuation;
  } while (continuation !== undefined);
  return running;
}
