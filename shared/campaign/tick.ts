import { randomUUID } from 'node:crypto';
import type { Actor } from '../core/audit';
import type { CampaignConfig } from './settings';
import { RouteLockError, isRouteLockError } from '../core/errors';
import { claimedAtOf, type MigrationRecord } from '../migration/records';
import { type MigrationStatus, terminalStates } from '../migration/types';
import { type LocationDocument, type StoredDocument, carriedVersion } from '../core/lock/document';
import { isProbeId } from '../migration/probe';
import type { TelemetryEvent } from '../migration/telemetry/lockTelemetry';
import { EVENT_KEY } from '../migration/telemetry/names';
import type { VersionedCampaign } from './store/ports/campaigns';
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
 * One tick of a campaign: refresh its running members from their migration records,
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
export function campaignSettings(config: { campaign: CampaignConfig }): CampaignSettings {
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

/**
 * What a step of the tick found, applied to the record when it saves (again on a lost CAS). Each step
 * returns its own; the tick combines them in step order (`combined`).
 */
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

const nothingFound: TickFindings = { holds: [], errors: [], durations: [], runningStarts: [] };

/** Findings of only the fields named. */
const found = (some: Partial<TickFindings>): TickFindings => ({ ...nothingFound, ...some });

/** Findings in step order: the lists joined, the first throttle reason and the first start kept. */
function combined(...all: readonly TickFindings[]): TickFindings {
  const throttledReason = all.find((f) => f.throttledReason !== undefined)?.throttledReason;
  const firstStartAt = all.find((f) => f.firstStartAt !== undefined)?.firstStartAt;
  return {
    holds: all.flatMap((f) => f.holds),
    errors: all.flatMap((f) => f.errors),
    durations: all.flatMap((f) => f.durations),
    runningStarts: all.flatMap((f) => f.runningStarts),
    ...(throttledReason === undefined ? {} : { throttledReason }),
    ...(firstStartAt === undefined ? {} : { firstStartAt }),
  };
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
 * reservation), so a save that finds them changed, or counts gone off (`stale`), counts again before
 * deciding.
 */
interface Tally {
  counts: CampaignCounts;
  under: Pick<CampaignRecord, 'reserved' | 'pages'>;
  stale: boolean;
}

/** The record with the members' counts taken under it. */
interface Counted {
  versioned: VersionedCampaign;
  tally: Tally;
}

/** The record and the counts as a step leaves them, and what the step found. */
interface Stepped extends Counted {
  findings: TickFindings;
}

async function tallyNow(deps: TickDeps, campaignId: string): Promise<Counted> {
  const versioned = await mustGet(deps, campaignId);
  const counts = countsFrom(await deps.campaigns.countMembers(campaignId));
  const { reserved, pages } = versioned.record;
  return { versioned, tally: { counts, under: { reserved, pages }, stale: false } };
}

/** The tally with `n` members moved from pending to `state` by this tick. */
function movedFromPending(tally: Tally, state: MemberState, n: number): Tally {
  return {
    ...tally,
    stale: tally.stale || n > tally.counts.pending,
    counts: { ...tally.counts, pending: tally.counts.pending - n, [state]: tally.counts[state] + n },
  };
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
  const leased = await takeLease(deps, read, now, rules);
  if (leased.held === null) return notNow(deps, campaignId, now, leased.standing);
  const { held } = leased;
  const { saved, findings } = await tickSteps(deps, read, now, rules, held).catch(async (error: unknown) => {
    // a tick that failed (the runner retries it) gives its lease back rather than make the retry wait
    await releaseLease(deps, campaignId, held.lease.owner).catch(() => undefined);
    throw error;
  });
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

/** This tick's lease taken on the record; else none, and the live lease another tick holds (if any). */
async function takeLease(
  deps: TickDeps,
  read: VersionedCampaign,
  now: number,
  rules: TickRules,
): Promise<{ held: Held } | { held: null; standing: TickLease | undefined }> {
  const owner = randomUUID();
  const lease: TickLease = { owner, until: now + TICK_LEASE_MS };
  const allowsOf = rules.leaseAllows ?? leaseAllows;
  const held: Held = { lease, allows: (r) => allowsOf(r.tickLease, owner, deps.now()) };
  const taken = await casLoop<TickLease | undefined>(deps, read, (r) => {
    if (isEnded(r.status)) return { next: null, note: undefined };
    if (!held.allows(r)) return { next: null, note: r.tickLease };
    return { next: { ...r, tickLease: lease }, note: undefined };
  });
  return taken.after === null ? { held: null, standing: taken.note } : { held };
}

/**
 * The tick's steps under its lease: the running members refreshed, counted once (every step after
 * only moves members this tick knows of), then cancel (Cancelling) or select and start (Running), then
 * the save. The record saved (null: another tick took the campaign meanwhile) and what the steps found.
 */
async function tickSteps(
  deps: TickDeps,
  read: VersionedCampaign,
  now: number,
  rules: TickRules,
  held: Held,
): Promise<{ saved: CampaignRecord | null; findings: TickFindings }> {
  const campaignId = read.record.campaignId;
  const lastSaveAt = Date.parse(read.record.updatedAt);
  // the first tick past a 10-minute boundary since the last save asks about the long-unfinished
  const askRunner = Math.floor(now / STATUS_ROUND_MS) !== Math.floor(lastSaveAt / STATUS_ROUND_MS);
  const refreshed = await refreshRunning(deps, campaignId, now, lastSaveAt, askRunner);
  const counted = await tallyNow(deps, campaignId);
  const status = counted.versioned.record.status;
  const stepped =
    status === 'Cancelling'
      ? await cancelStep(deps, counted, now)
      : status === 'Running'
        ? await runningStep(deps, counted, now, rules, held)
        : { ...counted, findings: nothingFound };
  const findings = combined(refreshed, stepped.findings);
  return { saved: await save(deps, stepped, now, findings, rules, held), findings };
}

/** The lease back, if this tick still holds it (best effort: one not given back runs out). */
async function releaseLease(deps: TickDeps, campaignId: string, owner: string): Promise<void> {
  const current = await deps.campaigns.get(campaignId);
  if (!current) return;
  await casLoop(deps, current, (r) => {
    if (r.tickLease?.owner !== owner) return { next: null, note: undefined };
    const { tickLease: _l, ...rest } = r;
    return { next: rest, note: undefined };
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

/** A running member's refresh: the member as its migration leaves it (null: nothing changed), and what it found. */
interface Refresh {
  changed: CampaignMember | null;
  findings: TickFindings;
}

const unchanged: Refresh = { changed: null, findings: nothingFound };

async function refreshRunning(
  deps: TickDeps,
  campaignId: string,
  now: number,
  lastTickAt: number,
  askRunner: boolean,
): Promise<TickFindings> {
  let findings = nothingFound;
  for await (const page of runningPages(deps, campaignId)) {
    // a member not due for a read this tick is still running (its start counts for the ETA); the tick
    // that asks about the long-unfinished reads every one
    const outcomes = await inParallel(page, (member) =>
      askRunner || dueForCheck(member.startedAt, now, lastTickAt, deps.settings.tickMs)
        ? refreshed(deps, member, now, askRunner)
        : Promise.resolve(unchanged),
    );
    const stillRunning = page.flatMap((member, i) =>
      (outcomes[i] as Refresh).changed === null && member.startedAt !== undefined ? [member.startedAt] : [],
    );
    findings = combined(findings, ...outcomes.map((o) => o.findings), found({ runningStarts: stillRunning }));
    const changed = outcomes.flatMap((o) => (o.changed === null ? [] : [o.changed]));
    if (changed.length > 0) await deps.campaigns.saveMembers(campaignId, changed);
  }
  return findings;
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

/** A running member refreshed from its migration's record (and, when long unfinished, its runner). */
async function refreshed(
  deps: TickDeps,
  member: CampaignMember,
  now: number,
  askRunner: boolean,
): Promise<Refresh> {
  const migrationId = member.migrationId ?? memberMigrationId(member.campaignId, member.seq);
  const failed = (what: string, error: unknown): Refresh => ({
    changed: null,
    findings: found({ errors: [`${what} ${migrationId}: ${messageOf(error)}`] }),
  });
  let record: MigrationRecord | null;
  try {
    record = await deps.records.get(migrationId);
  } catch (error) {
    return failed('reading migration', error);
  }
  if (record === null)
    return {
      changed: startLost(member.startedAt, now) ? backToPending(member) : null,
      findings: nothingFound,
    };
  if (record.done) return endedMember(member, migrationId, record.status, now);
  if (!askRunner || now - Date.parse(claimedAtOf(record)) <= LONG_UNFINISHED_MS) return unchanged;
  let status: MigrationStatus;
  try {
    status = await deps.migrations.status(migrationId);
  } catch (error) {
    return failed('status of migration', error);
  }
  return terminalStates.has(status.status) ? endedMember(member, migrationId, status, now) : unchanged;
}

/** A member whose migration ended: its end, and the hold and duration the histogram and the ETA count. */
function endedMember(
  member: CampaignMember,
  migrationId: string,
  status: MigrationStatus,
  now: number,
): Refresh {
  const writeLockMs = writeLockHold(status, now);
  const endedAt = endOf(status) ?? now;
  return {
    changed: {
      ...member,
      migrationId,
      state: memberStateOf(status.status),
      endedAt,
      ...(writeLockMs === undefined ? {} : { writeLockMs }),
      ...(status.error === undefined ? {} : { reason: status.error }),
    },
    findings: found({
      holds: writeLockMs === undefined ? [] : [writeLockMs],
      durations: member.startedAt === undefined ? [] : [Math.max(0, endedAt - member.startedAt)],
    }),
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

async function cancelStep(deps: TickDeps, { versioned, tally }: Counted, now: number): Promise<Stepped> {
  const errors = await cancelMembers(deps, versioned.record);
  const cancelled = await cancelPendingMembers(deps.campaigns, versioned.record.campaignId, now);
  return { versioned, tally: movedFromPending(tally, 'cancelled', cancelled), findings: found({ errors }) };
}

/** Every running member's migration asked to cancel once: the errors of the asks that failed. */
async function cancelMembers(deps: TickDeps, record: CampaignRecord): Promise<string[]> {
  const campaignId = record.campaignId;
  const actor: Actor = { id: record.cancelRequestedBy ?? `campaign:${campaignId}` };
  let errors: string[] = [];
  for await (const page of runningPages(deps, campaignId)) {
    const asked = await inParallel(
      // a member that joined another's migration is watched to its end, never cancelled by this campaign
      page.filter((m) => m.cancelSent !== true && m.migrationId !== undefined && !isJoined(m)),
      (member) => cancelOne(deps, member, actor),
    );
    errors = [...errors, ...asked.flatMap((a) => (a.error === undefined ? [] : [a.error]))];
    const changed = asked.flatMap((a) => (a.sent === null ? [] : [a.sent]));
    if (changed.length > 0) await deps.campaigns.saveMembers(campaignId, changed);
  }
  return errors;
}

/** One member's migration asked to cancel: the member marked sent, or (the ask failed) why not. */
async function cancelOne(
  deps: TickDeps,
  member: CampaignMember,
  actor: Actor,
): Promise<{ sent: CampaignMember | null; error?: string }> {
  try {
    await deps.migrations.cancel(member.migrationId as string, actor);
  } catch (error) {
    // too late (it ends Completed), gone, or one that cannot be cancelled: it ends on its own
    const settled = ['AlreadySwapped', 'NotFound', 'MigrationNotCancellable'] as const;
    if (!settled.some((code) => isRouteLockError(error, code)))
      return { sent: null, error: `cancelling migration ${member.migrationId}: ${messageOf(error)}` };
  }
  return { sent: { ...member, cancelSent: true } };
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
// d. Running: a page of the `from` selection, then the starts within the limits
// ---------------------------------------------------------------------------------------------

async function runningStep(
  deps: TickDeps,
  { versioned, tally }: Counted,
  now: number,
  rules: TickRules,
  held: Held,
): Promise<Stepped> {
  const selected = await selectPage(deps, versioned, tally.counts, held);
  const withPage = afterSelection(tally, selected);
  const started = await startMembers(deps, selected.versioned, withPage.counts, now, rules, held);
  const moved = started.outcomes.reduce(
    (t, m) => (m.state === 'pending' ? t : movedFromPending(t, m.state, 1)),
    withPage,
  );
  return {
    versioned: started.versioned,
    tally: moved,
    findings: combined(selected.findings, started.findings),
  };
}

type FromSource = Extract<CampaignSource, { kind: 'from' }>;

/** A page of the selection taken: the record after it, the members it added, what it found. */
interface Selected {
  versioned: VersionedCampaign;
  added: number;
  /** The record's member slots before and after this page's reservation, when it made one. */
  slots?: { before: Tally['under']; after: Tally['under'] };
  findings: TickFindings;
}

/** The tally with a selected page's members pending in it. */
function afterSelection(tally: Tally, selected: Selected): Tally {
  const { pending, total } = tally.counts;
  const counts = { ...tally.counts, pending: pending + selected.added, total: total + selected.added };
  if (selected.slots === undefined) return { ...tally, counts };
  const { before, after } = selected.slots;
  // an append between the count and this reservation: its members are not in the counts
  const appended = before.reserved !== tally.under.reserved || before.pages !== tally.under.pages;
  return { counts, under: after, stale: tally.stale || appended };
}

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
  // the listed copies with their ETags: the members' starts pass them on
  const versions = page.items.filter(({ doc }) => doc.location.region === region && !isProbeId(doc.id));
  return { routes: versions.map((item) => item.doc), versions, continuation: page.continuation };
}

/**
 * One page of the route list: the routes at the source region become members. Their slots are
 * reserved on the record first (pages + 1, reserved + n; seqs reserved + index) so its seqs are this
 * page's alone, then the members are added, then the source's continuation moves on. A crash in between
 * reads the same routes again next tick: they are kept once (addMembers drops a resource it has), at
 * the price of a page reservation.
 */
async function selectPage(
  deps: TickDeps,
  versioned: VersionedCampaign,
  counts: CampaignCounts,
  held: Held,
): Promise<Selected> {
  const { record } = versioned;
  const source = record.source;
  const none: Selected = { versioned, added: 0, findings: nothingFound };
  if (source.kind !== 'from' || source.done) return none;
  if (counts.pending >= Math.max(record.limits.maxConcurrent, SELECTION_LOW_WATER)) return none;
  let page;
  try {
    page = await selectionPage(deps.store, source.region, source.continuation);
  } catch (error) {
    return {
      ...none,
      findings: found({ errors: [`selecting routes at ${source.region}: ${messageOf(error)}`] }),
    };
  }
  const { taken, cut, full } = selectionRoom(
    record,
    source,
    page.routes.map((doc) => doc.id),
  );
  const findings = full
    ? found({ errors: [`the campaign is full (${MAX_CAMPAIGN_RESOURCES} resources): selection stopped`] })
    : nothingFound;
  // the source as this tick read it (a pause meanwhile does not undo a page already taken)
  const sameSelection = (r: CampaignRecord) =>
    held.allows(r) &&
    r.source.kind === 'from' &&
    !r.source.done &&
    r.source.continuation === source.continuation &&
    r.source.selected === source.selected;
  // each member carries its listed copy: its start passes it on, and the pre-lock decides on it
  const listedOf = new Map(page.versions.map((item) => [item.doc.id, carriedVersion(item)]));
  const added =
    taken.length === 0
      ? { versioned, added: 0 }
      : await addPage(deps, versioned, taken, listedOf, sameSelection);
  if (added === null) return { versioned: await mustGet(deps, record.campaignId), added: 0, findings };
  const advanced = await casLoop(deps, added.versioned, (r) => ({
    next: sameSelection(r) ? withSourceAdvanced(r, page.continuation, taken.length, cut) : null,
    note: undefined,
  }));
  return {
    ...added,
    versioned: advanced.after ?? (await mustGet(deps, record.campaignId)),
    findings,
  };
}

/**
 * What a selection takes of a listed page: up to its limit and the campaign's capacity; `cut` when
 * that ends the selection, `full` when the capacity was what ended it.
 */
function selectionRoom(
  record: CampaignRecord,
  source: FromSource,
  matching: readonly string[],
): { taken: string[]; cut: boolean; full: boolean } {
  const limitRoom = source.limit === undefined ? Number.POSITIVE_INFINITY : source.limit - source.selected;
  const capacityRoom = MAX_CAMPAIGN_RESOURCES - record.reserved;
  const room = Math.max(0, Math.min(limitRoom, capacityRoom));
  const taken = matching.slice(0, room);
  // the selection ends here once it has all it may take: its limit, or the campaign's capacity
  const cut = taken.length >= room;
  return { taken, cut, full: cut && capacityRoom < limitRoom };
}

/**
 * A page's member slots reserved on the record, then its members added with their listed copies. Null
 * when the reservation was declined (the selection moved on, or the campaign has no room).
 */
async function addPage(
  deps: TickDeps,
  versioned: VersionedCampaign,
  taken: readonly string[],
  listedOf: ReadonlyMap<string, StoredDocument>,
  sameSelection: (r: CampaignRecord) => boolean,
): Promise<Omit<Selected, 'findings'> | null> {
  const reserved = await casLoop(deps, versioned, (r) => ({
    next:
      sameSelection(r) && r.reserved + taken.length <= MAX_CAMPAIGN_RESOURCES
        ? { ...r, pages: r.pages + 1, reserved: r.reserved + taken.length }
        : null,
    note: undefined,
  }));
  if (reserved.after === null) return null;
  const { before, after } = reserved;
  const added = await deps.campaigns.addMembers(
    before.campaignId,
    taken.map((resourceId, i) => ({
      seq: before.reserved + i,
      resourceId,
      listed: listedOf.get(resourceId),
    })),
  );
  return {
    versioned: after,
    added,
    slots: {
      before: { reserved: before.reserved, pages: before.pages },
      after: { reserved: after.record.reserved, pages: after.record.pages },
    },
  };
}

/** The record with its `from` source moved past a page of `taken` routes. */
function withSourceAdvanced(
  r: CampaignRecord,
  continuation: string | null,
  taken: number,
  cut: boolean,
): CampaignRecord {
  const from = r.source as FromSource;
  const { continuation: _old, ...rest } = from;
  return {
    ...r,
    source: {
      ...rest,
      ...(continuation === null ? {} : { continuation }),
      selected: from.selected + taken,
      done: continuation === null || cut,
    },
  };
}

/** One start's answer: the member as it leaves it, whether the tick starts no more, and what it found. */
interface Started {
  member: CampaignMember;
  stop: boolean;
  findings: TickFindings;
}

async function startMembers(
  deps: TickDeps,
  versioned: VersionedCampaign,
  counts: CampaignCounts,
  now: number,
  rules: TickRules,
  held: Held,
): Promise<{ versioned: VersionedCampaign; outcomes: CampaignMember[]; findings: TickFindings }> {
  const campaignId = versioned.record.campaignId;
  const none = { versioned, outcomes: [], findings: nothingFound };
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
  const reservation = await casLoop(deps, versioned, (r) => {
    if (r.status !== 'Running' || !held.allows(r)) return { next: null, note: 0 };
    const count = Math.min(candidates.length, allowedBy(r));
    if (count <= 0) return { next: null, note: count };
    return {
      next: { ...r, recentStarts: [...pruneStarts(r.recentStarts, now), { at: now, count }] },
      note: count,
    };
  });
  if (reservation.after === null) return { ...none, versioned: await mustGet(deps, campaignId) };
  const markedAt = deps.now();
  const chosen = candidates.slice(0, reservation.note).map((m): CampaignMember => ({
    ...m,
    state: 'running',
    migrationId: memberMigrationId(campaignId, m.seq),
    startedAt: markedAt,
  }));
  // marked before the starts: a crash now leaves them running under their deterministic ids
  await deps.campaigns.saveMembers(campaignId, chosen);

  const record = reservation.after.record;
  const starts = await startAll(chosen, (member) => startOne(deps, record, member, now, held));
  const outcomes = starts.map((s) => s.member);
  await deps.campaigns.saveMembers(campaignId, outcomes);
  const runningStarts = outcomes.filter((m) => m.state === 'running').map(() => markedAt);
  const findings = combined(...starts.map((s) => s.findings), found({ runningStarts }));
  return { versioned: reservation.after, outcomes, findings };
}

/**
 * The chosen members' starts: the first alone (a throttling store refuses one start, not a whole
 * parallel round), then the rest PARALLEL at a time, until a start answers `stop`: the members not
 * begun by then go back to pending.
 */
async function startAll(
  chosen: readonly CampaignMember[],
  start: (member: CampaignMember) => Started | Promise<Started>,
): Promise<Started[]> {
  const notBegun = (member: CampaignMember): Started => ({
    member: backToPending(member),
    stop: false,
    findings: nothingFound,
  });
  const [first, ...rest] = chosen as [CampaignMember, ...CampaignMember[]];
  const head = await start(first);
  return [head, ...(head.stop ? rest.map(notBegun) : await inParallelUntilStop(rest, start, notBegun))];
}

/**
 * One member's start. Answered at once (no await) when too little of the lease is left, so that the
 * stop is seen before the next start begins.
 */
function startOne(
  deps: TickDeps,
  record: CampaignRecord,
  member: CampaignMember,
  now: number,
  held: Held,
): Started | Promise<Started> {
  if (!leaseLeftForStart(held.lease, deps.now())) {
    // too little of the lease left for this start to land before another tick may take over
    const error = 'the tick ran short of its lease: the next tick goes on with the starts';
    return { member: backToPending(member), stop: true, findings: found({ errors: [error] }) };
  }
  return startMigration(deps, record, member, now);
}

async function startMigration(
  deps: TickDeps,
  record: CampaignRecord,
  member: CampaignMember,
  now: number,
): Promise<Started> {
  try {
    const started = await deps.migrations.start({
      resourceId: member.resourceId,
      target: record.target,
      migrationId: member.migrationId,
      campaignId: record.campaignId,
      ...(record.limits.migrationAttempts === undefined
        ? {}
        : { migrationAttempts: record.limits.migrationAttempts }),
      ...(record.window === undefined ? {} : { window: record.window }),
      ...(member.listed === undefined ? {} : { listed: member.listed }),
    });
    // the listed copy has done its work: a started member no longer carries it
    const { startFailures: _f, listed: _l, ...ok } = member;
    return {
      member: { ...ok, migrationId: started.migrationId },
      stop: false,
      findings: found({ firstStartAt: now }),
    };
  } catch (error) {
    return afterFailedStart(member, error, now);
  }
}

/**
 * A start refused: a conflict or a skip ends the member; a store throttling or down stops this tick's
 * starts, the member back to pending with its failures counted.
 */
function afterFailedStart(member: CampaignMember, error: unknown, now: number): Started {
  const failures = member.startFailures ?? 0;
  const { outcome, counted } = afterStartError(error, failures);
  const ends = (ended: CampaignMember): Started => ({ member: ended, stop: false, findings: nothingFound });
  // an ended member starts nothing: the listed copy it held for its start goes with it
  const { listed: _listed, ...ending } = backToPending(member);
  if (outcome === 'conflict')
    return ends({ ...ending, state: 'conflict', endedAt: now, reason: messageOf(error) });
  if (outcome === 'skipped') {
    const { startFailures: _f, ...rest } = ending;
    const reason = counted
      ? `${MAX_START_FAILURES} starts in a row failed; the last: ${messageOf(error)}`
      : messageOf(error);
    // the error's code too: what the campaign's status counts its skips by
    const reasonCode = isRouteLockError(error) ? error.code : 'StartFailed';
    return ends({ ...rest, state: 'skipped', endedAt: now, reason, reasonCode });
  }
  return {
    member: counted ? { ...backToPending(member), startFailures: failures + 1 } : backToPending(member),
    stop: true,
    findings: found({
      throttledReason: messageOf(error),
      errors: [`starting ${member.resourceId}: ${messageOf(error)}`],
    }),
  };
}

// ---------------------------------------------------------------------------------------------
// e. the save
// ---------------------------------------------------------------------------------------------

/**
 * The tick's own fields applied to the record as it stands (`withFindings`). A CAS that loses re-reads
 * and applies them again, so an operator's command or new limits saved meanwhile win; when an append
 * moved the member slots since the count (or the counts went off), it counts again first, so no member
 * an append added is missed by the state it decides (Completed with a member pending).
 */
async function save(
  deps: TickDeps,
  stepped: Counted,
  now: number,
  findings: TickFindings,
  rules: TickRules,
  held: Held,
): Promise<CampaignRecord | null> {
  const campaignId = stepped.versioned.record.campaignId;
  let { versioned, tally } = stepped;
  for (let round = 0; ; round += 1) {
    const counted = tally;
    const saved = await casLoop(deps, versioned, (r) => {
      if (!held.allows(r)) return { next: null, note: { moved: false } };
      const moved = counted.stale || r.reserved !== counted.under.reserved || r.pages !== counted.under.pages;
      return { next: moved ? null : withFindings(r, counted.counts, now, findings, rules), note: { moved } };
    });
    if (!saved.note.moved) return saved.after?.record ?? null;
    if (round >= 50)
      throw new RouteLockError(
        'PreconditionFailed',
        `Campaign ${campaignId} kept gaining members under ${round} counts; try again.`,
      );
    ({ versioned, tally } = await tallyNow(deps, campaignId));
  }
}

/**
 * The record as this tick leaves it: the counts, the state they lead to, the rate window, the throttle,
 * the histogram, the ETA's sums, the first start, the last error; and the lease released, so the next
 * tick need not wait for it to run out.
 */
function withFindings(
  r: CampaignRecord,
  counts: CampaignCounts,
  now: number,
  findings: TickFindings,
  rules: TickRules,
): CampaignRecord {
  const at = new Date(now).toISOString();
  const { durations, runningStarts } = findings;
  const status = nextCampaignState(r.status, counts, sourceDone(r.source, counts.total));
  const throttle = rules.throttleAfterTick(r.throttle, now, findings.throttledReason);
  const lastTickError = findings.errors.length === 0 ? undefined : findings.errors.slice(0, 3).join('; ');
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
}

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

/** What a change decides on the record as it stands: the record to write (null: none), and a note of why. */
export interface CasDecision<N> {
  next: CampaignRecord | null;
  note: N;
}

/**
 * Replace the record with `change(record).next` under its ETag, re-reading and deciding again on a lost
 * race. Answers the last decision's note, the record it was made on (`before`), and the record written
 * (`after`; null when the change declined: the campaign moved on).
 */
export async function casLoop<N = undefined>(
  deps: Pick<TickDeps, 'campaigns'>,
  versioned: VersionedCampaign,
  change: (record: CampaignRecord) => CasDecision<N>,
): Promise<{ before: CampaignRecord; after: VersionedCampaign | null; note: N }> {
  let current = versioned;
  for (let i = 0; ; i += 1) {
    const { next, note } = change(current.record);
    if (next === null) return { before: current.record, after: null, note };
    const replaced = await deps.campaigns.replace(next, current.etag);
    if (replaced) return { before: current.record, after: replaced, note };
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

/**
 * `work` over `items` as `inParallel` does, until an answer says `stop`: the items not begun by then get
 * `notBegun(item)`. An answer `work` gives at once (not a promise) stops the very next item. The stop is
 * this loop's own state, shared by its workers as `next` is.
 */
async function inParallelUntilStop<T, R extends { stop: boolean }>(
  items: readonly T[],
  work: (item: T) => R | Promise<R>,
  notBegun: (item: T) => R,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let stopped = false;
  const worker = async () => {
    while (next < items.length) {
      const i = next;
      next += 1;
      const item = items[i] as T;
      if (stopped) {
        results[i] = notBegun(item);
        continue;
      }
      const pending = work(item);
      const answer = pending instanceof Promise ? await pending : pending;
      results[i] = answer;
      stopped ||= answer.stop;
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
