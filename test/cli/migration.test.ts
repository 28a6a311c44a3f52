import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { RouteLockApi } from '../../cli/api';
import type { LocalHost } from '../../local/host';
import type { PreflightReport } from '../../shared/migration/types';
import { type CliHost, runCli, startCliHost } from './cliProcess';

/**
 * `routelock migration …` end to end: the command line as a child process against the real embedded
 * host (dev timing, SQLite), its exit codes, its --json, and credentials that go out in headers only.
 */

const KEY = 'fk-3f9c1d0e-never-printed';
const TOKEN = 'eyJ-token-never-printed';

let host: LocalHost;
let env: Record<string, string>;

let cli: CliHost;
beforeAll(async () => {
  cli = await startCliHost('routelock-cli-', ['cli-r1', 'cli-r2']);
  ({ host, env } = cli);
});

afterAll(() => cli?.close());

test('start --json prints the API answer; show --watch follows it to Completed (exit 0); list finds it', async () => {
  const start = await runCli(
    ['migration', 'start', 'cli-r1', '--target', 'eastus', '--migration-id', 'cli-m1', '--json'],
    env,
  );
  expect(start).toMatchObject({ code: 0, stderr: '' });
  expect(JSON.parse(start.stdout)).toEqual({
    migrationId: 'cli-m1',
    instanceId: expect.any(String),
    statusUrl: '/api/migrations/cli-m1',
  });

  const watch = await runCli(['migration', 'show', 'cli-m1', '--watch', '--interval', '0.3'], env);
  expect(watch.code).toBe(0);
  expect(watch.stdout).toMatch(/^status:\s+Completed$/m);
  expect(watch.stdout).toMatch(/^target:\s+eastus$/m);
  // Without a terminal the watch writes a line per change on stderr, so stdout stays the result.
  expect(watch.stderr).toMatch(/^cli-m1 (Pending|Running) phase \w+$/m);
  expect(watch.stderr).toMatch(/^cli-m1 Completed phase swapped$/m);

  const list = await runCli(['--json', 'migration', 'list', '--resource', 'cli-r1'], env);
  expect(list.code).toBe(0);
  const page = JSON.parse(list.stdout) as { items: { migrationId: string; status: string }[] };
  expect(page.items).toEqual([expect.objectContaining({ migrationId: 'cli-m1', status: 'Completed' })]);
  const human = await runCli(['migration', 'list', '--status', 'Completed'], env);
  expect(human.stdout.split('\n')[0]).toMatch(/^MIGRATION\s+RESOURCE\s+STATUS\s+PHASE\s+TARGET\s+ERROR$/);
  expect(human.stdout).toMatch(/^cli-m1\s+cli-r1\s+Completed\s+swapped\s+eastus$/m);

  // Too late to cancel, and nothing to retry: the problem's title and detail, exit 1.
  const cancel = await runCli(['migration', 'cancel', 'cli-m1'], env);
  expect(cancel.code).toBe(1);
  expect(cancel.stderr).toMatch(/^error: The migration has already swapped: .*cli-m1/m);
  const retry = await runCli(['migration', 'retry', 'cli-m1'], env);
  expect(retry.code).toBe(1);
  expect(retry.stderr).toMatch(/only an ended, Failed migration can be retried/);
}, 60_000);

test('a migration cancelled before its swap ends Cancelled: show --watch exits 4', async () => {
  const start = await runCli(
    ['migration', 'start', 'cli-r2', '--target', 'eastus', '--migration-id', 'cli-m2'],
    env,
  );
  expect(start.code).toBe(0);
  expect(start.stdout).toContain('migration cli-m2 accepted');
  // The dev profile waits 3 s for convergence after the pre-lock: the cancel lands well before the swap.
  const cancel = await runCli(['--json', 'migration', 'cancel', 'cli-m2'], env);
  expect(cancel.code).toBe(0);
  expect(JSON.parse(cancel.stdout)).toMatchObject({
    migrationId: 'cli-m2',
    cancelRequestedAt: expect.any(String),
  });
  const watch = await runCli(['migration', 'show', 'cli-m2', '--watch', '--interval', '0.3', '--json'], env);
  expect(watch.code).toBe(4);
  expect(JSON.parse(watch.stdout)).toMatchObject({ migrationId: 'cli-m2', status: 'Cancelled' });
  const route = (await (await fetch(`${host.url}/api/routes/cli-r2`)).json()) as {
    location: unknown;
    lock: unknown;
  };
  expect(route).toMatchObject({ location: { region: 'westeurope' }, lock: null });
}, 60_000);

test('bad usage is exit 2 and sends nothing', async () => {
  const before = (await (await fetch(`${host.url}/api/migrations`)).json()) as { items: unknown[] };
  for (const args of [
    ['migration', 'start', 'cli-r1'],
    ['migration', 'start', 'cli-r1', '--target', 'a/b/c'],
    ['migration', 'list', '--status', 'Sleeping'],
    ['migration', 'list', '--limit', '0'],
    ['--url', 'ftp://example.com', 'migration', 'list'],
    ['campaign', 'start', '--target', 'eastus'],
    ['campaign', 'start', '--target', 'eastus', '--resource', 'a', '--from', 'westeurope'],
    ['nonsense'],
  ]) {
    const run = await runCli(args, env);
    expect({ args, code: run.code }).toEqual({ args, code: 2 });
    expect(run.stderr).toMatch(/error/);
  }
  const after = (await (await fetch(`${host.url}/api/migrations`)).json()) as { items: unknown[] };
  expect(after.items.length).toBe(before.items.length);
  expect((await runCli(['--help'], env)).code).toBe(0);
}, 60_000);

test('without --url or ROUTELOCK_URL the command line finds the host on PORT, as `npm start` listens; a bad PORT is named', async () => {
  const { port } = new URL(host.url);
  const { ROUTELOCK_URL: _url, ...rest } = env;
  const viaPort = await runCli(['migration', 'list', '--json'], { ...rest, PORT: port });
  expect(viaPort).toMatchObject({ code: 0, stderr: '' });
  expect(JSON.parse(viaPort.stdout)).toHaveProperty('items');
  const bad = await runCli(['migration', 'list'], { ...rest, PORT: 'seventy' });
  expect(bad).toMatchObject({ code: 2, stdout: '' });
  expect(bad.stderr).toMatch(
    /PORT: expected a TCP port number \(1-65535\), got "seventy"; or set ROUTELOCK_URL/,
  );
}, 60_000);

test('an input the API refuses is exit 1 with its problem; a host that does not answer is exit 3', async () => {
  const bad = await runCli(['migration', 'start', 'bad id!', '--target', 'eastus'], env);
  expect(bad.code).toBe(1);
  expect(bad.stderr).toMatch(/^error: The request is not valid: Invalid body: resourceId/m);
  const missing = await runCli(['migration', 'show', 'no-such-migration'], env);
  expect(missing).toMatchObject({ code: 1, stdout: '' });
  expect(missing.stderr).toBe('error: Not found: No migration no-such-migration.\n');
  // A port nothing listens on: one just opened and closed again.
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const down = await runCli([
    'migration',
    'list',
    '--url',
    `http://127.0.0.1:${port}`,
    '--key',
    KEY,
    '--token',
    TOKEN,
  ]);
  expect(down).toMatchObject({ code: 3, stdout: '' });
  expect(down.stderr).toBe(`error: cannot reach http://127.0.0.1:${port}: ECONNREFUSED\n`);
}, 60_000);

describe('credentials', () => {
  let echo: Server;
  let seen: Record<string, string | string[] | undefined>[];
  let echoUrl: string;

  beforeAll(async () => {
    seen = [];
    // A stand-in for a Functions host that refuses: records what arrived, answers a 403 problem.
    echo = createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(403, { 'content-type': 'application/problem+json' });
      res.end(
        JSON.stringify({
          title: 'Forbidden',
          status: 403,
          detail: 'The caller lacks the role Ops.Read.',
          code: 'Forbidden',
        }),
      );
    });
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    echoUrl = `http://127.0.0.1:${(echo.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => echo.close(() => resolve())));

  test('go out as x-functions-key and Authorization: Bearer, from flags or environment, and are never printed', async () => {
    const fromFlags = await runCli([
      'migration',
      'show',
      'm',
      '--url',
      echoUrl,
      '--key',
      KEY,
      '--token',
      TOKEN,
    ]);
    const fromEnv = await runCli(['--json', 'campaign', 'list'], {
      ROUTELOCK_URL: `${echoUrl}/api/`,
      ROUTELOCK_FUNCTION_KEY: KEY,
      ROUTELOCK_TOKEN: TOKEN,
    });
    for (const run of [fromFlags, fromEnv]) {
      expect(run.code).toBe(1);
      expect(run.stderr).toBe('error: Forbidden: The caller lacks the role Ops.Read.\n');
      expect(run.stdout + run.stderr).not.toContain(KEY);
      expect(run.stdout + run.stderr).not.toContain(TOKEN);
    }
    expect(seen).toHaveLength(2);
    for (const headers of seen) {
      expect(headers['x-functions-key']).toBe(KEY);
      expect(headers.authorization).toBe(`Bearer ${TOKEN}`);
    }
    // The help names the variables, never their values.
    const help = await runCli(['--help'], { ROUTELOCK_FUNCTION_KEY: KEY, ROUTELOCK_TOKEN: TOKEN });
    expect(help.stdout).toContain('ROUTELOCK_FUNCTION_KEY');
    expect(help.stdout).not.toContain(KEY);
    expect(help.stdout).not.toContain(TOKEN);
  }, 60_000);
});

describe('credentials stay on their way', () => {
  const servers: Server[] = [];
  const listen = async (host: string, handler: Parameters<typeof createServer>[1]) => {
    const server = createServer(handler);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    return (server.address() as AddressInfo).port;
  };
  afterAll(() => Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve())))));

  test('a redirect is not followed (exit 1): its other origin receives neither key nor token', async () => {
    const received: Record<string, string | string[] | undefined>[] = [];
    const elsewherePort = await listen('127.0.0.1', (req, res) => {
      received.push(req.headers);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"items":[]}');
    });
    // `localhost` and `127.0.0.1` are different origins: fetch would drop Authorization there, not the key.
    const redirectPort = await listen('127.0.0.1', (req, res) => {
      res.writeHead(307, { location: `http://localhost:${elsewherePort}${req.url ?? '/'}` });
      res.end();
    });
    const url = `http://127.0.0.1:${redirectPort}`;
    // Negative control: a fetch that follows the redirect hands the key to the other origin.
    await fetch(`${url}/api/campaigns`, { headers: { 'x-functions-key': KEY } });
    expect(received.map((h) => h['x-functions-key'])).toEqual([KEY]);
    received.length = 0;

    const run = await runCli(['campaign', 'list', '--url', url, '--key', KEY, '--token', TOKEN]);
    expect(run).toMatchObject({ code: 1, stdout: '' });
    expect(run.stderr).toBe(
      `error: HTTP 307: ${url} answered with a redirect to http://localhost:${elsewherePort}; redirects are not followed (they could carry the credentials elsewhere): give --url the address that answers\n`,
    );
    expect(received).toEqual([]);
  }, 60_000);

  test('a key or token over plain http to another machine is refused before any request (exit 2)', async () => {
    const address = Object.values(networkInterfaces())
      .flat()
      .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
    let requests = 0;
    // The refusal never connects: on a machine without another interface a documentation address
    // (RFC 5737) stands in, and only the reachability control below needs a real one.
    const port = address
      ? await listen('0.0.0.0', (_req, res) => {
          requests++;
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end('{"items":[]}');
        })
      : 9;
    const url = `http://${address ?? '192.0.2.1'}:${port}`;
    for (const credential of [
      ['--key', KEY],
      ['--token', TOKEN],
    ]) {
      const run = await runCli(['campaign', 'list', '--url', url, ...credential]);
      expect(run).toMatchObject({ code: 2, stdout: '' });
      expect(run.stderr).toBe(
        `error: --url: a key or token is sent over https only (plain http only to localhost): ${url} would expose it\n`,
      );
    }
    expect(requests).toBe(0);
    // Control: the same host is reachable, so it was the refusal that sent nothing; without credentials it is asked.
    if (address) {
      expect((await runCli(['campaign', 'list', '--url', url])).code).toBe(0);
      expect(requests).toBe(1);
    }
    // Loopback over http and any host over https are allowed (the https host here does not exist).
    expect(() => new RouteLockApi({ url: 'http://[::1]:7071', functionKey: KEY })).not.toThrow();
    expect(() => new RouteLockApi({ url: 'https://routelock.example', token: TOKEN })).not.toThrow();
  }, 60_000);

  test("a URL's user and password are never echoed", async () => {
    for (const url of ['https://user:hunter2@host:99999', 'user:hunter2@host', 'https://user:hunter2@host']) {
      const run = await runCli(['campaign', 'list', '--url', url]);
      expect({ url, code: run.code }).toEqual({ url, code: 2 });
      expect(run.stdout + run.stderr).not.toContain('hunter2');
      expect(run.stderr).toMatch(/^error: --url: /);
    }
  }, 60_000);
});

test('`npx routelock` runs this repository\'s bin (package.json "bin" → bin/routelock.js)', async () => {
  const run = await runCli(['--json', 'migration', 'list', '--resource', 'cli-r1'], env, {
    command: 'npx',
    commandArgs: ['routelock'],
  });
  expect(run.code).toBe(0);
  expect((JSON.parse(run.stdout) as { items: { migrationId: string }[] }).items[0]?.migrationId).toBe(
    'cli-m1',
  );
}, 60_000);

test('start --dry-run prints the preflight report and writes nothing; a failing check exits 5', async () => {
  const put = await fetch(`${host.url}/api/routes/cli-dry`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ location: { region: 'westeurope' } }),
  });
  expect(put.status).toBe(201);
  const before = await (await fetch(`${host.url}/api/routes/cli-dry`)).json();

  const dry = await runCli(['migration', 'start', 'cli-dry', '--target', 'eastus', '--dry-run'], env);
  expect(dry).toMatchObject({ code: 0, stderr: '' });
  expect(dry.stdout).toMatch(/^dry run of cli-dry → eastus: ok$/m);
  expect(dry.stdout).toMatch(/^✓ notLocked: no live lock$/m);
  // no allowlist on this host: said as such, not ticked as if the region had been checked
  expect(dry.stdout).toMatch(
    /^– regionAllowed: no region allowlist set \(ROUTELOCK_REGIONS\): any region accepted$/m,
  );
  expect(dry.stdout).not.toMatch(/✓ regionAllowed/);
  expect(dry.stdout).toMatch(/^convergence wait: \d+ s$/m);

  const json = await runCli(
    ['migration', 'start', 'cli-dry', '--target', 'eastus', '--dry-run', '--json'],
    env,
  );
  const report = JSON.parse(json.stdout) as PreflightReport;
  expect(report).toMatchObject({ dryRun: true, resourceId: 'cli-dry', ok: true });
  expect(report.checks.find((c) => c.check === 'regionAllowed')).toMatchObject({
    ok: true,
    outcome: 'notConfigured',
  });

  const atTarget = await runCli(
    ['migration', 'start', 'cli-dry', '--target', 'westeurope', '--dry-run'],
    env,
  );
  expect(atTarget.code).toBe(5);
  expect(atTarget.stdout).toMatch(/^✗ notAtTarget: /m);

  // nothing written: no migration of it, the route unchanged
  const list = await runCli(['migration', 'list', '--resource', 'cli-dry', '--json'], env);
  expect((JSON.parse(list.stdout) as { items: unknown[] }).items).toEqual([]);
  expect(await (await fetch(`${host.url}/api/routes/cli-dry`)).json()).toEqual(before);
}, 60_000);
