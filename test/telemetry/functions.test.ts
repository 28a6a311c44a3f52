import { InvocationContext, type Timer, type app } from '@azure/functions';
import { lockTelemetryHandler } from '../../functions/lockTelemetry';
import { createServices } from '../../functions/services';
import {
  registerTelemetryReconciliation,
  telemetryReconciliationHandler,
} from '../../functions/telemetryReconciliation';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { MemorySeenVersions } from '../../shared/migration/telemetry/seen';
import { ForwardingStore } from '../../testkit/forwardingStore';
import { KeepingSink } from '../../testkit/keepingSink';
import { scratchConfig } from '../support/scratch';

/**
 * The Azure side, called as the Functions host calls it: the change feed trigger reports its lag and
 * records what it saw; the timer trigger reconciles over the services' own store (through the audit
 * decorator) and seen versions.
 */

const timer = {
  isPastDue: false,
  scheduleStatus: { last: '', next: '', lastUpdated: '' },
} as unknown as Timer;

async function setup(store = new SqliteStore(':memory:')) {
  const sink = new KeepingSink();
  const seen = new MemorySeenVersions();
  const now = Date.now();
  const services = await createServices(scratchConfig({ ROUTELOCK_RECONCILE_GRACE_SECONDS: '0' }), {
    clock: () => now,
    store,
    sink,
    seen,
  });
  const logs: string[] = [];
  const context = new InvocationContext({ logHandler: (_level, ...args) => logs.push(args.join(' ')) });
  return { store, sink, seen, services, logs, context, now };
}

test('the change feed trigger: changeFeedLagSeconds = now − the newest _ts of the batch; versions recorded as seen', async () => {
  const h = await setup();
  const { doc, etag } = await h.services.router
    .createRoute('lag-1', { region: 'westeurope' })
    .then(() => h.store.read('lag-1', { from: 'writeRegion' }));
  const nowSeconds = h.now / 1000;
  const items = [
    { ...doc, _etag: `"${etag}"`, _ts: Math.floor(nowSeconds) - 42 },
    { ...doc, id: 'lag-2', _etag: '"other"', _ts: Math.floor(nowSeconds) - 7 },
  ];
  await lockTelemetryHandler(items, h.context, h.services);
  const lag = h.sink.metrics.filter((m) => m.name === 'changeFeedLagSeconds');
  expect(lag).toHaveLength(1);
  expect(lag[0]!.value).toBeCloseTo(nowSeconds - (Math.floor(nowSeconds) - 7), 1);
  expect(h.logs.join('\n')).toMatch(/lag \d+(\.\d)? s/);
  // the quoted _etag is keyed bare, as the store's listing will name it
  expect(await h.seen.seen(['lag-1'])).toEqual(new Set([`version:lag-1:${etag}`]));
});

test('the reconciliation timer: a version the trigger never handled is a TelemetryGap, the metric per run', async () => {
  const h = await setup();
  await h.services.router.createRoute('rec-1', { region: 'westeurope' });
  await h.services.router.createRoute('rec-2', { region: 'westeurope' });
  const seenOne = await h.store.read('rec-1', { from: 'writeRegion' });
  await lockTelemetryHandler([{ ...seenOne.doc, _etag: seenOne.etag }], h.context, h.services);
  // the store dates its writes by the wall clock; the services' clock is a little later
  const services = { ...h.services, clock: () => Date.now() + 1000 };
  h.sink.events = [];
  h.sink.metrics = [];
  await telemetryReconciliationHandler(timer, h.context, services);
  expect(h.sink.events.map((e) => [e.name, e.properties.resourceId, e.properties.op])).toEqual([
    ['TelemetryGap', 'rec-2', 'create'],
  ]);
  expect(h.sink.metrics).toEqual([{ name: 'telemetryGaps', value: 1, properties: { truncated: 'false' } }]);
  expect(h.logs.at(-1)).toMatch(/2 version\(s\) checked, 1 gap\(s\)/);
});

test('negative control: a store that cannot list by change time is skipped, not reported gap-free', async () => {
  const h = await setup(new ForwardingStore(new SqliteStore(':memory:')) as unknown as SqliteStore);
  await telemetryReconciliationHandler(timer, h.context, h.services);
  expect(h.sink.metrics).toEqual([]);
  expect(h.logs.at(-1)).toMatch(/cannot list documents by change time; skipped/);
});

test('the timer is registered with the change-feed trigger only (nothing records what the telemetry saw without it)', () => {
  const names = (env: Record<string, string | undefined>) => {
    const calls: { name: string; schedule: string }[] = [];
    registerTelemetryReconciliation(
      ((name: string, options: { schedule: string }) =>
        void calls.push({ name, schedule: options.schedule })) as unknown as typeof app.timer,
      env,
    );
    return calls;
  };
  expect(names({ COSMOS__accountEndpoint: 'https://acct.documents.azure.com:443/' })).toEqual([
    { name: 'telemetryReconciliation', schedule: '%ROUTELOCK_RECONCILE_SCHEDULE%' },
  ]);
  // negative control: on SQLite (the sample settings) there is no trigger, so no reconciliation either
  expect(names({ COSMOS__accountEndpoint: '' })).toEqual([]);
});
