import type { Actor } from '../audit';
import type { Config } from '../config';
import { RouteLockError, isRouteLockError } from '../errors';
import { claimedAtOf, type MigrationRecord } from '../migration/records';
import { type MigrationStatus, terminalStates } from '../migration/types';
import { isProbeId } from '../probe';
import type { VersionedCampaign } from '../store/ports/campaigns';
import {
  addToHistogram,
  countsFrom,
  isEnded,
  memberStateOf,
  nextCampaignState,
  pruneStarts,
  startsAllowed,
  throttleAfterTick,
} from './plan';
import type { CampaignSettings, TickDeps, TickResult } from './service';
import {
  type CampaignCounts,
  type CampaignMember,
  type CampaignRecord,
  type CampaignSource,
  MAX_CAMPAIGN_PAGES,
  MAX_CAMPAIGN_RESOURCES,
  MAX_IDS_PER_REQUEST,
  memberMigrationId,
} from './types';

/**
 * One tick of a campaign (issue 18 §3): refresh its running members from their migration records,
 * cancel (when Cancelling) or select and start (when Running) within its limits, and save the counts.
 *
 * Idempotent and safe to repeat after a crash at any point: the state is the record and the members,
 * and every step is written so that doing it again does no harm. Starts are reserved on the record
 * (ETag compare-and-swap) before they are made, so a crash only ever leaves fewer starts than reserved;
 * a member is marked running (with its deterministic migration id) before its start, so a start
 * repeated after a crash joins that migration and never makes a second one; a running member whose
 * migration record does not exist (the start never landed) goes back to pending, to be reserved again.
 */

/** ROUTELOCK_CAMPAIGN_TICK_SECONDS. */
export function campaignSettings(config: Pick<Config, 'campaign'>): CampaignSettings {
  return { tickMs: config.campaign.tickSeconds * 1000 };
}

/** Members read and saved at once. */
const PAGE = MAX_IDS_PER_REQUEST;
/** Migration record reads and starts in flight at once. */
const PARALLEL = 16;
/**
 * A migration unfinished this long is asked of its runner (Durable: a crashed orchestration reads
 * Failed), once every STATUS_ROUND_MS: a production migration runs for hours, and asking the task hub
 * for each of thousands on every tick would cost more than the answer is worth.
 */
const LONG_UNFINISHED_MS = 3_600_000;
const STATUS_ROUND_MS = 600_000;
/** Selection reads another page of routes while fewer members than this (or maxConcurrent) wait. */
const SELECTION_LOW_WATER = 100;

/** What this tick learnt, applied to the record when it saves (re-applied on a lost CAS). */
interface TickFindings {
  /** Write-lock holds (ms) of the members that ended. */
  holds: number[];
  /** Set when a start was refused by a throttling store. */
  throttledReason?: string;
  errors: string[];
  /** When this tick made the campaign's first start. */
  firstStartAt?: number;
}

/** The rules a tick applies: plan.ts's; a seam only so a test can plant a broken one and see it caught. */
export interface TickRules {
  startsAllowed: typeof startsAllowed;
  throttleAfterTick: typeof throttleAfterTick;
}

const planRules: TickRules = { startsAllowed, throttleAfterTick };

export async function campaignTick(
  deps: TickDeps,
  campaignId: string,
  rules: TickRules = planRules,
): Promise<TickResult> {
  const now = deps.now();
  const read = await deps.campaigns.get(campaignId);
  if (!read) throw new RouteLockError('NotFound', `No campaign ${campaignId}.`);
  if (isEnded(read.record.status)) return { done: true, status: read.record.status, nextTickAt: now };

  const findings: TickFindings = { holds: [], errors: [] };
  // the first tick past a 10-minute boundary since the last save asks about the long-unfinished
  const askRunner =
    Math.floor(now / STATUS_ROUND_MS) !== Math.floor(Date.parse(read.record.updatedAt) / STATUS_ROUND_MS);
  await refreshRunning(deps, campaignId, now, askRunner, findings);
  let versioned = read;
  if (read.record.status === 'Cancelling') {
    await cancelMembers(deps, read.record, now, findings);
  } else if (read.record.status === 'Running') {
    let counts = countsFrom(await deps.campaigns.countMembers(campaignId));
    const selected = await selectPage(deps, versioned, counts, findings);
    versioned = selected.versioned;
    counts = { ...counts, pending: counts.pending + selected.added };
    versioned = await startMembers(deps, versioned, counts, now, findings, rules);
  }
  const counts = countsFrom(await deps.campaigns.countMembers(campaignId));
  const saved = await save(deps, versioned, counts, now, findings, rules);
  const status = saved.status;
  const ended = isEnded(status);
  if (findings.firstStartAt !== undefined && saved.firstStartAt === findings.firstStartAt)
    telemetry(deps, 'CampaignStarted', saved);
  if (ended && !isEnded(read.record.status)) telemetry(deps, 'CampaignEnded', saved);
  const nextTickAt = Math.max(now + deps.settings.tickMs, saved.throttle?.until ?? 0);
  return { done: ended, status, nextTickAt };
}

// ---------------------------------------------------------------------------------------------
// b. running members: their migrations' ends
// ---------------------------------------------------------------------------------------------

async function refreshRunning(
  deps: TickDeps,
  campaignId: string,
  now: number,
  askRunner: boolean,
  findings: TickFindings,
): Promise<void> {
  let afterSeq: number | undefined;
  for (;;) {
    const page = await deps.campaigns.members(campaignId, {
      state: 'running',
      limit: PAGE,
      ...(afterSeq === undefined ? {} : { afterSeq }),
    });
    if (page.length === 0) return;
    afterSeq = (page[page.length - 1] as CampaignMember).seq;
    const changed = (
      await inParallel(page, (member) => refreshed(deps, member, now, askRunner, findings))
    ).filter((m): m is CampaignMember => m !== null);
    if (changed.length > 0) await deps.campaigns.saveMembers(campaignId, changed);
    if (page.length < PAGE) return;
  }
}

/** The member as its migration leaves it, or null when nothing changed. */
async function refreshed(
  deps: TickDeps,
  member: CampaignMember,
  now: number,
  askRunner: boolean,
  findings: TickFindings,
): Promise<CampaignMember | null> {
  const migrationId = member.migrationId ?? memberMigrationId(member.campaignId, member.seq);
  let record: MigrationRecord | null;
  try {
    record = await deps.records.get(migrationId);
  } catch (error) {
    findings.errors.push(`reading migration ${migrationId}: ${messageOf(error)}`);
    return null;
  }
  if (record === null) return backToPending(member);
  let status = record.status;
  if (!record.done) {
    if (!askRunner || now - Date.parse(claimedAtOf(record)) <= LONG_UNFINISHED_MS) return null;
    try {
      status = await deps.migrations.status(migrationId);
    } catch (error) {
      findings.errors.push(`status of migration ${migrationId}: ${messageOf(error)}`);
      return null;
    }
    if (!terminalStates.has(status.status)) return null;
  }
  const writeLockMs = writeLockHold(status, now);
  if (writeLockMs !== undefined) findings.holds.push(writeLockMs);
  return {
    ...member,
    migrationId,
    state: memberStateOf(status.status),
    endedAt: endOf(status) ?? now,
    ...(writeLockMs === undefined ? {} : { writeLockMs }),
    ...(status.error === undefined ? {} : { reason: status.error }),
  };
}

/** Marked running, but its start never landed (a crash between the mark and the start): wait again. */
function backToPending(member: CampaignMember): CampaignMember {
  const { migrationId: _id, startedAt: _at, ...rest } = member;
  return { ...rest, state: 'pending' };
}

/** When the migration ended: its last attempt's end (absent on records without attempts). */
function endOf(status: MigrationStatus): number | undefined {
  const last = status.attempts?.[status.attempts.length - 1];
  return last === undefined ? undefined : Date.parse(last.endedAt);
}

/** The write lock's hold: from writeAt to the swap, or to the migration's end when it was released. */
function writeLockHold(status: MigrationStatus, now: number): number | undefined {
  const { writeAt, swappedAt } = status.timeline;
  if (writeAt === null) return undefined;
  const end = swappedAt === null ? (endOf(status) ?? now) : Date.parse(swappedAt);
  return Math.max(0, end - Date.parse(writeAt));
}

// ---------------------------------------------------------------------------------------------
// c. Cancelling: every running migration asked once, the pending cancelled
// ---------------------------------------------------------------------------------------------

async function cancelMembers(
  deps: TickDeps,
  record: CampaignRecord,
  now: number,
  findings: TickFindings,
): Promise<void> {
  const campaignId = record.campaignId;
  const actor: Actor = { id: record.cancelRequestedBy ?? `campaign:${campaignId}` };
  let afterSeq: number | undefined;
  for (;;) {
    const page = await deps.campaigns.members(campaignId, {
      state: 'running',
      limit: PAGE,
      ...(afterSeq === undefined ? {} : { afterSeq }),
    });
    if (page.length === 0) break;
    afterSeq = (page[page.length - 1] as CampaignMember).seq;
    const sent = await inParallel(
      page.filter((m) => m.cancelSent !== true && m.migrationId !== undefined),
      async (member): Promise<CampaignMember | null> => {
        try {
          await deps.migrations.cancel(member.migrationId as string, actor);
        } catch (error) {
          // too late (it ends Completed), gone, or one that cannot be cancelled: it ends on its own
          const settled = ['AlreadySwapped', 'NotFound', 'MigrationNotCancellable'] as const;
          if (!settled.some((code) => isRouteLockError(error, code))) {
            findings.errors.push(`cancelling migration ${member.migrationId}: ${messageOf(error)}`);
            return null;
          }
        }
        return { ...member, cancelSent: true };
      },
    );
    const changed = sent.filter((m): m is CampaignMember => m !== null);
    if (changed.length > 0) await deps.campaigns.saveMembers(campaignId, changed);
    if (page.length < PAGE) break;
  }
  for (;;) {
    const pending = await deps.campaigns.members(campaignId, { state: 'pending', limit: PAGE });
    if (pending.length === 0) return;
    await deps.campaigns.saveMembers(
      campaignId,
      pending.map((m) => ({ ...m, state: 'cancelled', endedAt: now, reason: 'the campaign was cancelled' })),
    );
  }
}

// ---------------------------------------------------------------------------------------------
// d. Running: `from` selection, one page of routes a tick
// ---------------------------------------------------------------------------------------------

type FromSource = Extract<CampaignSource, { kind: 'from' }>;

/**
 * One page of the route list: the routes at the source region become members. The member page is
 * reserved on the record first (pages + 1, reserved + n) so its seqs are this page's alone, then the
 * members are added, then the source's continuation moves on. A crash in between reads the same
 * routes again next tick: they are kept once (addMembers drops a resource it has), at the price of a
 * page reservation.
 */
async function selectPage(
  deps: TickDeps,
  versioned: VersionedCampaign,
  counts: CampaignCounts,
  findings: TickFindings,
): Promise<{ versioned: VersionedCampaign; added: number }> {
  const source = versioned.record.source;
  const none = { versioned, added: 0 };
  if (source.kind !== 'from' || source.done) return none;
  if (counts.pending >= Math.max(versioned.record.limits.maxConcurrent, SELECTION_LOW_WATER)) return none;
  let page;
  try {
    page = await deps.store.list({
      lockedOnly: false,
      limit: PAGE,
      ...(source.continuation === undefined ? {} : { continuation: source.continuation }),
    });
  } catch (error) {
    findings.errors.push(`selecting routes at ${source.region}: ${messageOf(error)}`);
    return none;
  }
  const matching = page.items
    .map((item) => item.doc)
    .filter((doc) => doc.location.region === source.region && !isProbeId(doc.id))
    .map((doc) => doc.id);
  const record = versioned.record;
  const limitRoom = source.limit === undefined ? Number.POSITIVE_INFINITY : source.limit - source.selected;
  const capacityRoom = record.pages >= MAX_CAMPAIGN_PAGES ? 0 : MAX_CAMPAIGN_RESOURCES - record.reserved;
  const room = Math.max(0, Math.min(limitRoom, capacityRoom));
  const taken = matching.slice(0, room);
  // the selection ends here once it has all it may take: its limit, or the campaign's capacity
  const cut = taken.length >= room;
  if (cut && capacityRoom < limitRoom)
    findings.errors.push(`the campaign is full (${MAX_CAMPAIGN_RESOURCES} resources): selection stopped`);
  // the source as this tick read it (a pause meanwhile does not undo a page already taken)
  const sameSelection = (r: CampaignRecord) =>
    r.source.kind === 'from' &&
    !r.source.done &&
    r.source.continuation === source.continuation &&
    r.source.selected === source.selected;

  let current = versioned;
  let added = 0;
  if (taken.length > 0) {
    const reserved = await casLoop(deps, current, (r) =>
      sameSelection(r) && r.pages < MAX_CAMPAIGN_PAGES && r.reserved + taken.length <= MAX_CAMPAIGN_RESOURCES
        ? { ...r, pages: r.pages + 1, reserved: r.reserved + taken.length }
        : null,
    );
    if (!reserved) return { versioned: await mustGet(deps, record.campaignId), added: 0 };
    const pageNo = reserved.before.pages;
    current = reserved.after;
    added = await deps.campaigns.addMembers(
      record.campaignId,
      taken.map((resourceId, i) => ({ seq: pageNo * PAGE + i, resourceId })),
    );
  }
  const advanced = await casLoop(deps, current, (r) => {
    if (!sameSelection(r)) return null;
    const from = r.source as FromSource;
    const { continuation: _old, ...rest } = from;
    return {
      ...r,
      source: {
        ...rest,
        ...(page.continuation === null ? {} : { continuation: page.continuation }),
        selected: from.selected + taken.length,
        done: page.continuation === null || cut,
      },
    };
  });
  return { versioned: advanced ? advanced.after : await mustGet(deps, record.campaignId), added };
}

// ---------------------------------------------------------------------------------------------
// d. Running: starts within the limits
// ---------------------------------------------------------------------------------------------

/** A refusal that no retry changes: the member is skipped (or a conflict) with the reason. */
const skippedCodes = ['NotFound', 'RegionNotAllowed', 'BadRequest'] as const;

async function startMembers(
  deps: TickDeps,
  versioned: VersionedCampaign,
  counts: CampaignCounts,
  now: number,
  findings: TickFindings,
  rules: TickRules,
): Promise<VersionedCampaign> {
  const campaignId = versioned.record.campaignId;
  const allowedBy = (r: CampaignRecord) =>
    rules.startsAllowed({
      limits: r.limits,
      running: counts.running,
      pending: counts.pending,
      recentStarts: r.recentStarts,
      now,
      throttle: r.throttle,
    });
  const wanted = Math.min(allowedBy(versioned.record), PAGE);
  if (wanted <= 0) return versioned;
  const candidates = await deps.campaigns.members(campaignId, { state: 'pending', limit: wanted });
  if (candidates.length === 0) return versioned;

  // reserve first: the batch is on the record before any of its starts is made
  let count = 0;
  const reservation = await casLoop(deps, versioned, (r) => {
    if (r.status !== 'Running') return null;
    count = Math.min(candidates.length, allowedBy(r));
    if (count <= 0) return null;
    return { ...r, recentStarts: [...pruneStarts(r.recentStarts, now), { at: now, count }] };
  });
  if (!reservation) return mustGet(deps, campaignId);
  const chosen = candidates.slice(0, count).map((m): CampaignMember => ({
    ...m,
    state: 'running',
    migrationId: memberMigrationId(campaignId, m.seq),
    startedAt: now,
  }));
  // marked before the starts: a crash now leaves them running under their deterministic ids
  await deps.campaigns.saveMembers(campaignId, chosen);

  const record = reservation.after.record;
  let stopped = false;
  const startOne = async (member: CampaignMember): Promise<CampaignMember> => {
    if (stopped) return backToPending(member);
    try {
      const started = await deps.migrations.start({
        resourceId: member.resourceId,
        target: record.target,
        migrationId: member.migrationId,
        campaignId,
        ...(record.limits.migrationAttempts === undefined
          ? {}
          : { migrationAttempts: record.limits.migrationAttempts }),
      });
      findings.firstStartAt ??= now;
      return { ...member, migrationId: started.migrationId };
    } catch (error) {
      if (skippedCodes.some((code) => isRouteLockError(error, code)))
        return { ...backToPending(member), state: 'skipped', endedAt: now, reason: messageOf(error) };
      if (isRouteLockError(error, 'MigrationInProgress'))
        return { ...backToPending(member), state: 'conflict', endedAt: now, reason: messageOf(error) };
      // a store throttling or down (or a fault this tick cannot name): no more starts this tick
      stopped = true;
      findings.throttledReason ??= messageOf(error);
      findings.errors.push(`starting ${member.resourceId}: ${messageOf(error)}`);
      return backToPending(member);
    }
  };
  // the first alone: a throttling store refuses one start, not a whole parallel round
  const [first, ...rest] = chosen as [CampaignMember, ...CampaignMember[]];
  const outcomes = [await startOne(first), ...(await inParallel(rest, startOne))];
  await deps.campaigns.saveMembers(campaignId, outcomes);
  return reservation.after;
}

// ---------------------------------------------------------------------------------------------
// e. the save
// ---------------------------------------------------------------------------------------------

/**
 * The tick's own fields applied to the record as it stands: counts, the state they lead to, the rate
 * window, the throttle, the histogram, the first start, the last error. A CAS that loses re-reads and
 * applies them again, so an operator's command or new limits saved meanwhile win.
 */
async function save(
  deps: TickDeps,
  versioned: VersionedCampaign,
  counts: CampaignCounts,
  now: number,
  findings: TickFindings,
  rules: TickRules,
): Promise<CampaignRecord> {
  const at = new Date(now).toISOString();
  const apply = (r: CampaignRecord): CampaignRecord => {
    const status = nextCampaignState(r.status, counts, r.source.kind === 'ids' || r.source.done);
    const throttle = rules.throttleAfterTick(r.throttle, now, findings.throttledReason);
    const lastTickError = findings.errors.length === 0 ? undefined : findings.errors.slice(0, 3).join('; ');
    const { throttle: _t, lastTickError: _e, ...rest } = r;
    return {
      ...rest,
      status,
      counts,
      updatedAt: at,
      recentStarts: pruneStarts(r.recentStarts, now),
      writeLockHistogram: findings.holds.reduce(addToHistogram, r.writeLockHistogram),
      ...(throttle === undefined ? {} : { throttle }),
      ...(lastTickError === undefined ? {} : { lastTickError }),
      ...(r.firstStartAt === undefined && findings.firstStartAt === undefined
        ? {}
        : { firstStartAt: r.firstStartAt ?? findings.firstStartAt }),
      ...(isEnded(status) ? { endedAt: r.endedAt ?? at } : {}),
    };
  };
  const saved = await casLoop(deps, versioned, apply);
  return (saved as { after: VersionedCampaign }).after.record;
}

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

/**
 * Replace the record with `change(record)` under its ETag, re-reading and deciding again on a lost
 * race; null when `change` declines (the campaign moved on). `before` is the record it was applied to.
 */
export async function casLoop(
  deps: Pick<TickDeps, 'campaigns'>,
  versioned: VersionedCampaign,
  change: (record: CampaignRecord) => CampaignRecord | null,
): Promise<{ before: CampaignRecord; after: VersionedCampaign } | null> {
  let current = versioned;
  for (let i = 0; ; i += 1) {
    const next = change(current.record);
    if (next === null) return null;
    const replaced = await deps.campaigns.replace(next, current.etag);
    if (replaced) return { before: current.record, after: replaced };
    if (i >= 50)
      throw new RouteLockError(
        'PreconditionFailed',
        `Campaign ${current.record.campaignId} kept changing under ${i} writes; try again.`,
      );
    current = await mustGet(deps, current.record.campaignId);
  }
}

async function mustGet(deps: Pick<TickDeps, 'campaigns'>, campaignId: string): Promise<VersionedCampaign> {
  const read = await deps.campaigns.get(campaignId);
  if (!read) throw new RouteLockError('NotFound', `No campaign ${campaignId}.`);
  return read;
}

/** `work` over `items`, at most PARALLEL at once, results in order. */
async function inParallel<T, R>(items: readonly T[], work: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next;
      next += 1;
      results[i] = await work(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL, items.length) }, worker));
  return results;
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** Small: who, what, the counts. Never a credential (the record holds none). */
function telemetry(deps: TickDeps, name: 'CampaignStarted' | 'CampaignEnded', record: CampaignRecord): void {
  const { total, pending, running, completed, noOp, failed, conflict, cancelled, skipped } = record.counts;
  deps.sink?.event({
    name,
    properties: { campaignId: record.campaignId, status: record.status, targetRegion: record.target.region },
    measurements: { total, pending, running, completed, noOp, failed, conflict, cancelled, skipped },
  });
}
