import { type ChangeOp, type LocationDocument, newLocationDocument } from '../../shared/core/lock/document';
import {
  endSeenKey,
  reconcile,
  seenKeysOf,
  telemetryGapEvent,
  versionSeenKey,
} from '../../shared/migration/telemetry/reconcile';

/** The reconciliation's rule (shared/migration/telemetry/reconcile.ts), a row per case. */

const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-01T01:00:00.000Z';

function doc(
  op: ChangeOp,
  at: string,
  end?: { outcome: 'swapped' | 'released' | 'forceReleased'; at: string },
): LocationDocument {
  const base = newLocationDocument('r', { region: 'westeurope' });
  return {
    ...base,
    lastChange: { op, at },
    lastMigration: end
      ? {
          migrationId: 'm',
          from: { region: 'westeurope' },
          to: { region: 'eastus' },
          outcome: end.outcome,
          acquiredAt: T0,
          startsAt: T0,
          hardDeleteAt: T0,
          writeAt: T0,
          swappedAt: end.outcome === 'swapped' ? end.at : null,
          releasedAt: end.outcome === 'released' ? end.at : null,
          tokenHash: 'h',
          convergenceDelaySeconds: 0,
        }
      : null,
  };
}

const swapVersion = doc('swap', T1, { outcome: 'swapped', at: T1 });
const laterPrelock = doc('prelock', '2026-01-01T01:00:05.000Z', { outcome: 'swapped', at: T1 });

test.each([
  [
    'a swap version handled: its version and its end are seen',
    swapVersion,
    'v1',
    seenKeysOf(swapVersion, 'v1'),
    [],
  ],
  ['a version never handled (the batch dropped)', swapVersion, 'v1', [], ['version:swap']],
  [
    'a later version seen, the swap it carries never (coalesced away)',
    laterPrelock,
    'v2',
    seenKeysOf(laterPrelock, 'v2'),
    ['end:swap'],
  ],
  [
    'a later version seen, its swap seen on the swap version',
    laterPrelock,
    'v2',
    [...seenKeysOf(laterPrelock, 'v2'), ...seenKeysOf(swapVersion, 'v1')],
    [],
  ],
  [
    'a release end carried on, never seen',
    doc('prelock', T1, { outcome: 'released', at: T1 }),
    'v3',
    [versionSeenKey('r', 'v3')],
    ['end:release'],
  ],
  [
    'a force-release carries no end time: only its version is checked',
    doc('prelock', T1, { outcome: 'forceReleased', at: T1 }),
    'v4',
    [versionSeenKey('r', 'v4')],
    [],
  ],
  [
    'an end older than endsSince was checked in an earlier window',
    doc('prelock', T1, { outcome: 'swapped', at: T0 }),
    'v5',
    [versionSeenKey('r', 'v5')],
    [],
  ],
  ['a renew never handled is a gap too (a version unseen)', doc('renew', T1), 'v6', [], ['version:renew']],
] as const)('%s', (_name, version, etag, seen, expected) => {
  const gaps = reconcile(
    [{ doc: version, version: etag }],
    new Set<string>(seen),
    '2026-01-01T00:30:00.000Z',
  );
  expect(gaps.map((g) => `${g.missing}:${g.op}`)).toEqual(expected);
});

test('only the version that did the end records its end key; a later one carries it without it', () => {
  expect(seenKeysOf(swapVersion, 'v1')).toEqual([versionSeenKey('r', 'v1'), endSeenKey('r', 'm', T1)]);
  expect(seenKeysOf(laterPrelock, 'v2')).toEqual([versionSeenKey('r', 'v2')]);
});

test('one gap per version, its event keyed TelemetryGap:resourceId:version', () => {
  const [gap] = reconcile([{ doc: laterPrelock, version: 'v2' }], new Set(), T0);
  expect(gap?.missing).toBe('version'); // the version gap covers it; the end is not reported twice
  expect(telemetryGapEvent(gap!)).toEqual({
    name: 'TelemetryGap',
    properties: {
      eventKey: 'TelemetryGap:r:v2',
      resourceId: 'r',
      op: 'prelock',
      at: '2026-01-01T01:00:05.000Z',
      missing: 'version',
    },
  });
});
