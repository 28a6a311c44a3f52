import { MessageStore } from '../../examples/message-store/service';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { poll } from '../support/poll';

/**
 * The example participant's end notices across a retry. A retry
 * (POST /migrations/{id}/retry) keeps the migrationId and numbers its attempts after the failed ones
 * (retryRecord); the notice carries that migrationAttempt. A notice of one attempt must not answer for,
 * nor stop, another attempt's work.
 */

const FROM = { region: 'westeurope' };
const TO = { region: 'eastus' };
const LOCK_AT = '2026-12-01T10:00:00.000Z';

let host: LocalHost;
let api: string;
const stores: MessageStore[] = [];
beforeAll(async () => {
  host = await startLocalHost({
    env: { PORT: '0' },
    store: new SqliteStore(':memory:'),
    log: () => undefined,
  });
  api = `${host.url}/api`;
});
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});
afterAll(async () => {
  await host.close();
});

const send = (method: string, path: string, body?: unknown) =>
  fetch(`${api}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

async function post(store: MessageStore, body: unknown) {
  const res = await fetch(`${store.url}/migrate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return {
    status: res.status,
    location: res.headers.get('location'),
    body: (await res.json()) as Record<string, unknown>,
  };
}

const job = (id: string, migrationAttempt: number, sequence: number) => ({
  migrationId: 'm-1',
  resourceId: id,
  from: FROM,
  to: TO,
  step: 'bulkCopy',
  migrationAttempt,
  stepAttempt: 1,
  attempt: 1,
  sequence,
  lockAcquiredAt: LOCK_AT,
});
const notice = (id: string, step: string, migrationAttempt: number, extra: Record<string, unknown> = {}) => ({
  ...job(id, migrationAttempt, 99),
  step,
  ...extra,
});
const held = (store: MessageStore, region: string, id: string) => store.stores.get(region)?.list(id).length;

async function copied(store: MessageStore, id: string, migrationAttempt: number, sequence: number) {
  const started = await post(store, job(id, migrationAttempt, sequence));
  expect(started.status).toBe(202);
  await poll(
    async () => (await fetch(started.location as string)).status,
    (s) => s !== 202,
    5000,
  );
}

test('a retry that completes gets its source cleaned up, though attempt 1 was told it failed', async () => {
  const store = new MessageStore({
    regions: { westeurope: ':memory:', eastus: ':memory:' },
    copyDelayMs: 5,
    routingUrl: api,
  });
  stores.push(store);
  await store.listen();
  store.stores.get('westeurope')?.put('retry-1', 'msg-1', 'hello', 1);
  expect((await send('PUT', '/routes/retry-1', { location: FROM })).ok).toBe(true);
  await copied(store, 'retry-1', 1, 1);
  // attempt 1 failed: its partial copy at the target goes
  expect((await post(store, notice('retry-1', 'failed', 1, { reason: 'overran' }))).body).toMatchObject({
    cleanUp: { state: 'deleted', region: 'eastus' },
  });
  // the retry (same migrationId, attempt 2) copies again and swaps
  await copied(store, 'retry-1', 2, 5);
  expect(held(store, 'eastus', 'retry-1')).toBe(1);
  // the swap: the route is now at the target
  expect((await send('DELETE', '/routes/retry-1')).ok).toBe(true);
  expect((await send('PUT', '/routes/retry-1', { location: TO })).ok).toBe(true);
  const done = await post(
    store,
    notice('retry-1', 'completed', 2, { cleanUpSourceAfter: new Date().toISOString() }),
  );
  expect(done.body).toMatchObject({ cleanUp: { step: 'completed', region: 'westeurope' } });
  await poll(
    async () => held(store, 'westeurope', 'retry-1'),
    (n) => n === 0,
    3000,
  );
  expect(held(store, 'eastus', 'retry-1')).toBe(1);
});

test("a late notice of attempt 1 does not stop attempt 2's running copy", async () => {
  const store = new MessageStore({
    regions: { westeurope: ':memory:', eastus: ':memory:' },
    copyDelayMs: 300,
    routingUrl: api,
  });
  stores.push(store);
  await store.listen();
  store.stores.get('westeurope')?.put('retry-2', 'msg-1', 'hello', 1);
  expect((await send('PUT', '/routes/retry-2', { location: FROM })).ok).toBe(true);
  await copied(store, 'retry-2', 1, 1);
  const second = await post(store, job('retry-2', 2, 5));
  expect(second.status).toBe(202);
  // attempt 1's failed notice, delivered late (a retry of the notice)
  await post(store, notice('retry-2', 'failed', 1, { reason: 'overran' }));
  const final = await poll(
    async () => fetch(second.location as string).then((r) => r.status),
    (s) => s !== 202,
    5000,
  );
  expect(final).toBe(200);
  expect(held(store, 'eastus', 'retry-2')).toBe(1);
});

test('a clean-up weeks away waits quietly (no timer past setTimeout’s 24.8-day limit firing at once, over and over)', async () => {
  let reads = 0;
  const store = new MessageStore({
    regions: { westeurope: ':memory:', eastus: ':memory:' },
    copyDelayMs: 5,
    routingUrl: api,
    clock: () => {
      reads += 1;
      return Date.now();
    },
  });
  stores.push(store);
  await store.listen();
  store.stores.get('westeurope')?.put('far-1', 'msg-1', 'hello', 1);
  expect((await send('PUT', '/routes/far-1', { location: TO })).ok).toBe(true);
  await copied(store, 'far-1', 1, 1);
  const after = new Date(Date.now() + 30 * 86_400_000).toISOString();
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(w.name);
  process.on('warning', onWarning);
  try {
    expect(
      (await post(store, notice('far-1', 'completed', 1, { cleanUpSourceAfter: after }))).body,
    ).toMatchObject({ cleanUp: { state: 'scheduled' } });
    const before = reads;
    await new Promise((r) => setTimeout(r, 300));
    expect(reads - before).toBeLessThan(10);
    expect(warnings).not.toContain('TimeoutOverflowWarning');
    expect(held(store, 'westeurope', 'far-1')).toBe(1);
  } finally {
    process.off('warning', onWarning);
  }
});
