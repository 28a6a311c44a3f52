import { ManualClock } from '../testkit/clock';
import { type StoredDocument, newLocationDocument } from '../shared/core/lock/document';
import { Router } from '../shared/core/router';
import type { LocationStore, ReadOptions } from '../shared/core/store/ports/locations';
import { AuditTrail, AuditedLocationStore } from '../shared/migration/auditTrail';
import { SqliteAuditLedger } from '../shared/core/store/sqlite/audit';
import { nullSink } from '../shared/migration/telemetry/sink';
import { resetCounters } from '../shared/core/store/ports/locations';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import { productionTiming, seconds } from './support/timing';

/**
 * The read-through of a copy the router holds is ETag-conditional (docs/design.md §5.1): the
 * write region sends nothing when the version is unchanged, and the router keeps the copy it holds. Safe
 * only if a changed version is always fetched, and the kept copy is dated from the new read's start
 * (its TTL and Age), exactly as a full read's copy would be.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const TTL = seconds(productionTiming.localCacheTtlSeconds);

/** SQLite whose conditional read takes `slowMs` of the test's clock, or (`lies`) never sees a change. */
class TestStore extends SqliteStore {
  slowMs = 0;
  lies = false;
  conditionalReads = 0;
  constructor(private readonly clock: ManualClock) {
    super(':memory:');
  }
  override async readIfChanged(
    id: string,
    etag: string,
    options: ReadOptions,
  ): Promise<StoredDocument | 'notModified'> {
    this.conditionalReads += 1;
    const answer = await super.readIfChanged(id, etag, options);
    this.clock.advance(this.slowMs);
    return this.lies ? 'notModified' : answer;
  }
}

/**
 * A route whose pre-lock starts 10 s after the router cached it (from the nearest replica): each resolve
 * from then on is a read-through of that held copy.
 */
async function heldCopyOfAStartingLock() {
  const clock = new ManualClock();
  const store = new TestStore(clock);
  const router = new Router({ store, timing: productionTiming, clock: clock.now });
  const orchestrator = new Router({ store, timing: productionTiming, clock: clock.now });
  await orchestrator.createRoute('r', SOURCE);
  const grant = await orchestrator.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
  const enforcedFrom = Date.parse(grant.startsAt) - seconds(productionTiming.clockSkewSeconds);
  clock.advance(enforcedFrom - seconds(10) - clock.now());
  const held = await router.resolve('r');
  clock.advance(seconds(20)); // the lock has started: the held copy is read through
  resetCounters(store.counters);
  const reads = () => ({
    nearest: store.counters.nearestReads,
    writeRegion: store.counters.writeRegionReads,
  });
  return { clock, store, router, orchestrator, grant, held, reads };
}

test('an unchanged version: one write-region read, and the held copy itself is served', async () => {
  const h = await heldCopyOfAStartingLock();
  const answer = await h.router.resolve('r');
  expect(h.reads()).toEqual({ nearest: 0, writeRegion: 1 });
  expect(h.store.conditionalReads).toBe(1);
  expect(answer).toBe(h.held); // not a new parse of the same version
  expect(h.router.heldEtag('r')).toBe(h.held.etag);
});

test('a changed version is fetched and served, never the held copy', async () => {
  const h = await heldCopyOfAStartingLock();
  h.clock.advance(seconds(productionTiming.convergenceDelaySeconds)); // the escalation may come
  await h.router.resolve('r'); // keep a held copy (the pre-lock) in the cache
  const escalated = await h.orchestrator.escalate('r', { token: h.grant.token!, phase: 'hardDelete' });
  const answer = await h.router.resolve('r');
  expect(answer.etag).toBe(escalated.etag);
  expect(answer.doc.lock?.phase).toBe('hardDelete');
  expect(h.router.heldEtag('r')).toBe(escalated.etag);
});

test('negative control: a read-through that kept a changed version would serve the old lock, and the check above sees it', async () => {
  const h = await heldCopyOfAStartingLock();
  h.clock.advance(seconds(productionTiming.convergenceDelaySeconds));
  await h.router.resolve('r');
  const escalated = await h.orchestrator.escalate('r', { token: h.grant.token!, phase: 'hardDelete' });
  h.store.lies = true; // the bug: "unchanged" whatever the stored version
  const answer = await h.router.resolve('r');
  expect(answer.etag).not.toBe(escalated.etag);
  expect(answer.doc.lock?.phase).toBe('prelock');
});

test('the kept copy is re-dated from the new read’s start: its Age, and one local TTL from then', async () => {
  const h = await heldCopyOfAStartingLock();
  h.store.slowMs = seconds(5); // the conditional read takes 5 s
  const readBegan = h.clock.now();
  const view = await h.router.view('r');
  // dated from the read's start (5 s ago), not from the first copy's (25 s ago) nor the answer's (now)
  expect(view).toMatchObject({ ageSeconds: 5, resolvedAt: readBegan });
  expect(view.view.lock?.phase).toBe('prelock');
  h.store.slowMs = 0;
  // 40 s on: past the first copy's TTL (cached 65 s before), within the new read's: still held, read through
  h.clock.advance(TTL - seconds(25));
  resetCounters(h.store.counters);
  await h.router.resolve('r');
  expect(h.reads()).toEqual({ nearest: 0, writeRegion: 1 });
  // one local TTL after that read began (and not after it answered): gone, a miss reads the nearest copy
  const secondReadBegan = h.clock.now();
  h.store.slowMs = seconds(5);
  await h.router.resolve('r');
  h.store.slowMs = 0;
  h.clock.advance(secondReadBegan + TTL + 1 - h.clock.now());
  resetCounters(h.store.counters);
  await h.router.resolve('r');
  expect(h.reads()).toEqual({ nearest: 1, writeRegion: 1 });
});

test('a store without the conditional read (a wrapper) is read in full, with the same answers', async () => {
  const clock = new ManualClock();
  const sqlite = new SqliteStore(':memory:');
  const plain = {
    kind: sqlite.kind,
    counters: sqlite.counters,
    read: sqlite.read.bind(sqlite),
    create: sqlite.create.bind(sqlite),
    replace: sqlite.replace.bind(sqlite),
    delete: sqlite.delete.bind(sqlite),
    list: sqlite.list.bind(sqlite),
    close: sqlite.close.bind(sqlite),
  };
  const router = new Router({ store: plain, timing: productionTiming, clock: clock.now });
  await router.createRoute('r', SOURCE);
  const grant = await router.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
  clock.advance(Date.parse(grant.startsAt) - clock.now());
  await router.resolve('r');
  resetCounters(sqlite.counters);
  const answer = await router.resolve('r');
  expect(sqlite.counters.writeRegionReads).toBe(1);
  expect(answer.etag).toBe(grant.etag);
});

describe('SqliteStore.readIfChanged', () => {
  test('notModified for the stored ETag, the document for any other, NotFound for none, each one read', async () => {
    const store = new SqliteStore(':memory:');
    const created = await store.create(newLocationDocument('r', SOURCE));
    await expect(store.readIfChanged('r', created.etag, { from: 'writeRegion' })).resolves.toBe(
      'notModified',
    );
    await expect(store.readIfChanged('r', 'another', { from: 'writeRegion' })).resolves.toEqual(created);
    await expect(store.readIfChanged('gone', created.etag, { from: 'writeRegion' })).rejects.toMatchObject({
      code: 'NotFound',
    });
    expect(store.counters.writeRegionReads).toBe(3);
  });
});

test('a caller cannot change what the cache keeps: the copy it is handed is frozen (a kept copy outlives its read)', async () => {
  const h = await heldCopyOfAStartingLock();
  const answer = await h.router.resolve('r');
  expect(answer).toBe(h.held); // the very object the cache keeps while the version is unchanged
  expect(Object.isFrozen(answer.doc)).toBe(true);
  expect(Object.isFrozen(answer.doc.lock)).toBe(true);
  // a library-mode caller that "clears" the lock on its copy (the test file is a strict-mode module)
  expect(() => {
    (answer.doc as { lock: unknown }).lock = null;
  }).toThrow(TypeError);
  const next = await h.router.resolve('r');
  expect(next.doc.lock?.migrationId).toBe('m');
  expect(h.reads()).toEqual({ nearest: 0, writeRegion: 2 }); // still read through: the lock has started
});

test("the Functions host's audited store passes the conditional read through; over a store without one it has none", async () => {
  const sqlite = new SqliteStore(':memory:');
  const trail = new AuditTrail({ ledger: new SqliteAuditLedger(':memory:'), sink: nullSink });
  const audited = new AuditedLocationStore(sqlite, trail);
  const created = await audited.create(newLocationDocument('r', SOURCE));
  expect(await audited.readIfChanged!('r', created.etag, { from: 'writeRegion' })).toBe('notModified');
  const plain: LocationStore = {
    ...Object.fromEntries(
      (['read', 'create', 'replace', 'delete', 'list', 'close'] as const).map((m) => [
        m,
        sqlite[m].bind(sqlite),
      ]),
    ),
    kind: 'sqlite',
    counters: sqlite.counters,
  } as unknown as LocationStore;
  expect(new AuditedLocationStore(plain, trail).readIfChanged).toBeUndefined();
});
