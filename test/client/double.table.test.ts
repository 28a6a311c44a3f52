import { type Decision, RoutingClient } from '../../shared/core/client';
import {
  type RouteState,
  TestRoutingClient,
  type TestRoutingClientOptions,
  type ViewState,
  states,
} from '../../shared/core/clientTesting';
import type { Location, LocationDocument } from '../../shared/core/lock/document';
import type { Operation } from '../../shared/core/lock/view';
import { Front, type HostOnClock, SOURCE, T, TARGET, hostOnManualClock } from './harness';

/**
 * The test double is faithful: for every state × operation, at the source and at the target, its
 * decision equals the real client's for a route the embedded host was put into that state through the
 * API (dev profile on a manual clock: skew 0, Retry-After capped at 1 s, local TTL 2 s; the double is
 * given the same). The negative control: a double whose hard-delete view is altered (its lease over)
 * is caught by the same table.
 */

const operations: Operation[] = ['read', 'write', 'delete'];
const servings: Location[] = [SOURCE, TARGET];
type Decisions = Record<string, Decision>;

interface Row {
  name: string;
  /** The instant (manual clock) the real decisions were taken at. */
  at: number;
  state: RouteState;
  real: Decisions;
  policy: 'fail' | 'serveStaleReads';
}

let h: HostOnClock;
let front: Front | undefined;
const rows: Row[] = [];

async function decisionsOf(client: Pick<RoutingClient, 'decideFor'>, id: string): Promise<Decisions> {
  const out: Decisions = {};
  for (const serving of servings)
    for (const operation of operations)
      out[`${serving.region} ${operation}`] = (await client.decideFor(id, operation, serving)).decision;
  return out;
}

/** A route put into a state through the API, step by step as a migration takes it there. */
async function throughApi(
  id: string,
  upTo: 'unlocked' | 'pendingTarget' | 'preLock' | 'hardDelete' | 'writeLock' | 'retiredSource',
) {
  const api = new RoutingClient({ baseUrl: h.api, clock: h.clock.now, clockSkewSeconds: 0 });
  await api.putRoute(id, SOURCE);
  if (upTo === 'unlocked') return;
  const grant = await api.prelock(id, { migrationId: `m-${id}`, owner: 'table', target: TARGET });
  if (upTo === 'pendingTarget') return;
  h.clock.set(Date.parse(grant.startsAt));
  if (upTo === 'preLock') return;
  await api.escalate(id, grant.token!, 'hardDelete');
  if (upTo === 'hardDelete') return;
  const write = await api.escalate(id, grant.token!, 'write');
  if (upTo === 'writeLock') return;
  await api.swap(id, grant.token!, write.writeAt!);
}

const realClient = (baseUrl: string, policy: Row['policy'] = 'fail') =>
  new RoutingClient({ baseUrl, clock: h.clock.now, clockSkewSeconds: 0, whenUnreachable: policy });

beforeAll(async () => {
  h = await hostOnManualClock('dev');
  const steps = ['unlocked', 'pendingTarget', 'preLock', 'hardDelete', 'writeLock', 'retiredSource'] as const;
  for (const [i, step] of steps.entries()) {
    h.clock.set(T + i * 3_600_000);
    const id = `table-${step}`;
    await throughApi(id, step);
    const state = states[step]({ at: SOURCE, from: SOURCE, to: TARGET });
    rows.push({
      name: step,
      at: h.clock.now(),
      state,
      real: await decisionsOf(realClient(h.api), id),
      policy: 'fail',
    });
  }
  h.clock.set(T + 10 * 3_600_000);
  rows.push({
    name: 'notFound',
    at: h.clock.now(),
    state: states.notFound(),
    real: await decisionsOf(realClient(h.api), 'table-missing'),
    policy: 'fail',
  });
  await outageRows();
}, 60_000);

/** routelock gone (its front killed: every connection refused), under each outage policy. */
async function outageRows() {
  front = await Front.start(h.api);
  const id = 'table-outage';
  await throughApi(id, 'unlocked');
  const failing = realClient(front.api);
  const staleReads = realClient(front.api, 'serveStaleReads');
  await staleReads.resolve(id); // the view it held before the outage
  await front.kill();
  h.clock.advance(2_001); // past the view's freshness (dev local TTL 2 s)
  rows.push({
    name: 'unreachable',
    at: h.clock.now(),
    state: states.unreachable(),
    real: await decisionsOf(failing, id),
    policy: 'fail',
  });
  rows.push({
    name: 'unreachable, serveStaleReads',
    at: h.clock.now(),
    state: states.unreachable({ lastSeen: states.unlocked({ at: SOURCE }) }),
    real: await decisionsOf(staleReads, id),
    policy: 'serveStaleReads',
  });
}

afterAll(async () => {
  await front?.kill().catch(() => undefined);
  await h?.host.close();
});

/** Each row's state set on a double at the row's instant: where its decisions differ from the real ones. */
async function mismatches(make: (options: TestRoutingClientOptions) => TestRoutingClient) {
  const found: string[] = [];
  for (const row of rows) {
    h.clock.set(row.at);
    const double = make({
      clock: h.clock.now,
      clockSkewSeconds: 0,
      retryAfterMaxSeconds: 1,
      cacheTtlSeconds: 2,
      whenUnreachable: row.policy,
    });
    double.set('resource', row.state);
    const got = await decisionsOf(double, 'resource');
    for (const [cell, decision] of Object.entries(row.real))
      if (JSON.stringify(got[cell]) !== JSON.stringify(decision))
        found.push(
          `${row.name}: ${cell}: double ${JSON.stringify(got[cell])}, real ${JSON.stringify(decision)}`,
        );
  }
  return found;
}

test('the table covers every state, and the real decisions differ between them', () => {
  expect(rows.map((r) => r.name)).toEqual([
    'unlocked',
    'pendingTarget',
    'preLock',
    'hardDelete',
    'writeLock',
    'retiredSource',
    'notFound',
    'unreachable',
    'unreachable, serveStaleReads',
  ]);
  const kinds = (name: string) => Object.values(rows.find((r) => r.name === name)!.real).map((d) => d.kind);
  expect(kinds('hardDelete')).toEqual(['allow', 'allow', 'tombstone', 'notHere', 'notHere', 'notHere']);
  expect(kinds('writeLock')).toEqual(['allow', 'deny', 'deny', 'notHere', 'notHere', 'notHere']);
  expect(kinds('retiredSource')).toEqual(['notHere', 'notHere', 'notHere', 'allow', 'allow', 'allow']);
  expect(kinds('unreachable, serveStaleReads')).toEqual([
    'allow',
    'unavailable',
    'unavailable',
    'notHere',
    'unavailable',
    'unavailable',
  ]);
});

test('the double decides as the real client does for every state × operation', async () => {
  expect(await mismatches((options) => new TestRoutingClient(options))).toEqual([]);
});

test('negative control: a double with its hard-delete view altered is caught', async () => {
  class Altered extends TestRoutingClient {
    protected override documentFor(id: string, state: ViewState, now: number): LocationDocument {
      const doc = super.documentFor(id, state, now);
      if (state.kind !== 'hardDelete' || doc.lock?.phase !== 'hardDelete') return doc;
      return { ...doc, lock: { ...doc.lock, hardDeleteExpiresAt: new Date(now - 1).toISOString() } };
    }
  }
  const found = await mismatches((options) => new Altered(options));
  expect(found).toEqual([expect.stringMatching(/^hardDelete: westeurope delete: double \{"kind":"allow"\}/)]);
});
