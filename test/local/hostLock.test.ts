import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runHostToExit, spawnHost } from '../support/spawnHost';

/** One host per data file, a taken port that says what to do, and a shutdown that waits for its runners. */

const dir = mkdtempSync(join(tmpdir(), 'routelock-hostlock-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('a second host on the same SQLite file refuses to start and names the file and the host holding it', async () => {
  const db = join(dir, 'shared.db');
  const first = await spawnHost({ ROUTELOCK_SQLITE_PATH: db });
  try {
    const second = await runHostToExit({ ROUTELOCK_SQLITE_PATH: db });
    expect(second.code).toBe(3);
    expect(second.output).toContain(`${db} is in use by the routelock host with pid ${first.child.pid}`);
    expect(second.output).toContain(`at ${first.url}`);
    expect(second.output).toContain('ROUTELOCK_SQLITE_PATH');
  } finally {
    first.child.kill('SIGTERM');
    await first.exited;
  }
  // positive control: once the first has stopped, the file is free
  const third = await spawnHost({ ROUTELOCK_SQLITE_PATH: db });
  expect((await fetch(`${third.url}/api/health`)).status).toBe(200);
  third.child.kill('SIGTERM');
  expect(await third.exited).toEqual({ code: 0, signal: null });
}, 60_000);

test('a host killed by SIGKILL leaves no lock that blocks the next start', async () => {
  const db = join(dir, 'killed.db');
  const first = await spawnHost({ ROUTELOCK_SQLITE_PATH: db });
  first.child.kill('SIGKILL');
  await first.exited;
  const second = await spawnHost({ ROUTELOCK_SQLITE_PATH: db });
  expect((await fetch(`${second.url}/api/health`)).status).toBe(200);
  second.child.kill('SIGTERM');
  expect(await second.exited).toEqual({ code: 0, signal: null });
}, 60_000);

test('a taken port says to set PORT', async () => {
  const blocker = createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  const { port } = blocker.address() as { port: number };
  try {
    const result = await runHostToExit({ PORT: String(port), ROUTELOCK_SQLITE_PATH: join(dir, 'port.db') });
    expect(result.code).toBe(3);
    expect(result.output).toContain(`port ${port} on 127.0.0.1 is already in use`);
    expect(result.output).toContain('Set PORT to a free port');
  } finally {
    blocker.close();
  }
}, 60_000);

test('SIGTERM with migrations in flight exits 0, with no rejection from a closed store', async () => {
  const host = await spawnHost({ ROUTELOCK_SQLITE_PATH: join(dir, 'inflight.db'), ROUTELOCK_PROFILE: 'dev' });
  const api = `${host.url}/api`;
  const post = (path: string, body: unknown, method = 'POST') =>
    fetch(`${api}/${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  for (let i = 0; i < 5; i += 1) {
    expect((await post(`routes/sig-${i}`, { location: { region: 'westeurope' } }, 'PUT')).status).toBe(201);
    expect((await post('migrations', { resourceId: `sig-${i}`, target: { region: 'eastus' } })).status).toBe(
      202,
    );
  }
  host.child.kill('SIGTERM');
  expect(await host.exited).toEqual({ code: 0, signal: null });
  expect(host.output()).not.toMatch(/unhandled|database connection is not open|shutdown failed/i);
}, 60_000);
