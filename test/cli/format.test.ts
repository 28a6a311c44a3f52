import {
  EXIT,
  campaignDetails,
  campaignExitCode,
  campaignProgressLine,
  campaignTable,
  duration,
  endedMembers,
  migrationExitCode,
  migrationTable,
  parseLocation,
  table,
  textBar,
} from '../../cli/format';
import { terminalSafe } from '../../cli/main';
import type { CampaignCounts, CampaignStatus } from '../../shared/campaign/types';
import type { MigrationStatus } from '../../shared/migration/types';

/** The command line's human output: pure functions of the API's JSON. */

const counts = (c: Partial<CampaignCounts>): CampaignCounts => {
  const base = {
    pending: 0,
    running: 0,
    completed: 0,
    noOp: 0,
    failed: 0,
    conflict: 0,
    cancelled: 0,
    skipped: 0,
  };
  const all = { ...base, ...c };
  return { ...all, total: Object.values(all).reduce((a, b) => a + b, 0) };
};

const campaign = (over: Partial<CampaignStatus> = {}): CampaignStatus => ({
  campaignId: 'eu-residency',
  status: 'Running',
  target: { region: 'westeurope', account: 'acct2' },
  limits: { maxConcurrent: 50, startsPerMinute: 600 },
  source: { kind: 'ids' },
  counts: counts({ pending: 60, running: 10, completed: 28, failed: 2 }),
  createdAt: '2026-12-01T17:00:00.000Z',
  startedAt: '2026-12-01T17:00:01.000Z',
  updatedAt: '2026-12-01T17:05:00.000Z',
  etaSeconds: 125,
  writeLockSeconds: { p50: 0.012, p99: 0.25 },
  migrationsUrl: '/api/migrations?campaignId=eu-residency',
  ...over,
});

const migration = (over: Partial<MigrationStatus> = {}): MigrationStatus => ({
  migrationId: 'm-1',
  resourceId: 'tenant-1',
  status: 'Running',
  phase: 'hardDelete',
  target: { region: 'eastus' },
  timeline: { prelockAt: '2026-12-01T17:00:00.000Z', hardDeleteAt: null, writeAt: null, swappedAt: null },
  ...over,
});

test('table pads every column but the last to its widest cell', () => {
  expect(
    table(
      ['A', 'LONGER'],
      [
        ['xyz', '1'],
        ['x', '22'],
      ],
    ).split('\n'),
  ).toEqual(['A    LONGER', 'xyz  1', 'x    22']);
});

test('durations read as seconds, minutes or hours; null is a dash', () => {
  expect([duration(null), duration(9.4), duration(75), duration(3725)]).toEqual([
    '—',
    '9s',
    '1m 15s',
    '1h 02m',
  ]);
});

test('a location is region or region/account, nothing else', () => {
  expect(parseLocation('westeurope')).toEqual({ region: 'westeurope' });
  expect(parseLocation('westeurope/acct2')).toEqual({ region: 'westeurope', account: 'acct2' });
  for (const bad of ['', '/a', 'r/', 'r/a/b']) expect(() => parseLocation(bad)).toThrow(/region/);
});

test('ended members are all but pending and running; the bar fills in proportion', () => {
  const s = campaign();
  expect(endedMembers(s.counts)).toBe(30);
  expect(textBar(30, 100, 10)).toBe('[###-------]');
  expect(textBar(0, 0, 4)).toBe('[----]');
  expect(textBar(5, 4, 4)).toBe('[####]');
});

test('the campaign table: one row each, ended/total, outcomes, and no ETA once ended', () => {
  const lines = campaignTable([
    campaign(),
    campaign({
      campaignId: 'done',
      status: 'Completed',
      counts: counts({ completed: 3, noOp: 1 }),
      etaSeconds: 0,
    }),
  ]).split('\n');
  expect(lines[0]).toMatch(/^CAMPAIGN\s+STATUS\s+TARGET\s+ENDED\/TOTAL\s+RUNNING\s+OUTCOMES\s+ETA$/);
  expect(lines[1]).toMatch(
    /^eu-residency\s+Running\s+westeurope\/acct2\s+30\/100\s+10\s+completed 28, failed 2\s+2m 05s$/,
  );
  expect(lines[2]).toMatch(/^done\s+Completed\s+westeurope\/acct2\s+4\/4\s+0\s+completed 3, noOp 1$/);
  expect(campaignTable([])).toBe('No campaigns.');
});

test('campaign details name its limits, progress, ETA, write-lock percentiles and where its migrations are', () => {
  const text = campaignDetails(campaign({ lastTickError: 'store throttled (429)' }));
  expect(text).toContain(`limits:`.padEnd(12) + 'max 50 at once, 600 starts/min');
  expect(text).toContain(`progress:`.padEnd(12) + '[######--------------] 30/100 ended');
  expect(text).toContain(`counts:`.padEnd(12) + 'pending 60, running 10; completed 28, failed 2');
  expect(text).toContain(`eta:`.padEnd(12) + '2m 05s');
  expect(text).toContain(`write lock:`.padEnd(12) + 'p50 0.01 s, p99 0.25 s');
  expect(text).toContain(`last tick:`.padEnd(12) + 'store throttled (429)');
  expect(text).toContain(`migrations:`.padEnd(12) + '/api/migrations?campaignId=eu-residency');
  const from = campaignDetails(
    campaign({ source: { kind: 'from', region: 'northeurope', limit: 500, selected: 200, done: false } }),
  );
  expect(from).toContain('routes at northeurope (at most 500): 200 selected, selecting…');
  expect(campaignProgressLine(campaign())).toBe(
    'eu-residency Running [######--------------] 30/100 ended, running 10, completed 28, failed 2, eta 2m 05s',
  );
});

test('a cancelled campaign shows what moved, not that every member ended', () => {
  const cancelled = campaign({
    status: 'Cancelled',
    counts: counts({ completed: 20, noOp: 2, cancelled: 2478 }),
    etaSeconds: null,
  });
  expect(campaignProgressLine(cancelled)).toBe(
    'eu-residency Cancelled [--------------------] 22/2500 moved, running 0, completed 20, noOp 2, cancelled 2478, eta —',
  );
  expect(campaignDetails(cancelled)).toContain(
    `progress:`.padEnd(12) + '[--------------------] 22/2500 moved',
  );
  expect(campaignProgressLine(cancelled)).not.toContain('2500/2500 ended');
});

test('watch exit codes: 0 only when Completed with every resource moved, 4 otherwise', () => {
  expect(campaignExitCode(campaign({ status: 'Completed', counts: counts({ completed: 5, noOp: 2 }) }))).toBe(
    EXIT.ok,
  );
  for (const c of [{ failed: 1 }, { conflict: 1 }, { skipped: 1 }, { cancelled: 1 }])
    expect(campaignExitCode(campaign({ status: 'Completed', counts: counts({ completed: 5, ...c }) }))).toBe(
      4,
    );
  expect(campaignExitCode(campaign({ status: 'Cancelled', counts: counts({ completed: 5 }) }))).toBe(4);
  expect(migrationExitCode(migration({ status: 'Completed' }))).toBe(0);
  expect(migrationExitCode(migration({ status: 'NoOp' }))).toBe(0);
  for (const status of ['Failed', 'Conflict', 'Cancelled'] as const)
    expect(migrationExitCode(migration({ status }))).toBe(4);
});

test('the migration table shows status, phase, target and the error', () => {
  const lines = migrationTable([
    migration(),
    migration({ migrationId: 'm-2', status: 'Failed', phase: 'released', error: 'store unavailable' }),
  ]).split('\n');
  expect(lines[1]).toMatch(/^m-1\s+tenant-1\s+Running\s+hardDelete\s+eastus$/);
  expect(lines[2]).toMatch(/^m-2\s+tenant-1\s+Failed\s+released\s+eastus\s+store unavailable$/);
  expect(migrationTable([])).toBe('No migrations.');
});

test("human output shows a participant's control characters escaped, never as terminal sequences", () => {
  // a preflight or verify detail is the participant's text: an ESC sequence could rewrite the screen
  const detail = 'ready\u001b[2J\u001b]0;owned\u0007 done\r\n\tnext';
  const safe = terminalSafe(detail);
  expect(safe).toBe('ready\\u{1b}[2J\\u{1b}]0;owned\\u{7} done\\u{d}\n\tnext');
  // eslint-disable-next-line no-control-regex
  expect(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/.test(safe)).toBe(false);
  expect(terminalSafe('plain text, ünïcode ✓')).toBe('plain text, ünïcode ✓');
});
