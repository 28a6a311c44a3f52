import { newLocationDocument } from '../../shared/core/lock/document';
import { escalate, prelock, release, renew } from '../../shared/core/lock/rules';
import { phaseExpiresAt } from '../../shared/core/lock/state';
import { lockTelemetry } from '../../shared/migration/telemetry/lockTelemetry';
import { telemetryEventNames } from '../../shared/migration/telemetry/names';
import { T0, productionTiming as cfg, seconds } from '../support/timing';

/**
 * A long hard-delete bulk copy writes nothing but renewals for hours, so the stall
 * alert (infra/monitoring/alerts/migrationStalled.kql) needs each renewal as progress: a `LockRenewed`
 * keyed per version, with the phase and the phase's new expiry (the alert's deadline). Built with the
 * real lock rules.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const started = seconds(cfg.convergenceDelaySeconds) + seconds(cfg.clockSkewSeconds);

function hardDeleteLock() {
  const taken = prelock(
    newLocationDocument('conv-42', SOURCE),
    { migrationId: 'm-1', owner: 'orch-1', target: TARGET, newToken: 'tok-1' },
    T0,
    cfg,
  ).doc;
  return escalate(taken, { token: 'tok-1', phase: 'hardDelete' }, T0 + started, cfg).doc;
}

test('a renewal of the hard-delete lock is a LockRenewed: phase, the new expiry, keyed on the version', () => {
  const held = hardDeleteLock();
  const renewedAt = T0 + started + seconds(cfg.hardDeleteLeaseSeconds) / 3;
  const renewed = renew(held, { token: 'tok-1' }, renewedAt, cfg).doc;
  expect(renewed.lock && phaseExpiresAt(renewed.lock)).not.toBe(held.lock && phaseExpiresAt(held.lock));
  const { events, metrics } = lockTelemetry(renewed, 0, 'v9');
  expect(telemetryEventNames).toContain('LockRenewed');
  expect(events).toEqual([
    {
      name: 'LockRenewed',
      properties: {
        eventKey: 'LockRenewed:conv-42:v9',
        resourceId: 'conv-42',
        op: 'renew',
        at: new Date(renewedAt).toISOString(),
        phase: 'hardDelete',
        migrationId: 'm-1',
        expiresAt: renewed.lock?.hardDeleteExpiresAt,
      },
    },
  ]);
  expect(metrics).toEqual([]);
  // the acquisition carries its expiry too: the alert's deadline before the first renewal
  expect(lockTelemetry(held, 0, 'v8').events[0]?.properties).toMatchObject({
    phase: 'hardDelete',
    expiresAt: held.lock?.hardDeleteExpiresAt,
  });
  // no credential in it
  expect(JSON.stringify(events)).not.toMatch(/tok-1|tokenHash|[0-9a-f]{64}/);
});

test('negative control: a version with no lock (released) yields no LockRenewed', () => {
  const released = release(hardDeleteLock(), { token: 'tok-1' } as never, T0 + started + 1000).doc;
  expect(lockTelemetry(released, 0, 'v10').events.map((e) => e.name)).not.toContain('LockRenewed');
});
