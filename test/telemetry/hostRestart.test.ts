import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import type { MigrationStatus } from '../../shared/migration/types';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import type { MetricsSnapshot } from '../../shared/migration/telemetry/sink';
import { parse } from 'yaml';

/**
 * The embedded host end to end: a real migration over HTTP, GET /api/metrics, a restart over the same
 * files (the same snapshot), and the host's reconciliation finding a write its change handler never saw
 * (made through another connection to the store's file: the host's stream never hears of it).
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'routelock-host-telemetry-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const env = {
  PORT: '0',
  ROUTELOCK_CACHE_TIERS: 'local=1',
  ROUTELOCK_REPLICATION_BOUND_SECONDS: '0',
  ROUTELOCK_SAFETY_BUFFER_SECONDS: '0',
  ROUTELOCK_RECONCILE_GRACE_SECONDS: '0',
};

async function start(): Promise<LocalHost> {
  return startLocalHost({
    env,
    store: new SqliteStore(join(dir, 'routes.db')),
    statePath: join(dir, 'state.db'),
    log: () => undefined,
  });
}

async function metricsOf(host: LocalHost): Promise<MetricsSnapshot> {
  return (await (await fetch(`${host.url}/api/metrics`)).json()) as MetricsSnapshot;
}

async function migrate(host: LocalHost, resourceId: string): Promise<MigrationStatus> {
  const json = { 'content-type': 'application/json' };
  await fetch(`${host.url}/api/routes/${resourceId}`, {
    method: 'PUT',
    headers: json,
    body: JSON.stringify({ location: SOURCE }),
  });
  const started = (await (
    await fetch(`${host.url}/api/migrations`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ resourceId, target: TARGET }),
    })
  ).json()) as { statusUrl: string };
  for (;;) {
    const status = (await (await fetch(`${host.url}${started.statusUrl}`)).json()) as MigrationStatus;
    if (status.status !== 'Running' && status.status !== 'Pending') return status;
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('/api/metrics survives a restart; a change the handler never saw is a TelemetryGap, counted once', async () => {
  let host = await start();
  try {
    expect((await migrate(host, 'restart-1')).status).toBe('Completed');
    // the change handler runs after each write's answer: wait for the swap's events
    for (let i = 0; i < 50 && (await metricsOf(host)).events.MigrationSwapped !== 1; i += 1)
      await new Promise((r) => setTimeout(r, 20));
    expect((await metricsOf(host)).events).toMatchObject({
      LockAcquired: 3,
      LockReleased: 1,
      MigrationSwapped: 1,
    });
    expect((await metricsOf(host)).writeLockSeconds.count).toBe(1);
    // the runner's MigrationEnded (docs/design.md §6.12): counted by outcome, and kept across the restart
    for (let i = 0; i < 50 && (await metricsOf(host)).migrations.completed !== 1; i += 1)
      await new Promise((r) => setTimeout(r, 20));
    expect((await metricsOf(host)).migrations).toEqual({
      completed: 1,
      failed: 0,
      conflicts: 0,
      cancelled: 0,
      noOps: 0,
    });
    const before = await metricsOf(host);
    expect(await host.reconcileTelemetry()).toMatchObject({ checked: 1, gaps: [] });
    await host.close();

    host = await start();
    expect(await metricsOf(host)).toEqual(before);

    // Another connection to the same file writes: the host's change stream never hears of it.
    const elsewhere = new SqliteStore(join(dir, 'routes.db'));
    const stored = await elsewhere.read('restart-1', { from: 'writeRegion' });
    await elsewhere.replace(
      { ...stored.doc, lastChange: { op: 'renew', at: new Date().toISOString() } },
      stored.etag,
    );
    await elsewhere.close();
    await new Promise((r) => setTimeout(r, 5)); // the store's clock moves past the write
    const run = await host.reconcileTelemetry();
    expect(run?.gaps).toEqual([
      expect.objectContaining({ resourceId: 'restart-1', op: 'renew', missing: 'version' }),
    ]);
    await host.reconcileTelemetry(); // the next, overlapping run: the same key
    const withGap = await metricsOf(host);
    expect(withGap).toMatchObject({ telemetryGaps: 1, events: { TelemetryGap: 1 } });
    await host.close();

    host = await start();
    expect((await metricsOf(host)).telemetryGaps).toBe(1);
  } finally {
    await host.close();
  }
}, 60_000);

interface Schema {
  $ref?: string;
  required?: string[];
  properties?: Record<string, Schema>;
}

/** The keys openapi.yaml requires of an object, and its nested objects', against a live answer. */
function assertShape(value: Record<string, unknown>, schema: Schema, schemas: Record<string, Schema>): void {
  const resolved = schema.$ref ? schemas[schema.$ref.split('/').pop()!]! : schema;
  if (!resolved.properties) return;
  expect(Object.keys(value).sort()).toEqual([...(resolved.required ?? [])].sort());
  for (const [key, child] of Object.entries(resolved.properties)) {
    const nested = value[key];
    if (nested && typeof nested === 'object' && (child.$ref || child.properties))
      assertShape(nested as Record<string, unknown>, child, schemas);
  }
}

test('GET /api/metrics answers exactly the MetricsSnapshot openapi.yaml declares', async () => {
  const spec = parse(readFileSync(join(__dirname, '../../openapi.yaml'), 'utf8')) as {
    components: { schemas: Record<string, Schema> };
  };
  const host = await startLocalHost({ env, store: new SqliteStore(':memory:'), log: () => undefined });
  try {
    const snapshot = (await metricsOf(host)) as unknown as Record<string, unknown>;
    assertShape(snapshot, { $ref: '#/components/schemas/MetricsSnapshot' }, spec.components.schemas);
  } finally {
    await host.close();
  }
});
