import { lockTelemetryRetry } from '../../functions/lockTelemetry';
import { ConfigError, parseConfig } from '../../shared/config';
import { type LocationDocument, newLocationDocument } from '../../shared/core/lock/document';
import type { ChangeListing } from '../../shared/core/store/ports/locations';
import { retryHorizonSeconds } from '../../shared/migration/telemetry/changeFeedRetry';
import { handleVersions } from '../../shared/migration/telemetry/changeHandler';
import type { TelemetryMetric } from '../../shared/migration/telemetry/lockTelemetry';
import {
  endSeenKey,
  reconcile,
  seenKeysOf,
  versionSeenKey,
} from '../../shared/migration/telemetry/reconcile';
import { runReconciliation } from '../../shared/migration/telemetry/reconciliation';
import {
  MemorySeenVersions,
  SEEN_ENDS_PER_RESOURCE,
  SEEN_KEYS_PER_RESOURCE,
  mergeSeenKeys,
} from '../../shared/migration/telemetry/seen';
import { MetricsRecorder, nullSink } from '../../shared/migration/telemetry/sink';

/**
 * A TelemetryGap must mean a real loss. A batch the change-feed trigger is still
 * retrying is no gap (the grace covers the retry horizon, and config refuses less on Cosmos DB); the
 * window must leave no change unchecked between two runs; a long migration's versions must not evict the
 * previous one's end key; a run the page bound cut short says so. Each with its negative control.
 */

const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();
const MINUTE = 60_000;

/** A listing over fixed rows (doc, etag, the store's write time), honouring since/until/limit/continuation. */
function listingOf(rows: { doc: LocationDocument; etag: string; at: number }[]): ChangeListing {
  return {
    async listChanged({ since, until, limit, continuation }) {
      const inWindow = rows.filter((r) => r.at >= since && r.at < until).sort((a, b) => a.at - b.at);
      const start = continuation ? Number(continuation) : 0;
      const page = inWindow.slice(start, start + limit);
      return {
        items: page.map((r) => ({ doc: r.doc, etag: r.etag })),
        continuation: start + limit < inWindow.length ? String(start + limit) : null,
      };
    },
  } as ChangeListing;
}

function withLastMigration(id: string, op: 'swap' | 'prelock' | 'renew', at: number, swappedAt: number) {
  return {
    ...newLocationDocument(id, { region: 'eastus' }),
    lastChange: { op, at: iso(at) },
    lastMigration: {
      migrationId: 'A',
      from: { region: 'westeurope' },
      to: { region: 'eastus' },
      outcome: 'swapped',
      acquiredAt: iso(swappedAt - 10 * MINUTE),
      startsAt: iso(swappedAt - 10 * MINUTE),
      hardDeleteAt: iso(swappedAt - MINUTE),
      writeAt: iso(swappedAt - 15_000),
      swappedAt: iso(swappedAt),
      releasedAt: null,
      tokenHash: 'h',
      convergenceDelaySeconds: 0,
    },
  } as LocationDocument;
}

const cosmosEnv = {
  ROUTELOCK_STORE: 'cosmos',
  COSMOS_ENDPOINT: 'https://127.0.0.1:8081',
  COSMOS_KEY: 'a2V5',
};
/** The Functions host (it sets FUNCTIONS_WORKER_RUNTIME): the schedule and the trigger's retries apply. */
const functionsEnv = { ...cosmosEnv, FUNCTIONS_WORKER_RUNTIME: 'node' };
function problemsOf(env: Record<string, string>): string[] {
  try {
    parseConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('a batch the trigger is still retrying is no gap', () => {
  test("the retry horizon is derived from the trigger's own policy: 5 s doubling to 5 min, 10 retries = 1515 s", () => {
    expect(lockTelemetryRetry).toMatchObject({ maxRetryCount: 10 });
    expect(retryHorizonSeconds(lockTelemetryRetry)).toBe(5 + 10 + 20 + 40 + 80 + 160 + 4 * 300);
    // a different policy, a different horizon (the config check follows the policy, not a constant)
    expect(retryHorizonSeconds({ ...lockTelemetryRetry, maxRetryCount: 3 } as never)).toBe(35);
  });

  test('on Cosmos DB config refuses a grace shorter than the horizon, naming the variable; the default covers it', () => {
    expect(problemsOf({ ...functionsEnv, ROUTELOCK_RECONCILE_GRACE_SECONDS: '300' })).toEqual([
      expect.stringMatching(/^ROUTELOCK_RECONCILE_GRACE_SECONDS: must be at least .*retry horizon \(1515 s/),
    ]);
    expect(problemsOf({ ...functionsEnv, ROUTELOCK_RECONCILE_GRACE_SECONDS: '1514' })).toHaveLength(1);
    expect(problemsOf({ ...functionsEnv, ROUTELOCK_RECONCILE_GRACE_SECONDS: '1515' })).toEqual([]);
    const { graceSeconds } = parseConfig(functionsEnv).operations.reconciliation;
    expect(graceSeconds).toBeGreaterThanOrEqual(1515);
    // the embedded host's stream runs with the write: no retries, any grace, on either store
    expect(problemsOf({ ROUTELOCK_RECONCILE_GRACE_SECONDS: '0' })).toEqual([]);
    expect(problemsOf({ ...cosmosEnv, ROUTELOCK_RECONCILE_GRACE_SECONDS: '0' })).toEqual([]);
  });

  /** A swap written at T0 whose first deliveries fail; the retry that succeeds runs at `handledAt` (or never). */
  async function retriedBatch(
    settings: { windowSeconds: number; graceSeconds: number },
    handledAt: number | null,
  ) {
    const seen = new MemorySeenVersions();
    const recorder = new MetricsRecorder();
    const doc = withLastMigration('r1', 'swap', T0, T0);
    const listing = listingOf([{ doc, etag: 'v1', at: T0 }]);
    let handled = false;
    // the reconciliation timer every 15 minutes for two hours
    for (let now = T0 + 6 * MINUTE; now <= T0 + 126 * MINUTE; now += 15 * MINUTE) {
      if (handledAt !== null && !handled && now >= handledAt) {
        await handleVersions([{ doc, version: 'v1' }], {
          sink: recorder,
          seen,
          declaredConvergenceDelaySeconds: 0,
        });
        handled = true;
      }
      await runReconciliation({ listing, seen, sink: recorder, now: () => now, settings });
    }
    return recorder.snapshot();
  }

  test("the grace config accepts: a batch handled by the policy's last retry (~25 min) is never a gap", async () => {
    const { graceSeconds, windowSeconds } = parseConfig(functionsEnv).operations.reconciliation;
    const snapshot = await retriedBatch({ graceSeconds, windowSeconds }, T0 + 1515 * 1000 + 30_000);
    expect(snapshot).toMatchObject({ telemetryGaps: 0, events: { MigrationSwapped: 1 } });
  });

  test('negative control: a batch the trigger gave up is found, once, with the same grace', async () => {
    const { graceSeconds, windowSeconds } = parseConfig(functionsEnv).operations.reconciliation;
    const snapshot = await retriedBatch({ graceSeconds, windowSeconds }, null);
    expect(snapshot.telemetryGaps).toBe(1);
    expect(snapshot.duplicatesIgnored).toBeGreaterThan(0); // found by several overlapping runs, one key
  });

  test('negative control: a 300 s grace reports the retried batch as a gap that stays', async () => {
    const snapshot = await retriedBatch({ graceSeconds: 300, windowSeconds: 3600 }, T0 + 21 * MINUTE);
    expect(snapshot).toMatchObject({ telemetryGaps: 1, events: { MigrationSwapped: 1 } });
  });
});

describe('the window covers the time between two runs and the grace', () => {
  test.each([
    [
      { ROUTELOCK_RECONCILE_INTERVAL_SECONDS: '7200' },
      /^ROUTELOCK_RECONCILE_WINDOW_SECONDS: must be at least .* \(9000 s\)/,
    ],
    [
      { ROUTELOCK_RECONCILE_GRACE_SECONDS: '3000' },
      /^ROUTELOCK_RECONCILE_WINDOW_SECONDS: must be at least .* \(3900 s\)/,
    ],
    [{ ROUTELOCK_RECONCILE_SCHEDULE: '0 0 */2 * * *' }, /^ROUTELOCK_RECONCILE_SCHEDULE: runs every 7200 s/],
    [
      { ROUTELOCK_RECONCILE_SCHEDULE: '0 0 * * * *', ROUTELOCK_RECONCILE_GRACE_SECONDS: '1' },
      /^ROUTELOCK_RECONCILE_SCHEDULE: runs every 3600 s/,
    ],
  ])('%j is refused, naming the variable', (env, message) => {
    // the interval is the embedded host's, the schedule the Functions host's
    const host: Record<string, string> =
      'ROUTELOCK_RECONCILE_SCHEDULE' in env ? { FUNCTIONS_WORKER_RUNTIME: 'node' } : {};
    expect(problemsOf({ ...host, ...env })).toContainEqual(expect.stringMatching(message));
  });

  test.each<Record<string, string>>([
    {},
    { ROUTELOCK_RECONCILE_INTERVAL_SECONDS: '1800' }, // 1800 + 1800 = 3600
    { ROUTELOCK_RECONCILE_SCHEDULE: '0 0 * * * *', ROUTELOCK_RECONCILE_WINDOW_SECONDS: '5400' },
    // not a simple period (a list): left to the operator (docs/design.md §8.2)
    { ROUTELOCK_RECONCILE_SCHEDULE: '0 0,40 * * * *' },
  ])('negative control: %j is accepted on both hosts', (env) => {
    expect(problemsOf({ ...cosmosEnv, ...env })).toEqual([]);
    expect(problemsOf({ ...functionsEnv, ...env })).toEqual([]);
  });

  test('each host is held to its own setting only: the schedule on Functions, the interval on the embedded host', () => {
    // every 5 min + 1800 s grace = 2100 ≤ 2400: fine on Functions, whatever the (unused) interval says
    const everyFive = {
      ROUTELOCK_RECONCILE_SCHEDULE: '0 */5 * * * *',
      ROUTELOCK_RECONCILE_WINDOW_SECONDS: '2400',
    };
    expect(
      problemsOf({ ...functionsEnv, ...everyFive, ROUTELOCK_RECONCILE_INTERVAL_SECONDS: '7200' }),
    ).toEqual([]);
    // the embedded host at 300 s + 1800 s = 2100 ≤ 2400: fine, whatever the (unused) schedule says
    const embedded = {
      ROUTELOCK_RECONCILE_INTERVAL_SECONDS: '300',
      ROUTELOCK_RECONCILE_WINDOW_SECONDS: '2400',
    };
    expect(problemsOf({ ...embedded, ROUTELOCK_RECONCILE_SCHEDULE: '0 0 */2 * * *' })).toEqual([]);
    // controls: each host refuses its own setting
    expect(
      problemsOf({ ...functionsEnv, ...everyFive, ROUTELOCK_RECONCILE_SCHEDULE: '0 0 */2 * * *' }),
    ).toHaveLength(1);
    expect(problemsOf({ ...embedded, ROUTELOCK_RECONCILE_INTERVAL_SECONDS: '7200' })).toHaveLength(1);
  });
});

describe("a long migration's versions keep the previous one's end key", () => {
  test('a swap seen, then 32 versions of the next migration (pre-lock, renewals): no gap', async () => {
    const seen = new MemorySeenVersions();
    await seen.record('r1', seenKeysOf(withLastMigration('r1', 'swap', T0, T0), 'v0'));
    let last = withLastMigration('r1', 'swap', T0, T0);
    for (let i = 1; i <= SEEN_KEYS_PER_RESOURCE; i += 1) {
      last = withLastMigration('r1', i === 1 ? 'prelock' : 'renew', T0 + i * 100_000, T0);
      await seen.record('r1', seenKeysOf(last, `v${i}`));
    }
    const keys = await seen.seen(['r1']);
    expect(
      reconcile([{ doc: last, version: `v${SEEN_KEYS_PER_RESOURCE}` }], keys, iso(T0 - 3600_000)),
    ).toEqual([]);
    expect(keys.has(versionSeenKey('r1', 'v0'))).toBe(false); // the oldest version key went, as it may
  });

  test('negative control: the same history with the swap never seen is a missing end', async () => {
    const seen = new MemorySeenVersions();
    let last = withLastMigration('r1', 'swap', T0, T0);
    for (let i = 1; i <= SEEN_KEYS_PER_RESOURCE; i += 1) {
      last = withLastMigration('r1', i === 1 ? 'prelock' : 'renew', T0 + i * 100_000, T0);
      await seen.record('r1', seenKeysOf(last, `v${i}`));
    }
    const gaps = reconcile([{ doc: last, version: 'v32' }], await seen.seen(['r1']), iso(T0 - 3600_000));
    expect(gaps).toEqual([expect.objectContaining({ missing: 'end', op: 'swap' })]);
  });

  test('both kinds stay bounded: the newest 32 version keys and the newest 8 end keys', () => {
    const ends = Array.from({ length: 20 }, (_, i) => endSeenKey('r1', `m${i}`, iso(T0 + i)));
    const versions = Array.from({ length: 50 }, (_, i) => versionSeenKey('r1', `v${i}`));
    const merged = mergeSeenKeys([], [...ends, ...versions]);
    expect(merged.filter((k) => k.startsWith('end:'))).toEqual(ends.slice(-SEEN_ENDS_PER_RESOURCE));
    expect(merged.filter((k) => k.startsWith('version:'))).toEqual(versions.slice(-SEEN_KEYS_PER_RESOURCE));
  });
});

describe('a truncated reconciliation run says so', () => {
  async function runOver(documents: number, maxPages: number) {
    const metrics: TelemetryMetric[] = [];
    const rows = Array.from({ length: documents }, (_, i) => ({
      doc: withLastMigration(`r${i}`, 'swap', T0 + i * 1000, T0 + i * 1000),
      etag: `e${i}`,
      at: T0 + i * 1000,
    }));
    const run = await runReconciliation({
      listing: listingOf(rows),
      seen: new MemorySeenVersions(),
      sink: { ...nullSink, metric: (m) => metrics.push(m) },
      now: () => T0 + 3 * 3600_000,
      settings: { windowSeconds: 3 * 3600, graceSeconds: 0 },
      pageSize: 10,
      maxPages,
    });
    return { run, metrics };
  }

  test('a run the page bound stopped: truncated on the run and on its telemetryGaps', async () => {
    const { run, metrics } = await runOver(35, 3);
    expect(run).toMatchObject({ truncated: true, checked: 30 });
    expect(metrics).toEqual([{ name: 'telemetryGaps', value: 30, properties: { truncated: 'true' } }]);
  });

  test('negative control: a run that read its whole window is not truncated', async () => {
    const { run, metrics } = await runOver(30, 3);
    expect(run).toMatchObject({ truncated: false, checked: 30 });
    expect(metrics).toEqual([{ name: 'telemetryGaps', value: 30, properties: { truncated: 'false' } }]);
  });
});
