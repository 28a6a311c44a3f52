import type { CampaignCounts, CampaignPreflightReport, CampaignStatus } from '../shared/campaign/types';
import { type Location, describeLocation } from '../shared/core/lock/document';
import {
  type CutoverWindow,
  type MigrationStatus,
  type PreflightReport,
  type PreflightTiming,
  terminalStates,
} from '../shared/migration/types';

/**
 * Human output of the command line: pure functions from the API's JSON to text (`--json` prints the
 * JSON itself). Exit codes of `show --watch` are decided here too, so the rule has one home.
 */

/** `show --watch` exit codes (README "Operating campaigns from the command line"). */
export const EXIT = {
  ok: 0,
  /** The API refused (a problem: 4xx/5xx). */
  refused: 1,
  /** Bad arguments: nothing was sent. */
  usage: 2,
  /** The host did not answer. */
  unreachable: 3,
  /** `--watch` saw it end, but not every resource moved (Cancelled, Failed, Conflict, skipped). */
  endedUnmoved: 4,
  /** A `--dry-run` found a check failing. */
  checkFailed: 5,
} as const;

export const where = (location: Location | undefined): string => (location ? describeLocation(location) : '');

/** `--target westeurope/acct2` → a Location. */
export function parseLocation(text: string): Location {
  const [region, account, ...rest] = text.split('/');
  if (!region || rest.length > 0 || account === '')
    throw new TypeError(`expected region or region/account, got "${text}"`);
  return account === undefined ? { region } : { region, account };
}

/** 75 → "1m 15s"; 3725 → "1h 02m"; null → "—". */
export function duration(seconds: number | null | undefined): string {
  if (seconds == null || !Number.isFinite(seconds)) return '—';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** Members whose migration has ended, or that were skipped: everything but pending and running. */
export const endedMembers = (counts: CampaignCounts): number =>
  counts.total - counts.pending - counts.running;

/** Members whose resource is at the target: moved, or already there. */
export const movedMembers = (c: CampaignCounts): number => c.completed + c.noOp;

/** Members whose resource did not reach the target. */
export const unmovedMembers = (c: CampaignCounts): number => c.failed + c.conflict + c.cancelled + c.skipped;

export function campaignEnded(status: CampaignStatus): boolean {
  return status.status === 'Completed' || status.status === 'Cancelled';
}

/** 0 when it Completed with every resource moved (completed or already there), 4 otherwise. */
export function campaignExitCode(status: CampaignStatus): number {
  return status.status === 'Completed' && unmovedMembers(status.counts) === 0 ? EXIT.ok : EXIT.endedUnmoved;
}

export const migrationEnded = (status: MigrationStatus): boolean => terminalStates.has(status.status);
export const migrationExitCode = (status: MigrationStatus): number =>
  status.status === 'Completed' || status.status === 'NoOp' ? EXIT.ok : EXIT.endedUnmoved;

/** Columns padded to their widest cell; the last one is not padded. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** "completed 3, failed 1" — the non-zero counts besides total, pending and running. */
export function outcomeCounts(c: CampaignCounts): string {
  const parts = (['completed', 'noOp', 'failed', 'conflict', 'cancelled', 'skipped'] as const)
    .filter((k) => c[k] > 0)
    .map((k) => `${k} ${c[k]}`);
  return parts.length ? parts.join(', ') : '—';
}

/** A text bar of `width` cells: "[#####-----]". */
export function textBar(done: number, total: number, width = 20): string {
  const filled = total > 0 ? Math.min(width, Math.round((done / total) * width)) : 0;
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}]`;
}

const limitsText = (s: CampaignStatus): string =>
  [
    `max ${s.limits.maxConcurrent} at once`,
    s.limits.startsPerMinute !== undefined ? `${s.limits.startsPerMinute} starts/min` : 'no start rate limit',
    ...(s.limits.migrationAttempts !== undefined ? [`${s.limits.migrationAttempts} attempts each`] : []),
  ].join(', ');

/** "2 never started: NotFound 2" (skipped members have no migration to say why). */
export function skippedText(k: NonNullable<CampaignStatus['skipped']>): string {
  const reasons = Object.entries(k.byReason)
    .sort(([a, x], [b, y]) => y - x || a.localeCompare(b))
    .map(([code, n]) => `${code} ${n}`)
    .join(', ');
  return `${k.total} never started: ${reasons}${k.truncated ? ' (of the first counted)' : ''}`;
}

export function campaignDetails(s: CampaignStatus): string {
  const c = s.counts;
  const source =
    s.source.kind === 'from'
      ? `routes at ${s.source.region}${s.source.limit !== undefined ? ` (at most ${s.source.limit})` : ''}: ${s.source.selected} selected${s.source.done ? '' : ', selecting…'}`
      : 'listed ids';
  const lines: [string, string][] = [
    ['campaign', s.campaignId],
    ['status', s.status],
    ['target', where(s.target)],
    ['resources', source],
    ['limits', limitsText(s)],
    ['progress', `${textBar(campaignBarValue(s).value, c.total)} ${campaignTally(s)}`],
    ['counts', `pending ${c.pending}, running ${c.running}; ${outcomeCounts(c)}`],
    ['eta', duration(s.etaSeconds)],
    [
      'write lock',
      s.writeLockSeconds
        ? `p50 ${s.writeLockSeconds.p50.toFixed(2)} s, p99 ${s.writeLockSeconds.p99.toFixed(2)} s`
        : '—',
    ],
    ['created', s.createdAt],
    ['updated', s.updatedAt],
  ];
  if (s.skipped) lines.splice(7, 0, ['skipped', skippedText(s.skipped)]);
  if (s.startedAt) lines.splice(-1, 0, ['started', s.startedAt]);
  if (s.endedAt) lines.push(['ended', s.endedAt]);
  if (s.pausedAt) lines.push(['paused', s.pausedAt]);
  if (s.cancelRequestedAt)
    lines.push([
      'cancel asked',
      `${s.cancelRequestedAt}${s.cancelRequestedBy ? ` by ${s.cancelRequestedBy}` : ''}`,
    ]);
  if (s.throttledUntil) lines.push(['throttled until', s.throttledUntil]);
  if (s.lastTickError) lines.push(['last tick', s.lastTickError]);
  lines.push(['migrations', s.migrationsUrl]);
  return keyValues(lines);
}

export function campaignTable(items: readonly CampaignStatus[]): string {
  if (items.length === 0) return 'No campaigns.';
  return table(
    ['CAMPAIGN', 'STATUS', 'TARGET', 'ENDED/TOTAL', 'RUNNING', 'OUTCOMES', 'ETA'],
    items.map((s) => [
      s.campaignId,
      s.status,
      where(s.target),
      `${endedMembers(s.counts)}/${s.counts.total}`,
      String(s.counts.running),
      outcomeCounts(s.counts),
      campaignEnded(s) ? '' : duration(s.etaSeconds),
    ]),
  );
}

/** One line for a watch without a terminal (a log, a CI job). */
/**
 * What a campaign's bar fills with: members that ended while it runs; once it is Cancelled, every member
 * has ended by definition, so the bar shows what moved (completed or already there) instead.
 */
export function campaignBarValue(s: CampaignStatus): { value: number; what: string } {
  return s.status === 'Cancelled'
    ? { value: movedMembers(s.counts), what: 'moved' }
    : { value: endedMembers(s.counts), what: 'ended' };
}

/** "120/2500 moved, cancelled 2380" or "7/10 ended". */
export function campaignTally(s: CampaignStatus): string {
  const { value, what } = campaignBarValue(s);
  return `${value}/${s.counts.total} ${what}`;
}

export function campaignProgressLine(s: CampaignStatus): string {
  const c = s.counts;
  const { value } = campaignBarValue(s);
  return `${s.campaignId} ${s.status} ${textBar(value, c.total)} ${campaignTally(s)}, running ${c.running}, ${outcomeCounts(c)}, eta ${duration(s.etaSeconds)}`;
}

export function migrationDetails(m: MigrationStatus): string {
  const t = m.timeline;
  const lines: [string, string][] = [
    ['migration', m.migrationId],
    ['resource', m.resourceId],
    ['status', m.status],
    ['phase', m.phase],
    ['target', where(m.target)],
  ];
  if (m.waitingForWindow) lines.push(['window', `waiting; opens ${m.waitingForWindow.nextOpening}`]);
  if (m.attempt !== undefined) lines.push(['attempt', String(m.attempt)]);
  if (t.prelockAt) lines.push(['pre-lock', t.prelockAt]);
  if (t.hardDeleteAt) lines.push(['hard-delete', t.hardDeleteAt]);
  if (t.writeAt) lines.push(['write lock', t.writeAt]);
  if (t.swappedAt) lines.push(['swapped', t.swappedAt]);
  if (m.error) lines.push(['error', m.error]);
  if (m.cancelRequestedAt)
    lines.push([
      'cancel asked',
      `${m.cancelRequestedAt}${m.cancelRequestedBy ? ` by ${m.cancelRequestedBy}` : ''}`,
    ]);
  for (const a of m.attempts ?? [])
    lines.push([
      `attempt ${a.attempt}`,
      `${a.outcome}${a.reason ? `: ${a.reason}` : ''} (${a.startedAt} → ${a.endedAt})`,
    ]);
  return keyValues(lines);
}

export function migrationTable(items: readonly MigrationStatus[]): string {
  if (items.length === 0) return 'No migrations.';
  return table(
    ['MIGRATION', 'RESOURCE', 'STATUS', 'PHASE', 'TARGET', 'ERROR'],
    items.map((m) => [m.migrationId, m.resourceId, m.status, m.phase, where(m.target), m.error ?? '']),
  );
}

export const migrationProgressLine = (m: MigrationStatus): string =>
  `${m.migrationId} ${m.status} phase ${m.phase}${m.error ? `: ${m.error}` : ''}`;

function keyValues(lines: readonly [string, string][]): string {
  const width = Math.max(...lines.map(([k]) => k.length));
  return lines.map(([k, v]) => `${`${k}:`.padEnd(width + 2)}${v}`).join('\n');
}

/** A dry run's report, a line per check (✓ / ✗ / – not configured), then the timing. */
export function preflightLines(report: PreflightReport): string {
  return [
    `dry run of ${report.resourceId} → ${report.target.region}: ${report.ok ? 'ok' : 'a check fails'}`,
    ...report.checks.map(checkLine),
    ...timingLines(report.timing),
  ].join('\n');
}

type CheckShown = Pick<PreflightReport['checks'][number], 'ok' | 'detail' | 'participant' | 'outcome'> & {
  check: string;
};

/** ✓ passed, ✗ failed, – nothing to check against (not a pass). */
const checkMark = (c: CheckShown): string => (c.outcome === 'notConfigured' ? '–' : c.ok ? '✓' : '✗');

const checkLine = (c: CheckShown): string =>
  `${checkMark(c)} ${c.participant === undefined ? c.check : `participant ${c.participant}`}: ${c.detail}${c.outcome === 'notImplemented' ? ' (notImplemented)' : ''}`;

const timingLines = (t: PreflightTiming): string[] => [
  `convergence wait: ${t.convergenceWaitSeconds} s`,
  `earliest write lock: ${t.earliestWriteLockAt}${t.bulkCopyDuration === 'unknown' ? ' + the bulk copy (duration unknown)' : ''}`,
  `write budget: ${t.writeBudgetSeconds} s; attempts: ${t.migrationAttempts}`,
  ...(t.nextWriteSlotAt === undefined ? [] : [`window's next write slot: ${t.nextWriteSlotAt ?? 'none'}`]),
];

/** `campaign start --dry-run`: the counts, the skipped by reason (and by name), the checks, the estimate. */
export function campaignPreflightLines(report: CampaignPreflightReport): string {
  const { skipped, estimate: e, source } = report;
  const name = report.campaignId === undefined ? 'campaign' : `campaign ${report.campaignId}`;
  const from =
    source.kind === 'ids'
      ? `ids${source.duplicates > 0 ? `, ${source.duplicates} duplicate(s) kept once` : ''}`
      : `routes at ${source.region}${source.limit === undefined ? '' : `, limit ${source.limit}`}`;
  const reasons = Object.entries(skipped.byReason).map(([reason, n]) => `${reason} ${n}`);
  const copy = e.bulkCopyDuration === 'unknown' ? ', plus each bulk copy (duration unknown)' : '';
  return [
    `dry run of ${name} → ${where(report.target)}: ${report.ok ? 'ok' : 'a check fails'}`,
    `resources: ${report.resourceCount} (${from}); would start ${report.wouldStart}, skip ${skipped.count}${reasons.length > 0 ? ` (${reasons.join(', ')})` : ''}`,
    ...skipped.resources.map((s) => `  skip ${s.resourceId}: ${s.reason}: ${s.detail}`),
    ...(skipped.truncated
      ? [
          `  … ${skipped.count - skipped.resources.length} more skipped (--json lists the first ${skipped.resources.length})`,
        ]
      : []),
    ...report.checks.map(
      (c) => checkLine(c) + (c.resourceId === undefined ? '' : ` (asked about ${c.resourceId})`),
    ),
    ...(report.timing === null ? [] : ['one migration:', ...timingLines(report.timing).map((l) => `  ${l}`)]),
    `limits: maxConcurrent ${report.limits.maxConcurrent}${report.limits.startsPerMinute === undefined ? '' : `, ${report.limits.startsPerMinute} starts a minute`}`,
    `estimate: at least ${duration(e.lowerBoundSeconds)} (${e.migrations} migrations in ${e.waves} wave(s), limited by ${e.limitedBy}); ${duration(e.withWriteBudgetSeconds)} if every write budget is used${copy}`,
  ].join('\n');
}

/** The window flags of `migration start` and `campaign start` as a request's `window` (undefined: none). */
export function windowFromFlags(flags: {
  notBefore?: string | undefined;
  notAfter?: string | undefined;
  daily?: string | undefined;
  timeZone?: string | undefined;
}): CutoverWindow | undefined {
  const { notBefore, notAfter, daily, timeZone } = flags;
  for (const [flag, value] of [
    ['--not-before', notBefore],
    ['--not-after', notAfter],
  ] as const)
    // the API's form (openapi.yaml CutoverWindow): RFC 3339 with an offset, never the host's local time
    if (value !== undefined && !isInstant(value))
      throw new TypeError(`${flag}: expected an ISO 8601 instant (2026-12-01T22:00:00Z), got "${value}"`);
  if ((daily === undefined) !== (timeZone === undefined))
    throw new TypeError('--daily and --time-zone go together (the daily window is local time in that zone)');
  let span: CutoverWindow['daily'];
  if (daily !== undefined && timeZone !== undefined) {
    const match = /^(([01]\d|2[0-3]):[0-5]\d)-(([01]\d|2[0-3]):[0-5]\d)$/.exec(daily);
    if (!match) throw new TypeError(`--daily: expected HH:MM-HH:MM (22:00-04:00), got "${daily}"`);
    try {
      new Intl.DateTimeFormat('en', { timeZone });
    } catch {
      throw new TypeError(`--time-zone: "${timeZone}" is not an IANA time zone (Europe/Amsterdam)`);
    }
    span = { start: match[1] as string, end: match[3] as string, timeZone };
  }
  const window: CutoverWindow = {
    ...(notBefore === undefined ? {} : { notBefore }),
    ...(notAfter === undefined ? {} : { notAfter }),
    ...(span === undefined ? {} : { daily: span }),
  };
  return Object.keys(window).length === 0 ? undefined : window;
}

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$/;

/** An RFC 3339 instant on a real calendar date, with an offset (as the API's window rule wants it). */
function isInstant(value: string): boolean {
  const m = RFC3339.exec(value);
  if (!m) return false;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = new Date(Date.UTC(2000, month - 1, day));
  date.setUTCFullYear(year);
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}
