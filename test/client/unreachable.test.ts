import {
  type Decision,
  type ResolvedView,
  RoutingClient,
  RoutingServiceError,
  decide,
  decisionStatus,
} from '../../shared/core/client';
import type { Operation, RouteView } from '../../shared/core/lock/view';
import { Front, type HostOnClock, SOURCE, T, TARGET, hostOnManualClock } from './harness';

/**
 * What `resolve` does when routelock cannot be reached. `'fail'` (the default) raises
 * `Unreachable`, which a service answers with 503. `'serveStaleReads'` serves the last view for reads
 * only, up to `staleForMs` past its freshness: writes and deletes stay `unavailable`, because a lock may
 * have been taken during the outage and the pre-lock's convergence wait counts only the cache's TTL.
 * The check: no write or delete is allowed at the source while the write lock is in force. Its negative
 * control is the unsafe policy (the last view served as it was), which the check must catch.
 */

let h: HostOnClock | undefined;
let front: Front | undefined;
afterEach(async () => {
  await front?.kill().catch(() => undefined);
  await h?.host.close();
  h = undefined;
  front = undefined;
});

const failure = (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (e: unknown) => e,
  );

/**
 * A service's client (behind `front`) caches the route; then, with the service still holding it, the
 * orchestrator takes the pre-lock and, once it has started, the write lock. Dev profile: TTL 2 s,
 * convergence 3 s, skew 0. Returns the service's last fresh view.
 */
async function writeLockTakenAfterCaching(client: RoutingClient, id: string): Promise<RouteView> {
  const orchestrator = new RoutingClient({ baseUrl: h!.api, clock: h!.clock.now, clockSkewSeconds: 0 });
  await orchestrator.putRoute(id, SOURCE);
  const lastFresh = await client.resolve(id);
  expect(lastFresh.lock).toBeNull();
  h!.clock.set(T + 100);
  const grant = await orchestrator.prelock(id, { migrationId: 'm-out', owner: 'o', target: TARGET });
  h!.clock.set(Date.parse(grant.startsAt));
  await orchestrator.escalate(id, grant.token!, 'hardDelete');
  await orchestrator.escalate(id, grant.token!, 'write');
  return lastFresh;
}

/** The truth, read past every cache: the write region's enforcement now. */
async function truth(id: string): Promise<RouteView> {
  return new RoutingClient({ baseUrl: h!.api, clock: h!.clock.now, clockSkewSeconds: 0 }).resolve(id);
}

/** The check: a write or delete the service would perform at the source while the truth denies it. */
function violations(decisions: Record<Operation, Decision>, now: RouteView): Operation[] {
  return (['write', 'delete'] as const).filter(
    (op) => decisionStatus(decisions[op]).proceed && now.enforcement[op] === 'deny',
  );
}

function decisions(view: ResolvedView): Record<Operation, Decision> {
  return {
    read: decide(view, 'read', SOURCE),
    write: decide(view, 'write', SOURCE),
    delete: decide(view, 'delete', SOURCE),
  };
}

describe("whenUnreachable: 'serveStaleReads', a killed host", () => {
  test('reads are served from the last view; writes and deletes are unavailable (503), never allowed', async () => {
    h = await hostOnManualClock('dev');
    front = await Front.start(h.api);
    const client = new RoutingClient({
      baseUrl: front.api,
      clock: h.clock.now,
      clockSkewSeconds: 0,
      whenUnreachable: 'serveStaleReads',
      staleForMs: 60_000,
    });
    const lastFresh = await writeLockTakenAfterCaching(client, 'conv-o');
    await front.kill();

    const view = await client.resolve('conv-o'); // past the TTL: asks, is refused, serves stale
    expect(view.stale).toMatchObject({ code: 'Unreachable' });
    expect(view.enforcement).toMatchObject({ read: 'allow', write: 'deny', delete: 'deny' });
    const served = decisions(view);
    expect(served).toEqual({
      read: { kind: 'allow' },
      write: { kind: 'unavailable', retryAfterSeconds: 1 },
      delete: { kind: 'unavailable', retryAfterSeconds: 1 },
    });
    expect(decisionStatus(served.write)).toMatchObject({
      proceed: false,
      status: 503,
      code: 'Unreachable',
      headers: { 'Retry-After': '1' },
    });
    const now = await truth('conv-o');
    expect(now.enforcement.write).toBe('deny'); // the write lock is in force
    expect(violations(served, now)).toEqual([]);

    // Negative control: serving the last view as it was (the unsafe 'serveStale') allows the write and
    // the delete at the source under the write lock, and the check catches both.
    expect(violations(decisions(lastFresh), now)).toEqual(['write', 'delete']);
  });

  test('a stale view is served only staleForMs past its freshness, then the outage is an error', async () => {
    h = await hostOnManualClock('dev');
    front = await Front.start(h.api);
    const client = new RoutingClient({
      baseUrl: front.api,
      clock: h.clock.now,
      whenUnreachable: 'serveStaleReads',
      staleForMs: 10_000,
    });
    const orchestrator = new RoutingClient({ baseUrl: h.api, clock: h.clock.now });
    await orchestrator.putRoute('conv-b', SOURCE);
    await client.resolve('conv-b'); // fresh for 2 s (dev TTL)
    await front.kill();
    h.clock.set(T + 2000 + 9_999);
    expect((await client.resolve('conv-b')).stale).toBeDefined();
    h.clock.set(T + 2000 + 10_000);
    expect(await failure(client.resolve('conv-b'))).toMatchObject({ status: 0, code: 'Unreachable' });
    const { decision } = await client.decideFor('conv-b', 'read', SOURCE);
    expect(decision).toEqual({ kind: 'unavailable', retryAfterSeconds: 1 });
  });

  test('a hung host (timeout) and a gateway 503 are outages too', async () => {
    h = await hostOnManualClock('dev');
    front = await Front.start(h.api);
    const client = new RoutingClient({
      baseUrl: front.api,
      clock: h.clock.now,
      timeoutMs: 150,
      whenUnreachable: 'serveStaleReads',
    });
    const orchestrator = new RoutingClient({ baseUrl: h.api, clock: h.clock.now });
    await orchestrator.putRoute('conv-h', SOURCE);
    await client.resolve('conv-h');
    h.clock.set(T + 5000);
    front.mode = 'hang';
    const hung = await client.resolve('conv-h');
    expect(hung.stale).toMatchObject({ code: 'Unreachable' });
    expect(decide(hung, 'write', SOURCE).kind).toBe('unavailable');
    front.mode = 'gateway503';
    const gateway = await client.resolve('conv-h');
    expect(gateway.stale).toMatchObject({ code: 'HTTP503' });
    expect(decide(gateway, 'delete', SOURCE).kind).toBe('unavailable');
    expect(decide(gateway, 'read', TARGET)).toEqual({ kind: 'notHere', location: SOURCE });
    // and once the host answers again, the view is fresh and writable
    front.mode = 'forward';
    const back = await client.resolve('conv-h');
    expect(back.stale).toBeUndefined();
    expect(decide(back, 'write', SOURCE)).toEqual({ kind: 'allow' });
  });
});

test('the newest view is what an outage serves, even one that was not to be cached (no-store)', async () => {
  h = await hostOnManualClock('dev');
  front = await Front.start(h.api);
  const client = new RoutingClient({
    baseUrl: front.api,
    clock: h.clock.now,
    clockSkewSeconds: 0,
    whenUnreachable: 'serveStaleReads',
  });
  await writeLockTakenAfterCaching(client, 'conv-n');
  const locked = await client.resolve('conv-n'); // no-store: the write lock is in force
  expect(locked.enforcement.write).toBe('deny');
  await front.kill();
  const stale = await client.resolve('conv-n');
  expect(stale.stale).toBeDefined();
  expect(stale.lock).toMatchObject({ migrationId: 'm-out', phase: 'write' });
});

describe("whenUnreachable: 'fail' (the default)", () => {
  test('inside its TTL an unlocked cached view is served (the convergence wait counts that TTL)', async () => {
    h = await hostOnManualClock('dev');
    front = await Front.start(h.api);
    const client = new RoutingClient({ baseUrl: front.api, clock: h.clock.now });
    await new RoutingClient({ baseUrl: h.api, clock: h.clock.now }).putRoute('conv-t', SOURCE);
    await client.resolve('conv-t');
    await front.kill();
    h.clock.set(T + 1999);
    expect(decide(await client.resolve('conv-t'), 'write', SOURCE)).toEqual({ kind: 'allow' });
    h.clock.set(T + 2000);
    expect(await failure(client.resolve('conv-t'))).toMatchObject({ status: 0, code: 'Unreachable' });
  });

  test('past its TTL every resolve fails, and the service answers 503', async () => {
    h = await hostOnManualClock('dev');
    front = await Front.start(h.api);
    const client = new RoutingClient({ baseUrl: front.api, clock: h.clock.now, clockSkewSeconds: 0 });
    const lastFresh = await writeLockTakenAfterCaching(client, 'conv-f');
    await front.kill();
    // The write lock began 3 s after the cached copy was read, past its 2 s TTL: nothing stale is served.
    const error = await failure(client.resolve('conv-f'));
    expect(error).toBeInstanceOf(RoutingServiceError);
    expect(error).toMatchObject({ status: 0, code: 'Unreachable' });
    const { decision, view } = await client.decideFor('conv-f', 'write', SOURCE);
    expect(view).toBeNull();
    expect(decisionStatus(decision)).toMatchObject({ proceed: false, status: 503, code: 'Unreachable' });
    // Negative control, as above: the last view served as it was would allow the write.
    expect(violations(decisions(lastFresh), await truth('conv-f'))).toEqual(['write', 'delete']);
  });
});

test("a gateway's HTML error page is a RoutingServiceError with its status, not a JSON SyntaxError", async () => {
  front = await Front.start();
  front.mode = 'gateway503';
  const client = new RoutingClient({ baseUrl: front.api });
  const error = await failure(client.resolve('conv-g'));
  expect(error).toBeInstanceOf(RoutingServiceError);
  expect(error).toMatchObject({ status: 503, code: 'HTTP503' });
  // an outage all the same: the service answers 503
  expect((await client.decideFor('conv-g', 'read', SOURCE)).decision).toEqual({
    kind: 'unavailable',
    retryAfterSeconds: 1,
  });
});
