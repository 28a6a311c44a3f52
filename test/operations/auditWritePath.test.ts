import { type AuditRecord, auditRecordFor, auditRecordsRecoverableFrom } from '../../shared/core/audit';
import { AuditTrail, AuditedLocationStore } from '../../shared/migration/auditTrail';
import { createServices } from '../../functions/services';
import { parseConfig } from '../../shared/config';
import { RouteLockError } from '../../shared/core/errors';
import type { LocationDocument } from '../../shared/core/lock/document';
import { Router } from '../../shared/core/router';
import { CosmosAuditLedger } from '../../shared/core/store/cosmos/audit';
import type { AuditLedger } from '../../shared/core/store/ports/audit';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { SqliteAuditLedger } from '../../shared/core/store/sqlite/audit';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { handleDocumentVersions } from '../../shared/migration/telemetry/changeHandler';
import { MetricsRecorder, nullSink } from '../../shared/migration/telemetry/sink';
import { ManualClock } from '../../testkit/clock';
import { useCosmosServers } from '../support/cosmosServers';
import { scratchConfig } from '../support/scratch';

/**
 * The audit ledger written on the write path, with the change feed as its idempotent backstop: no
 * record lost when the feed drops or coalesces a batch, none doubled when both write it, and never a
 * failed or changed answer because the ledger was down.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const timing = parseConfig({}).timing;
const servers = useCosmosServers();

/** A ledger that fails its next `failures` appends (or every one while `down`), as an outage would. */
class FlakyLedger implements AuditLedger {
  failures = 0;
  down = false;
  attempts = 0;
  constructor(readonly inner: AuditLedger) {}
  async append(record: AuditRecord): Promise<void> {
    this.attempts += 1;
    if (this.down || this.failures > 0) {
      this.failures = Math.max(0, this.failures - 1);
      throw new RouteLockError('StoreUnavailable', 'Cosmos DB did not serve audit entry (503).', {
        retryAfterSeconds: 1,
      });
    }
    await this.inner.append(record);
  }
  list(resourceId: string, limit: number): Promise<AuditRecord[]> {
    return this.inner.list(resourceId, limit);
  }
}

/** A router over `store` with the write path on it (`hooked`) or, as before it existed, without. */
function harness(options: { hooked: boolean; store?: LocationStore; ledger?: AuditLedger }) {
  const clock = new ManualClock();
  const raw = options.store ?? new SqliteStore(':memory:');
  const ledger = new FlakyLedger(options.ledger ?? new SqliteAuditLedger(':memory:'));
  const sink = new MetricsRecorder();
  const sleeps: number[] = [];
  const trail = new AuditTrail({
    ledger,
    sink,
    sleep: async (ms) => {
      sleeps.push(ms);
      clock.advance(ms);
    },
  });
  const store = options.hooked ? new AuditedLocationStore(raw, trail) : raw;
  const router = new Router({ store, timing, clock: clock.now });
  // What the change feed would deliver: every committed version, in order (SQLite's own stream).
  const versions: LocationDocument[] = [];
  if (raw instanceof SqliteStore) raw.onChange((doc) => versions.push(structuredClone(doc)));
  const feed = (batch: LocationDocument[]) =>
    handleDocumentVersions(batch, { sink: nullSink, audit: ledger, declaredConvergenceDelaySeconds: 0 });
  return { clock, raw, ledger, sink, sleeps, router, versions, feed };
}

type Harness = ReturnType<typeof harness>;

/** Pre-lock, both escalations and the swap: the orchestrator's path to a cutover. */
async function swapped(h: Harness, id: string) {
  await h.router.createRoute(id, SOURCE);
  const grant = await h.router.prelock(id, { migrationId: `m-${id}`, owner: 'o', target: TARGET });
  h.clock.set(Date.parse(grant.startsAt) + (timing.clockSkewSeconds + 1) * 1000);
  await h.router.escalate(id, { token: grant.token!, phase: 'hardDelete' });
  await h.router.escalate(id, { token: grant.token!, phase: 'write' });
  return h.router.swap(id, { token: grant.token! });
}

/** Pre-lock and release: an aborted migration. */
async function released(h: Harness, id: string) {
  await h.router.createRoute(id, SOURCE);
  const grant = await h.router.prelock(id, { migrationId: `m-${id}`, owner: 'o', target: TARGET });
  return h.router.release(id, { token: grant.token! });
}

const ops = async (ledger: AuditLedger, id: string) => (await ledger.list(id, 20)).map((r) => r.op);

test('a swap, a release and a reclaim each write exactly one audit record, with no change feed running', async () => {
  const h = harness({ hooked: true });
  await swapped(h, 'w-swap');
  await released(h, 'w-rel');
  await h.router.createRoute('w-orphan', SOURCE);
  const grant = await h.router.prelock('w-orphan', { migrationId: 'm-o', owner: 'o', target: TARGET });
  h.clock.set(Date.parse(grant.expiresAt) + 1000);
  await h.router.reclaim('w-orphan');
  expect(await ops(h.ledger, 'w-swap')).toEqual(['swap']);
  expect(await ops(h.ledger, 'w-rel')).toEqual(['release']);
  expect(await ops(h.ledger, 'w-orphan')).toEqual(['reclaim']);
  // Each is the record the committed version calls for, nothing else (prelock, escalate: none).
  const last = h.versions.at(-1)!;
  expect(await h.ledger.list('w-orphan', 5)).toEqual([auditRecordFor(last)]);
  expect(h.ledger.attempts).toBe(3);
});

test('the composed services (both hosts) audit on the write path: a force-release after its approvals', async () => {
  const store = new SqliteStore(':memory:');
  const audit = new SqliteAuditLedger(':memory:');
  const clock = new ManualClock();
  const services = await createServices(scratchConfig(), { clock: clock.now, store, audit });
  await services.router.createRoute('w-fr', SOURCE);
  await services.router.prelock('w-fr', { migrationId: 'm-fr', owner: 'o', target: TARGET });
  const request = await services.forceRelease.open('w-fr', 'alice', 'stuck');
  await services.forceRelease.approve(request.id, 'bob');
  expect((await services.forceRelease.approve(request.id, 'carol')).released).toBe(true);
  // No change feed ran: the release's own record came from the write path.
  expect(await ops(audit, 'w-fr')).toEqual([
    'forceReleaseRequested',
    'forceReleaseApproved',
    'forceReleaseApproved',
    'forceRelease',
  ]);
});

test('composed services, ledger down: a force-release request still opens and is approved; the gaps are reported', async () => {
  const store = new SqliteStore(':memory:');
  const audit = new FlakyLedger(new SqliteAuditLedger(':memory:'));
  const sink = new MetricsRecorder();
  const services = await createServices(scratchConfig(), { store, audit, sink });
  await services.router.createRoute('w-down', SOURCE);
  await services.router.prelock('w-down', { migrationId: 'm-d', owner: 'o', target: TARGET });
  audit.down = true;
  // Before the write path, the committed request answered 503 here, and a retried approval 409.
  const request = await services.forceRelease.open('w-down', 'alice', 'stuck');
  expect((await services.forceRelease.approve(request.id, 'bob')).request.approvals).toHaveLength(1);
  // the opening once, then at the approval the opening again and the approval
  expect(sink.snapshot().events).toEqual({ AuditRecordDeferred: 3 });
  expect(audit.attempts).toBe(12); // four attempts per record, the real 50/200/800 ms backoff
  // The ledger is back: the next step of the request appends the records the earlier ones could not
  // (no change feed watches requests: this is their backstop).
  audit.down = false;
  await services.forceRelease.approve(request.id, 'carol');
  const ops = (await services.audit.list('w-down', 20)).map((r) => `${r.op}:${r.actor}`).sort();
  expect(ops).toEqual([
    'forceRelease:alice,bob,carol',
    'forceReleaseApproved:bob',
    'forceReleaseApproved:carol',
    'forceReleaseRequested:alice',
  ]);
}, 15_000);

test('the feed replaying the same versions, twice and coalesced, adds no record', async () => {
  const h = harness({ hooked: true });
  await swapped(h, 'r-swap');
  await released(h, 'r-rel');
  const before = [await h.ledger.list('r-swap', 20), await h.ledger.list('r-rel', 20)];
  expect(before.map((records) => records.length)).toEqual([1, 1]);
  await h.feed(h.versions);
  await h.feed(h.versions);
  // Coalesced: only each document's latest version arrives.
  await h.feed([h.versions.filter((v) => v.id === 'r-swap').at(-1)!, h.versions.at(-1)!]);
  expect([await h.ledger.list('r-swap', 20), await h.ledger.list('r-rel', 20)]).toEqual(before);
});

test('a ledger failing three times then recovering still ends with the record; the answer is unchanged', async () => {
  const healthy = harness({ hooked: true });
  const flaky = harness({ hooked: true });
  const expected = await released(healthy, 'f-1');
  flaky.ledger.failures = 3;
  const answer = await released(flaky, 'f-1');
  expect(flaky.sleeps).toEqual([50, 200, 800]);
  expect(await ops(flaky.ledger, 'f-1')).toEqual(['release']);
  expect(flaky.sink.snapshot().events.AuditRecordDeferred).toBeUndefined();
  expect({ ...answer, etag: '' }).toEqual({ ...expected, etag: '' });
});

test('a ledger down for good: the mutation commits and answers, the gap is reported, the backstop fills it', async () => {
  const h = harness({ hooked: true });
  h.ledger.down = true;
  const view = await swapped(h, 'd-1');
  expect(view.location).toEqual(TARGET);
  const stored = await h.raw.read('d-1', { from: 'writeRegion' });
  expect(stored.doc.lastChange?.op).toBe('swap');
  expect(h.ledger.attempts).toBe(4); // the first try and three retries, then no more
  expect(h.sink.snapshot().events).toEqual({ AuditRecordDeferred: 1 });
  h.ledger.down = false;
  expect(await ops(h.ledger, 'd-1')).toEqual([]);
  // Later, the change feed (backstop) delivers the version: the gap is filled with the same record.
  await h.feed(h.versions);
  expect(await h.ledger.list('d-1', 5)).toEqual([auditRecordFor(stored.doc)]);
});

test('coalesced past the end: a skipped swap or release is rebuilt exactly; a skipped force-release is not', async () => {
  const h = harness({ hooked: true });
  await swapped(h, 'c-swap');
  await released(h, 'c-rel');
  for (const id of ['c-swap', 'c-rel']) {
    const own = await h.ledger.list(id, 5);
    expect(own).toHaveLength(1);
    // The next migration's pre-lock lands before the feed reads: the end's version is never delivered.
    h.clock.advanceSeconds(86_400);
    const back = id === 'c-swap' ? SOURCE : TARGET;
    await h.router.prelock(id, { migrationId: `m2-${id}`, owner: 'o', target: back });
    const later = (await h.raw.read(id, { from: 'writeRegion' })).doc;
    expect(later.lastChange?.op).toBe('prelock');
    expect(auditRecordFor(later)).toBeNull();
    expect(auditRecordsRecoverableFrom(later)).toEqual(own);
  }
  // A force-release's record needs its actor, reason and request: a later version no longer has them.
  const fr = harness({ hooked: false });
  await fr.router.createRoute('c-fr', SOURCE);
  await fr.router.prelock('c-fr', { migrationId: 'm-fr', owner: 'o', target: TARGET });
  await fr.router.forceRelease('c-fr', { actor: 'a,b,c', reason: 'stuck', requestId: 'fr-1' });
  await fr.router.prelock('c-fr', { migrationId: 'm-fr2', owner: 'o', target: TARGET });
  expect(auditRecordsRecoverableFrom(fr.versions.at(-1)!)).toEqual([]);
  expect(auditRecordFor(fr.versions.at(-2)!)).toMatchObject({ op: 'forceRelease', actor: 'a,b,c' });
});

/**
 * The change-feed trigger's invocation throws and the host gives the batch up (its retries spent): the
 * batch is dropped, and no later version of the document reaches the feed. What the ledger holds.
 */
async function afterDroppedBatch(hooked: boolean): Promise<string[][]> {
  const h = harness({ hooked });
  await swapped(h, 'n-swap');
  await h.router.createRoute('n-fr', SOURCE);
  await h.router.prelock('n-fr', { migrationId: 'm-fr', owner: 'o', target: TARGET });
  await h.router.forceRelease('n-fr', { actor: 'a,b,c', reason: 'stuck', requestId: 'fr-n' });
  h.ledger.down = true;
  await expect(h.feed(h.versions)).rejects.toThrow(/did not serve/);
  h.ledger.down = false;
  return [await ops(h.ledger, 'n-swap'), await ops(h.ledger, 'n-fr')];
}

test('negative control: without the write-path hook, a dropped change-feed batch loses the records', async () => {
  expect(await afterDroppedBatch(true)).toEqual([['swap'], ['forceRelease']]);
  // The write path removed: only the feed writes, and it dropped them.
  expect(await afterDroppedBatch(false)).toEqual([[], []]);
});

describe.each(['stock', 'quoted ETags'] as const)('on the Cosmos test server (%s)', (form) => {
  test('write path then feed replays: one record, the first one kept', async () => {
    const server = form === 'stock' ? servers.stock : servers.quoted;
    const store = await server.connect(`locations${Date.now()}`);
    const container = store.containerNamed(`audit${Date.now()}`);
    await container.database.containers.createIfNotExists({
      id: container.id,
      partitionKey: { paths: ['/id'] },
    });
    const h = harness({ hooked: true, store, ledger: new CosmosAuditLedger(container) });
    await released(h, 'cz-1');
    const stored = await store.read('cz-1', { from: 'writeRegion' });
    const record = auditRecordFor(stored.doc)!;
    expect(await h.ledger.list('cz-1', 5)).toEqual([record]);
    await h.feed([stored.doc, stored.doc]);
    // A different body under the same id (never produced, but the ledger is append-only): ignored.
    await h.ledger.append({ ...record, reason: 'rewritten' });
    expect(await h.ledger.list('cz-1', 5)).toEqual([record]);
  });
});
