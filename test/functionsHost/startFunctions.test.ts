import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { poll } from '../support/poll';
import { scratchDir } from '../support/scratch';

/**
 * `npm run start:functions` on free ports in a temporary directory: the app on the real Durable Task
 * extension, Storage Queues and timer extensions (hosts/webjobs), Azurite and the Node worker stand-in.
 * The first run restores the host's NuGet packages and builds it, hence the long start budget; the
 * figures it prints (restore + build, start to listening, start to Completed) are the ones docs/operators.md
 * quotes. Skipped by `npm run test:fast` (it needs the .NET SDK and minutes).
 */

const root = join(__dirname, '../..');
jest.setTimeout(120_000);

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

interface Launched {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/**
 * The machine's environment without the app's settings: the .NET SDK and NuGet read theirs from it
 * (without NUGET_CERT_REVOCATION_MODE a restore on a closed network waits on each package's revocation
 * check: 262 s instead of 16 s), and the app's come from the test alone.
 */
function machineEnv(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(process.env).filter(
      (entry): entry is [string, string] =>
        entry[1] !== undefined && !/^(ROUTELOCK_|COSMOS_|PORT$|AzureWebJobs)/.test(entry[0]),
    ),
  );
}

function launch(env: Record<string, string>): Launched {
  const dir = scratchDir('functions-');
  const child = spawn(process.execPath, [join(root, 'scripts/start-functions.js')], {
    cwd: dir,
    env: {
      ...machineEnv(),
      ROUTELOCK_SQLITE_PATH: join(dir, 'routelock.db'),
      ROUTELOCK_TASK_HUB: `fnhost${Date.now().toString(36)}`,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout?.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (text += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => text, exited };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function json(
  url: string,
  init?: RequestInit,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url, { ...init, headers: { 'content-type': 'application/json' } });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('npm run start:functions', () => {
  let host: Launched;
  let api = '';
  let startedMs = 0;

  beforeAll(async () => {
    const port = await freePort();
    const began = Date.now();
    host = launch({ PORT: String(port) });
    api = await poll(
      () => /API base (\S+)/.exec(host.output())?.[1] ?? (host.child.exitCode === null ? '' : 'exited'),
      (value) => value !== '',
      600_000,
    );
    if (api === 'exited') throw new Error(`start:functions exited:\n${host.output()}`);
    startedMs = Date.now() - began;
    process.stdout.write(`start:functions: listening after ${startedMs} ms (build included)\n`);
  }, 620_000);

  afterAll(async () => {
    if (host && host.child.exitCode === null) {
      host.child.kill('SIGTERM');
      await host.exited;
    }
  });

  test('a lock-only migration runs to Completed on the real Durable extension', async () => {
    const id = `fnhost-${Date.now()}`;
    const put = await json(`${api}/routes/${id}`, {
      method: 'PUT',
      body: JSON.stringify({ location: { region: 'westeurope' } }),
    });
    expect(put.status).toBe(201);
    const began = Date.now();
    const started = await json(`${api}/migrations`, {
      method: 'POST',
      body: JSON.stringify({ resourceId: id, target: { region: 'eastus' } }),
    });
    expect(started.status).toBe(202);
    const migrationId = String(started.body.migrationId);
    const ended = await poll(
      async () => (await json(`${api}/migrations/${encodeURIComponent(migrationId)}`)).body,
      (body) => ['Completed', 'Failed', 'Cancelled', 'Conflict'].includes(String(body.status)),
      90_000,
    );
    process.stdout.write(`start:functions: lock-only migration Completed after ${Date.now() - began} ms\n`);
    expect(ended.status).toBe('Completed');
    const route = await json(`${api}/routes/${id}`);
    expect(route.body.location).toEqual({ region: 'eastus' });
    expect(route.body.lock).toBeNull();
  });

  test('SIGTERM stops every process it started', async () => {
    const pids = [...host.output().matchAll(/started \(pid (\d+)\)/g)].map((m) => Number(m[1]));
    expect(pids).toHaveLength(3); // Azurite, the worker, the WebJobs host
    expect(pids.every(alive)).toBe(true);
    host.child.kill('SIGTERM');
    expect(await host.exited).toBe(0);
    expect(pids.filter(alive)).toEqual([]);
  });

  test('a bad setting fails before anything starts', async () => {
    const bad = launch({ PORT: String(await freePort()), ROUTELOCK_TASK_HUB: 'no_underscores' });
    expect(await bad.exited).toBe(1);
    expect(bad.output()).toMatch(/SETTING_INVALID: .*hubName 'no_underscores' is not a task hub name/);
    expect(bad.output()).not.toMatch(/started \(pid/);
  });
});
