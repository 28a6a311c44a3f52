import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RoutingClient } from '../../shared/core/client';
import { spawnHost } from '../support/spawnHost';

/**
 * RoutingClient against a real embedded host stopped with SIGSTOP: the process accepts nothing, but the
 * kernel still completes connections into its backlog, so every request hangs to the client's timeout.
 * Ten concurrent workers open the breaker; from then on their calls are answered `unavailable` without
 * a request. Counts only, no timing assertion (the bench measures time and sockets).
 */

const dir = mkdtempSync(join(tmpdir(), 'routelock-hung-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('a SIGSTOPped host opens the breaker; while it is open no request is sent', async () => {
  const host = await spawnHost({ ROUTELOCK_SQLITE_PATH: join(dir, 'hung.db'), ROUTELOCK_PROFILE: 'dev' });
  const here = { region: 'westeurope' };
  try {
    const api = `${host.url}/api`;
    const client = new RoutingClient({
      baseUrl: api,
      clockSkewSeconds: 0,
      timeoutMs: 300,
      breakerFailures: 5,
      breakerBackoffMs: 60_000,
      breakerJitter: 0,
    });
    for (let i = 0; i < 10; i += 1) await client.putRoute(`conv-${i}`, here);
    await client.ready();
    host.child.kill('SIGSTOP');

    const wave = await Promise.all(
      Array.from({ length: 10 }, (_, i) => client.decideFor(`conv-${i}`, 'write', here)),
    );
    for (const { decision } of wave) expect(decision.kind).toBe('unavailable');
    expect(client.breakerState()).toMatchObject({ kind: 'open', opens: 1 });
    const sent = client.requests;

    const refused = await Promise.all(
      Array.from({ length: 50 }, (_, i) => client.decideFor(`conv-${i % 10}`, 'read', here)),
    );
    for (const { decision } of refused) expect(decision.kind).toBe('unavailable');
    expect(client.requests).toBe(sent);
  } finally {
    host.child.kill('SIGCONT');
    host.child.kill('SIGTERM');
    await host.exited;
  }
});
