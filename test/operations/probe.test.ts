import { ManualClock } from '../../testkit/clock';
import type { LocationDocument, StoredDocument } from '../../shared/core/lock/document';
import { probeTiming, runProbe } from '../../shared/migration/probe';
import { Router } from '../../shared/core/router';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { MetricsRecorder } from '../../shared/migration/telemetry/sink';
import { FaultyStore } from '../../testkit/faultyStore';

/** The synthetic probe: green on a healthy store; on a broken one, it names the phase and the assertion. */

/** A store with a bug: it silently drops the write lock from whatever it stores. */
class DropsWriteLock extends FaultyStore {
  override async replace(doc: LocationDocument, ifMatch: string): Promise<StoredDocument> {
    if (doc.lock?.phase === 'write') {
      const { writeAt: _a, writeExpiresAt: _b, ...lock } = doc.lock;
      return super.replace({ ...doc, lock: { ...lock, phase: 'hardDelete' } }, ifMatch);
    }
    return super.replace(doc, ifMatch);
  }
}

function probeWith(store: LocationStore) {
  const clock = new ManualClock();
  const sink = new MetricsRecorder();
  return {
    sink,
    run: () =>
      runProbe({
        store,
        region: 'westeurope',
        clock: clock.now,
        sleep: async (ms) => void clock.advance(ms),
        sink,
      }),
  };
}

test('a healthy store passes every phase, and the next run migrates back', async () => {
  const store = new SqliteStore(':memory:');
  const probe = probeWith(store);
  const first = await probe.run();
  expect(first).toMatchObject({ success: true, resourceId: 'probe-westeurope' });
  expect(first.steps.map((s) => s.phase)).toEqual(['prelock', 'hardDelete', 'write', 'swap']);
  expect((await store.read('probe-westeurope', { from: 'writeRegion' })).doc.location).toEqual({
    region: 'westeurope',
    account: 'probe-b',
  });
  expect(await probe.run()).toMatchObject({ success: true });
  expect((await store.read('probe-westeurope', { from: 'writeRegion' })).doc.location).toEqual({
    region: 'westeurope',
    account: 'probe-a',
  });
  expect(probe.sink.snapshot().probes).toMatchObject({
    runs: 2,
    failures: 0,
    last: { success: true, runLocation: 'westeurope' },
  });
});

test('a store that drops the write lock fails the probe at the write phase, naming the assertion', async () => {
  const store = new DropsWriteLock(new SqliteStore(':memory:'));
  const probe = probeWith(store);
  const result = await probe.run();
  expect(result).toMatchObject({
    success: false,
    failedPhase: 'write',
    failedAssertion: 'write lock: writes are refused',
  });
  expect(probe.sink.snapshot().probes.last).toMatchObject({
    success: false,
    message: 'write: write lock: writes are refused',
  });
  // it released its lock on the way out: the next probe can run
  expect((await store.read('probe-westeurope', { from: 'writeRegion' })).doc.lock).toBeNull();
});

test('a store outage fails the probe with the error, not a crash', async () => {
  const store = new FaultyStore(new SqliteStore(':memory:'));
  store.down = true;
  const result = await probeWith(store).run();
  expect(result).toMatchObject({ success: false, failedPhase: 'setup' });
  expect(result.failedAssertion).toMatch(/StoreUnavailable|throttled/);
});

test('the probe keeps the serving router’s declared regions: an undeclared probe region creates nothing', async () => {
  const store = new SqliteStore(':memory:');
  const clock = new ManualClock();
  const run = (allowedRegions: string[]) =>
    runProbe({
      store,
      region: 'westeurope',
      clock: clock.now,
      sleep: async (ms) => void clock.advance(ms),
      policy: { allowedRegions },
    });
  const refused = await run(['eastus']);
  expect(refused).toMatchObject({ success: false, failedPhase: 'setup' });
  expect(refused.failedAssertion).toMatch(/Region "westeurope" is not one of the declared regions/);
  await expect(store.read('probe-westeurope', { from: 'writeRegion' })).rejects.toMatchObject({
    code: 'NotFound',
  });
  // the control: declared, the same probe runs green
  expect(await run(['westeurope', 'eastus'])).toMatchObject({ success: true });
});

test('the probe moves only routes it created: a real resource carrying its id is left alone', async () => {
  const store = new SqliteStore(':memory:');
  const clock = new ManualClock();
  const real = { region: 'westeurope', account: 'chatweu01' };
  const router = new Router({ store, timing: probeTiming(), clock: clock.now });
  await router.createRoute('probe-westeurope', real); // a library caller, not the probe
  const probe = () =>
    runProbe({ store, region: 'westeurope', clock: clock.now, sleep: async (ms) => void clock.advance(ms) });
  const refused = await probe();
  expect(refused).toMatchObject({ success: false, failedPhase: 'setup' });
  expect(refused.failedAssertion).toMatch(/was not created by the probe; it is left alone/);
  const after = (await store.read('probe-westeurope', { from: 'writeRegion' })).doc;
  expect(after).toMatchObject({ location: real, lock: null });
  // the control: the probe's own route (marked when it created it) is moved as before
  const own = new SqliteStore(':memory:');
  const first = await runProbe({
    store: own,
    region: 'westeurope',
    clock: clock.now,
    sleep: async (ms) => void clock.advance(ms),
  });
  expect(first.success).toBe(true);
  expect((await own.read('probe-westeurope', { from: 'writeRegion' })).doc.createdBy).toBe('probe');
});

test('overlapping runs: the second finds the first one’s live lock and is skipped, not failed', async () => {
  const store = new SqliteStore(':memory:');
  const clock = new ManualClock();
  const sink = new MetricsRecorder();
  let resumeFirst: () => void = () => undefined;
  let firstWaiting: () => void = () => undefined;
  const waiting = new Promise<void>((resolve) => (firstWaiting = resolve));
  // The first run stops in its convergence wait, its pre-lock live, until the second has run.
  const first = runProbe({
    store,
    region: 'westeurope',
    clock: clock.now,
    sink,
    sleep: (ms) =>
      new Promise<void>((resolve) => {
        resumeFirst = () => {
          clock.advance(ms);
          resolve();
        };
        firstWaiting();
      }),
  });
  await waiting;
  const second = await runProbe({
    store,
    region: 'westeurope',
    clock: clock.now,
    sink,
    sleep: async (ms) => void clock.advance(ms),
  });
  expect(second).toMatchObject({ outcome: 'skipped', success: false, steps: [] });
  expect(second.skipReason).toMatch(
    /^another probe run holds probe-westeurope's lock \(migration probe-\d+\)/,
  );
  expect(second.failedPhase).toBeUndefined();
  resumeFirst();
  expect(await first).toMatchObject({ outcome: 'passed', success: true });
  // one run recorded, no failure: the probe-failing alert has nothing to read
  expect(sink.snapshot().probes).toMatchObject({ runs: 1, failures: 0, last: { success: true } });
});
