import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CampaignPreflightReport } from '../../shared/campaign/types';
import { type CliHost, runCli, startCliHost } from './cliProcess';

/**
 * `campaign start --dry-run` end to end against the embedded host (the report read out, --json raw,
 * exit 0 / 5, nothing written), and the window flags of both starts as the body they send.
 */

let cli: CliHost;
let env: Record<string, string>;

beforeAll(async () => {
  cli = await startCliHost('routelock-cdry-', ['cdry-1', 'cdry-2', 'cdry-3']);
  ({ env } = cli);
});
afterAll(() => cli?.close());

const get = async (path: string) => (await fetch(`${cli.host.url}/api/${path}`)).json() as Promise<unknown>;

test('campaign start --dry-run prints the report, --json prints it raw; a failing check exits 5; nothing written', async () => {
  const routesBefore = await get('routes');
  const human = await runCli(
    [
      'campaign',
      'start',
      '--target',
      'eastus',
      '--resource',
      'cdry-1',
      '--resource',
      'cdry-2',
      '--resource',
      'cdry-gone',
      '--max-concurrent',
      '1',
      '--campaign-id',
      'c-cli-dry',
      '--dry-run',
    ],
    env,
  );
  expect(human).toMatchObject({ code: 0, stderr: '' });
  expect(human.stdout).toMatch(/^dry run of campaign c-cli-dry → eastus: ok$/m);
  expect(human.stdout).toMatch(/^resources: 3 \(ids\); would start 2, skip 1 \(routeExists 1\)$/m);
  expect(human.stdout).toMatch(/^ {2}skip cdry-gone: routeExists: no route cdry-gone$/m);
  expect(human.stdout).toMatch(/^✓ campaignIdFree: no campaign c-cli-dry yet$/m);
  expect(human.stdout).toMatch(/^ {2}convergence wait: \d+ s$/m);
  expect(human.stdout).toMatch(
    /^estimate: at least \S+ \(2 migrations in 2 wave\(s\), limited by maxConcurrent\); /m,
  );

  const raw = await runCli(
    [
      '--json',
      'campaign',
      'start',
      '--target',
      'eastus',
      '--from',
      'westeurope',
      '--limit',
      '2',
      '--dry-run',
    ],
    env,
  );
  expect(raw.code).toBe(0);
  const report = JSON.parse(raw.stdout) as CampaignPreflightReport;
  expect(report).toMatchObject({
    dryRun: true,
    ok: true,
    source: { kind: 'from', region: 'westeurope', limit: 2 },
    resourceCount: 2,
    wouldStart: 2,
  });

  // every resource already at the target: nothing would start, exit 5
  const there = await runCli(
    ['campaign', 'start', '--target', 'westeurope', '--from', 'westeurope', '--dry-run'],
    env,
  );
  expect(there.code).toBe(5);
  expect(there.stdout).toMatch(/^✗ resourcesToStart: none of its 3 resources would start$/m);
  expect(there.stdout).toMatch(/skip 3 \(notAtTarget 3\)/);

  // the window flags reach the dry run of both starts: its check read out
  const notAfter = new Date(Date.now() + 7 * 86_400_000).toISOString();
  for (const start of [
    ['campaign', 'start', '--target', 'eastus', '--resource', 'cdry-1'],
    ['migration', 'start', 'cdry-1', '--target', 'eastus'],
  ]) {
    const windowed = await runCli([...start, '--not-after', notAfter, '--dry-run'], env);
    expect({ start, code: windowed.code }).toEqual({ start, code: 0 });
    expect(windowed.stdout).toMatch(/^✓ windowReachable: /m);
  }
  const over = await runCli(
    [
      ...['campaign', 'start', '--target', 'eastus', '--resource', 'cdry-1'],
      '--not-after',
      '2020-01-01T00:00:00Z',
      '--dry-run',
    ],
    env,
  );
  expect(over.code).toBe(1);
  expect(over.stderr).toMatch(/window\.notAfter/);

  // a body the API refuses is still exit 1 (a 400), not a report
  const bad = await runCli(
    ['campaign', 'start', '--target', 'eastus', '--resource', 'bad id!', '--dry-run'],
    env,
  );
  expect(bad.code).toBe(1);

  // nothing written: no campaign, no migration, the routes as they were
  expect(await get('campaigns')).toEqual({ items: [] });
  expect(await get('migrations')).toEqual({ items: [] });
  expect(await get('routes')).toEqual(routesBefore);
}, 60_000);

test('more ids than one request: the dry run covers the first 1,000 and says so', async () => {
  const file = join(cli.dir, 'ids.txt');
  writeFileSync(file, Array.from({ length: 1002 }, (_, i) => `cdry-many-${i}`).join('\n'));
  const run = await runCli(
    ['--json', 'campaign', 'start', '--target', 'eastus', '--resources-file', file, '--dry-run'],
    env,
  );
  expect(run.code).toBe(5); // none of them has a route
  expect(run.stderr).toBe("the dry run covers the first 1000 of 1002 ids (one request's)\n");
  expect(JSON.parse(run.stdout)).toMatchObject({
    resourceCount: 1000,
    skipped: { count: 1000, truncated: true },
  });
}, 60_000);

describe('window flags', () => {
  let server: Server;
  let bodies: { url: string; body: Record<string, unknown> }[];
  let url: string;
  beforeAll(async () => {
    bodies = [];
    server = createServer((req, res) => {
      let text = '';
      req.on('data', (chunk: Buffer) => (text += chunk.toString()));
      req.on('end', () => {
        const body = JSON.parse(text) as Record<string, unknown>;
        bodies.push({ url: req.url ?? '', body });
        res.writeHead(202, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify(
            req.url === '/api/campaigns'
              ? { campaignId: 'c-w', statusUrl: '/api/campaigns/c-w', created: true }
              : { migrationId: 'm-w', instanceId: 'i', statusUrl: '/api/migrations/m-w' },
          ),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
  beforeEach(() => (bodies.length = 0));

  const flags = [
    '--not-before',
    '2026-12-01T22:00:00Z',
    '--not-after',
    '2026-12-08T06:00:00Z',
    '--daily',
    '22:00-04:00',
    '--time-zone',
    'Europe/Amsterdam',
  ];
  const window = {
    notBefore: '2026-12-01T22:00:00Z',
    notAfter: '2026-12-08T06:00:00Z',
    daily: { start: '22:00', end: '04:00', timeZone: 'Europe/Amsterdam' },
  };

  test('migration start and campaign start send them as `window`; without flags, no window', async () => {
    expect(
      (await runCli(['--url', url, 'migration', 'start', 'r-1', '--target', 'eastus', ...flags])).code,
    ).toBe(0);
    expect(
      (await runCli(['--url', url, 'campaign', 'start', '--target', 'eastus', '--resource', 'r-1', ...flags]))
        .code,
    ).toBe(0);
    expect(
      (
        await runCli([
          '--url',
          url,
          'migration',
          'start',
          'r-1',
          '--target',
          'eastus',
          '--not-after',
          '2026-12-08T06:00:00Z',
        ])
      ).code,
    ).toBe(0);
    expect((await runCli(['--url', url, 'migration', 'start', 'r-1', '--target', 'eastus'])).code).toBe(0);
    expect(bodies).toEqual([
      { url: '/api/migrations', body: { resourceId: 'r-1', target: { region: 'eastus' }, window } },
      { url: '/api/campaigns', body: { target: { region: 'eastus' }, resources: ['r-1'], window } },
      {
        url: '/api/migrations',
        body: {
          resourceId: 'r-1',
          target: { region: 'eastus' },
          window: { notAfter: '2026-12-08T06:00:00Z' },
        },
      },
      { url: '/api/migrations', body: { resourceId: 'r-1', target: { region: 'eastus' } } },
    ]);
  }, 60_000);

  test('--daily without --time-zone, a malformed span, instant or zone: usage error (exit 2), nothing sent', async () => {
    for (const bad of [
      ['--daily', '22:00-04:00'],
      ['--time-zone', 'Europe/Amsterdam'],
      ['--daily', '22-04', '--time-zone', 'Europe/Amsterdam'],
      ['--daily', '22:00-04:00', '--time-zone', 'Mars/Olympus'],
      ['--not-before', 'tomorrow'],
      ['--not-after', '2026-13-45T99:00:00Z'],
    ])
      for (const start of [
        ['migration', 'start', 'r-1', '--target', 'eastus'],
        ['campaign', 'start', '--target', 'eastus', '--resource', 'r-1', '--dry-run'],
      ]) {
        const run = await runCli(['--url', url, ...start, ...bad]);
        expect({ bad, code: run.code }).toEqual({ bad, code: 2 });
        expect(run.stderr).toMatch(/^error: --/m);
      }
    expect(bodies).toEqual([]);
  }, 60_000);
});
