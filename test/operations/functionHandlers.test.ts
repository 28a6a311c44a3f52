import { InvocationContext, type Timer } from '@azure/functions';
import { lockTelemetryHandler } from '../../functions/lockTelemetry';
import { orphanSweeperHandler } from '../../functions/orphanSweeper';
import { createServices } from '../../functions/services';
import { syntheticProbeHandler } from '../../functions/syntheticProbe';
import { SqliteAuditLedger } from '../../shared/core/store/sqlite/audit';
import { ManualClock } from '../../testkit/clock';
import type { LocationDocument } from '../../shared/core/lock/document';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { MetricsRecorder } from '../../shared/migration/telemetry/sink';
import { scratchConfig } from '../support/scratch';

/** The Azure trigger handlers, called as the Functions host calls them. */

const timer = {
  isPastDue: false,
  scheduleStatus: { last: '', next: '', lastUpdated: '' },
} as unknown as Timer;

async function setup() {
  const clock = new ManualClock();
  const store = new SqliteStore(':memory:');
  const recorder = new MetricsRecorder();
  const audit = new SqliteAuditLedger(':memory:');
  const services = await createServices(scratchConfig({ ROUTELOCK_PROBE_REGION: 'northeurope' }), {
    clock: clock.now,
    store,
    sink: recorder,
    audit,
  });
  const logs: string[] = [];
  const context = () =>
    new InvocationContext({ logHandler: (level, ...args) => logs.push(`${level} ${args.join(' ')}`) });
  return { clock, store, recorder, audit, services, logs, context };
}

test('change feed trigger: telemetry and audit for each version, flushed', async () => {
  const h = await setup();
  const versions: LocationDocument[] = [];
  h.store.onChange((doc) => versions.push(doc));
  await h.services.router.createRoute('r-1', { region: 'westeurope' });
  const grant = await h.services.router.prelock('r-1', {
    migrationId: 'm',
    owner: 'o',
    target: { region: 'eastus' },
  });
  await h.services.router.release('r-1', { token: grant.token! });
  await lockTelemetryHandler(versions, h.context(), h.services);
  expect(h.recorder.snapshot().events).toEqual({ LockAcquired: 1, LockReleased: 1 });
  expect((await h.audit.list('r-1', 5)).map((r) => r.op)).toEqual(['release']);
  expect(h.logs.join('\n')).toMatch(/change feed: 3 version\(s\), 2 event\(s\)/);
});

test('timer: the probe runs on probe-{region} and reports availability', async () => {
  const h = await setup();
  const realNow = () => Date.now();
  await syntheticProbeHandler(timer, h.context(), { ...h.services, clock: realNow });
  expect(h.recorder.snapshot().probes).toMatchObject({
    runs: 1,
    failures: 0,
    last: { runLocation: 'northeurope' },
  });
  expect(h.logs.join('\n')).toMatch(/probe probe-northeurope: ok/);
}, 15_000);

test('timer: the sweeper reclaims an orphan', async () => {
  const h = await setup();
  await h.services.router.createRoute('r-2', { region: 'westeurope' });
  const grant = await h.services.router.prelock('r-2', {
    migrationId: 'm',
    owner: 'o',
    target: { region: 'eastus' },
  });
  h.clock.set(Date.parse(grant.expiresAt) + 1000);
  await orphanSweeperHandler(timer, h.context(), h.services);
  expect(h.logs.join('\n')).toMatch(/1 locked route\(s\) scanned, 1 orphan\(s\) reclaimed/);
  expect((await h.store.read('r-2', { from: 'writeRegion' })).doc).toMatchObject({
    lock: null,
    lastChange: { op: 'reclaim' },
  });
});
