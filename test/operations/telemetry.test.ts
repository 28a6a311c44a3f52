import { parseConfig } from '../../shared/config';
import type { LocationDocument } from '../../shared/core/lock/document';
import { sha256Hex } from '../../shared/core/lock/token';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { SqliteAuditLedger } from '../../shared/core/store/sqlite/audit';
import { handleDocumentVersions } from '../../shared/migration/telemetry/changeHandler';
import {
  MetricsRecorder,
  TelemetryClientSink,
  type TelemetryClientLike,
  distribution,
} from '../../shared/migration/telemetry/sink';
import { virtualRunner } from '../support/migrationHarness';
import { assertNoSecrets } from '../support/secrets';

/**
 * The change-feed handler fed with real document versions, produced by the library through a real
 * migration (captured from the SQLite store's change stream), with a fake Application Insights client.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

class FakeTelemetryClient implements TelemetryClientLike {
  events: { name: string; properties?: Record<string, string>; measurements?: Record<string, number> }[] = [];
  metrics: { name: string; value: number; properties?: Record<string, string> }[] = [];
  availability: unknown[] = [];
  flushes = 0;
  trackEvent(t: {
    name: string;
    properties?: Record<string, string>;
    measurements?: Record<string, number>;
  }) {
    this.events.push(t);
  }
  trackMetric(t: { name: string; value: number; properties?: Record<string, string> }) {
    this.metrics.push(t);
  }
  trackAvailability(t: unknown) {
    this.availability.push(t);
  }
  async flush() {
    this.flushes += 1;
  }
}

/** Run migrations on virtual time and capture every document version the store wrote. */
async function versionsOf(
  run: (h: ReturnType<typeof virtualRunner>) => Promise<void>,
  env: Record<string, string> = {},
) {
  const store = new SqliteStore(':memory:');
  const versions: LocationDocument[] = [];
  store.onChange((doc) => versions.push(structuredClone(doc)));
  // Participants answer in-process (422: a participant that refuses the copy); no test touches the network.
  const h = virtualRunner({ store, env, http: async () => ({ status: 422, body: { error: 'refused' } }) });
  await run(h);
  return { versions, h };
}

function secretsOf(versions: LocationDocument[]): string[] {
  return versions
    .flatMap((v) => [v.lock?.tokenHash, v.lock?.idempotencyKeyHash, v.lastMigration?.tokenHash])
    .filter((s): s is string => Boolean(s));
}

test('a completed migration: LockAcquired per phase, LockReleased + MigrationSwapped, the four durations', async () => {
  const { versions } = await versionsOf(async (h) => {
    await h.router.createRoute('conv-t', SOURCE);
    h.runner.start({ resourceId: 'conv-t', target: TARGET, migrationId: 'm-t' });
    await h.settle();
  });
  expect(versions.map((v) => v.lastChange?.op)).toEqual([
    'create',
    'prelock',
    'escalate',
    'escalate',
    'swap',
  ]);
  const client = new FakeTelemetryClient();
  const audit = new SqliteAuditLedger(':memory:');
  const result = await handleDocumentVersions(versions, {
    sink: new TelemetryClientSink(client),
    audit,
    declaredConvergenceDelaySeconds: 7500,
  });
  expect(client.events.map((e) => `${e.name}${e.properties?.phase ? `:${e.properties.phase}` : ''}`)).toEqual(
    [
      'LockAcquired:prelock',
      'LockAcquired:hardDelete',
      'LockAcquired:write',
      'LockReleased',
      'MigrationSwapped',
    ],
  );
  const swap = versions.at(-1)!.lastMigration!;
  const secondsBetween = (a: string | null, b: string | null) => (Date.parse(b!) - Date.parse(a!)) / 1000;
  expect(Object.fromEntries(client.metrics.map((m) => [m.name, m.value]))).toEqual({
    convergenceWaitSeconds: secondsBetween(swap.acquiredAt, swap.hardDeleteAt),
    writeLockSeconds: secondsBetween(swap.writeAt, swap.swappedAt),
    hardDeleteSeconds: secondsBetween(swap.hardDeleteAt, swap.swappedAt),
    migrationSeconds: secondsBetween(swap.acquiredAt, swap.swappedAt),
  });
  expect(client.metrics.find((m) => m.name === 'convergenceWaitSeconds')!.value).toBe(7500 + 600); // delay + buffer
  expect(client.events[0]!.properties).toMatchObject({
    resourceId: 'conv-t',
    migrationId: 'm-t',
    target: 'eastus',
  });
  expect(client.flushes).toBe(1);
  expect(result).toMatchObject({ events: 5, metrics: 4, audited: 1 });
  expect(await audit.list('conv-t', 10)).toEqual([
    expect.objectContaining({
      op: 'swap',
      migrationId: 'm-t',
      from: SOURCE,
      to: TARGET,
      swappedAt: swap.swappedAt,
    }),
  ]);
  // No token, hash or idempotency-key hash in any property, measurement or record.
  const secrets = secretsOf(versions);
  expect(secrets.length).toBeGreaterThan(0);
  assertNoSecrets(JSON.stringify([client.events, client.metrics, await audit.list('conv-t', 10)]), secrets);
});

test('an abort (failing participant): LockReleased with reason release, audited, no swap metrics', async () => {
  const { versions } = await versionsOf(
    async (h) => {
      await h.router.createRoute('conv-a', SOURCE);
      h.runner.start({ resourceId: 'conv-a', target: TARGET });
      await h.settle();
    },
    // one attempt: the events of one abort (a retry with a fresh lock would pre-lock again)
    {
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p', url: 'https://p.test/x' }]),
      ROUTELOCK_MIGRATION_ATTEMPTS: '1',
    },
  );
  expect(versions.at(-1)!.lastChange?.op).toBe('release');
  const client = new FakeTelemetryClient();
  const audit = new SqliteAuditLedger(':memory:');
  await handleDocumentVersions(versions, {
    sink: new TelemetryClientSink(client),
    audit,
    declaredConvergenceDelaySeconds: 7500,
  });
  expect(client.events.map((e) => e.name)).toEqual(['LockAcquired', 'LockAcquired', 'LockReleased']);
  expect(client.events.at(-1)!.properties).toMatchObject({ reason: 'release' });
  expect(client.metrics.map((m) => m.name)).toEqual(['convergenceWaitSeconds']);
  expect((await audit.list('conv-a', 10)).map((r) => r.op)).toEqual(['release']);
  assertNoSecrets(JSON.stringify([client.events, client.metrics]), secretsOf(versions));
});

test('a shortfall: a lock taken under a shorter delay than the one declared now raises ConvergenceShortfall', async () => {
  // The lock was acquired while the service declared a 60 s delay; the service now declares 7500 s.
  const { versions } = await versionsOf(
    async (h) => {
      await h.router.createRoute('conv-s', SOURCE);
      h.runner.start({ resourceId: 'conv-s', target: TARGET });
      await h.settle();
    },
    {
      ROUTELOCK_CACHE_TIERS: 'local=30',
      ROUTELOCK_REPLICATION_BOUND_SECONDS: '30',
      ROUTELOCK_SAFETY_BUFFER_SECONDS: '10',
    },
  );
  const client = new FakeTelemetryClient();
  const declared = parseConfig({}).timing.convergenceDelaySeconds;
  await handleDocumentVersions(versions, {
    sink: new TelemetryClientSink(client),
    declaredConvergenceDelaySeconds: declared,
  });
  const shortfall = client.events.find((e) => e.name === 'ConvergenceShortfall');
  expect(shortfall?.measurements).toEqual({ convergenceWaitSeconds: 70, convergenceDelaySeconds: 7500 });
  // negative control: judged against the delay it was taken under, the same wait is no shortfall
  const relaxed = new FakeTelemetryClient();
  await handleDocumentVersions(versions, {
    sink: new TelemetryClientSink(relaxed),
    declaredConvergenceDelaySeconds: 60,
  });
  expect(relaxed.events.some((e) => e.name === 'ConvergenceShortfall')).toBe(false);
});

test('a probe route is judged by its own lock timing: the same short wait on a service route is a shortfall', async () => {
  // A lock taken under a one-second delay, as the probe's is, on a host that declares a longer one.
  const { versions } = await versionsOf(
    async (h) => {
      await h.router.createRoute('conv-p', SOURCE);
      h.runner.start({ resourceId: 'conv-p', target: TARGET });
      await h.settle();
    },
    {
      ROUTELOCK_CACHE_TIERS: 'local=1',
      ROUTELOCK_REPLICATION_BOUND_SECONDS: '0',
      ROUTELOCK_SAFETY_BUFFER_SECONDS: '0',
    },
  );
  const declared = parseConfig({}).timing.convergenceDelaySeconds;
  const shortfalls = async (docs: LocationDocument[]) => {
    const client = new FakeTelemetryClient();
    await handleDocumentVersions(docs, {
      sink: new TelemetryClientSink(client),
      declaredConvergenceDelaySeconds: declared,
    });
    return client.events.filter((e) => e.name === 'ConvergenceShortfall');
  };
  const asProbe = versions.map((doc) => ({ ...doc, id: 'probe-westeurope' }));
  expect(await shortfalls(asProbe)).toEqual([]);
  // negative control: a service's route with that lock falls short of the delay declared now
  const real = await shortfalls(versions);
  expect(real).toHaveLength(1);
  expect(real[0]?.measurements?.convergenceDelaySeconds).toBe(declared);
});

test('documents that are not location documents (a lease, a stray item) are skipped', async () => {
  const client = new FakeTelemetryClient();
  const result = await handleDocumentVersions([{ id: 'lease-1', ContinuationToken: '"5"' }, null, 'x'], {
    sink: new TelemetryClientSink(client),
    declaredConvergenceDelaySeconds: 0,
  });
  expect(result).toMatchObject({ skipped: 3, events: 0 });
});

test('the recorder behind /api/metrics: nearest-rank percentiles, event counts, shortfalls', () => {
  expect(distribution([5, 1, 3, 2, 4])).toEqual({ count: 5, p50: 3, p75: 4, p99: 5, max: 5 });
  expect(distribution([])).toEqual({ count: 0, p50: null, p75: null, p99: null, max: null });
  const recorder = new MetricsRecorder();
  // From the events' measurements (deduplicable), not from metrics.
  recorder.metric({ name: 'writeLockSeconds', value: 99, properties: {} });
  for (const [i, v] of [13, 15, 19, 12].entries())
    recorder.event({
      name: 'MigrationSwapped',
      properties: { eventKey: `MigrationSwapped:r:${i}` },
      measurements: { writeLockSeconds: v },
    });
  recorder.event({ name: 'ConvergenceShortfall', properties: {} });
  recorder.event({ name: 'LockAcquired', properties: {} });
  const snapshot = recorder.snapshot();
  expect(snapshot.writeLockSeconds).toEqual({ count: 4, p50: 13, p75: 15, p99: 19, max: 19 });
  expect(snapshot.events).toEqual({ ConvergenceShortfall: 1, LockAcquired: 1, MigrationSwapped: 4 });
  expect(snapshot.convergenceShortfalls).toBe(1);
  expect(sha256Hex('x')).toHaveLength(64);
});
