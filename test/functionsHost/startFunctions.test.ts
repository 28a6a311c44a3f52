import { poll } from '../support/poll';
import { type FunctionsHost, freePort, json, launch, startHost } from './host';

/**
 * `npm run start:functions` on free ports in a temporary directory: the app on the real Durable Task
 * extension, Storage Queues and timer extensions (hosts/webjobs), Azurite and the Node worker stand-in.
 * The first run restores the host's NuGet packages and builds it, hence the long start budget; the
 * figures it prints (restore + build, start to listening, start to Completed) are the ones docs/operators.md
 * quotes. Skipped by `npm run test:fast` (it needs the .NET SDK and minutes).
 */

jest.setTimeout(120_000);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('npm run start:functions', () => {
  let host: FunctionsHost;
  let api = '';

  beforeAll(async () => {
    host = await startHost();
    api = host.api;
    process.stdout.write(`start:functions: listening after ${host.startedMs} ms (build included)\n`);
  }, 620_000);

  afterAll(async () => {
    await host?.stop();
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
