import { newLocationDocument } from '../../shared/core/lock/document';
import { escalate, forceRelease, prelock, reclaim, release, swap } from '../../shared/core/lock/rules';
import { lockTelemetry } from '../../shared/migration/telemetry/lockTelemetry';
import { MetricsRecorder } from '../../shared/migration/telemetry/sink';
import { T0, productionTiming as cfg, seconds } from '../support/timing';

/**
 * Every write lock reports its hold, not only the attempt that swapped: a write lock that overran its
 * budget and was downgraded, or was released, is among the longest 423 periods, which the chart, the p99
 * alert and /api/metrics must see. The downgrade's or release's version carries the
 * attempt (lastChange.writeAt/writeExpiresAt) and its LockReleased the hold, capped at the write lease's
 * end. Built with the real lock rules.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const hd = T0 + seconds(cfg.convergenceDelaySeconds) + seconds(cfg.clockSkewSeconds) + seconds(1);
const w = hd + seconds(60);

function writeLocked() {
  let d = prelock(
    newLocationDocument('conv-42', SOURCE),
    { migrationId: 'm-1', owner: 'orch-1', target: TARGET, newToken: 'tok-1' },
    T0,
    cfg,
  ).doc;
  d = escalate(d, { token: 'tok-1', phase: 'hardDelete' }, hd, cfg).doc;
  return escalate(d, { token: 'tok-1', phase: 'write' }, w, cfg).doc;
}

const holdsOf = (events: ReturnType<typeof lockTelemetry>['events']) =>
  events
    .filter((e) => e.measurements?.writeLockSeconds !== undefined)
    .map((e) => [e.name, e.measurements?.writeLockSeconds]);

test('a downgraded write lock reports its hold on its LockReleased, and the recorder counts it', () => {
  const locked = writeLocked();
  const writeAt = locked.lock?.phase === 'write' ? locked.lock.writeAt : '';
  const downgraded = release(locked, { token: 'tok-1', phase: 'write', writeAt }, w + seconds(40)).doc;
  expect(downgraded.lastChange).toMatchObject({ op: 'downgrade', writeAt });
  const telemetry = lockTelemetry(downgraded, 0, 'v5');
  expect(holdsOf(telemetry.events)).toEqual([['LockReleased', 40]]);
  expect(telemetry.metrics).toEqual([expect.objectContaining({ name: 'writeLockSeconds', value: 40 })]);
  const recorder = new MetricsRecorder();
  for (const event of telemetry.events) recorder.event(event);
  for (const event of telemetry.events) recorder.event(event); // redelivered: counted once
  expect(recorder.snapshot().writeLockSeconds).toMatchObject({ count: 1, max: 40 });
  // no credential rides along
  expect(JSON.stringify(telemetry)).not.toMatch(/tok-1|tokenHash/);
});

test('a write lock that overran its lease and was then released: the hold stops at the lease end', () => {
  const locked = writeLocked();
  const lease = locked.lock?.phase === 'write' ? (Date.parse(locked.lock.writeExpiresAt) - w) / 1000 : 0;
  expect(lease).toBeGreaterThan(0);
  const released = release(locked, { token: 'tok-1' }, w + seconds(lease + 100)).doc;
  expect(holdsOf(lockTelemetry(released, 0, 'v6').events)).toEqual([['LockReleased', lease]]);
});

test('negative control: a swap is counted once (MigrationSwapped), a release with no write lock not at all', () => {
  const swapped = swap(writeLocked(), { token: 'tok-1' }, w + seconds(12), cfg).doc;
  const telemetry = lockTelemetry(swapped, 0, 'v7');
  expect(holdsOf(telemetry.events)).toEqual([['MigrationSwapped', 12]]);
  const recorder = new MetricsRecorder();
  for (const event of telemetry.events) recorder.event(event);
  expect(recorder.snapshot().writeLockSeconds).toMatchObject({ count: 1, max: 12 });

  let hardDelete = prelock(
    newLocationDocument('conv-43', SOURCE),
    { migrationId: 'm-2', owner: 'orch-1', target: TARGET, newToken: 'tok-2' },
    T0,
    cfg,
  ).doc;
  hardDelete = escalate(hardDelete, { token: 'tok-2', phase: 'hardDelete' }, hd, cfg).doc;
  const aborted = release(hardDelete, { token: 'tok-2' }, hd + seconds(30)).doc;
  expect(holdsOf(lockTelemetry(aborted, 0, 'v8').events)).toEqual([]);
});

test('a stuck write lock force-released, or reclaimed by the sweeper, reports its hold too', () => {
  const locked = writeLocked();
  const lease = locked.lock?.phase === 'write' ? (Date.parse(locked.lock.writeExpiresAt) - w) / 1000 : 0;
  const forced = forceRelease(
    locked,
    { actor: 'oid-1,oid-2', reason: 'stuck delta copy', requestId: 'fr-1' },
    w + seconds(30),
  ).doc;
  expect(forced.lastChange).toMatchObject({ op: 'forceRelease', writeAt: expect.any(String) });
  expect(holdsOf(lockTelemetry(forced, 0, 'v9').events)).toEqual([['LockReleased', 30]]);
  // the sweeper reclaims it only once expired: the hold ends at the lease end
  const reclaimed = reclaim(locked, Date.parse(locked.lock!.expiresAt) + seconds(3600)).doc;
  expect(holdsOf(lockTelemetry(reclaimed, 0, 'v10').events)).toEqual([['LockReleased', lease]]);
});
