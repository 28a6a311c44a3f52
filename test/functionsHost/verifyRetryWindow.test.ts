import { join } from 'node:path';
import Database from 'better-sqlite3';
import { type CopyJobRequest } from '../../examples/message-store/service';
import { MessageStore } from '../../examples/message-store/service';
import type { LocationDocument } from '../../shared/core/lock/document';
import type { AuditRecord } from '../../shared/core/audit';
import type { MigrationAttempt, Verification } from '../../shared/migration/types';
import { scratchDir } from '../support/scratch';
import { ENDED, type FunctionsHost, explained, history, json, startHost, watchMigration } from './host';

/**
 * The workflow's recoveries and its cutover window on the real Durable extension (hosts/webjobs through
 * `npm run start:functions`), one example message store as the participant answering `202` + `Location`:
 * a verify that finds a mismatch (the delta copied again under a new write lock, verified again, then the
 * swap), a participant whose copy fails in the first attempt (a second attempt with a fresh lock), and a
 * cutover window that opens a minute after the start (a durable timer until then, the swap inside it).
 * The store's per-resource hooks pick which resource misbehaves, so the three run side by side on one
 * host: the window's minute is most of the file's time. A failure prints the orchestration's history.
 */

jest.setTimeout(180_000);

const FROM = { region: 'westeurope' };
const TO = { region: 'eastus' };
const WINDOW_OPENS_IN_MS = 60_000;

/** The route's stored document, read from the host's SQLite file as another process of the app would. */
function storedDoc(dataPath: string, id: string): LocationDocument | undefined {
  const db = new Database(dataPath, { readonly: true, fileMustExist: true });
  try {
    const row = db.prepare<[string], { doc: string }>('SELECT doc FROM locations WHERE id = ?').get(id);
    return row === undefined ? undefined : (JSON.parse(row.doc) as LocationDocument);
  } finally {
    db.close();
  }
}

/** Every distinct version of the route's lock and of its last migration, polled until `stop` holds. */
function watchLocks(dataPath: string, id: string) {
  const locks: { tokenHash: string; acquiredAt: string }[] = [];
  const ends: { tokenHash: string; acquiredAt: string; outcome: string }[] = [];
  let running = true;
  const watching = (async () => {
    while (running) {
      const doc = storedDoc(dataPath, id);
      const { lock, lastMigration: last } = doc ?? {};
      if (lock && locks.at(-1)?.tokenHash !== lock.tokenHash)
        locks.push({ tokenHash: lock.tokenHash, acquiredAt: lock.acquiredAt });
      if (last && (ends.at(-1)?.tokenHash !== last.tokenHash || ends.at(-1)?.outcome !== last.outcome))
        ends.push({ tokenHash: last.tokenHash, acquiredAt: last.acquiredAt, outcome: last.outcome });
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    locks,
    ends,
    stop: async () => {
      running = false;
      await watching;
    },
  };
}

describe('verify, retry and cutover window on the real Durable extension', () => {
  let host: FunctionsHost;
  let store: MessageStore;
  /** Every copy run the store started, with its job: what the participant was told of each lock. */
  const runs: CopyJobRequest[] = [];

  beforeAll(async () => {
    const dir = scratchDir('participant-');
    store = new MessageStore({
      regions: { westeurope: join(dir, 'we.db'), eastus: join(dir, 'eus.db') },
      honoursPreferWait: false,
      copyDelayMs: (job: CopyJobRequest) => {
        runs.push(job);
        return 200;
      },
      // a resource named retry-… fails its copies in the first migration attempt
      failCopy: (job: CopyJobRequest) => job.resourceId.startsWith('retry-') && job.migrationAttempt === 1,
    });
    await store.listen();
    host = await startHost({
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'messages', url: `${store.url}/migrate` }]),
    });
    store.useRouting(host.api);
    process.stdout.write(`functionsHost/verifyRetryWindow: host listening after ${host.startedMs} ms\n`);
  }, 620_000);

  afterAll(async () => {
    await host?.stop();
    await store?.close();
  });

  async function route(id: string, messages: string[]) {
    const put = await json(`${host.api}/routes/${id}`, {
      method: 'PUT',
      body: JSON.stringify({ location: FROM }),
    });
    expect(put.status).toBe(201);
    messages.forEach((m, i) => store.stores.get('westeurope')?.put(id, m, `text ${i + 1}`, i + 1));
  }

  async function startMigration(body: Record<string, unknown>) {
    const started = await json(`${host.api}/migrations`, { method: 'POST', body: JSON.stringify(body) });
    expect(started.status).toBe(202);
    return { migrationId: String(started.body.migrationId), instanceId: String(started.body.instanceId) };
  }

  const targetMessages = (id: string) =>
    store.stores
      .get('eastus')
      ?.list(id)
      .filter((m) => !m.deleted)
      .map((m) => m.messageId);

  test.concurrent(
    'verify finds a mismatch, the delta is copied again and verified, then the swap',
    async () => {
      const id = `verify-${Date.now()}`;
      await route(id, ['msg-1', 'msg-2']);
      // the first delta copy loses the newest message at the target: what verify must catch
      store.dropItemFromNextDelta(id);
      const began = Date.now();
      const { migrationId, instanceId } = await startMigration({ resourceId: id, target: TO });
      await explained(
        host,
        () => [instanceId],
        async () => {
          const { body } = await watchMigration(host, migrationId, undefined, 150_000);
          process.stdout.write(
            `functionsHost/verifyRetryWindow: mismatch then match ${String(body.status)} after ${Date.now() - began} ms\n`,
          );
          expect(body.status).toBe('Completed');
          expect(body.deltaAttempts).toBe(2);
          const verifications = (body.verifications as Verification[]).map((v) => [
            v.deltaAttempt,
            v.outcome,
            v.sourceCount,
            v.targetCount,
          ]);
          expect(verifications).toEqual([
            [1, 'mismatch', 2, 1],
            [2, 'match', 2, 2],
          ]);
          const copies = store.copies.filter((c) => c.migrationId === migrationId).map((c) => c.step);
          expect(copies).toEqual(['bulkCopy', 'deltaCopy', 'deltaCopy']);
          expect(targetMessages(id)).toEqual(['msg-1', 'msg-2']);
          const after = await json(`${host.api}/routes/${id}`);
          expect(after.body.location).toEqual(TO);
          expect(after.body.lock).toBeNull();
        },
      );
    },
  );

  test.concurrent(
    'a copy failing in the first attempt: a second attempt with a fresh lock completes',
    async () => {
      const id = `retry-${Date.now()}`;
      await route(id, ['msg-1']);
      const locks = watchLocks(host.dataPath, id);
      const began = Date.now();
      const { migrationId, instanceId } = await startMigration({ resourceId: id, target: TO });
      await explained(
        host,
        () => [instanceId],
        async () => {
          let ended;
          try {
            ended = await watchMigration(host, migrationId, undefined, 150_000);
          } finally {
            await locks.stop();
          }
          const { body } = ended;
          process.stdout.write(
            `functionsHost/verifyRetryWindow: retried migration ${String(body.status)} after ${Date.now() - began} ms\n`,
          );
          expect(body).toMatchObject({ status: 'Completed', attempt: 2 });
          const attempts = body.attempts as MigrationAttempt[];
          expect(attempts.map((a) => [a.attempt, a.outcome])).toEqual([
            [1, 'Failed'],
            [2, 'Completed'],
          ]);
          expect(attempts[0]?.reason).toMatch(
            /participant messages answered 500 to bulkCopy .*; lock released$/,
          );
          // two locks, one after the other: attempt 1's released before attempt 2's was taken
          expect(locks.locks).toHaveLength(2);
          const [first, second] = locks.locks;
          expect(second?.tokenHash).not.toBe(first?.tokenHash);
          expect(Date.parse(second!.acquiredAt)).toBeGreaterThan(Date.parse(first!.acquiredAt));
          expect(locks.ends).toEqual([
            { ...first, outcome: 'released' },
            { ...second, outcome: 'swapped' },
          ]);
          // the ledger tells the same story: attempt 1's lock released, attempt 2's swapped
          const audit = (await json(`${host.api}/routes/${id}/audit`)).body.items as AuditRecord[];
          expect(audit.map((r) => [r.op, r.acquiredAt])).toEqual([
            ['release', first?.acquiredAt],
            ['swap', second?.acquiredAt],
          ]);
          // each attempt's jobs carry their own lock: the participant can tell them apart
          const jobs = runs
            .filter((r) => r.resourceId === id)
            .map((r) => [r.migrationAttempt, r.step, r.lockAcquiredAt]);
          expect(jobs).toEqual([
            [1, 'bulkCopy', Date.parse(first!.acquiredAt)],
            [2, 'bulkCopy', Date.parse(second!.acquiredAt)],
            [2, 'deltaCopy', Date.parse(second!.acquiredAt)],
          ]);
          expect(targetMessages(id)).toEqual(['msg-1']);
          expect((await json(`${host.api}/routes/${id}`)).body.location).toEqual(TO);
        },
      );
    },
  );

  test.concurrent(
    'a cutover window opening a minute later: a durable timer, then the swap inside it',
    async () => {
      const id = `window-${Date.now()}`;
      await route(id, ['msg-1']);
      const notBefore = new Date(Date.now() + WINDOW_OPENS_IN_MS).toISOString();
      const { migrationId, instanceId } = await startMigration({
        resourceId: id,
        target: TO,
        window: { notBefore },
      });
      await explained(
        host,
        () => [instanceId],
        async () => {
          // it copies the bulk and holds the hard-delete lock while it waits; no write lock, no swap
          const waiting = await watchMigration(
            host,
            migrationId,
            (b) => b.waitingForWindow !== undefined || ENDED.includes(String(b.status)),
          );
          // the engine's status drops an instant's trailing zeros (…05.450Z → …05.45Z): compare instants
          const { nextOpening } = waiting.body.waitingForWindow as { nextOpening: string };
          expect(Date.parse(nextOpening)).toBe(Date.parse(notBefore));
          expect(waiting.body.timeline).toMatchObject({ writeAt: null, swappedAt: null });
          const { body } = await watchMigration(host, migrationId, undefined, WINDOW_OPENS_IN_MS + 90_000);
          process.stdout.write(
            `functionsHost/verifyRetryWindow: windowed migration ${String(body.status)}, swapped ${Date.parse(String((body.timeline as Record<string, string>).swappedAt)) - Date.parse(notBefore)} ms after the window opened\n`,
          );
          expect(body.status).toBe('Completed');
          expect(body).not.toHaveProperty('waitingForWindow');
          const timeline = body.timeline as Record<string, string>;
          expect(Date.parse(String(timeline.hardDeleteAt))).toBeLessThan(Date.parse(notBefore));
          expect(Date.parse(String(timeline.writeAt))).toBeGreaterThanOrEqual(Date.parse(notBefore));
          expect(Date.parse(String(timeline.swappedAt))).toBeGreaterThanOrEqual(Date.parse(notBefore));
          // the write-lock step (the delta copy) ran inside the window, the bulk copy before it
          const work = store.work.filter((w) => w.migrationId === migrationId);
          expect(work.find((w) => w.step === 'bulkCopy')!.endedAt).toBeLessThan(Date.parse(notBefore));
          expect(work.find((w) => w.step === 'deltaCopy')!.startedAt).toBeGreaterThanOrEqual(
            Date.parse(notBefore),
          );
          // the wait was a durable timer set for the opening, in the orchestration's history
          const text = await history(host, instanceId);
          const events = (JSON.parse(text.slice(text.indexOf(' ') + 1)) as { historyEvents: unknown[] })
            .historyEvents as { EventType: string; FireAt?: string }[];
          const timers = events
            .filter((e) => e.EventType === 'TimerCreated')
            .map((e) => Date.parse(String(e.FireAt)));
          expect(timers).toContain(Date.parse(notBefore));
          expect((await json(`${host.api}/routes/${id}`)).body.location).toEqual(TO);
        },
      );
    },
  );
});
