import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServices } from '../../functions/services';
import { type Decision, type ResolvedView, decide } from '../../shared/core/client';
import { parseConfig } from '../../shared/config';
import { RouteLockError } from '../../shared/core/errors';
import { bareEtag } from '../../shared/core/lock/document';
import { Router } from '../../shared/core/router';
import { observeStoreThrottling, storeError } from '../../shared/core/store/cosmos/common';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { sweepOrphans } from '../../shared/migration/sweeper';
import {
  decisionMetric,
  recordDecision,
  recordStoreThrottled,
} from '../../shared/migration/telemetry/decisions';
import type { TelemetryEvent, TelemetryMetric } from '../../shared/migration/telemetry/lockTelemetry';
import { telemetryEventNames, telemetryMetricNames } from '../../shared/migration/telemetry/names';
import { MessageStore } from '../../examples/message-store/service';
import { ManualClock } from '../../testkit/clock';
import { scratchConfig } from '../support/scratch';

/**
 * The request-path counters the workbook's refusals panel and the throttling alert read: a service's
 * decisions (shared/migration/telemetry/decisions.ts, wired in the example message store), Cosmos DB 429s at the
 * store adapter, and the sweeper's OrphanedLockFound.
 */

const metrics = () => {
  const seen: TelemetryMetric[] = [];
  return { seen, sink: { metric: (m: TelemetryMetric) => seen.push(m) } };
};

test.each<[Decision['kind'], string, Decision]>([
  ['allow', 'nothing', { kind: 'allow' }],
  ['notFound', 'nothing', { kind: 'notFound' }],
  ['deny', 'writesRefused', { kind: 'deny', retryAfterSeconds: 3 }],
  ['tombstone', 'deletesTombstoned', { kind: 'tombstone' }],
  ['notHere', 'requestsMisdirected', { kind: 'notHere', location: { region: 'eastus' } }],
  ['unavailable', 'routingUnavailable', { kind: 'unavailable', retryAfterSeconds: 1 }],
])('a %s decision is counted as %s', (_kind, label, decision) => {
  const metric = label === 'nothing' ? undefined : label;
  expect(decisionMetric(decision)).toBe(metric);
  const { seen, sink } = metrics();
  recordDecision(sink, decision, { service: 'orders', operation: 'write', region: 'westeurope' });
  expect(seen).toEqual(
    metric === undefined
      ? []
      : [
          {
            name: metric,
            value: 1,
            properties: { service: 'orders', operation: 'write', region: 'westeurope' },
          },
        ],
  );
  // every counted name is in the catalogue the workbook's queries are checked against
  if (metric !== undefined) expect(telemetryMetricNames).toContain(metric);
});

/** A view at `westeurope` with the enforcement of a lock phase (what RoutingClient.resolve returns). */
function viewIn(phase: 'none' | 'hardDelete' | 'write'): ResolvedView {
  return {
    resourceId: 'conv-1',
    location: { region: 'westeurope' },
    enforcement: {
      read: 'allow',
      write: phase === 'write' ? 'deny' : 'allow',
      delete: phase === 'write' ? 'deny' : phase === 'hardDelete' ? 'tombstone' : 'allow',
      ...(phase === 'write' ? { retryAfterSeconds: 4 } : {}),
    },
  } as unknown as ResolvedView;
}

describe('the example message store counts what it refused, tombstoned and sent elsewhere', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'decisions-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const storeWith = (phase: 'none' | 'hardDelete' | 'write', options: { ignoreWriteLock?: boolean } = {}) => {
    const { seen, sink } = metrics();
    const store = new MessageStore({
      regions: { westeurope: join(dir, 'we.db'), eastus: join(dir, 'eu.db') },
      telemetry: sink,
      ...options,
    });
    // the routing answer, without a routing service: the store decides on it as on any resolved view
    store.resolve = async () => viewIn(phase);
    return { store, seen };
  };

  test('a write under the write lock: 423 and writesRefused; a delete under hard-delete: deletesTombstoned', async () => {
    const locked = storeWith('write');
    expect(await locked.store.write('westeurope', 'conv-1', 'm-1', 'hi')).toEqual({
      status: 'locked',
      retryAfterSeconds: 4,
    });
    expect(locked.seen.map((m) => [m.name, m.properties.operation])).toEqual([['writesRefused', 'write']]);

    const tombstoning = storeWith('hardDelete');
    await tombstoning.store.write('westeurope', 'conv-1', 'm-1', 'hi');
    expect(await tombstoning.store.remove('westeurope', 'conv-1', 'm-1')).toEqual({ status: 'tombstoned' });
    // the allowed write is not counted
    expect(tombstoning.seen.map((m) => m.name)).toEqual(['deletesTombstoned']);

    const elsewhere = storeWith('none');
    await elsewhere.store.read('eastus', 'conv-1');
    expect(elsewhere.seen.map((m) => [m.name, m.properties.region])).toEqual([
      ['requestsMisdirected', 'eastus'],
    ]);
  });

  test('negative control: a build that ignores the write lock refuses nothing, and counts no refusal', async () => {
    const careless = storeWith('write', { ignoreWriteLock: true });
    expect(await careless.store.write('westeurope', 'conv-1', 'm-1', 'hi')).toEqual({ status: 'ok' });
    expect(careless.seen).toEqual([]);
    // the decision it ignored was a refusal: counting it would report a 423 nobody got
    expect(decide(viewIn('write'), 'write', 'westeurope').kind).toBe('deny');
  });
});

describe('Cosmos DB throttling at the store adapter', () => {
  test('a 429 is told to the observers (once each), other failures are not; unsubscribing stops it', () => {
    const seen: string[] = [];
    const stop = observeStoreThrottling((about) => seen.push(about.kind));
    const throttled = storeError({ statusCode: 429, retryAfterInMs: 2000 }, 'conv-1');
    expect(throttled).toBeInstanceOf(RouteLockError);
    expect(throttled.code).toBe('StoreUnavailable');
    storeError({ statusCode: 503 }, 'conv-1');
    storeError({ statusCode: 412 }, 'conv-1');
    expect(seen).toEqual(['route']);
    stop();
    storeError({ statusCode: 429 }, 'conv-1');
    expect(seen).toEqual(['route']);
  });

  test('an observer that throws never changes the error a caller gets', () => {
    const stop = observeStoreThrottling(() => {
      throw new Error('telemetry down');
    });
    try {
      expect(storeError({ statusCode: 429 }, 'conv-1').code).toBe('StoreUnavailable');
    } finally {
      stop();
    }
  });

  test('counted as storeThrottled, by what the request was about', () => {
    const { seen, sink } = metrics();
    recordStoreThrottled(sink, { kind: 'route' });
    expect(seen).toEqual([{ name: 'storeThrottled', value: 1, properties: { subject: 'route' } }]);
  });
});

test('the sweeper reports each orphan it finds, keyed on the version it read', async () => {
  const clock = new ManualClock();
  const store = new SqliteStore(':memory:');
  const router = new Router({ store, timing: parseConfig({}).timing, clock: clock.now });
  await router.createRoute('stuck-1', { region: 'westeurope' });
  await router.createRoute('live-1', { region: 'westeurope' });
  const stale = await router.prelock('stuck-1', {
    migrationId: 'm-old',
    owner: 'o',
    target: { region: 'eastus' },
  });
  clock.set(Date.parse(stale.expiresAt) + 90_000);
  await router.prelock('live-1', { migrationId: 'm-live', owner: 'o', target: { region: 'eastus' } });
  const version = bareEtag((await store.read('stuck-1', { from: 'writeRegion' })).etag);

  const events: TelemetryEvent[] = [];
  const result = await sweepOrphans({ router, clock: clock.now, sink: { event: (e) => events.push(e) } });
  expect(result.reclaimed).toEqual([{ resourceId: 'stuck-1', ageSeconds: 90 }]);
  expect(events).toEqual([
    {
      name: 'OrphanedLockFound',
      properties: {
        eventKey: `OrphanedLockFound:stuck-1:${version}`,
        resourceId: 'stuck-1',
        migrationId: 'm-old',
        phase: 'prelock',
        expiredAt: stale.expiresAt,
      },
      measurements: { ageSeconds: 90 },
    },
  ]);
  expect(telemetryEventNames).toContain('OrphanedLockFound');
  // reclaimed: the next sweep finds nothing (the live lock is never reported)
  events.length = 0;
  await sweepOrphans({ router, clock: clock.now, sink: { event: (e) => events.push(e) } });
  expect(events).toEqual([]);
});

test('the app counts the throttling its Cosmos DB adapters see (and only with Cosmos DB as its store)', async () => {
  const sinkOf = (seen: { metric: (m: TelemetryMetric) => void }) => ({
    event() {},
    availability() {},
    flush: async () => undefined,
    ...seen,
  });
  const onSqlite = metrics();
  await createServices(scratchConfig(), { store: new SqliteStore(':memory:'), sink: sinkOf(onSqlite.sink) });
  storeError({ statusCode: 429 }, 'conv-1');
  expect(onSqlite.seen).toEqual([]);

  const onCosmos = metrics();
  const config = scratchConfig({
    ROUTELOCK_STORE: 'cosmos',
    COSMOS_ENDPOINT: 'https://routelock.documents.azure.com',
  });
  expect(config.store.kind).toBe('cosmos');
  // the store itself is given (no account is reached): what is checked is the wiring to the app's sink
  await createServices(config, { store: new SqliteStore(':memory:'), sink: sinkOf(onCosmos.sink) });
  storeError({ statusCode: 429 }, 'conv-1');
  storeError({ statusCode: 503 }, 'conv-1');
  expect(onCosmos.seen).toEqual([{ name: 'storeThrottled', value: 1, properties: { subject: 'route' } }]);
  expect(onSqlite.seen).toEqual([]);
});
