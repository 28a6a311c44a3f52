import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type LockObservation,
  holdOverhead,
  lockObservation,
  writeLockHolds,
} from '../../drill/writeLockHold';
import { MessageStore, type MessageStoreOptions } from '../../examples/message-store/service';
import { startLocalHost } from '../support/localHost';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';

/**
 * `Prefer: wait=N` at the example participant (docs/design.md §6.5): a job that ends within
 * N is answered 200 with no poll; one that runs longer 202 + Location after N, its poll held the same
 * way; a build that ignores the header answers 202 at once and is polled, as before. End to end on the
 * in-process runner: the delta answered 200 inside the window (no poll at all), and a participant that
 * ignores the header still migrating by polling, its write lock then holding past the 1 s poll wait.
 */

const FROM = { region: 'westeurope' };
const TO = { region: 'eastus' };

const stores: MessageStore[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

async function participant(options: Partial<MessageStoreOptions> = {}) {
  const store = new MessageStore({
    regions: { westeurope: ':memory:', eastus: ':memory:' },
    copyDelayMs: 150,
    ...options,
  });
  stores.push(store);
  await store.listen();
  store.stores.get('westeurope')?.put('conv-1', 'msg-1', 'hello', 1);
  return store;
}

const deltaJob = {
  migrationId: 'm-1',
  resourceId: 'conv-1',
  from: FROM,
  to: TO,
  step: 'deltaCopy',
  migrationAttempt: 1,
  stepAttempt: 1,
  attempt: 1,
  sequence: 2,
  lockAcquiredAt: '2026-12-01T10:00:00.000Z',
};

const atTarget = (store: MessageStore) =>
  store.stores
    .get('eastus')
    ?.list('conv-1')
    .map((m) => m.messageId);

const postJob = (store: MessageStore, prefer?: string) =>
  fetch(`${store.url}/migrate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(prefer ? { prefer } : {}) },
    body: JSON.stringify(deltaJob),
  });

describe('the message store and Prefer: wait', () => {
  test('a copy that ends within the wait: 200 {"done": true} to the POST, nothing to poll', async () => {
    const store = await participant();
    const res = await postJob(store, 'wait=1');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ done: true });
    expect(store.counters.polls).toBe(0);
    expect(atTarget(store)).toEqual(['msg-1']);
  });

  test('a copy longer than the wait: 202 + Location after it, and the poll held the same way until done', async () => {
    const store = await participant({ copyDelayMs: 1500 });
    const res = await postJob(store, 'wait=1');
    expect(res.status).toBe(202);
    const location = res.headers.get('location') as string;
    expect(res.headers.get('retry-after')).toBe('1');
    expect(atTarget(store)).toEqual([]); // still copying when the wait ran out
    const polled = await fetch(location, { headers: { prefer: 'wait=1' } });
    expect(polled.status).toBe(200);
    expect(atTarget(store)).toEqual(['msg-1']);
  });

  test.each<[string, Partial<MessageStoreOptions>, string | undefined]>([
    ['without the header', {}, undefined],
    ['a build that ignores the header', { honoursPreferWait: false }, 'wait=1'],
  ])('%s: 202 at once, polled as before', async (_, options, prefer) => {
    const store = await participant(options);
    const res = await postJob(store, prefer);
    expect(res.status).toBe(202);
    expect(atTarget(store)).toEqual([]); // answered before the copy's 150 ms
    const location = res.headers.get('location') as string;
    expect((await fetch(location)).status).toBe(202);
  });
});

/** One migration of conv-1 on the in-process runner (the embedded host), calling the store over HTTP. */
async function migrateOnce(store: MessageStore) {
  const dir = mkdtempSync(join(tmpdir(), 'routelock-prefer-'));
  const routes = new SqliteStore(join(dir, 'routes.db'));
  const observations: LockObservation[] = [];
  routes.onChange((doc) => observations.push(lockObservation(doc, Date.now())));
  const host = await startLocalHost({
    store: routes,
    statePath: join(dir, 'state.db'),
    env: {
      PORT: '0',
      ROUTELOCK_CACHE_TIERS: 'local=1',
      ROUTELOCK_REPLICATION_BOUND_SECONDS: '0',
      ROUTELOCK_SAFETY_BUFFER_SECONDS: '1',
      // a 2 s participant timeout (under the 3 s renewal cadence): the requests carry wait=1
      ROUTELOCK_WRITE_LEASE_SECONDS: '9',
      ROUTELOCK_WRITE_BUDGET_SECONDS: '10',
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'messages', url: `${store.url}/migrate` }]),
    },
    log: () => undefined,
  });
  try {
    expect(host.config.migration.participantTimeoutSeconds).toBe(2);
    store.useRouting(`${host.url}/api`);
    await host.services.router.createRoute('conv-1', FROM);
    const { record } = host.runner.start({ resourceId: 'conv-1', target: TO });
    await host.runner.idle();
    const status = await host.runner.status(record.migrationId);
    return { status, holds: writeLockHolds(observations).map((h) => holdOverhead(h, store.work)) };
  } finally {
    await host.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

test('in process: the honouring store answers the delta 200 inside the window (no poll); the ignoring one is polled and its hold takes the poll wait', async () => {
  const honouring = await participant({ copyDelayMs: 100 });
  const ignoring = await participant({ copyDelayMs: 100, honoursPreferWait: false });
  const [fast, polled] = await Promise.all([migrateOnce(honouring), migrateOnce(ignoring)]);
  for (const run of [fast, polled]) {
    expect(run.status.status).toBe('Completed');
    expect(run.holds.map((h) => h.endedBy)).toEqual(['swap']);
  }
  expect(honouring.counters.polls).toBe(0); // the bulk copy's too: 100 ms, inside its wait
  expect(ignoring.counters.polls).toBeGreaterThanOrEqual(2); // the bulk copy's and the delta's
  // the delta and verify ran inside each hold, as the store reports them
  for (const [store, run] of [
    [honouring, fast],
    [ignoring, polled],
  ] as const) {
    const steps = store.work.filter((w) => w.startedAt >= (run.holds[0]?.from ?? 0)).map((w) => w.step);
    expect(steps).toEqual(['deltaCopy', 'verify']);
  }
  // a poll waits at least the poll minimum (1 s) after the POST's 202: the polled hold holds it
  expect(polled.holds[0]?.holdMs).toBeGreaterThanOrEqual(1000);
}, 60_000);
