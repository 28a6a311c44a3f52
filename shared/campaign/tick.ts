import { randomUUID } from 'node:crypto';
import type { Actor } from '../audit';
import type { Config } from '../config';
import { RouteLockError, isRouteLockError } from '../errors';
import { claimedAtOf, type MigrationRecord } from '../migration/records';
import { type MigrationStatus, terminalStates } from '../migration/types';
import type { LocationDocument, StoredDocument } from '../lock/document';
import { isProbeId } from '../probe';
import type { TelemetryEvent } from '../telemetry/lockTelemetry';
import { EVENT_KEY } from '../telemetry/names';
import type { VersionedCampaign } from '../store/ports/campaigns';
import {
  addToHistogram,
  afterStartError,
  countsFrom,
  isEnded,
  isJoined,
  leaseAllows,
  leaseLeftForStart,
  MAX_START_FAILURES,
  memberStateOf,
  nextCampaignState,
  pruneStarts,
  sourceDone,
  dueForCheck,
  startLost,
  startsAllowed,
  throttleAfterTick,
  TICK_LEASE_MS,
} from './plan';
import type { CampaignSettings, TickDeps, TickResult } from './service';
import {
  type CampaignCounts,
  type CampaignMember,
  type CampaignRecord,
  type CampaignSource,
  type MemberState,
  MAX_CAMPAIGN_RESOURCES,
  MAX_IDS_PER_REQUEST,
  memberMigrationId,
  type TickLease,
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
 *
 * Overlapping ticks (a redelivered Durable activity, a second ticker): a tick first takes a lease on
 * the record (compare-and-swap; TICK_LEASE_MS), and one that finds another's live lease returns at once.
 * Each record write of the tick checks it still holds the lease; it makes no start with less than
 * TICK_LEASE_MARGIN_MS of it left by its own clock; and "no migration record: back to pending" applies
 * only to members marked longer ago than a lease, so no later tick takes a start still in flight for
 * lost. Residual: a start that takes longer than the margin to land (plus the clock skew between the
 * two hosts) after a tick overran its lease can be put back to pending and a further member started in
 * its place, one over maxConcurrent until the next tick counts it; the start itself joins by its
 * deterministic id, so no resource is migrated twice.
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
  /** Durations (ms, start to end) of the migrations that ended. */
  durations: number[];
  /** Start instants of the members left running (for the ETA's elapsed time). */
  runningStarts: number[];
}

/** The rules a tick applies: plan.ts's; a seam only so a test can plant a broken one and see it caught. */
export interface TickRules {
  startsAllowed: typeof startsAllowed;
  throttleAfterTick: typeof throttleAfterTick;
  /** Absent: plan.ts's. */
  leaseAllows?: typeof leaseAllows;
}

const planRules: TickRules = { startsAllowed, throttleAfterTick, leaseAllows };

/**
 * The members' counts, taken once a tick (after the refresh) and kept up with the tick's own changes;
 * `under` is what the record's member slots were when they were taken. An append changes those (its
 * reservation), so a save that finds them changed, or counts gone off, counts again before deciding.
 */
interface Tally {
  counts: CampaignCounts;
  under: Pick<CampaignRecord, 'reserved' | 'pages'>;
  stale: boolean;
}

async function tallyNow(
  deps: TickDeps,
  campaignId: string,
): Promise<{ versioned: VersionedCampaign; tally: Tally }> {
  const versioned = await mustGet(deps, campaignId);
  const counts = countsFrom(await deps.campaigns.countMembers(campaignId));
  const { reserved, pages } = versioned.record;
  return { versioned, tally: { counts, under: { reserved, pages }, stale: false } };
}

/** Members moved from pending to `state` by this tick. */
function movedFromPending(tally: Tally, state: MemberState, n: number): void {
  if (n > tally.counts.pending) tally.stale = true;
  tally.counts = { ...tally.counts, pending: tally.counts.pending - n, [state]: tally.counts[state] + n };
}

/** The lease this tick holds, and the checks of it. */
interface Held {
  lease: TickLease;
  /** Whether the record (as it stands) still lets this tick write. */
  allows: (record: CampaignRecord) => boolean;
}

export async function campaignTick(
  deps: TickDeps,
  campaignId: string,
  rules: TickRules = planRules,
): Promise<TickResult> {
  const now = deps.now();
  const read = await deps.campaigns.get(campaignId);
  if (!read) throw new RouteLockError('NotFound', `No campaign ${campaignId}.`);
  if (isEnded(read.record.status)) return { done: true, status: read.record.status, nextTickAt: now };

  // the lease first: while another tick holds it, this one does nothing and asks to tick again soon
  const owner = randomUUID();
  const lease: TickLease = { owner, until: now + TICK_LEASE_MS };
  const allowsOf = rules.leaseAllows ?? leaseAllows;
  const held: Held = { lease, allows: (r) => allowsOf(r.tickLease, owner, deps.now()) };
  let standing: TickLease | undefined;
  const taken = await casLoop(deps, read, (r) => {
    if (isEnded(r.status)) return null;
    if (!held.allows(r)) {
      standing = r.tickLease;
      return null;
    }
    return { ...r, tickLease: lease };
  });
  if (!taken) return notNow(deps, campaignId, now, standing);

  const findings: TickFindings = { holds: [], errors: [], durations: [], runningStarts: [] };
  // the first tick past a 10-minute boundary since the last save asks about the long-unfinished
  const askRunner =
    Math.floor(now / STATUS_ROUND_MS) !== Math.floor(Date.parse(read.record.updatedAt) / STATUS_ROUND_MS);
  const work = async (): Promise<CampaignRecord | null> => {
    await refreshRunning(deps, campaignId, now, Date.parse(read.record.updatedAt), askRunner, findings);
    // counted once a tick: every step below only moves members this tick knows of
    const counted = await tallyNow(deps, campaignId);
    const { tally } = counted;
    let versioned = counted.versioned;
    if (versioned.record.status === 'Cancelling') {
      await cancelMembers(deps, versioned.record, findings);
      movedFromPending(tally, 'cancelled', await cancelPendingMembers(deps.campaigns, campaignId, now));
    } else if (versioned.record.status === 'Running') {
      const selected = await selectPage(deps, versioned, tally.counts, findings, held);
      versioned = selected.versioned;
      if (selected.slots !== undefined) {
        const { before, after } = selected.slots;
        // an append between the count and this reservation: its members are not in the counts
        if (before.reserved !== tally.under.reserved || before.pages !== tally.under.pages)
          tally.stale = true;
        tally.under = after;
      }
      const { pending, total } = tally.counts;
      tally.counts = { ...tally.counts, pending: pending + selected.added, total: total + selected.added };
      const started = await startMembers(deps, versioned, tally.counts, now, findings, rules, held);
      versioned = started.versioned;
      for (const m of started.outcomes) if (m.state !== 'pending') movedFromPending(tally, m.state, 1);
    }
    return save(deps, versioned, tally, now, findings, rules, held);
  };
  let saved: CampaignRecord | null;
  try {
    saved = await work();
  } catch (error) {
    // a tick that failed (the runner retries it) gives its lease back rather than make the retry wait
    await releaseLease(deps, campaignId, owner).catch(() => undefined);
    throw error;
  }
  // another tick took the campaign meanwhile (this one overran its lease): that one saves
  if (saved === null) return notNow(deps, campaignId, now, undefined);
  const status = saved.status;
  const ended = isEnded(status);
  if (findings.firstStartAt !== undefined && saved.firstStartAt === findings.firstStartAt)
    telemetry(deps, 'CampaignStarted', saved);
  if (ended && !isEnded(read.record.status)) telemetry(deps, 'CampaignEnded', saved);
  const nextTickAt = Math.max(now + deps.settings.tickMs, saved.throttle?.until ?? 0);
  return { done: ended, status, nextTickAt };
}

/** The lease back, if this tick still holds it (best effort: one not given back runs out). */
async function releaseLease(deps: TickDeps, campaignId: string, owner: string): Promise<void> {
  const current = await deps.campaigns.get(campaignId);
  if (!current) return;
  await casLoop(deps, current, (r) => {
    if (r.tickLease?.owner !== owner) return null;
    const { tickLease: _l, ...rest } = r;
    return rest;
  });
}

/** Another tick holds the campaign: tick again soon (by the lease's end at the latest). */
async function notNow(
  deps: TickDeps,
  campaignId: string,
  now: number,
  standing: TickLease | undefined,
): Promise<TickResult> {
  const current = await mustGet(deps, campaignId);
  const status = current.record.status;
  if (isEnded(status)) return { done: true, status, nextTickAt: now };
  const soon = now + deps.settings.tickMs;
  return { done: false, status, nextTickAt: standing === undefined ? soon : Math.min(soon, standing.until) };
}

// ---------------------------------------------------------------------------------------------
// b. running members: their migrations' ends
// ---------------------------------------------------------------------------------------------

async function refreshRunning(
  deps: TickDeps,
  campaignId: string,
  now: number,
  lastTickAt: number,
  askRunner: boolean,
  findings: TickFindings,
): Promise<void> {
  for await (const page of runningPages(deps, campaignId)) {
    // a member not due for a read this tick is still running (its start counts for the ETA); the tick
    // that asks about the long-unfinished reads every one
    const outcomes = await inParallel(page, (member) =>
      askRunner || dueForCheck(member.startedAt, now, lastTickAt, deps.settings.tickMs)
        ? refreshed(deps, member, now, askRunner, findings)
        : Promise.resolve(null),
    );
    page.forEach((member, i) => {
      if (outcomes[i] === null && member.startedAt !== undefined)
        findings.runningStarts.push(member.startedAt);
    });
    const changed = outcomes.filter((m): m is CampaignMember => m !== null);
    if (changed.length > 0) await deps.campaigns.saveMembers(campaignId, changed);
  }
}

/** The running members a page at a time, in seq order (a page saved meanwhile does not move the cursor). */
async function* runningPages(deps: TickDeps, campaignId: string): AsyncGenerator<CampaignMember[]> {
  let afterSeq: number | undefined;
  for (;;) {
    const page = await deps.campaigns.members(campaignId, {
      state: 'running',
      limit: PAGE,
      ...(afterSeq === undefined ? {} : { afterSeq }),
    });
    if (page.length === 0) return;
    yield page;
    if (page.length < PAGE) return;
    afterSeq = (page[page.length - 1] as CampaignMember).seq;
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
  if (record === null) return startLost(member.startedAt, now) ? backToPending(member) : null;
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
  const endedAt = endOf(status) ?? now;
  if (member.startedAt !== undefined) findings.durations.push(Math.max(0, endedAt - member.startedAt));
  return {
    ...member,
    migrationId,
    state: memberStateOf(status.status),
    endedAt,
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

async function cancelMembers(deps: TickDeps, record: CampaignRecord, findings: TickFindings): Promise<void> {
  const campaignId = record.campaignId;
  const actor: Actor = { id: record.cancelRequestedBy ?? `campaign:${campaignId}` };
  for await (const page of runningPages(deps, campaignId)) {
    const sent = await inParallel(
      // a member that joined another's migration is watched to its end, never cancelled by this campaign
      page.filter((m) => m.cancelSent !== true && m.migrationId !== undefined && !isJoined(m)),
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
  }
}

/**
 * A cancelled campaign's pending members, cancelled: how many. The Cancelling tick calls it, and so does
 * an append that finds the campaign Cancelled after its members landed (reserved before the cancel).
 */
export async function cancelPendingMembers(
  campaigns: TickDeps['campaigns'],
  campaignId: string,
  now: number,
): Promise<number> {
  let cancelled = 0;
  for (;;) {
    const pending = await campaigns.members(campaignId, { state: 'pending', limit: PAGE });
    if (pending.length === 0) return cancelled;
    await campaigns.saveMembers(
      campaignId,
      pending.map((m) => ({ ...m, state: 'cancelled', endedAt: now, reason: 'the campaign was cancelled' })),
    );
    cancelled += pending.length;
  }
}

// ---------------------------------------------------------------------------------------------
// d. Running: `from` selection, one page of routes a tick
// ---------------------------------------------------------------------------------------------

type FromSource = Extract<CampaignSource, { kind: 'from' }>;

/**
 * One page of a `from: {region}` selection: the listed routes now at the region (never the probe's),
 * and where the list goes on (null: its end). The tick and the campaign's dry run both read it.
 */
export async function selectionPage(
  store: Pick<TickDeps['store'], 'list'>,
  region: string,
  continuation: string | undefined,
): Promise<{ routes: LocationDocument[]; versions: StoredDocument[]; continuation: string | null }> {
  const page = await store.list({
    lockedOnly: false,
    limit: PAGE,
    ...(continuation === undefined ? {} : { continuation }),
  });
  // the listed copies with their ETags: the members' starts pass them on (issue 20 §5)
  const versions = page.items.filter(({ doc }) => doc.location.region === region && !isProbeId(doc.id));
  return { routes: versions.map((item) => item.doc), versions, continuation: page.continuation };
}

/**
 * One page of the route list: the routes at the source region become members. Their slots are
 * reserved on the record first (pages + 1, reserved + n; seqs reserved + index) so its seqs are this page's alone, then the
 * members are added, then the source's continuation moves on. A crash in between reads the same
 * routes again next tick: they are kept once (addMembers drops a resource it has), at the price of a
 * page reservation.
 */
async function selectPage(
  deps: TickDeps,
  versioned: VersionedCampaign,
  counts: CampaignCounts,
  findings: TickFindings,
  held: Held,
): Promise<{
  versioned: VersionedCampaign;
  added: number;
  /** The record's member slots before and after this page's reservation, when it made one. */
  slots?: { before: Tally['under']; after: Tally['under'] };
}> {
  const source = versioned.record.source;
  const none = { versioned, added: 0 };
  if (source.kind !== 'from' || source.done) return none;
  if (counts.pending >= Math.max(versioned.record.limits.maxConcurrent, SELECTION_LOW_WATER)) return none;
  let page;
  try {
    page = await selectionPage(deps.store, source.region, source.continuation);
  } catch (error) {
    findings.errors.push(`selecting routes at ${source.region}: ${messageOf(error)}`);
    return none;
  }
  const matching = page.routes.map((doc) => doc.id);
  const etagOf = new Map(page.versions.map((item) => [item.doc.id, item.etag]));
  // this process's router holds them: a member started here decides its pre-lock on the listed copy
  deps.router.holdVersions(page.versions);
  const record = versioned.record;
  const limitRoom = source.limit === undefined ? Number.POSITIVE_INFINITY : source.limit - source.selected;
  const capacityRoom = MAX_CAMPAIGN_RESOURCES - record.reserved;
  const room = Math.max(0, Math.min(limitRoom, capacityRoom));
  const taken = matching.slice(0, room);
  // the selection ends here once it has all it may take: its limit, or the campaign's capacity
  const cut = taken.length >= room;
  if (cut && capacityRoom < limitRoom)
    findings.errors.push(`the campaign is full (${MAX_CAMPAIGN_RESOURCES} resources): selection stopped`);
  // the source as this tick read it (a pause meanwhile does not undo a page already taken)
  const sameSelection = (r: CampaignRecord) =>
    held.allows(r) &&
    r.source.kind === 'from' &&
    !r.source.done &&
    r.source.continuation === source.continuation &&
    r.source.selected === source.selected;

  let current = versioned;
  let added = 0;
  let slots: { before: Tally['under']; after: Tally['under'] } | undefined;
  if (taken.length > 0) {
    const reserved = await casLoop(deps, current, (r) =>
      sameSelection(r) && r.reserved + taken.length <= MAX_CAMPAIGN_RESOURCES
        ? { ...r, pages: r.pages + 1, reserved: r.reserved + taken.length }
        : null,
    );
    if (!reserved) return { versioned: await mustGet(deps, record.campaignId), added: 0 };
    const first = reserved.before.reserved;
    current = reserved.after;
    slots = {
      before: { reserved: first, pages: reserved.before.pages },
      after: { reserved: current.record.reserved, pages: current.record.pages },
    };
    added = await deps.campaigns.addMembers(
      record.campaignId,
      taken.map((resourceId, i) => ({ seq: first + i, resourceId, routeEtag: etagOf.get(resourceId) })),
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
  return {
    versioned: advanced ? advanced.after : await mustGet(deps, record.campaignId),
    added,
    ...(slots === undefined ? {} : { slots }),
  };
}

// ---------------------------------------------------------------------------------------------
// d. Running: starts within the limits
// ---------------------------------------------------------------------------------------------

async function startMembers(
  deps: TickDeps,
  versioned: VersionedCampaign,
  counts: CampaignCounts,
  now: number,
  findings: TickFindings,
  rules: TickRules,
  held: Held,
): Promise<{ versioned: VersionedCampaign; outcomes: CampaignMember[] }> {
  const campaignId = versioned.record.campaignId;
  const none = { versioned, outcomes: [] };
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
  if (wanted <= 0) return none;
  const candidates = await deps.campaigns.members(campaignId, { state: 'pending', limit: wanted });
  if (candidates.length === 0) return none;

  // reserve first: the batch is on the record before any of its starts is made
  let count = 0;
  const reservation = await casLoop(deps, versioned, (r) => {
    if (r.status !== 'Running' || !held.allows(r)) return null;
    count = Math.min(candidates.length, allowedBy(r));
    if (count <= 0) return null;
    return { ...r, recentStarts: [...pruneStarts(r.recentStarts, now), { at: now, count }] };
  });
  if (!reservation) return { versioned: await mustGet(deps, campaignId), outcomes: [] };
  const markedAt = deps.now();
  const chosen = candidates.slice(0, count).map((m): CampaignMember => ({
    ...m,
    state: 'running',
    migrationId: memberMigrationId(campaignId, m.seq),
    startedAt: markedAt,
  }));
  // marked before the starts: a crash now leaves them running under their deterministic ids
  await deps.campaigns.saveMembers(campaignId, chosen);

  const record = reservation.after.record;
  let stopped = false;
  const startOne = async (member: CampaignMember): Promise<CampaignMember> => {
    if (stopped) return backToPending(member);
    if (!leaseLeftForStart(held.lease, deps.now())) {
      // too little of the lease left for this start to land before another tick may take over
      stopped = true;
      findings.errors.push('the tick ran short of its lease: the next tick goes on with the starts');
      return backToPending(member);
    }
    try {
      const started = await deps.migrations.start({
        resourceId: member.resourceId,
        target: record.target,
        migrationId: member.migrationId,
        campaignId,
        ...(record.limits.migrationAttempts === undefined
          ? {}
          : { migrationAttempts: record.limits.migrationAttempts }),
        ...(record.window === undefined ? {} : { window: record.window }),
        ...(member.routeEtag === undefined ? {} : { routeEtag: member.routeEtag }),
      });
      findings.firstStartAt ??= now;
      const { startFailures: _f, ...ok } = member;
      return { ...ok, migrationId: started.migrationId };
    } catch (error) {
      const failures = member.startFailures ?? 0;
      const { outcome, counted } = afterStartError(error, failures);
      if (outcome === 'conflict')
        return { ...backToPending(member), state: 'conflict', endedAt: now, reason: messageOf(error) };
      if (outcome === 'skipped') {
        const { startFailures: _f, ...rest } = backToPending(member);
        const reason = counted
          ? `${MAX_START_FAILURES} starts in a row failed; the last: ${messageOf(error)}`
          : messageOf(error);
        // the error's code too: what the campaign's status counts its skips by
        const reasonCode = isRouteLockError(error) ? error.code : 'StartFailed';
        return { ...rest, state: 'skipped', endedAt: now, reason, reasonCode };
      }
      // a store throttling or down: no more starts this tick, and this member's failures counted
      stopped = true;
      findings.throttledReason ??= messageOf(error);
      findings.errors.push(`starting ${member.resourceId}: ${messageOf(error)}`);
      return counted ? { ...backToPending(member), startFailures: failures + 1 } : backToPending(member);
    }
  };
  // the first alone: a throttling store refuses one start, not a whole parallel round
  const [first, ...rest] = chosen as [CampaignMember, ...CampaignMember[]];
  const outcomes = [await startOne(first), ...(await inParallel(rest, startOne))];
  await deps.campaigns.saveMembers(campaignId, outcomes);
  for (const m of outcomes) if (m.state === 'running') findings.runningStarts.push(markedAt);
  return { versioned: reservation.after, outcomes };
}

// ---------------------------------------------------------------------------------------------
// e. the save
// ---------------------------------------------------------------------------------------------

/**
 * The tick's own fields applied to the record as it stands: counts, the state they lead to, the rate
 * window, the throttle, the histogram, the first start, the last error. A CAS that loses re-reads and
 * applies them again, so an operator's command or new limits saved meanwhile win; when an append moved
 * the member slots since the count (or the counts went off), it counts again first, so no member an
 * append added is missed by the state it decides (Completed with a member pending).
 */
async function save(
  deps: TickDeps,
  versioned: VersionedCampaign,
  tally: Tally,
  now: number,
  findings: TickFindings,
  rules: TickRules,
  held: Held,
): Promise<CampaignRecord | null> {
  const at = new Date(now).toISOString();
  const { durations, runningStarts } = findings;
  const apply = (r: CampaignRecord, counts: CampaignCounts): CampaignRecord => {
    const status = nextCampaignState(r.status, counts, sourceDone(r.source, counts.total));
    const throttle = rules.throttleAfterTick(r.throttle, now, findings.throttledReason);
    const lastTickError = findings.errors.length === 0 ? undefined : findings.errors.slice(0, 3).join('; ');
    // the lease is released here: the next tick need not wait for it to run out
    const { throttle: _t, lastTickError: _e, tickLease: _l, runningStartedAt: _r, ...rest } = r;
    const ended = r.endedMigrations ?? { count: 0, totalMs: 0 };
    return {
      ...rest,
      status,
      counts,
      updatedAt: at,
      recentStarts: pruneStarts(r.recentStarts, now),
      writeLockHistogram: findings.holds.reduce(addToHistogram, r.writeLockHistogram),
      ...(durations.length === 0 && r.endedMigrations === undefined
        ? {}
        : {
            endedMigrations: {
              count: ended.count + durations.length,
              totalMs: ended.totalMs + durations.reduce((a, b) => a + b, 0),
            },
          }),
      ...(runningStarts.length === 0
        ? {}
        : { runningStartedAt: Math.round(runningStarts.reduce((a, b) => a + b, 0) / runningStarts.length) }),
      ...(throttle === undefined ? {} : { throttle }),
      ...(lastTickError === undefined ? {} : { lastTickError }),
      ...(r.firstStartAt === undefined && findings.firstStartAt === undefined
        ? {}
        : { firstStartAt: r.firstStartAt ?? findings.firstStartAt }),
      ...(isEnded(status) ? { endedAt: r.endedAt ?? at } : {}),
    };
  };
  let current = versioned;
  let counted = tally;
  for (let round = 0; ; round += 1) {
    let moved = false;
    const saved = await casLoop(deps, current, (r) => {
      if (!held.allows(r)) return null;
      moved = counted.stale || r.reserved !== counted.under.reserved || r.pages !== counted.under.pages;
      return moved ? null : apply(r, counted.counts);
    });
    if (!moved) return saved === null ? null : saved.after.record;
    if (round >= 50)
      throw new RouteLockError(
        'PreconditionFailed',
        `Campaign ${versioned.record.campaignId} kept gaining members under ${round} counts; try again.`,
      );
    ({ versioned: current, tally: counted } = await tallyNow(deps, versioned.record.campaignId));
  }
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
export async function inParallel<T, R>(items: readonly T[], work: (item: T) => Promise<R>): Promise<R[]> {
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

function telemetry(deps: TickDeps, name: 'CampaignStarted' | 'CampaignEnded', record: CampaignRecord): void {
  deps.sink?.event(campaignEvent(name, record));
}

/**
 * Small: who, what, the counts. Never a credential (the record holds none). Keyed on the campaign
 * (`${name}:${campaignId}`, docs/design.md §8.1): a campaign starts and ends once, and a tick the runner
 * delivers again emits the same key, which the recorder and the workbook count once.
 */
export function campaignEvent(
  name: 'CampaignStarted' | 'CampaignEnded',
  record: CampaignRecord,
): TelemetryEvent {
  const { total, pending, running, completed, noOp, failed, conflict, cancelled, skipped } = record.counts;
  return {
    name,
    properties: {
      // A completed campaign reopens when resources are added and ends again: each end is its own.
      [EVENT_KEY]:
        name === 'CampaignEnded'
          ? `${name}:${record.campaignId}:${record.endedAt ?? record.updatedAt}`
          : `${name}:${record.campaignId}`,
      campaignId: record.campaignId,
      status: record.status,
      targetRegion: record.target.region,
    },
    measurements: { total, pending, running, completed, noOp, failed, conflict, cancelled, skipped },
  };
}
