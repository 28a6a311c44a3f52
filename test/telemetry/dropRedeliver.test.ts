import { bareEtag, type LocationDocument, type StoredDocument } from '../../shared/core/lock/document';
import { CosmosStore } from '../../shared/core/store/cosmos/locations';
import { CosmosSeenVersions } from '../../shared/migration/store/cosmos/telemetry';
import type { ChangeListing, LocationStore, PriorityOption } from '../../shared/core/store/ports/locations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { SqliteTelemetry } from '../../shared/migration/store/sqlite/telemetry';
import { handleDocumentVersions } from '../../shared/migration/telemetry/changeHandler';
import { runReconciliation } from '../../shared/migration/telemetry/reconciliation';
import type { SeenVersions } from '../../shared/migration/telemetry/seen';
import {
  FanOutSink,
  MetricsRecorder,
  type TelemetrySink,
  nullSink,
} from '../../shared/migration/telemetry/sink';
import { ManualClock } from '../../testkit/clock';
import { ForwardingStore } from '../../testkit/forwardingStore';
import { useCosmosServers } from '../support/cosmosServers';
import { virtualRunner } from '../support/migrationHarness';
import { assertNoSecrets } from '../support/secrets';
import { KeepingSink } from '../../testkit/keepingSink';

/**
 * The reconciliation's promise (docs/design.md §8.2): the change feed drops a batch (a handler invocation
 * that never ran, a version the feed coalesced away) and redelivers batches (the same one twice, overlapping
 * ones), on SQLite and on the Cosmos stand-in. Real document versions from real migrations, delivered as the
 * Cosmos change feed delivers them (the item with its `_etag` and `_ts`); the reconciliation reads the real
 * store's listing by change time and the real seen-versions store.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

/** Every version a store writes, as a change feed item. */
class CapturingStore extends ForwardingStore {
  readonly items: Record<string, unknown>[] = [];
  override async create(doc: LocationDocument, options?: PriorityOption): Promise<StoredDocument> {
    return this.capture(await this.inner.create(doc, options));
  }
  override async replace(
    doc: LocationDocument,
    ifMatch: string,
    options?: PriorityOption,
  ): Promise<StoredDocument> {
    return this.capture(await this.inner.replace(doc, ifMatch, options));
  }
  private capture(written: StoredDocument): StoredDocument {
    const ts = Math.floor((written.storedAt ?? Date.now()) / 1000);
    this.items.push(structuredClone({ ...written.doc, _etag: written.etag, _ts: ts }));
    return written;
  }
}

interface Backend {
  store: LocationStore & ChangeListing;
  seen: SeenVersions;
}

const servers = useCosmosServers();
let n = 0;
const backends: [string, () => Promise<Backend>][] = [
  [
    'sqlite',
    async () => {
      const telemetry = new SqliteTelemetry(':memory:');
      return { store: new SqliteStore(':memory:'), seen: telemetry };
    },
  ],
  ...(['stock', 'quoted'] as const).map((kind): [string, () => Promise<Backend>] => [
    `cosmos (@vercel/cosmosdb-server, ${kind} ETags)`,
    async () => {
      const server = servers[kind];
      n += 1;
      const store = await CosmosStore.connect({
        endpoint: server.endpoint,
        key: server.key,
        disableTlsVerify: true,
        database: 'routelock',
        container: `telemetry-locations${n}`,
        extraContainers: [`telemetry-audit${n}`],
      });
      return { store, seen: new CosmosSeenVersions(store.containerNamed(`telemetry-audit${n}`)) };
    },
  ]),
];

/** Two resources: one migration swapped; another swapped and then pre-locked again (it carries the swap on). */
async function writeVersions(backend: Backend) {
  const capturing = new CapturingStore(backend.store);
  const h = virtualRunner({
    store: capturing,
    clock: new ManualClock(Date.now()),
    http: async () => ({ status: 422, body: { error: 'refused' } }),
  });
  await h.router.createRoute('r-swap', SOURCE);
  h.runner.start({ resourceId: 'r-swap', target: TARGET, migrationId: 'm-swap' });
  await h.settle();
  await h.router.createRoute('r-next', SOURCE);
  h.runner.start({ resourceId: 'r-next', target: TARGET, migrationId: 'm-first' });
  await h.settle();
  h.clock.advanceSeconds(2 * 86_400); // past the retired source's write block
  await h.router.prelock('r-next', { migrationId: 'm-second', owner: 'test', target: SOURCE });
  return capturing.items;
}

const opOf = (item: Record<string, unknown>) =>
  `${item.id as string}:${(item as unknown as LocationDocument).lastChange?.op}`;

describe.each(backends)('drop and redeliver: %s', (_name, open) => {
  let backend: Backend;
  let items: Record<string, unknown>[];
  beforeAll(async () => {
    backend = await open();
    items = await writeVersions(backend);
  }, 60_000);
  afterAll(async () => {
    await backend.store.close();
    if (backend.seen instanceof SqliteTelemetry) backend.seen.close();
  });

  const deliver = (batches: unknown[][], sink: TelemetrySink, seen: SeenVersions | undefined) =>
    batches.reduce<Promise<unknown>>(
      (previous, batch) =>
        previous.then(() =>
          handleDocumentVersions(batch, { sink, seen, declaredConvergenceDelaySeconds: 0 }),
        ),
      Promise.resolve(),
    );
  const inBatches = (list: unknown[], size: number) =>
    Array.from({ length: Math.ceil(list.length / size) }, (_, i) => list.slice(i * size, i * size + size));
  const reconcileNow = (seen: SeenVersions, sink: TelemetrySink = nullSink) =>
    runReconciliation({
      listing: backend.store,
      seen,
      sink,
      // Cosmos `_ts` is whole seconds: the window ends past the last write's second.
      now: () => Date.now() + 2000,
      settings: { windowSeconds: 3600, graceSeconds: 0 },
      pageSize: 4, // several pages for eleven versions
    });

  test('the versions: two migrations swapped, the second resource pre-locked again', () => {
    expect(items.map(opOf)).toEqual([
      'r-swap:create',
      'r-swap:prelock',
      'r-swap:escalate',
      'r-swap:escalate',
      'r-swap:swap',
      'r-next:create',
      'r-next:prelock',
      'r-next:escalate',
      'r-next:escalate',
      'r-next:swap',
      'r-next:prelock',
    ]);
  });

  test('every event carries eventKey = name:resourceId:bare ETag; durations are measurements', async () => {
    const sink = new KeepingSink();
    await deliver([items], sink, undefined);
    const swapItem = items[4] as { _etag: string };
    const swapped = sink.events.find(
      (e) => e.name === 'MigrationSwapped' && e.properties.resourceId === 'r-swap',
    );
    expect(swapped?.properties.eventKey).toBe(`MigrationSwapped:r-swap:${bareEtag(swapItem._etag)}`);
    expect(swapped?.properties.eventKey).not.toContain('"');
    expect(Object.keys(swapped?.measurements ?? {}).sort()).toEqual([
      'convergenceDelaySeconds',
      'convergenceWaitSeconds',
      'hardDeleteSeconds',
      'migrationSeconds',
      'writeLockSeconds',
    ]);
    const released = sink.events.find(
      (e) => e.name === 'LockReleased' && e.properties.resourceId === 'r-swap',
    );
    expect(released?.measurements).toEqual({
      convergenceWaitSeconds: swapped?.measurements?.convergenceWaitSeconds,
      convergenceDelaySeconds: swapped?.measurements?.convergenceDelaySeconds,
    });
    // keys are unique per event: nothing derived from one version shares a key with another
    const keys = sink.events.map((e) => e.properties.eventKey);
    expect(new Set(keys).size).toBe(keys.length);
    // the change feed's lag per batch: no clock given, no metric
    expect(sink.metrics.some((m) => m.name === 'changeFeedLagSeconds')).toBe(false);
    const secrets = items.flatMap((i) => {
      const d = i as unknown as LocationDocument;
      return [d.lock?.tokenHash, d.lastMigration?.tokenHash].filter((s): s is string => Boolean(s));
    });
    assertNoSecrets(JSON.stringify(sink.events), secrets);
  });

  test('redelivered batches (the same twice, overlapping) count nothing twice and leave no gap', async () => {
    const once = new MetricsRecorder();
    await deliver(inBatches(items, 3), once, undefined);
    const seen = backend.seen;
    const recorder = new MetricsRecorder();
    const kept = new KeepingSink();
    const sink = new FanOutSink([recorder, kept]);
    const batches = inBatches(items, 3);
    // each batch twice (a retried invocation), then overlapping windows of five
    await deliver([...batches.flatMap((b) => [b, b]), items.slice(2, 7), items.slice(5, 10)], sink, seen);
    const expected = once.snapshot();
    expect(recorder.snapshot()).toEqual({ ...expected, duplicatesIgnored: expect.any(Number) });
    expect(recorder.snapshot().duplicatesIgnored).toBeGreaterThan(0);
    expect(expected.events).toEqual({ LockAcquired: 7, LockReleased: 2, MigrationSwapped: 2 });
    expect(expected.writeLockSeconds.count).toBe(2);
    // Application Insights keeps every copy; deduplicated on eventKey (the workbook's KQL) they are the once-counts
    const distinct = new Map(kept.events.map((e) => [e.properties.eventKey, e.name]));
    expect(kept.events.length).toBeGreaterThan(distinct.size);
    const byName: Record<string, number> = {};
    for (const name of distinct.values()) byName[name] = (byName[name] ?? 0) + 1;
    expect(byName).toEqual(expected.events);
    // negative control: the same copies counted without their key are double counts
    const undeduplicated = new MetricsRecorder();
    for (const e of kept.events)
      undeduplicated.event({
        ...e,
        properties: { ...e.properties, eventKey: undefined as unknown as string },
      });
    expect(undeduplicated.snapshot().events.MigrationSwapped).toBeGreaterThan(2);

    const gapSink = new KeepingSink();
    const run = await reconcileNow(seen, gapSink);
    expect(run).toMatchObject({ checked: 2, gaps: [], truncated: false });
    expect(gapSink.metrics).toEqual([
      { name: 'telemetryGaps', value: 0, properties: { truncated: 'false' } },
    ]);
  }, 60_000);
});

describe.each(backends)('a dropped batch is a TelemetryGap: %s', (_name, open) => {
  let backend: Backend;
  let items: Record<string, unknown>[];
  beforeAll(async () => {
    backend = await open();
    items = await writeVersions(backend);
  }, 60_000);
  afterAll(async () => {
    await backend.store.close();
    if (backend.seen instanceof SqliteTelemetry) backend.seen.close();
  });

  test('an invocation that never ran, a swap coalesced away: found; run again, gone', async () => {
    const handle = (batch: unknown[], sink: TelemetrySink) =>
      handleDocumentVersions(batch, { sink, seen: backend.seen, declaredConvergenceDelaySeconds: 0 });
    const recorder = new MetricsRecorder();
    // r-swap's last batch (its swap) never ran; r-next's swap was coalesced into the pre-lock after it
    const droppedBatch = items.slice(3, 5);
    const coalesced = items[9]!;
    expect(droppedBatch.map(opOf)).toEqual(['r-swap:escalate', 'r-swap:swap']);
    expect(opOf(coalesced)).toBe('r-next:swap');
    for (const item of items)
      if (!droppedBatch.includes(item) && item !== coalesced) await handle([item], recorder);

    const gapSink = new KeepingSink();
    const gapRecorder = new MetricsRecorder();
    const run = await runReconciliation({
      listing: backend.store,
      seen: backend.seen,
      sink: new FanOutSink([gapSink, gapRecorder]),
      now: () => Date.now() + 2000,
      settings: { windowSeconds: 3600, graceSeconds: 0 },
    });
    const swapEtag = bareEtag((items[4] as { _etag: string })._etag);
    const nextEtag = bareEtag((items[10] as { _etag: string })._etag);
    const swapAt = (coalesced as unknown as LocationDocument).lastMigration!.swappedAt!;
    expect(run.gaps).toEqual(
      expect.arrayContaining([
        { resourceId: 'r-swap', version: swapEtag, op: 'swap', at: expect.any(String), missing: 'version' },
        { resourceId: 'r-next', version: nextEtag, op: 'swap', at: swapAt, missing: 'end' },
      ]),
    );
    expect(run.gaps).toHaveLength(2);
    expect(gapSink.events.map((e) => e.properties.eventKey).sort()).toEqual(
      [`TelemetryGap:r-next:${nextEtag}`, `TelemetryGap:r-swap:${swapEtag}`].sort(),
    );
    expect(gapSink.events[0]?.properties).toMatchObject({
      resourceId: expect.any(String),
      op: 'swap',
      at: expect.any(String),
    });
    expect(gapSink.metrics).toEqual([
      { name: 'telemetryGaps', value: 2, properties: { truncated: 'false' } },
    ]);
    expect(gapRecorder.snapshot().telemetryGaps).toBe(2);
    // the next, overlapping run finds the same gaps under the same keys: counted once
    await runReconciliation({
      listing: backend.store,
      seen: backend.seen,
      sink: gapRecorder,
      now: () => Date.now() + 2000,
      settings: { windowSeconds: 3600, graceSeconds: 0 },
    });
    expect(gapRecorder.snapshot()).toMatchObject({ telemetryGaps: 2, duplicatesIgnored: 2 });

    // The retry runs the dropped batch after all (and the coalesced swap is still lost to its events, so
    // only the dropped batch's gap closes); nothing already counted is counted again.
    await handle(droppedBatch, recorder);
    const after = await reconcileAgain(backend);
    expect(after.gaps.map((g) => `${g.resourceId}:${g.missing}`)).toEqual(['r-next:end']);
    expect(recorder.snapshot().events).toEqual({ LockAcquired: 7, LockReleased: 1, MigrationSwapped: 1 });
  }, 60_000);
});

function reconcileAgain(backend: Backend) {
  return runReconciliation({
    listing: backend.store,
    seen: backend.seen,
    sink: nullSink,
    now: () => Date.now() + 2000,
    settings: { windowSeconds: 3600, graceSeconds: 0 },
  });
}
