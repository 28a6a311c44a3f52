import { parseConfig } from '../../shared/config';
import type { LocationDocument, Lock } from '../../shared/core/lock/document';
import { newLocationDocument } from '../../shared/core/lock/document';
import {
  type PreflightFacts,
  type PreflightSettings,
  preflight,
  preflightRules,
} from '../../shared/migration/preflight';
import { migrationSettings } from '../../shared/migration/workflow';

/** The dry run's pure core (docs/design.md §6.2): each check passing and failing, and a negative control. */

const NOW = Date.parse('2026-12-01T12:00:00.000Z');
const iso = (offsetSeconds: number) => new Date(NOW + offsetSeconds * 1000).toISOString();
const config = parseConfig({});
const settings = (allowedRegions: readonly string[] | null = null): PreflightSettings => ({
  timing: config.timing,
  migration: migrationSettings(config),
  allowedRegions,
});

const route = (patch: Partial<LocationDocument> = {}): LocationDocument => ({
  ...newLocationDocument('r-1', { region: 'westeurope' }, NOW - 3_600_000),
  ...patch,
});
const facts = (patch: Partial<PreflightFacts> = {}): PreflightFacts => ({
  resourceId: 'r-1',
  target: { region: 'eastus' },
  doc: route(),
  running: null,
  participants: [],
  ...patch,
});
const lock = {
  tokenHash: 'h',
  migrationId: 'm-rival',
  owner: 'ops',
  target: { region: 'northeurope' },
  phase: 'prelock',
  acquiredAt: iso(-60),
  startsAt: iso(600),
  expiresAt: iso(900),
  maxExpiresAt: iso(3600),
  convergenceDelaySeconds: 660,
} as unknown as Lock;
const retired: LocationDocument['secondary'] = {
  location: { region: 'northeurope' },
  role: 'retiredSource',
  writesBlockedUntil: iso(120),
};

const failing = (f: PreflightFacts, s = settings()) =>
  preflight(f, NOW, s)
    .checks.filter((c) => !c.ok)
    .map((c) => c.check);

describe('preflight: one failing check per row, every other passing', () => {
  test.each([
    ['a route ready to move', facts(), []],
    ['no route', facts({ doc: null }), ['routeExists']],
    ['an active lock', facts({ doc: route({ lock }) }), ['notLocked']],
    ['already at the target', facts({ target: { region: 'westeurope' } }), ['notAtTarget']],
    [
      'a retired source still write-blocked',
      facts({ doc: route({ secondary: retired }) }),
      ['noRetiredSourceWindow'],
    ],
    [
      'another migration running',
      facts({ running: { migrationId: 'm-0', status: 'Running', target: { region: 'eastus' } } }),
      ['noMigrationRunning'],
    ],
  ] as const)('%s', (_name, f, expected) => {
    expect(failing(f)).toEqual(expected);
    expect(preflight(f, NOW, settings()).ok).toBe(expected.length === 0);
  });

  test('a target outside ROUTELOCK_REGIONS fails regionAllowed', () => {
    expect(failing(facts(), settings(['westeurope']))).toEqual(['regionAllowed']);
    expect(failing(facts(), settings(['westeurope', 'eastus']))).toEqual([]);
  });

  test('no allowlist: regionAllowed says so (notConfigured), never a pass', () => {
    const regionCheck = (allowed: readonly string[] | null) =>
      preflight(facts(), NOW, settings(allowed)).checks.find((c) => c.check === 'regionAllowed');
    expect(regionCheck(null)).toEqual({
      check: 'regionAllowed',
      ok: true,
      outcome: 'notConfigured',
      detail: 'no region allowlist set (ROUTELOCK_REGIONS): any region accepted',
    });
    // an allowlist that holds the region is a pass, without the outcome
    expect(regionCheck(['eastus'])).toEqual({
      check: 'regionAllowed',
      ok: true,
      detail: 'eastus is one of ROUTELOCK_REGIONS',
    });
  });

  test('an active lock names who holds it, its phase and until when', () => {
    const detail = preflight(facts({ doc: route({ lock }) }), NOW, settings()).checks.find(
      (c) => c.check === 'notLocked',
    )?.detail;
    expect(detail).toContain('ops');
    expect(detail).toContain('m-rival');
    expect(detail).toContain('prelock');
    expect(detail).toContain(iso(900));
  });

  test('an expired lock and an ended retired-source window do not count', () => {
    const expired = { ...lock, expiresAt: iso(-1), maxExpiresAt: iso(-1) } as Lock;
    const ended = { ...retired, writesBlockedUntil: iso(-1) };
    expect(failing(facts({ doc: route({ lock: expired, secondary: ended }) }))).toEqual([]);
  });

  test('negative control: without the retired-source rule a write-blocked source reports ok', () => {
    const f = facts({ doc: route({ secondary: retired }) });
    const withoutIt = preflightRules.filter(
      (rule) => rule(f, NOW, settings())?.check !== 'noRetiredSourceWindow',
    );
    expect(preflight(f, NOW, settings(), withoutIt).ok).toBe(true);
    expect(preflight(f, NOW, settings()).ok).toBe(false);
  });
});

describe('preflight: participants (an optional step: 404 is not implemented)', () => {
  test.each([
    [200, true, 'ready'],
    [404, true, 'notImplemented'],
    [500, false, 'transient'],
    [0, false, 'transient'],
    [400, false, 'failed'],
    [202, false, 'failed'],
  ] as const)('answer %i → ok %s, %s', (status, ok, outcome) => {
    const report = preflight(
      facts({ participants: [{ name: 'messages', answer: { status, body: null } }] }),
      NOW,
      settings(),
    );
    expect(report.checks.at(-1)).toMatchObject({
      check: 'participant',
      participant: 'messages',
      ok,
      outcome,
    });
    expect(report.ok).toBe(ok);
  });
});

describe('preflight: timing', () => {
  test('the workflow convergence wait, the earliest write lock, the budget and attempts', () => {
    const s = settings();
    const t = preflight(facts(), NOW, s).timing;
    const delay = s.timing.convergenceDelaySeconds;
    const wait = Math.max(delay, s.migration.replicationBoundSeconds) + s.migration.safetyBufferSeconds;
    expect(t.convergenceWaitSeconds).toBe(Math.max(wait, delay + s.timing.clockSkewSeconds));
    // lock-only (no participants configured): no in-flight grace, no bulk copy
    expect(t.earliestWriteLockAt).toBe(iso(t.convergenceWaitSeconds));
    expect(t.bulkCopyDuration).toBe('none');
    expect(t.writeBudgetSeconds).toBe(s.migration.writeBudgetSeconds);
    expect(t.migrationAttempts).toBe(s.migration.migrationAttempts);
  });

  test('with a participant in scope the in-flight grace is added and the bulk copy is unknown', () => {
    const s = settings();
    const withParticipant: PreflightSettings = {
      ...s,
      migration: {
        ...s.migration,
        inFlightGraceSeconds: 5,
        participants: [{ name: 'messages', url: 'http://127.0.0.1:1/migrate' }],
      },
    };
    const t = preflight(facts(), NOW, withParticipant).timing;
    expect(t.earliestWriteLockAt).toBe(iso(t.convergenceWaitSeconds + 5));
    expect(t.bulkCopyDuration).toBe('unknown');
    expect(t).not.toHaveProperty('writeWindowAt');
  });

  describe('under announced locks (production: L = 8105 s, S = 5 s, G = 5 s)', () => {
    const on = parseConfig({ ROUTELOCK_ANNOUNCED_LOCKS: 'true' });
    const announced = (participants: boolean): PreflightSettings => ({
      timing: on.timing,
      migration: {
        ...migrationSettings(on),
        inFlightGraceSeconds: 5,
        participants: participants ? [{ name: 'messages', url: 'http://127.0.0.1:1/migrate' }] : [],
      },
      allowedRegions: null,
    });
    test.each([
      // the hard-delete lock in force on every clock at L + S; the window L after the bulk copy, the write lock S after
      ['with a participant', true, 8110, 8110 + 5 + 8110],
      ['lock-only: no in-flight grace', false, 8110, 8110 + 8110],
    ])('%s', (_label, participants, wait, writeLock) => {
      const t = preflight(facts(), NOW, announced(participants)).timing;
      expect(t.convergenceWaitSeconds).toBe(wait);
      expect(t.earliestWriteLockAt).toBe(iso(writeLock));
      expect(t.writeWindowAt).toBe(iso(writeLock - 5));
    });
    test('with a cutover window: its slot from the earliest write lock, the window S before it', () => {
      const window = { notBefore: iso(86_400) };
      const t = preflight(facts({ window }), NOW, announced(true)).timing;
      expect(t.nextWriteSlotAt).toBe(iso(86_400));
      expect(t.writeWindowAt).toBe(iso(86_400 - 5));
    });
  });
});
