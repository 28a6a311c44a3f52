import { isRouteLockError, RouteLockError } from '../core/errors';
import type { MigrationState, PreflightTiming } from '../migration/types';
import {
  type CampaignCounts,
  type CampaignEstimate,
  type CampaignLimits,
  type CampaignLimitsPatch,
  type CampaignMember,
  type CampaignRecord,
  type CampaignSource,
  type CampaignState,
  type CampaignStatus,
  type CampaignThrottle,
  DEFAULT_MAX_CONCURRENT,
  endedCampaignStates,
  memberMigrationId,
  MAX_MAX_CONCURRENT,
  type MemberState,
  memberStates,
  type StartBatch,
  type TickLease,
} from './types';

/**
 * A campaign's rules (docs/design.md §6.9), pure: how many may start now, the throttle back-off, the state
 * transitions and the commands, the write-lock histogram, the ETA and the status view. The tick
 * (tick.ts) and the service (campaigns.ts) only apply these; neither decides a rule of its own.
 */

// ---------------------------------------------------------------------------------------------
// Members: a refused start, a joined migration
// ---------------------------------------------------------------------------------------------

/** A member whose start failed (retriably) this many times in a row is skipped: it cannot hold the queue. */
export const MAX_START_FAILURES = 10;

/**
 * Retriable refusals of every start alike (the store throttling or down, the task hub not answering):
 * the campaign backs off, and no member is blamed for them (an outage would skip one member a minute).
 */
const outageCodes = ['StoreUnavailable', 'OrchestrationStatusUnavailable'] as const;

/**
 * What a refused start makes of its member: `skipped` for a refusal no retry changes (no route, region
 * not allowed, a non-retriable code, a fault with no code), `conflict` when another migration holds the
 * resource, `retry` (pending again, the tick backs off) for a retriable one: an outage's always, any
 * other until the member's MAX_START_FAILURES-th in a row (`counted`), so it cannot hold the queue's head.
 */
export function afterStartError(
  error: unknown,
  failuresBefore: number,
): { outcome: 'skipped' | 'conflict' | 'retry'; counted: boolean } {
  if (isRouteLockError(error, 'MigrationInProgress')) return { outcome: 'conflict', counted: false };
  if (!isRouteLockError(error) || !error.retriable) return { outcome: 'skipped', counted: false };
  if (outageCodes.some((code) => isRouteLockError(error, code))) return { outcome: 'retry', counted: false };
  return { outcome: failuresBefore + 1 >= MAX_START_FAILURES ? 'skipped' : 'retry', counted: true };
}

/**
 * A member that joined a migration already moving its resource to the target (the start answered
 * another's id): the campaign watches it and counts its outcome, but does not own it, so never cancels it.
 */
export const isJoined = (member: Pick<CampaignMember, 'campaignId' | 'seq' | 'migrationId'>): boolean =>
  member.migrationId !== undefined && member.migrationId !== memberMigrationId(member.campaignId, member.seq);

/** The rate limit's window. */
export const START_WINDOW_MS = 60_000;

/** Starts recorded in the 60 s before `now` (a batch exactly 60 s old no longer counts). */
export function startsInWindow(recentStarts: readonly StartBatch[], now: number): number {
  let sum = 0;
  for (const batch of recentStarts) if (batch.at > now - START_WINDOW_MS) sum += batch.count;
  return sum;
}

/** The batches that still count against the rate limit (older ones are dropped from the record). */
export function pruneStarts(recentStarts: readonly StartBatch[], now: number): StartBatch[] {
  return recentStarts.filter((batch) => batch.at > now - START_WINDOW_MS);
}

export interface StartsAllowedInput {
  limits: CampaignLimits;
  running: number;
  pending: number;
  recentStarts: readonly StartBatch[];
  now: number;
  throttle?: CampaignThrottle | undefined;
}

/**
 * How many members may start now: none while the store throttles; otherwise the least of the room
 * under maxConcurrent, the room under startsPerMinute and the members waiting.
 *
 * Why no 60 s window (t − 60 s, t] ever holds more than startsPerMinute starts: every start belongs to
 * a batch recorded (reserved on the record, under its ETag) at its decision time `at` before it is made.
 * Take the last batch B of any window. Every earlier batch in the window has `at` > B.at − 60 s, so it
 * was among the batches counted when B was decided; B's count was at most startsPerMinute minus their
 * sum. So the window's sum, theirs plus B's, is at most startsPerMinute. (A batch only ever holds fewer
 * starts than reserved: a crash or a refusal after the reservation never adds one.)
 */
export function startsAllowed(input: StartsAllowedInput): number {
  const { limits, running, pending, recentStarts, now, throttle } = input;
  if (throttle !== undefined && now < throttle.until) return 0;
  let allowed = Math.min(limits.maxConcurrent - running, pending);
  if (limits.startsPerMinute !== undefined) {
    allowed = Math.min(allowed, limits.startsPerMinute - startsInWindow(recentStarts, now));
  }
  return Math.max(0, allowed);
}

// ---------------------------------------------------------------------------------------------
// The tick lease: ticks are at-least-once (a redelivered Durable activity) and may overlap
// ---------------------------------------------------------------------------------------------

/** How long a tick holds its campaign: far longer than a tick of 1,000 starts takes. */
export const TICK_LEASE_MS = 60_000;
/** A tick makes no start with less than this left of its lease (by its own clock). */
export const TICK_LEASE_MARGIN_MS = 20_000;

/** Whether `owner` may act on the record: no lease, its own, or one run out. */
export function leaseAllows(lease: TickLease | undefined, owner: string, now: number): boolean {
  return lease === undefined || lease.owner === owner || lease.until <= now;
}

/** Whether a start may begin now: it has TICK_LEASE_MARGIN_MS to land before the lease can be taken. */
export function leaseLeftForStart(lease: TickLease, now: number): boolean {
  return now < lease.until - TICK_LEASE_MARGIN_MS;
}

/**
 * A running member whose migration record does not exist: its start never landed (a crash between
 * the mark and the start) only when it was marked longer ago than a lease. A younger one may be the
 * start of a tick still under way, and is left running.
 */
export function startLost(markedAt: number | undefined, now: number): boolean {
  return markedAt === undefined || now - markedAt > TICK_LEASE_MS;
}

/** A running member's record is read at least this often (to the tick's doubling below it), however long it has run. */
export const MEMBER_CHECK_MAX_INTERVAL_MS = 60_000;

/**
 * How often a running member's migration record is read: every tick while it is young (most that end
 * early end so: NoOp, Conflict, a refusal), then about a tenth of its age, in doublings of the tick, up
 * to {@link MEMBER_CHECK_MAX_INTERVAL_MS}. A production migration runs for hours (its convergence wait
 * alone is the largest cache TTL): read on every 5 s tick, one cost 1,600 record reads; an end is seen at
 * most an interval late, at most a tenth of its run.
 */
export function memberCheckIntervalMs(ageMs: number, tickMs: number): number {
  // doublings only, so each interval's multiples are the next one's too: no gap over the cap
  const most = Math.max(0, Math.floor(Math.log2(MEMBER_CHECK_MAX_INTERVAL_MS / tickMs)));
  const doublings = Math.floor(Math.log2(Math.max(1, ageMs / (10 * tickMs))));
  return tickMs * 2 ** Math.min(most, doublings);
}

/**
 * Whether this tick reads a running member's record: when its age crossed a multiple of its check
 * interval since the last tick (`lastTickAt`, the record's last save). Stateless, so a tick on any
 * runner decides alike; a tick late or early only moves a read to the next multiple.
 */
export function dueForCheck(
  startedAt: number | undefined,
  now: number,
  lastTickAt: number,
  tickMs: number,
): boolean {
  if (startedAt === undefined || lastTickAt <= startedAt) return true;
  const interval = memberCheckIntervalMs(now - startedAt, tickMs);
  if (interval <= tickMs) return true; // young: every tick, a wake's too
  return Math.floor((now - startedAt) / interval) !== Math.floor((lastTickAt - startedAt) / interval);
}

export const THROTTLE_FIRST_BACKOFF_MS = 1000;
export const THROTTLE_MAX_BACKOFF_MS = 60_000;

/** A start refused by a throttling store: no start for 1 s, doubled on each throttled start after, 60 s at most. */
export function throttledAfter(
  previous: CampaignThrottle | undefined,
  now: number,
  reason: string,
): CampaignThrottle {
  const backoffMs =
    previous === undefined
      ? THROTTLE_FIRST_BACKOFF_MS
      : Math.min(THROTTLE_MAX_BACKOFF_MS, previous.backoffMs * 2);
  return { until: now + backoffMs, backoffMs, reason };
}

/**
 * The throttle a tick leaves: a new back-off when one of its starts was throttled; the standing one
 * while it has not run out (the tick could not try); cleared once a tick went past it unthrottled.
 */
export function throttleAfterTick(
  previous: CampaignThrottle | undefined,
  now: number,
  throttledReason: string | undefined,
): CampaignThrottle | undefined {
  if (throttledReason !== undefined) return throttledAfter(previous, now, throttledReason);
  if (previous !== undefined && now < previous.until) return previous;
  return undefined;
}

/**
 * Where a tick leaves the campaign: Running ends Completed once nothing waits, nothing runs and the
 * selection is done; Cancelling ends Cancelled once nothing runs (the tick has cancelled the pending).
 * Paused stays Paused even when everything has ended: an operator's resume completes it.
 */
export function nextCampaignState(
  status: CampaignState,
  counts: Pick<CampaignCounts, 'pending' | 'running'>,
  sourceDone: boolean,
): CampaignState {
  if (status === 'Running' && counts.pending === 0 && counts.running === 0 && sourceDone) return 'Completed';
  if (status === 'Cancelling' && counts.running === 0 && counts.pending === 0) return 'Cancelled';
  return status;
}

/**
 * Whether a campaign's members are all known: a `from` selection read to its end, or an `ids` campaign
 * with at least one member. An `ids` campaign with none (its create crashed before its page landed)
 * stays Running, visible, until a repeated create or an append brings ids, or it is cancelled.
 */
export function sourceDone(source: CampaignSource, total: number): boolean {
  return source.kind === 'ids' ? total > 0 : source.done;
}

export type CampaignCommand = 'pause' | 'resume' | 'cancel';

/**
 * The state an operator's command leaves (the same state: it answers unchanged). Pause and resume of an
 * ended or cancelling campaign are refused (CampaignEnded); a cancel of an ended one answers unchanged.
 */
export function commandOutcome(
  status: CampaignState,
  command: CampaignCommand,
  campaignId = '',
): CampaignState {
  const refuse = (): never => {
    throw new RouteLockError(
      'CampaignEnded',
      `Campaign ${campaignId} is ${status}; it can no longer be ${command === 'pause' ? 'paused' : 'resumed'}.`,
    );
  };
  switch (command) {
    case 'pause':
      if (status === 'Running' || status === 'Paused') return 'Paused';
      return refuse();
    case 'resume':
      if (status === 'Running' || status === 'Paused') return 'Running';
      return refuse();
    case 'cancel':
      return status === 'Running' || status === 'Paused' ? 'Cancelling' : status;
  }
}

/** Resources can be added while it may still start them: Running or Paused. */
export function assertAcceptsResources(status: CampaignState, campaignId: string): void {
  if (status === 'Running' || status === 'Paused') return;
  throw new RouteLockError(
    'CampaignEnded',
    `Campaign ${campaignId} is ${status}; resources can only be added while it is Running or Paused.`,
  );
}

/** New members reopen a campaign that completed meanwhile (its runner had stopped): Running again. */
export function afterResourcesAdded(status: CampaignState, added: number): CampaignState {
  return status === 'Completed' && added > 0 ? 'Running' : status;
}

export const isEnded = (status: CampaignState): boolean => endedCampaignStates.has(status);

// ---------------------------------------------------------------------------------------------
// Write-lock histogram: fixed log buckets, 9 a decade, from 1 ms to 1 h (60 buckets)
// ---------------------------------------------------------------------------------------------

export const HISTOGRAM_BUCKETS = 60;
const BUCKETS_PER_DECADE = 9;

/** Bucket i counts the holds of up to 10^(i/9) ms (bucket 0: 1 ms or less; the last also everything over 1 h). */
export const bucketUpperMs = (i: number): number => 10 ** (i / BUCKETS_PER_DECADE);

export function bucketOf(ms: number): number {
  if (!(ms > 1)) return 0;
  // the small epsilon keeps an exact bound (10 ms, 100 ms) in its own bucket despite rounding
  const i = Math.ceil(Math.log10(ms) * BUCKETS_PER_DECADE - 1e-9);
  return Math.min(HISTOGRAM_BUCKETS - 1, i);
}

export const emptyHistogram = (): number[] => new Array<number>(HISTOGRAM_BUCKETS).fill(0);

/** A new histogram with one more hold of `ms` (an empty or short array reads as zeros). */
export function addToHistogram(histogram: readonly number[], ms: number): number[] {
  const next = emptyHistogram().map((_, i) => histogram[i] ?? 0);
  const i = bucketOf(ms);
  next[i] = (next[i] ?? 0) + 1;
  return next;
}

/** The q-quantile (0..1) in seconds: the upper bound of the bucket it falls in; null when empty. */
export function histogramQuantile(histogram: readonly number[], q: number): number | null {
  const total = histogram.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (let i = 0; i < histogram.length; i += 1) {
    seen += histogram[i] ?? 0;
    if (seen >= rank) return Math.round(bucketUpperMs(i)) / 1000;
  }
  return Math.round(bucketUpperMs(histogram.length - 1)) / 1000;
}

// ---------------------------------------------------------------------------------------------
// Counts, ETA, the status view
// ---------------------------------------------------------------------------------------------

/** Members still to end: waiting and running. */
export const unfinishedOf = (counts: CampaignCounts): number => counts.pending + counts.running;

export interface EtaInput {
  pending: number;
  running: number;
  /** Its ended migrations (start to end): how many, their summed duration. */
  endedMigrations?: { count: number; totalMs: number } | undefined;
  /** The mean start (epoch ms) of the running members. */
  runningStartedAt?: number | undefined;
  limits: CampaignLimits;
  now: number;
}

/**
 * Seconds until every member has ended; null before a migration has ended (no duration to go by).
 *
 * Each migration is taken to last the mean of those ended. The running have the mean less their
 * (mean) elapsed time left; the pending go in waves of as many as run at once: maxConcurrent, or
 * fewer when startsPerMinute allows fewer starts in one mean duration. The first wave fills the slots
 * free now, the rest start as slots free up. Unlike a rate since the first start, this falls while the
 * last members run (a rate falls as they run, so the ETA rose). Never negative.
 */
export function etaSeconds(input: EtaInput): number | null {
  const { pending, running, endedMigrations: ended, limits, now } = input;
  if (ended === undefined || ended.count <= 0) return null;
  if (pending + running <= 0) return 0;
  const mean = Math.max(0, ended.totalMs / ended.count);
  const elapsed = input.runningStartedAt === undefined ? 0 : Math.max(0, now - input.runningStartedAt);
  const runningLeft = running > 0 ? Math.max(0, mean - elapsed) : 0;
  const byRate =
    limits.startsPerMinute === undefined
      ? Number.POSITIVE_INFINITY
      : Math.floor((limits.startsPerMinute * mean) / START_WINDOW_MS);
  const wave = Math.max(1, Math.min(limits.maxConcurrent, byRate));
  let endMs = runningLeft;
  if (pending > 0) {
    const startNow = Math.min(pending, Math.max(0, wave - running));
    const rest = pending - startNow;
    if (startNow > 0) endMs = Math.max(endMs, mean);
    if (rest > 0) {
      // the rest begin when the first slot frees: a running one ending, or the first wave's
      const slotFrees = Math.min(
        running > 0 ? runningLeft : Number.POSITIVE_INFINITY,
        startNow > 0 ? mean : Number.POSITIVE_INFINITY,
      );
      endMs = Math.max(endMs, slotFrees + Math.ceil(rest / wave) * mean);
    }
  }
  return Math.max(0, Math.ceil(endMs / 1000));
}

export interface DurationEstimateInput {
  /** Migrations to run. */
  migrations: number;
  limits: Pick<CampaignLimits, 'maxConcurrent' | 'startsPerMinute'>;
  /** One migration's duration, ms (the dry run's floor, with or without its write budget). */
  perMigrationMs: number;
}

/**
 * The least time (ms) `migrations` migrations of `perMigrationMs` each take under the limits, before
 * any has run (a dry run; etaSeconds above goes by measured durations once some have ended). Start i
 * is as early as the tick's rules allow: not before start i − maxConcurrent has ended (startsAllowed's
 * room under maxConcurrent), and not before start i − startsPerMinute is 60 s old (its sliding window,
 * START_WINDOW_MS). Ticks are taken to cost nothing, so a real campaign takes at least this.
 */
export function minimumCampaignMs(input: DurationEstimateInput): number {
  const { migrations: n, limits, perMigrationMs: d } = input;
  if (n <= 0) return 0;
  const c = Math.max(1, limits.maxConcurrent);
  const r = limits.startsPerMinute;
  const starts = new Float64Array(n);
  for (let i = 0; i < n; i += 1) {
    const slot = i >= c ? (starts[i - c] as number) + d : 0;
    const rate = r !== undefined && i >= r ? (starts[i - r] as number) + START_WINDOW_MS : 0;
    starts[i] = Math.max(slot, rate);
  }
  // starts never fall (both bounds rise with i): the last start ends last
  return (starts[n - 1] as number) + d;
}

/** Which limit sets minimumCampaignMs: the one that alone would take longer ('none': neither binds). */
export function bindingLimit(input: DurationEstimateInput): 'maxConcurrent' | 'startsPerMinute' | 'none' {
  const { migrations: n, limits, perMigrationMs: d } = input;
  const c = Math.max(1, limits.maxConcurrent);
  const r = limits.startsPerMinute;
  const byConcurrency = n > c ? Math.ceil(n / c) * d : 0;
  const byRate = r !== undefined && n > r ? Math.floor((n - 1) / r) * START_WINDOW_MS + d : 0;
  if (byConcurrency === 0 && byRate === 0) return 'none';
  return byRate > byConcurrency ? 'startsPerMinute' : 'maxConcurrent';
}

/** Rounds of maxConcurrent migrations. */
export const wavesOf = (migrations: number, maxConcurrent: number): number =>
  migrations <= 0 ? 0 : Math.ceil(migrations / Math.max(1, maxConcurrent));

/**
 * A dry run's estimate (CampaignEstimate): one migration's floor from its timing (now to the earliest
 * write lock: the convergence wait and the in-flight grace), the campaign's least duration with write
 * phases of no time and of their whole budget. Null timing (nothing would start): all zero.
 */
export function campaignEstimate(
  migrations: number,
  limits: Pick<CampaignLimits, 'maxConcurrent' | 'startsPerMinute'>,
  timing: PreflightTiming | null,
  now: number,
): CampaignEstimate {
  const floorMs = timing === null ? 0 : Math.max(0, Date.parse(timing.earliestWriteLockAt) - now);
  const writeBudgetMs = (timing?.writeBudgetSeconds ?? 0) * 1000;
  const bare = { migrations, limits, perMigrationMs: floorMs };
  return {
    migrations,
    perMigrationMinimumSeconds: Math.ceil(floorMs / 1000),
    writeBudgetSeconds: timing?.writeBudgetSeconds ?? 0,
    bulkCopyDuration: timing?.bulkCopyDuration ?? 'none',
    waves: wavesOf(migrations, limits.maxConcurrent),
    limitedBy: bindingLimit(bare),
    lowerBoundSeconds: Math.ceil(minimumCampaignMs(bare) / 1000),
    withWriteBudgetSeconds: Math.ceil(
      minimumCampaignMs({ ...bare, perMigrationMs: floorMs + writeBudgetMs }) / 1000,
    ),
  };
}

/** A member's state once its migration has this status (Pending and Running: still running). */
export function memberStateOf(state: MigrationState): MemberState {
  switch (state) {
    case 'Completed':
      return 'completed';
    case 'NoOp':
      return 'noOp';
    case 'Failed':
      return 'failed';
    case 'Conflict':
      return 'conflict';
    case 'Cancelled':
      return 'cancelled';
    case 'Pending':
    case 'Running':
      return 'running';
  }
}

/** Every state's count (0 when absent) and their total. */
export function countsFrom(partial: Partial<Record<MemberState, number>>): CampaignCounts {
  const counts = Object.fromEntries(memberStates.map((s) => [s, partial[s] ?? 0])) as Record<
    MemberState,
    number
  >;
  return { ...counts, total: memberStates.reduce((sum, s) => sum + counts[s], 0) };
}

export const migrationsUrlOf = (campaignId: string): string =>
  `/api/migrations?campaignId=${encodeURIComponent(campaignId)}`;

/** GET /campaigns/{id}: what the record says, with the ETA and percentiles worked out (no credential). */
export function campaignView(record: CampaignRecord, now: number): CampaignStatus {
  const source: CampaignStatus['source'] =
    record.source.kind === 'ids'
      ? { kind: 'ids' }
      : {
          kind: 'from',
          region: record.source.region,
          ...(record.source.limit === undefined ? {} : { limit: record.source.limit }),
          selected: record.source.selected,
          done: record.source.done,
        };
  const p50 = histogramQuantile(record.writeLockHistogram, 0.5);
  const p99 = histogramQuantile(record.writeLockHistogram, 0.99);
  const ended = isEnded(record.status);
  return {
    campaignId: record.campaignId,
    status: record.status,
    target: record.target,
    limits: record.limits,
    source,
    counts: record.counts,
    createdAt: record.createdAt,
    startedAt: record.firstStartAt === undefined ? null : new Date(record.firstStartAt).toISOString(),
    updatedAt: record.updatedAt,
    ...(record.endedAt === undefined ? {} : { endedAt: record.endedAt }),
    etaSeconds: ended
      ? 0
      : etaSeconds({
          pending: record.counts.pending,
          running: record.counts.running,
          endedMigrations: record.endedMigrations,
          runningStartedAt: record.runningStartedAt,
          limits: record.limits,
          now,
        }),
    writeLockSeconds: p50 === null || p99 === null ? null : { p50, p99 },
    ...(record.throttle !== undefined && record.throttle.until > now && !ended
      ? { throttledUntil: new Date(record.throttle.until).toISOString() }
      : {}),
    ...(record.pausedAt === undefined ? {} : { pausedAt: record.pausedAt }),
    ...(record.cancelRequestedAt === undefined ? {} : { cancelRequestedAt: record.cancelRequestedAt }),
    ...(record.cancelRequestedBy === undefined ? {} : { cancelRequestedBy: record.cancelRequestedBy }),
    ...(record.lastTickError === undefined ? {} : { lastTickError: record.lastTickError }),
    ...(record.window === undefined ? {} : { window: record.window }),
    migrationsUrl: migrationsUrlOf(record.campaignId),
  };
}

// ---------------------------------------------------------------------------------------------
// Limits: what a create or a PATCH may set
// ---------------------------------------------------------------------------------------------

/** The most starts a minute a campaign may ask for (beyond it, maxConcurrent is the only brake). */
export const MAX_STARTS_PER_MINUTE = 100_000;

const wholeIn = (value: number, min: number, max: number): boolean =>
  Number.isInteger(value) && value >= min && value <= max;

/**
 * A campaign's limits, checked: maxConcurrent 1..10,000 (default 10), startsPerMinute 1..100,000 or
 * none, migrationAttempts 1..the configured attempts or none. BadRequest names the field.
 */
export function checkedLimits(
  asked: {
    maxConcurrent?: number | undefined;
    startsPerMinute?: number | undefined;
    migrationAttempts?: number | undefined;
  },
  maxMigrationAttempts: number,
): CampaignLimits {
  const maxConcurrent = asked.maxConcurrent ?? DEFAULT_MAX_CONCURRENT;
  if (!wholeIn(maxConcurrent, 1, MAX_MAX_CONCURRENT))
    throw new RouteLockError(
      'BadRequest',
      `maxConcurrent: must be a whole number from 1 to ${MAX_MAX_CONCURRENT}.`,
    );
  if (asked.startsPerMinute !== undefined && !wholeIn(asked.startsPerMinute, 1, MAX_STARTS_PER_MINUTE))
    throw new RouteLockError(
      'BadRequest',
      `startsPerMinute: must be a whole number from 1 to ${MAX_STARTS_PER_MINUTE}.`,
    );
  if (asked.migrationAttempts !== undefined && !wholeIn(asked.migrationAttempts, 1, maxMigrationAttempts))
    throw new RouteLockError(
      'BadRequest',
      `migrationAttempts: must be a whole number from 1 to ${maxMigrationAttempts} (ROUTELOCK_MIGRATION_ATTEMPTS).`,
    );
  return {
    maxConcurrent,
    ...(asked.startsPerMinute === undefined ? {} : { startsPerMinute: asked.startsPerMinute }),
    ...(asked.migrationAttempts === undefined ? {} : { migrationAttempts: asked.migrationAttempts }),
  };
}

/** The limits after a PATCH: the fields it names replaced, `startsPerMinute: null` removing the rate limit. */
export function patchedLimits(
  limits: CampaignLimits,
  patch: CampaignLimitsPatch,
  maxMigrationAttempts: number,
): CampaignLimits {
  const { startsPerMinute: _dropped, ...rest } = limits;
  const startsPerMinute =
    patch.startsPerMinute === null ? undefined : (patch.startsPerMinute ?? limits.startsPerMinute);
  return checkedLimits(
    {
      ...rest,
      ...(patch.maxConcurrent === undefined ? {} : { maxConcurrent: patch.maxConcurrent }),
      startsPerMinute,
    },
    maxMigrationAttempts,
  );
}
