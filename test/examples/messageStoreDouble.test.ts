import { MessageStore } from '../../examples/message-store/service';
import { RoutingServiceError } from '../../shared/core/client';
import { type RouteState, TestRoutingClient, states } from '../../shared/core/clientTesting';

/**
 * The example service's handling of every route state, unit-tested with the test double
 * (`@routelock/client/testing`): no routelock host, no migration, one call per operation. The service
 * serves `westeurope` and `eastus`; the conversation lives in `westeurope`, and moves to `eastus`.
 */

const from = 'westeurope';
const to = 'eastus';
const id = 'conv-1';
const stores: MessageStore[] = [];

function storeIn(state: RouteState, routing = new TestRoutingClient()): MessageStore {
  routing.set(id, state);
  const store = new MessageStore({ regions: { [from]: ':memory:', [to]: ':memory:' }, routing });
  stores.push(store);
  return store;
}

afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

/** Write, read, delete and read again at `region`: what the service answered each time. */
async function roundTrip(store: MessageStore, region: string) {
  const write = await store.write(region, id, 'm-1', 'hello');
  const read = await store.read(region, id);
  const remove = await store.remove(region, id, 'm-1');
  const after = await store.read(region, id);
  return { write, read, remove, after };
}

describe.each([
  ['unlocked', states.unlocked({ at: from })],
  ['preLock (started)', states.preLock({ from, to })],
  ['pendingTarget (pre-lock just taken)', states.pendingTarget({ from, to })],
])('%s: the source serves everything, the target sends callers there', (_name, state) => {
  test('at the source', async () => {
    expect(await roundTrip(storeIn(state), from)).toEqual({
      write: { status: 'ok' },
      read: { status: 'ok', messages: ['m-1'] },
      remove: { status: 'ok' },
      after: { status: 'ok', messages: [] },
    });
  });

  test('at the target', async () => {
    const store = storeIn(state);
    const notHere = { status: 'notHere', location: { region: from } };
    expect(await roundTrip(store, to)).toEqual({
      write: notHere,
      read: notHere,
      remove: notHere,
      after: notHere,
    });
    expect(store.counters.misdirected).toBe(2);
  });
});

test('hardDelete: a delete at the source is a tombstone, and the message is gone for readers', async () => {
  const store = storeIn(states.hardDelete({ from, to }));
  expect(await roundTrip(store, from)).toEqual({
    write: { status: 'ok' },
    read: { status: 'ok', messages: ['m-1'] },
    remove: { status: 'tombstoned' },
    after: { status: 'ok', messages: [] },
  });
  expect(store.counters.deletesTombstoned).toBe(1);
  expect(store.stores.get(from)!.list(id)).toEqual([
    expect.objectContaining({ messageId: 'm-1', deleted: true }),
  ]);
});

test('writeLock: writes and deletes at the source are refused with Retry-After, reads served', async () => {
  const routing = new TestRoutingClient();
  const store = storeIn(states.unlocked({ at: from }), routing);
  await store.write(from, id, 'm-0', 'before the lock');
  routing.set(id, states.writeLock({ from, to, forSeconds: 3 }));
  expect(await roundTrip(store, from)).toEqual({
    write: { status: 'locked', retryAfterSeconds: 3 },
    read: { status: 'ok', messages: ['m-0'] },
    remove: { status: 'locked', retryAfterSeconds: 3 },
    after: { status: 'ok', messages: ['m-0'] },
  });
  expect(store.counters.writesRefused).toBe(2);
  // the negative control: the build that ignores the write lock accepts the write
  const careless = new MessageStore({ regions: { [from]: ':memory:' }, routing, ignoreWriteLock: true });
  stores.push(careless);
  expect(await careless.write(from, id, 'm-2', 'during the lock')).toEqual({ status: 'ok' });
});

test('retiredSource: the old region sends callers to the new one, which serves everything', async () => {
  const store = storeIn(states.retiredSource({ from, to }));
  const notHere = { status: 'notHere', location: { region: to } };
  expect(await roundTrip(store, from)).toEqual({
    write: notHere,
    read: notHere,
    remove: notHere,
    after: notHere,
  });
  expect((await roundTrip(store, to)).remove).toEqual({ status: 'ok' });
});

test('notFound: nothing is read or written; the error says NotFound', async () => {
  const store = storeIn(states.notFound());
  await expect(store.write(from, id, 'm-1', 'x')).rejects.toMatchObject({ code: 'NotFound', status: 404 });
  await expect(store.read(from, id)).rejects.toBeInstanceOf(RoutingServiceError);
  expect(store.stores.get(from)!.list(id)).toEqual([]);
});

test('unreachable (the client fails, its default): every operation fails, nothing is written', async () => {
  const store = storeIn(states.unreachable());
  await expect(store.write(from, id, 'm-1', 'x')).rejects.toMatchObject({ code: 'Unreachable', status: 0 });
  await expect(store.read(from, id)).rejects.toMatchObject({ code: 'Unreachable' });
  expect(store.stores.get(from)!.list(id)).toEqual([]);
});

test('unreachable under serveStaleReads: reads from the last view, writes and deletes 503', async () => {
  const routing = new TestRoutingClient({ whenUnreachable: 'serveStaleReads' });
  const store = storeIn(states.unlocked({ at: from }), routing);
  await store.write(from, id, 'm-0', 'before the outage');
  routing.set(id, states.unreachable({ lastSeen: states.unlocked({ at: from }) }));
  expect(await roundTrip(store, from)).toEqual({
    write: { status: 'unavailable', retryAfterSeconds: 1 },
    read: { status: 'ok', messages: ['m-0'] },
    remove: { status: 'unavailable', retryAfterSeconds: 1 },
    after: { status: 'ok', messages: ['m-0'] },
  });
});
