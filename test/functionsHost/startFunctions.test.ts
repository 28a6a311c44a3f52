import { request } from 'node:http';
import { poll } from '../support/poll';
import { type FunctionsHost, freePort, hostSecret, json, launch, startHost } from './host';

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

  describe('only the WebJobs host reaches the worker', () => {
    const workerUrl = () => /worker listening on (\S+)/.exec(host.output())?.[1] ?? '';
    /** The worker's invocation of the app's `PUT routes/{id}`, as the front door sends it. */
    async function putRoute(id: string, headers: Record<string, string>): Promise<number> {
      const described = (await (
        await fetch(workerUrl(), { headers: { 'x-routelock-worker-key': hostSecret(host) } })
      ).json()) as { name: string; trigger: { name: string; route?: string; methods?: string[] } }[];
      const fn = described.find(
        (f) => f.trigger.route === 'routes/{id}' && f.trigger.methods?.includes('PUT'),
      );
      const body = Buffer.from(JSON.stringify({ location: { region: 'westeurope' } })).toString('base64');
      const http = {
        method: 'PUT',
        url: `${api}/routes/${id}`,
        headers: { 'content-type': 'application/json' },
        query: {},
        params: { id },
        body: { base64: body },
      };
      const invocation = { name: fn?.name, inputs: [{ name: fn?.trigger.name, data: { http } }] };
      const response = await fetch(workerUrl(), {
        method: 'POST',
        headers,
        body: JSON.stringify(invocation),
      });
      return response.status;
    }

    test('a call without the secret, or naming a foreign Host, is refused and invokes nothing', async () => {
      const id = `fnhost-worker-${Date.now()}`;
      expect(await putRoute(id, { 'content-type': 'text/plain' })).toBe(403);
      expect(
        await putRoute(id, { 'content-type': 'application/json', 'x-routelock-worker-key': 'x'.repeat(64) }),
      ).toBe(403);
      const rebound = { 'content-type': 'application/json', 'x-routelock-worker-key': hostSecret(host) };
      const rebinding = await new Promise<number>((resolve, reject) => {
        // fetch does not let a caller set Host; a rebinding page's browser sends its own name
        const url = new URL(workerUrl());
        const req = request(
          {
            host: url.hostname,
            port: url.port,
            method: 'GET',
            headers: { ...rebound, host: `evil.example:${url.port}` },
          },
          (res) => resolve(res.statusCode ?? 0),
        );
        req.once('error', reject);
        req.end();
      });
      expect(rebinding).toBe(403);
      expect((await json(`${api}/routes/${id}`)).status).toBe(404);
      // the same call with the secret runs the function
      expect(await putRoute(id, rebound)).toBe(200);
      expect((await json(`${api}/routes/${id}`)).status).toBe(200);
    });
  });

  test('the Durable HTTP API asks for the secret', async () => {
    const url = `${host.origin}/runtime/webhooks/durabletask/instances/none-such`;
    expect((await fetch(url)).status).toBe(401);
    expect((await fetch(`${url}?code=wrong`)).status).toBe(401);
    expect((await fetch(`${url}?code=${hostSecret(host)}`)).status).toBe(404);
    expect((await fetch(url, { headers: { 'x-functions-key': hostSecret(host) } })).status).toBe(404);
  });

  test('a cross-site browser request to /api/ is refused before the app runs', async () => {
    const cancel = `${api}/migrations/none-such/cancel`;
    const refused = await fetch(cancel, {
      method: 'POST',
      headers: { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
    });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { code: string }).code).toBe('CrossSiteRequest');
    // without a browser's headers the same request reaches the app, which knows no such migration
    expect((await fetch(cancel, { method: 'POST' })).status).toBe(404);
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

  test("an AzureFunctionsJobHost__extensions__ override is read over host.json, as Azure's app settings are", async () => {
    // the host's check sees the override before anything starts; the extension would refuse it only then
    const bad = launch({
      PORT: String(await freePort()),
      AzureFunctionsJobHost__extensions__durableTask__storageProvider__controlQueueVisibilityTimeout:
        '00:00:10',
    });
    expect(await bad.exited).toBe(1);
    expect(bad.output()).toMatch(
      /SETTING_INVALID: .*controlQueueVisibilityTimeout '00:00:10' is not a time span the extension takes/,
    );
    expect(bad.output()).not.toMatch(/started \(pid/);
  });

  test('PORT=0 and ROUTELOCK_AUTH=appservice are refused before anything starts', async () => {
    const zero = launch({ PORT: '0' });
    expect(await zero.exited).toBe(1);
    expect(zero.output()).toMatch(/SETTING_INVALID: PORT=0 is not a port number/);
    const trusting = launch({ PORT: String(await freePort()), ROUTELOCK_AUTH: 'appservice' });
    expect(await trusting.exited).toBe(1);
    expect(trusting.output()).toMatch(
      /SETTING_INVALID: ROUTELOCK_AUTH=appservice trusts the x-ms-client-principal/,
    );
    expect(zero.output() + trusting.output()).not.toMatch(/started \(pid/);
  });
});
