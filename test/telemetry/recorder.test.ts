import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteTelemetry } from '../../shared/migration/store/sqlite/telemetry';
import type { TelemetryEvent } from '../../shared/migration/telemetry/lockTelemetry';
import { MetricsRecorder } from '../../shared/migration/telemetry/sink';

/**
 * The recorder behind GET /api/metrics: each eventKey once, MigrationEnded by outcome, TelemetryGap,
 * distributions from event measurements, bounded, and the same snapshot after a restart over its file.
 */

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'routelock-recorder-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ended = (migrationId: string, outcome: string, attempt = 1): TelemetryEvent => ({
  name: 'MigrationEnded',
  properties: {
    eventKey: `MigrationEnded:${migrationId}:${attempt}`,
    migrationId,
    resourceId: `r-${migrationId}`,
    outcome,
    code: outcome === 'Completed' ? '' : 'ParticipantFailed',
    stoppedAt: 'write',
    attempt: String(attempt),
    campaignId: '',
  },
  measurements: { attempts: attempt, durationSeconds: 30 },
});
const swapped = (resourceId: string, version: string, writeLockSeconds: number): TelemetryEvent => ({
  name: 'MigrationSwapped',
  properties: { eventKey: `MigrationSwapped:${resourceId}:${version}`, resourceId },
  measurements: { writeLockSeconds, hardDeleteSeconds: 20, migrationSeconds: 8000 },
});
const released = (resourceId: string, version: string, convergenceWaitSeconds: number): TelemetryEvent => ({
  name: 'LockReleased',
  properties: { eventKey: `LockReleased:${resourceId}:${version}`, resourceId },
  measurements: { convergenceWaitSeconds, convergenceDelaySeconds: 7500 },
});

function feed(recorder: MetricsRecorder): void {
  for (const [id, outcome] of [
    ['m1', 'Completed'],
    ['m2', 'Completed'],
    ['m3', 'Failed'],
    ['m4', 'Conflict'],
    ['m5', 'Cancelled'],
    ['m6', 'NoOp'],
  ] as const)
    recorder.event(ended(id, outcome));
  recorder.event(ended('m3', 'Failed')); // the Durable activity ran twice: same key
  recorder.event(ended('m3', 'Completed', 2)); // its second attempt: a key of its own
  recorder.event(swapped('r1', 'e1', 13));
  recorder.event(swapped('r1', 'e1', 13)); // a redelivered batch
  recorder.event(swapped('r2', 'e2', 19));
  recorder.event(released('r1', 'e1', 8100));
  recorder.event(released('r2', 'e2', 8200));
  recorder.event({
    name: 'TelemetryGap',
    properties: { eventKey: 'TelemetryGap:r9:e9', resourceId: 'r9', op: 'swap', at: '2026-01-01T00:00:00Z' },
  });
  recorder.event({ name: 'AuditRecordDeferred', properties: { resourceId: 'r1' } }); // no key: every time
  recorder.event({ name: 'AuditRecordDeferred', properties: { resourceId: 'r1' } });
  // metrics never feed the distributions (a pre-aggregated value cannot be deduplicated)
  recorder.metric({ name: 'writeLockSeconds', value: 999, properties: {} });
  recorder.availability({
    name: 'routelock-probe',
    success: false,
    durationMs: 40,
    runLocation: 'westeurope',
  });
}

test('counted once per eventKey: outcomes, gaps, distributions from measurements', () => {
  const recorder = new MetricsRecorder();
  feed(recorder);
  const snapshot = recorder.snapshot();
  expect(snapshot.migrations).toEqual({ completed: 3, failed: 1, conflicts: 1, cancelled: 1, noOps: 1 });
  expect(snapshot.events).toEqual({
    AuditRecordDeferred: 2,
    LockReleased: 2,
    MigrationEnded: 7,
    MigrationSwapped: 2,
    TelemetryGap: 1,
  });
  expect(snapshot.telemetryGaps).toBe(1);
  expect(snapshot.duplicatesIgnored).toBe(2);
  expect(snapshot.writeLockSeconds).toEqual({ count: 2, p50: 13, p75: 19, p99: 19, max: 19 });
  expect(snapshot.hardDeleteSeconds.count).toBe(2);
  // the convergence wait from LockReleased only (a swap carries it on MigrationSwapped too)
  expect(snapshot.convergenceWaitSeconds).toMatchObject({ count: 2, max: 8200 });
  expect(snapshot.probes).toMatchObject({ runs: 1, failures: 1 });
});

test('a restart over the same file: the same snapshot, and a redelivery after it still counts nothing', () => {
  const path = join(dir, 'restart.db');
  const first = new SqliteTelemetry(path);
  const before = new MetricsRecorder(first);
  feed(before);
  const snapshot = before.snapshot();
  first.close();

  const second = new SqliteTelemetry(path);
  const after = new MetricsRecorder(second);
  expect(after.snapshot()).toEqual(snapshot);
  after.event(swapped('r1', 'e1', 13)); // the feed redelivers a batch from before the restart
  after.event(ended('m4', 'Conflict'));
  expect(after.snapshot()).toEqual({ ...snapshot, duplicatesIgnored: snapshot.duplicatesIgnored + 2 });
  second.close();
  // negative control: a recorder without its journal starts from nothing
  expect(new MetricsRecorder().snapshot().migrations.completed).toBe(0);
});

test('bounded: the key window and the values per distribution, in memory and in the file alike', () => {
  const path = join(dir, 'bounded.db');
  const limits = { keys: 3, values: 2 };
  const journal = new SqliteTelemetry(path, limits);
  const recorder = new MetricsRecorder(journal, limits);
  for (const [i, v] of [10, 11, 12, 13].entries()) recorder.event(swapped('r', `e${i}`, v));
  expect(recorder.snapshot().writeLockSeconds).toMatchObject({ count: 2, p50: 12, max: 13 });
  recorder.event(swapped('r', 'e3', 13)); // inside the window: a duplicate
  expect(recorder.snapshot().duplicatesIgnored).toBe(1);
  recorder.event(swapped('r', 'e0', 10)); // fell out of the window of three: counted again (the documented bound)
  expect(recorder.snapshot().events.MigrationSwapped).toBe(5);
  journal.close();
  const reopened = new SqliteTelemetry(path, limits);
  const state = reopened.load();
  expect(state.keys).toEqual(['MigrationSwapped:r:e2', 'MigrationSwapped:r:e3', 'MigrationSwapped:r:e0']);
  expect(state.values.writeLockSeconds).toEqual([13, 10]);
  expect(new MetricsRecorder(reopened, limits).snapshot()).toEqual(recorder.snapshot());
  reopened.close();
});
