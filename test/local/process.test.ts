import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LockGrant } from '../../shared/core/lock/view';
import { runHostToExit, spawnHost } from '../support/spawnHost';

/** The embedded host as a process: restarts, signals, bad configuration. */

const dir = mkdtempSync(join(tmpdir(), 'routelock-process-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const json = (body: unknown) => ({
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(body),
});

test('SIGKILL loses nothing: after a restart on the same file, the live lock and its token still work', async () => {
  const env = { ROUTELOCK_SQLITE_PATH: join(dir, 'kill.db'), ROUTELOCK_PROFILE: 'dev' };
  const first = await spawnHost(env);
  const api = `${first.url}/api`;
  await fetch(`${api}/routes/conv-9`, { ...json({ location: { region: 'westeurope' } }), method: 'PUT' });
  const grant = (await (
    await fetch(
      `${api}/routes/conv-9/prelock`,
      json({ migrationId: 'm-9', owner: 'o', target: { region: 'eastus' } }),
    )
  ).json()) as LockGrant;
  expect(grant.token).toBeDefined();
  first.child.kill('SIGKILL');
  expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });

  const second = await spawnHost(env);
  try {
    const api2 = `${second.url}/api`;
    const view = await (await fetch(`${api2}/routes/conv-9`)).json();
    expect(view).toMatchObject({ lock: { migrationId: 'm-9', phase: 'prelock' } });
    const other = await fetch(
      `${api2}/routes/conv-9/prelock`,
      json({ migrationId: 'm-10', owner: 'o2', target: { region: 'eastus' } }),
    );
    expect(other.status).toBe(423);
    const wait = Date.parse(grant.startsAt) - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait + 50));
    const escalated = await fetch(
      `${api2}/routes/conv-9/escalate`,
      json({ token: grant.token, phase: 'hardDelete' }),
    );
    expect(escalated.status).toBe(200);
    expect(second.output()).not.toContain(grant.token!);
    expect(first.output()).not.toContain(grant.token!);
  } finally {
    second.child.kill('SIGTERM');
    await second.exited;
  }
});

test('SIGTERM and SIGINT shut down cleanly (exit 0)', async () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    const host = await spawnHost({ ROUTELOCK_SQLITE_PATH: join(dir, `${signal}.db`) });
    expect((await fetch(`${host.url}/api/health`)).status).toBe(200);
    host.child.kill(signal);
    expect(await host.exited).toEqual({ code: 0, signal: null });
    expect(host.output()).toContain(`${signal}, shutting down`);
  }
});

test('bad configuration exits non-zero and names the variable', async () => {
  const bad = await runHostToExit({
    ROUTELOCK_WRITE_LEASE_SECONDS: 'soon',
    ROUTELOCK_SQLITE_PATH: join(dir, 'bad.db'),
  });
  expect(bad.code).toBe(2);
  expect(bad.output).toContain('ROUTELOCK_WRITE_LEASE_SECONDS: expected a whole number of seconds');
  const port = await runHostToExit({ PORT: 'eighty' });
  expect(port.code).toBe(2);
  expect(port.output).toContain('PORT: expected a TCP port number');
});

test('the banner prints the URL, the store, the timing profile and a migration that runs as pasted, twice', async () => {
  const host = await spawnHost({ ROUTELOCK_SQLITE_PATH: join(dir, 'banner.db') });
  try {
    const out = host.output();
    expect(out).toContain(`store:   sqlite (${join(dir, 'banner.db')})`);
    expect(out).toContain('timing:  dev (convergence delay 3 s');
    const lines = out.split('\n');
    const start = lines.findIndex((line) => line.startsWith('Try it'));
    const example = lines.slice(start + 1, lines.indexOf('', start)).map((line) => line.trim());
    expect(example[0]).toMatch(/^A=http:\/\/127\.0\.0\.1:\d+\/api; /);
    for (const run of [1, 2]) {
      const answer = execFileSync('bash', ['-euc', example.join('\n')], { encoding: 'utf8' });
      expect({ run, started: /"migrationId":"m-[^"]+"/.test(answer) }).toEqual({ run, started: true });
    }
  } finally {
    host.child.kill('SIGTERM');
    await host.exited;
  }
});

test('ROUTELOCK_STORE=cosmos runs the host on the Cosmos adapter (emulator on loopback)', async () => {
  const { startCosmosServer } = await import('../../testkit/cosmosServer');
  const cosmos = await startCosmosServer();
  const host = await spawnHost({
    ROUTELOCK_STORE: 'cosmos',
    COSMOS_ENDPOINT: cosmos.endpoint,
    COSMOS_KEY: cosmos.key,
    COSMOS_DISABLE_TLS_VERIFY: '1',
  });
  try {
    expect(host.output()).toContain(`store:   cosmos (${cosmos.endpoint})`);
    expect(await (await fetch(`${host.url}/api/health`)).json()).toEqual({ status: 'ok', store: 'cosmos' });
    const put = await fetch(`${host.url}/api/routes/c-1`, {
      ...json({ location: { region: 'westeurope' } }),
      method: 'PUT',
    });
    expect(put.status).toBe(201);
    expect((await fetch(`${host.url}/api/routes/c-1`)).status).toBe(200);
  } finally {
    host.child.kill('SIGTERM');
    await host.exited;
    await cosmos.close();
  }
});
