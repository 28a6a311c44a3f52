import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import type { ProbeResult } from '../../shared/migration/probe';
import type { MetricsSnapshot } from '../../shared/migration/telemetry/sink';

/**
 * The synthetic probe on a fresh embedded host, with the dev profile's declared convergence delay (far
 * longer than the probe's own one second): its runs are judged by the probe's own timing, so they make
 * no convergence shortfall; its events still reach the metrics.
 */

let dir: string;
let host: LocalHost;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'routelock-probe-shortfall-'));
  host = await startLocalHost({
    env: { PORT: '0', ROUTELOCK_SQLITE_PATH: join(dir, 'routelock.db') },
    log: () => undefined,
  });
});
afterAll(async () => {
  await host?.close();
  rmSync(dir, { recursive: true, force: true });
});

const metrics = async () => (await (await fetch(`${host.url}/api/metrics`)).json()) as MetricsSnapshot;

test('4 probe runs on a fresh host: 4 passed, 4 swaps counted, 0 convergence shortfalls', async () => {
  const declared = host.services.config.timing.convergenceDelaySeconds;
  expect(declared).toBeGreaterThan(1); // the dev profile's delay: what a probe lock would have fallen short of
  for (let run = 0; run < 4; run += 1) {
    const res = await fetch(`${host.url}/api/ops/probe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ outcome: 'passed', success: true });
  }
  // the change stream reaches the recorder asynchronously: wait for the 4 swaps
  const deadline = Date.now() + 10_000;
  let snapshot = await metrics();
  while ((snapshot.events.MigrationSwapped ?? 0) < 4 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    snapshot = await metrics();
  }
  expect(snapshot.events.MigrationSwapped).toBe(4);
  expect(snapshot.convergenceShortfalls).toBe(0);
  expect(snapshot.events.ConvergenceShortfall).toBeUndefined();
  expect(snapshot.probes).toMatchObject({ runs: 4, failures: 0 });
}, 60_000);

test('overlapping runs over HTTP: of each pair one passes and one is skipped; no probe failure', async () => {
  const post = () =>
    fetch(`${host.url}/api/ops/probe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    }).then(async (r) => (await r.json()) as ProbeResult);
  const before = (await metrics()).probes;
  // Several pairs, so each way of losing the race is met: the lock seen at setup, or taken first at pre-lock.
  for (let pair = 0; pair < 3; pair += 1) {
    const results = await Promise.all([post(), post()]);
    expect(results.map((r) => r.outcome).sort()).toEqual(['passed', 'skipped']);
    expect(results.find((r) => r.outcome === 'skipped')?.skipReason).toMatch(/^another probe run /);
  }
  const after = (await metrics()).probes;
  expect(after.failures).toBe(before.failures);
  expect(after.runs).toBe(before.runs + 3);
}, 60_000);
