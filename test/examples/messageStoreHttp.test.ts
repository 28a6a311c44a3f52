import { MessageStore } from '../../examples/message-store/service';
import { TestRoutingClient, states } from '../../shared/core/clientTesting';
import { ManualClock } from '../../testkit/clock';

/**
 * The example service's message routes over HTTP, behind the request guard (`@routelock/client/middleware`):
 * each route state answered as the client's `decisionStatus` says, with RFC 9457 bodies; a delete under
 * the hard-delete lock tombstoned; and a write whose route is older than the in-flight grace when it is
 * about to commit refused with nothing written.
 */

const [from, to] = ['westeurope', 'eastus'];
const id = 'conv-1';
let store: MessageStore;
let routing: TestRoutingClient;
let url: string;
const clock = new ManualClock(Date.UTC(2026, 5, 1));

beforeEach(async () => {
  routing = new TestRoutingClient({ clock: clock.now });
  store = new MessageStore({ regions: { [from]: ':memory:', [to]: ':memory:' }, routing, clock: clock.now });
  url = await store.listen();
});

afterEach(() => store.close());

const messages = (region: string, messageId = '') =>
  `${url}/regions/${region}/conversations/${id}/messages${messageId && `/${messageId}`}`;

async function send(method: 'GET' | 'POST' | 'DELETE', target: string, body?: unknown) {
  const res = await fetch(target, {
    method,
    ...(body === undefined
      ? {}
      : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
  });
  const text = await res.text();
  return {
    status: res.status,
    retryAfter: res.headers.get('retry-after'),
    body: (text ? JSON.parse(text) : null) as Record<string, unknown> | null,
  };
}

test('unlocked: written, read, deleted at the source; the target answers 421 with the location', async () => {
  routing.set(id, states.unlocked({ at: from }));
  expect((await send('POST', messages(from), { messageId: 'm-1', text: 'hi' })).status).toBe(200);
  expect((await send('GET', messages(from))).body).toEqual({ status: 'ok', messages: ['m-1'] });
  const there = await send('POST', messages(to), { messageId: 'm-2', text: 'hi' });
  expect(there.status).toBe(421);
  expect(there.body).toMatchObject({ code: 'MisdirectedRequest', location: { region: from } });
  expect((await send('DELETE', messages(from, 'm-1'))).status).toBe(200);
  expect(store.accepted.map((a) => a.kind)).toEqual(['write', 'delete']);
  // fetch (undici) sends a request answered 421 once more, on a new connection (RFC 9110 §15.5.20)
  expect(store.counters.misdirected).toBeGreaterThanOrEqual(1);
});

test('the hard-delete lock: a delete is a tombstone (204); the write lock: 423 with Retry-After', async () => {
  routing.set(id, states.unlocked({ at: from }));
  await send('POST', messages(from), { messageId: 'm-1', text: 'hi' });
  routing.set(id, states.hardDelete({ from, to }));
  expect((await send('DELETE', messages(from, 'm-1'))).status).toBe(204);
  expect(store.counters.deletesTombstoned).toBe(1);
  expect((await send('GET', messages(from))).body).toEqual({ status: 'ok', messages: [] });
  routing.set(id, states.writeLock({ from, to, forSeconds: 3 }));
  const locked = await send('POST', messages(from), { messageId: 'm-2', text: 'hi' });
  expect({ status: locked.status, retryAfter: locked.retryAfter }).toEqual({ status: 423, retryAfter: '3' });
  expect(locked.body).toMatchObject({ code: 'Locked', resourceId: id, operation: 'write' });
  expect(store.counters.writesRefused).toBe(1);
});

test('no route: 404; routelock unreachable: 503', async () => {
  routing.set(id, states.notFound());
  expect((await send('GET', messages(from))).body).toMatchObject({ status: 404, code: 'NotFound' });
  routing.set(id, states.unreachable());
  expect((await send('POST', messages(from), { messageId: 'm-1', text: 'hi' })).status).toBe(503);
});

test('a write that reaches its commit after the in-flight grace is not committed', async () => {
  // a started lock's view (hard-delete allows writes): re-fetched by every request, so only the grace covers it
  routing.set(id, states.hardDelete({ from, to }));
  // A slow request: the clock passes the grace between the route's answer and the handler's commit.
  const decideFor = routing.decideFor.bind(routing);
  routing.decideFor = async (...args) => {
    const decided = await decideFor(...args);
    clock.advance(5_100);
    return decided;
  };
  const late = await send('POST', messages(from), { messageId: 'm-1', text: 'late' });
  expect(late.status).toBe(503);
  expect(late.body).toMatchObject({ code: 'GraceExpired' });
  expect(store.accepted).toEqual([]);
  expect(store.stores.get(from)?.list(id)).toEqual([]);
});
