import type { CampaignRecord } from '../../shared/campaign/types';
import { campaignEvent } from '../../shared/campaign/tick';
import { type LocationDocument, newLocationDocument } from '../../shared/core/lock/document';
import { SqliteTelemetry } from '../../shared/migration/store/sqlite/telemetry';
import { handleVersions } from '../../shared/migration/telemetry/changeHandler';
import type { TelemetryEvent, TelemetryMetric } from '../../shared/migration/telemetry/lockTelemetry';
import {
  type RecordedEvent,
  type RecorderJournal,
  MetricsRecorder,
  nullSink,
} from '../../shared/migration/telemetry/sink';

/**
 * Figures neither lost nor counted twice. A journal write that fails must leave
 * the event uncounted (so the retry counts it), the lag must keep reporting while a batch fails, and a
 * campaign's start and end are keyed so a redelivered tick counts once.
 */

const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

function swapped(id: string, at: number): LocationDocument {
  return {
    ...newLocationDocument(id, { region: 'eastus' }),
    lastChange: { op: 'swap', at: iso(at) },
    lastMigration: {
      migrationId: 'm1',
      from: { region: 'westeurope' },
      to: { region: 'eastus' },
      outcome: 'swapped',
      acquiredAt: iso(at - 600_000),
      startsAt: iso(at - 600_000),
      hardDeleteAt: iso(at - 60_000),
      writeAt: iso(at - 15_000),
      swappedAt: iso(at),
      releasedAt: null,
      tokenHash: 'h',
      convergenceDelaySeconds: 0,
    },
  } as LocationDocument;
}

describe('the recorder journals an event before it counts it', () => {
  const swap: TelemetryEvent = {
    name: 'MigrationSwapped',
    properties: { eventKey: 'MigrationSwapped:r1:v1' },
    measurements: { writeLockSeconds: 12 },
  };
  /** The SQLite journal, its first `recordEvent` failing (SQLITE_BUSY) when `failFirst`. */
  function flakyJournal(failFirst: boolean) {
    const db = new SqliteTelemetry(':memory:');
    let fail = failFirst;
    const journal: RecorderJournal = {
      load: () => db.load(),
      recordDuplicate: () => db.recordDuplicate(),
      recordProbes: (p) => db.recordProbes(p),
      recordEvent: (e: RecordedEvent) => {
        if (fail) {
          fail = false;
          throw new Error('SQLITE_BUSY');
        }
        db.recordEvent(e);
      },
    };
    return { db, journal };
  }

  test('a failed journal write leaves the event uncounted: the retry counts it, and it survives a restart', () => {
    const { db, journal } = flakyJournal(true);
    const recorder = new MetricsRecorder(journal);
    expect(() => recorder.event(swap)).toThrow('SQLITE_BUSY');
    expect(recorder.snapshot().events.MigrationSwapped).toBeUndefined();
    recorder.event(swap); // the batch run again
    expect(recorder.snapshot()).toMatchObject({ events: { MigrationSwapped: 1 }, duplicatesIgnored: 0 });
    const restarted = new MetricsRecorder(journal);
    expect(restarted.snapshot()).toMatchObject({ events: { MigrationSwapped: 1 }, duplicatesIgnored: 0 });
    expect(restarted.snapshot().writeLockSeconds.count).toBe(1);
    db.close();
  });

  test('negative control: a journal that never fails counts a redelivery as a duplicate, not twice', () => {
    const { db, journal } = flakyJournal(false);
    const recorder = new MetricsRecorder(journal);
    recorder.event(swap);
    recorder.event(swap);
    expect(recorder.snapshot()).toMatchObject({ events: { MigrationSwapped: 1 }, duplicatesIgnored: 1 });
    expect(new MetricsRecorder(journal).snapshot()).toMatchObject({ duplicatesIgnored: 1 });
    db.close();
  });

  test('a failed probe journal write leaves the probe counts where they were', () => {
    const recorder = new MetricsRecorder({
      load: () => ({ keys: [], counts: {}, values: {}, probes: { runs: 0, failures: 0, last: null } }),
      recordDuplicate: () => undefined,
      recordEvent: () => undefined,
      recordProbes: () => {
        throw new Error('SQLITE_BUSY');
      },
    });
    const probe = { name: 'routelock-probe' as const, success: false, durationMs: 5, runLocation: 'eastus' };
    expect(() => recorder.availability(probe)).toThrow('SQLITE_BUSY');
    expect(recorder.snapshot().probes).toMatchObject({ runs: 0, failures: 0 });
  });
});

describe('changeFeedLagSeconds while a batch fails', () => {
  const lagOf = async (audit: { append: () => Promise<void> }) => {
    const metrics: TelemetryMetric[] = [];
    let flushed = 0;
    const sink = {
      ...nullSink,
      metric: (m: TelemetryMetric) => metrics.push(m),
      flush: async () => {
        flushed += 1;
      },
    };
    const result = handleVersions([{ doc: swapped('r1', T0), version: 'v1', storedAtSeconds: T0 / 1000 }], {
      sink,
      audit: audit as never,
      declaredConvergenceDelaySeconds: 0,
      now: () => T0 + 20 * 60_000,
    });
    return { result, metrics, flushed: () => flushed };
  };

  test('a batch whose audit append fails still reports its lag (20 min, rising), flushed, and still throws', async () => {
    const { result, metrics, flushed } = await lagOf({
      append: async () => {
        throw new Error('ledger 503');
      },
    });
    await expect(result).rejects.toThrow('ledger 503');
    expect(metrics.filter((m) => m.name === 'changeFeedLagSeconds').map((m) => m.value)).toEqual([1200]);
    expect(flushed()).toBe(1);
  });

  test('negative control: a batch that succeeds reports the same lag once', async () => {
    const { result, metrics } = await lagOf({ append: async () => undefined });
    await expect(result).resolves.toMatchObject({ lagSeconds: 1200 });
    expect(metrics.filter((m) => m.name === 'changeFeedLagSeconds').map((m) => m.value)).toEqual([1200]);
  });
});

describe('campaign events are keyed', () => {
  const record = {
    campaignId: 'c-1',
    status: 'Completed',
    target: { region: 'eastus' },
    counts: {
      total: 2,
      pending: 0,
      running: 0,
      completed: 2,
      noOp: 0,
      failed: 0,
      conflict: 0,
      cancelled: 0,
      skipped: 0,
    },
  } as unknown as CampaignRecord;

  test('a tick delivered twice: CampaignStarted and CampaignEnded counted once each', () => {
    const recorder = new MetricsRecorder();
    for (let delivery = 0; delivery < 2; delivery += 1) {
      recorder.event(campaignEvent('CampaignStarted', record));
      recorder.event(campaignEvent('CampaignEnded', record));
    }
    expect(campaignEvent('CampaignEnded', record).properties.eventKey).toBe(
      `CampaignEnded:c-1:${record.endedAt ?? record.updatedAt}`,
    );
    expect(campaignEvent('CampaignStarted', record).properties.eventKey).toBe('CampaignStarted:c-1');
    expect(recorder.snapshot()).toMatchObject({
      events: { CampaignStarted: 1, CampaignEnded: 1 },
      duplicatesIgnored: 2,
    });
  });

  test('a campaign reopened (resources added) that ends again: its second end is counted too', () => {
    const recorder = new MetricsRecorder();
    const first = { ...record, endedAt: '2026-12-01T10:00:00.000Z' } as CampaignRecord;
    const second = { ...record, endedAt: '2026-12-01T11:00:00.000Z' } as CampaignRecord;
    recorder.event(campaignEvent('CampaignEnded', first));
    recorder.event(campaignEvent('CampaignEnded', second));
    recorder.event(campaignEvent('CampaignEnded', second)); // redelivered
    expect(recorder.snapshot().events.CampaignEnded).toBe(2);
  });

  test('negative control: the same event without its key is counted twice', () => {
    const recorder = new MetricsRecorder();
    const { eventKey: _key, ...unkeyed } = campaignEvent('CampaignEnded', record).properties;
    recorder.event({ ...campaignEvent('CampaignEnded', record), properties: unkeyed });
    recorder.event({ ...campaignEvent('CampaignEnded', record), properties: unkeyed });
    expect(recorder.snapshot().events.CampaignEnded).toBe(2);
  });
});
