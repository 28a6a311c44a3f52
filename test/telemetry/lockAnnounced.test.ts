import { newLocationDocument } from '../../shared/core/lock/document';
import { announce, prelock, release, swap, escalate } from '../../shared/core/lock/rules';
import { lockTelemetry } from '../../shared/migration/telemetry/lockTelemetry';
import { telemetryEventNames } from '../../shared/migration/telemetry/names';
import { T0, productionTiming as cfg, seconds } from '../support/timing';

/**
 * An announced lock's telemetry, built with the real rules: its pre-lock is a `LockAcquired` in phase
 * `hardDelete`; announcing its write window is a `LockAnnounced {phase: write, windowAt, windowUntil}`
 * keyed on the version; its convergence wait (acquiredAt → hardDeleteAt, the lead) is no shortfall.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const L = seconds(cfg.announceLeadSeconds);

const taken = prelock(
  newLocationDocument('conv-42', SOURCE),
  { migrationId: 'm-1', owner: 'orch-1', target: TARGET, newToken: 'tok-1', announced: true },
  T0,
  cfg,
).doc;
const announcedAt = T0 + L + seconds(60);
const windowed = announce(taken, { token: 'tok-1', phase: 'write' }, announcedAt, cfg).doc;

test('the announced pre-lock is acquired in phase hardDelete', () => {
  expect(lockTelemetry(taken, cfg.convergenceDelaySeconds, 'v1').events).toMatchObject([
    { name: 'LockAcquired', properties: { phase: 'hardDelete', op: 'prelock' } },
  ]);
});

test('an announcement is a LockAnnounced with the window, keyed on the version', () => {
  expect(telemetryEventNames).toContain('LockAnnounced');
  const { events, metrics } = lockTelemetry(windowed, cfg.convergenceDelaySeconds, 'v2');
  expect(events).toEqual([
    {
      name: 'LockAnnounced',
      properties: {
        eventKey: 'LockAnnounced:conv-42:v2',
        resourceId: 'conv-42',
        op: 'announce',
        at: new Date(announcedAt).toISOString(),
        phase: 'write',
        migrationId: 'm-1',
        windowAt: windowed.lock!.writeWindowAt,
        windowUntil: windowed.lock!.writeWindowUntil,
      },
    },
  ]);
  expect(metrics).toEqual([]);
});

test('its end reports a convergence wait of the lead, no shortfall', () => {
  const activatedAt = Date.parse(windowed.lock!.writeWindowAt!) + seconds(cfg.clockSkewSeconds);
  const written = escalate(windowed, { token: 'tok-1', phase: 'write' }, activatedAt, cfg).doc;
  for (const ended of [
    swap(written, { token: 'tok-1' }, activatedAt + 1000, cfg).doc,
    release(windowed, { token: 'tok-1' }, announcedAt + 1000).doc,
  ]) {
    const { events, metrics } = lockTelemetry(ended, cfg.convergenceDelaySeconds, 'v3');
    expect(events.map((e) => e.name)).not.toContain('ConvergenceShortfall');
    expect(metrics.find((m) => m.name === 'convergenceWaitSeconds')?.value).toBe(cfg.announceLeadSeconds);
  }
});
