import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CampaignStatus } from '../../shared/campaign/types';
import { type CliHost, runCli, startCliHost } from './cliProcess';

/**
 * `routelock campaign …` end to end: the command line as a child process against the real embedded
 * host (dev timing, in-process campaign runner, SQLite): a campaign watched to Completed, a file of
 * more than 1,000 ids sent in pages, limits changed, pause, resume and cancel, and the exit codes.
 */

let dir: string;
let env: Record<string, string>;

const ROUTES = ['cmp-a', 'cmp-b', 'cmp-c'];

let cli: CliHost;
beforeAll(async () => {
  cli = await startCliHost('routelock-cli-campaign-', ROUTES);
  ({ dir, env } = cli);
});

afterAll(() => cli?.close());

test('start, watch to Completed (exit 0), list it and its migrations', async () => {
  const args = ['campaign', 'start', '--target', 'eastus', '--max-concurrent', '2', '--campaign-id', 'cmp-1'];
  const start = await runCli([...args, ...ROUTES.flatMap((id) => ['--resource', id]), '--json'], env);
  expect(start).toMatchObject({ code: 0, stderr: '' });
  expect(JSON.parse(start.stdout)).toMatchObject({
    campaignId: 'cmp-1',
    created: true,
    statusUrl: expect.any(String),
  });

  const watch = await runCli(['campaign', 'show', 'cmp-1', '--watch', '--interval', '0.5'], env);
  expect(watch.stderr).toMatch(/^cmp-1 Running \[[#-]{20}\] \d\/3 ended, running \d/m);
  expect(watch.stderr).toMatch(/^cmp-1 Completed \[#{20}\] 3\/3 ended, running 0, completed 3, eta/m);
  expect(watch.code).toBe(0);
  expect(watch.stdout).toMatch(/^status:\s+Completed$/m);
  expect(watch.stdout).toMatch(/^progress:\s+\[#{20}\] 3\/3 ended$/m);

  const list = await runCli(['--json', 'campaign', 'list', '--status', 'Completed'], env);
  const page = JSON.parse(list.stdout) as { items: CampaignStatus[] };
  expect(page.items.map((c) => c.campaignId)).toEqual(['cmp-1']);
  const table = await runCli(['campaign', 'list'], env);
  expect(table.stdout).toMatch(/^cmp-1\s+Completed\s+eastus\s+3\/3\s+0\s+completed 3$/m);

  const migrations = await runCli(['--json', 'migration', 'list', '--campaign', 'cmp-1'], env);
  const items = (JSON.parse(migrations.stdout) as { items: { resourceId: string; status: string }[] }).items;
  expect(items.map((m) => m.resourceId).sort()).toEqual(ROUTES);
  expect(items.every((m) => m.status === 'Completed')).toBe(true);

  // The same id and target again: the campaign that stands, nothing started.
  const again = await runCli([...args, '--resource', 'cmp-a'], env);
  expect(again).toMatchObject({ code: 0 });
  expect(again.stdout).toContain('campaign cmp-1 already exists');
}, 90_000);

test('a file of 1,205 ids goes as POST /campaigns with 1,000 and one page of 205; limits, pause, resume, cancel (exit 4)', async () => {
  const ids = Array.from({ length: 1205 }, (_, i) => `bulk-${String(i).padStart(4, '0')}`);
  const file = join(dir, 'ids.txt');
  writeFileSync(file, `# tenants of the residency programme\n${ids.join('\n')}\n\n`);
  // One start a minute: it stays Running while the commands below act on it.
  const start = await runCli(
    [
      'campaign',
      'start',
      '--target',
      'eastus',
      '--resources-file',
      file,
      '--starts-per-minute',
      '1',
      '--campaign-id',
      'cmp-bulk',
    ],
    env,
  );
  expect(start.code).toBe(0);
  expect(start.stderr.trim().split('\n')).toEqual([
    'sent 1000/1205 ids',
    'sent 1205/1205 ids (205 added, 0 duplicates)',
  ]);
  expect(start.stdout).toContain('started campaign cmp-bulk');

  const show = JSON.parse(
    (await runCli(['--json', 'campaign', 'show', 'cmp-bulk'], env)).stdout,
  ) as CampaignStatus;
  expect(show.counts.total).toBe(1205);
  expect(show.limits).toMatchObject({ startsPerMinute: 1 });

  // Appending the file's tail again (an interrupted append resumed with --skip): all duplicates.
  const add = await runCli(
    ['--json', 'campaign', 'add', 'cmp-bulk', '--resources-file', file, '--skip', '1200'],
    env,
  );
  expect(add.code).toBe(0);
  expect(JSON.parse(add.stdout)).toMatchObject({ added: 0, duplicates: 5 });

  const limits = await runCli(['--json', 'campaign', 'limits', 'cmp-bulk', '--max-concurrent', '3'], env);
  expect(JSON.parse(limits.stdout)).toMatchObject({ limits: { maxConcurrent: 3, startsPerMinute: 1 } });
  const paused = await runCli(['campaign', 'pause', 'cmp-bulk'], env);
  expect(paused.stdout).toMatch(/^cmp-bulk: Paused \(\d+\/1205 ended\)$/m);
  const resumed = await runCli(['--json', 'campaign', 'resume', 'cmp-bulk'], env);
  expect(JSON.parse(resumed.stdout)).toMatchObject({ status: 'Running' });
  const nothing = await runCli(['campaign', 'limits', 'cmp-bulk'], env);
  expect(nothing.code).toBe(2);

  const cancel = await runCli(['campaign', 'cancel', 'cmp-bulk'], env);
  expect(cancel.code).toBe(0);
  const watch = await runCli(['--json', 'campaign', 'show', 'cmp-bulk', '--watch', '--interval', '0.5'], env);
  expect(watch.code).toBe(4);
  const ended = JSON.parse(watch.stdout) as CampaignStatus;
  expect(ended.status).toBe('Cancelled');
  expect(ended.counts.cancelled).toBeGreaterThan(1000);

  const shown = await runCli(['campaign', 'show', 'cmp-bulk'], env);
  expect(shown.stdout).toMatch(/^progress:\s+\[[#-]{20}\] \d+\/1205 moved$/m);

  // Ended: the API refuses more ids (409), exit 1; said plainly, with no "append the rest" hint.
  const late = await runCli(['campaign', 'add', 'cmp-bulk', '--resource', 'bulk-late'], env);
  expect(late.code).toBe(1);
  expect(late.stderr).toMatch(
    /^campaign cmp-bulk has ended: it takes no more resources; start a new campaign for these ids$/m,
  );
  expect(late.stderr).not.toMatch(/--skip|append the rest/);
  expect(late.stderr).toMatch(/^error: .+: /m);
}, 90_000);

test('a campaign whose members were all skipped says why, by count, in its status and on show', async () => {
  const start = await runCli(
    [
      'campaign',
      'start',
      '--target',
      'eastus',
      '--resource',
      'gone-1',
      '--resource',
      'gone-2',
      '--campaign-id',
      'cmp-gone',
    ],
    env,
  );
  expect(start.code).toBe(0);
  const watch = await runCli(['--json', 'campaign', 'show', 'cmp-gone', '--watch', '--interval', '0.5'], env);
  expect(watch.code).toBe(4);
  const status = JSON.parse(watch.stdout) as CampaignStatus;
  expect(status.counts).toMatchObject({ total: 2, skipped: 2 });
  expect(status.skipped).toEqual({ total: 2, byReason: { NotFound: 2 } });
  const shown = await runCli(['campaign', 'show', 'cmp-gone'], env);
  expect(shown.stdout).toMatch(/^skipped:\s+2 never started: NotFound 2$/m);
  // the list answers without it (a status read of one campaign counts them)
  const list = await runCli(['--json', 'campaign', 'list'], env);
  const listed = (JSON.parse(list.stdout) as { items: CampaignStatus[] }).items;
  expect(listed.find((c) => c.campaignId === 'cmp-gone')?.skipped).toBeUndefined();
}, 60_000);

test('every subcommand --help shows the global options and the exit codes', async () => {
  for (const args of [
    ['campaign', 'add', '--help'],
    ['migration', 'start', '--help'],
  ]) {
    const help = await runCli(args, env);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Global Options:$/m);
    for (const option of ['--url <url>', '--json', '--key <key>']) expect(help.stdout).toContain(option);
    expect(help.stdout).toContain('http://127.0.0.1:${PORT:-7071}/api');
    expect(help.stdout).toMatch(/^Exit codes:\n {2}0 {2}done\n/m);
    expect(help.stdout).toMatch(/^ {2}5 {2}--dry-run found a check failing$/m);
  }
}, 60_000);

test('more than 100,000 ids is refused before anything is sent (exit 2); an unknown campaign is exit 1', async () => {
  const file = join(dir, 'too-many.txt');
  writeFileSync(file, Array.from({ length: 100_001 }, (_, i) => `t-${i}`).join('\n'));
  const run = await runCli(
    ['campaign', 'start', '--target', 'eastus', '--resources-file', file, '--campaign-id', 'cmp-x'],
    env,
  );
  expect(run.code).toBe(2);
  expect(run.stderr).toContain('100001 ids: a campaign holds at most 100000');
  const missing = await runCli(['campaign', 'show', 'cmp-x'], env);
  expect(missing.code).toBe(1);
  expect(missing.stderr).toMatch(/^error: Not found/m);
}, 60_000);
