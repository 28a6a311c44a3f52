import type { RouteResolver } from '../../shared/core/client';
import { TestRoutingClient, TestRoutingClientError, states } from '../../shared/core/clientTesting';
import { ManualClock } from '../../testkit/clock';

/**
 * The test double's own behaviour beyond the decisions (which double.table.test.ts holds to the real
 * client's): a state set is seen at once, outages carry their status and Retry-After, the outage policy's
 * stale window runs on the double's clock, and the calls a service makes besides deciding work.
 */

const from = 'westeurope';
const to = { region: 'eastus', account: 'chatuse01' };

test('a state set replaces the one the client had cached, at once', async () => {
  const double = new TestRoutingClient();
  double.set('c', states.unlocked({ at: from }));
  expect((await double.decideFor('c', 'write', from)).decision).toEqual({ kind: 'allow' });
  double.set('c', states.writeLock({ from, to, forSeconds: 2 }));
  expect((await double.decideFor('c', 'write', from)).decision).toEqual({
    kind: 'deny',
    retryAfterSeconds: 2,
  });
  expect((await double.decideFor('c', 'write', to)).decision).toEqual({
    kind: 'notHere',
    location: { region: from },
  });
  expect(double.stateOf('c')).toEqual({ kind: 'writeLock', from: { region: from }, to, forSeconds: 2 });
  expect(double.stateOf('never-set')).toEqual({ kind: 'notFound' });
});

test('the view is the server-shaped view: the lock, the secondary, the enforcement', async () => {
  const double = new TestRoutingClient();
  double.set('c', states.hardDelete({ from, to }));
  const view = await double.resolve('c');
  expect(view).toMatchObject({
    resourceId: 'c',
    location: { region: from },
    secondary: { location: to, role: 'pendingTarget' },
    lock: { phase: 'hardDelete', target: to },
    enforcement: { read: 'allow', write: 'allow', delete: 'tombstone' },
  });
});

test.each([
  [0, undefined, { kind: 'unavailable', retryAfterSeconds: 1 }, 'Unreachable'],
  [429, 7, { kind: 'unavailable', retryAfterSeconds: 7 }, 'Throttled'],
  [503, 4, { kind: 'unavailable', retryAfterSeconds: 4 }, 'StoreUnavailable'],
] as const)(
  'an outage with status %s: decided unavailable, resolve throws',
  async (status, retry, decision, code) => {
    const double = new TestRoutingClient();
    double.set(
      'c',
      states.unreachable({ status, ...(retry === undefined ? {} : { retryAfterSeconds: retry }) }),
    );
    expect((await double.decideFor('c', 'read', from)).decision).toEqual(decision);
    await expect(double.resolve('c')).rejects.toMatchObject({ code, status });
  },
);

test("serveStaleReads: reads from the last view for staleForMs on the double's clock, then unavailable", async () => {
  const clock = new ManualClock();
  const double = new TestRoutingClient({
    clock: clock.now,
    whenUnreachable: 'serveStaleReads',
    staleForMs: 10_000,
  });
  double.set('c', states.unreachable({ lastSeen: states.unlocked({ at: from }) }));
  expect((await double.decideFor('c', 'read', from)).decision).toEqual({ kind: 'allow' });
  expect((await double.resolve('c')).stale).toMatchObject({ code: 'Unreachable' });
  clock.advance(10_001);
  expect((await double.decideFor('c', 'read', from)).decision).toEqual({
    kind: 'unavailable',
    retryAfterSeconds: 1,
  });
});

test('a RouteResolver: ready, putRoute, resolveForWrite and the grace, as a service calls them', async () => {
  const routing: RouteResolver = new TestRoutingClient({ inFlightGraceSeconds: 3 });
  expect(await routing.ready()).toEqual({ apiVersion: expect.any(Number), store: 'double' });
  await routing.putRoute('new', { region: from });
  const { view, resolvedAt } = await routing.resolveForWrite('new');
  expect(view.location).toEqual({ region: from });
  expect(typeof resolvedAt).toBe('number');
  expect(routing.inFlightGraceSeconds).toBe(3);
});

test('an outage cannot have last seen a state with no view: a typed error', () => {
  const build = () => states.unreachable({ lastSeen: states.notFound() });
  expect(build).toThrow(TestRoutingClientError);
  expect(build).toThrow(expect.objectContaining({ code: 'InvalidRouteState' }));
});
