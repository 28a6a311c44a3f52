import { type Decision, RoutingClient, decide, decisionStatus } from '../../shared/core/client';
import { errorKind } from '../../shared/core/errors';
import type { Location } from '../../shared/core/lock/document';
import type { Operation } from '../../shared/core/lock/view';
import { type HostOnClock, SOURCE, TARGET, hostOnManualClock } from './harness';

/**
 * `decide()` for every case, with the HTTP answer a service gives its own caller
 * (`decisionStatus`, docs/design.md §5.5), each case resolved over HTTP from the embedded host through
 * one migration's phases: unlocked, pre-lock pending, hard-delete lock, write lock, swapped; at the
 * source, at the target and elsewhere; a missing route; a stale view and an outage.
 */

let h: HostOnClock | undefined;
afterEach(async () => {
  await h?.host.close();
  h = undefined;
});

const ELSEWHERE: Location = { region: 'northeurope', account: 'chatneu01' };
type Row = [
  phase: string,
  at: 'source' | 'target' | 'elsewhere',
  op: Operation,
  kind: Decision['kind'],
  status: number,
];

/** Every case of one migration, as the table of docs/design.md §5.5 gives it. */
const table: Row[] = [
  ['unlocked', 'source', 'read', 'allow', 200],
  ['unlocked', 'source', 'write', 'allow', 200],
  ['unlocked', 'source', 'delete', 'allow', 200],
  ['unlocked', 'target', 'write', 'notHere', 421],
  ['prelockPending', 'source', 'write', 'allow', 200],
  ['prelockPending', 'source', 'delete', 'allow', 200],
  ['hardDelete', 'source', 'read', 'allow', 200],
  ['hardDelete', 'source', 'write', 'allow', 200],
  ['hardDelete', 'source', 'delete', 'tombstone', 204],
  ['hardDelete', 'target', 'write', 'notHere', 421],
  ['write', 'source', 'read', 'allow', 200],
  ['write', 'source', 'write', 'deny', 423],
  ['write', 'source', 'delete', 'deny', 423], // a delete under the write lock is refused, not tombstoned
  ['write', 'target', 'write', 'notHere', 421], // the pending target accepts nothing before the swap
  ['write', 'elsewhere', 'read', 'notHere', 421],
  ['swapped', 'source', 'read', 'notHere', 421], // the retired source serves nothing
  ['swapped', 'source', 'write', 'notHere', 421],
  ['swapped', 'target', 'write', 'allow', 200],
  ['swapped', 'target', 'delete', 'allow', 200],
];

test('every case, resolved over HTTP, and the status a service answers for it', async () => {
  h = await hostOnManualClock('dev');
  const clock = h.clock;
  const client = new RoutingClient({ baseUrl: h.api, clock: clock.now, clockSkewSeconds: 0 });
  const where = { source: SOURCE, target: TARGET, elsewhere: ELSEWHERE };
  const seen: Row[] = [];
  const record = async (phase: string) => {
    for (const [rowPhase, at, op] of table.filter((r) => r[0] === phase)) {
      client.forget('conv-d');
      const { decision } = await client.decideFor('conv-d', op, where[at]);
      seen.push([rowPhase, at, op, decision.kind, decisionStatus(decision).status]);
    }
  };

  await client.putRoute('conv-d', SOURCE);
  await record('unlocked');
  const grant = await client.prelock('conv-d', { migrationId: 'm-d', owner: 'o', target: TARGET });
  await record('prelockPending');
  clock.set(Date.parse(grant.startsAt));
  await client.escalate('conv-d', grant.token!, 'hardDelete');
  await record('hardDelete');
  const write = await client.escalate('conv-d', grant.token!, 'write');
  await record('write');
  await client.swap('conv-d', grant.token!, write.writeAt!);
  await record('swapped');
  expect(seen).toEqual(table);
});

test('the answers: Retry-After with 423, the location with 421, a 307 when the service names the URL', async () => {
  h = await hostOnManualClock('dev');
  const client = new RoutingClient({ baseUrl: h.api, clock: h.clock.now, clockSkewSeconds: 0 });
  await client.putRoute('conv-a', SOURCE);
  const grant = await client.prelock('conv-a', { migrationId: 'm-a', owner: 'o', target: TARGET });
  h.clock.set(Date.parse(grant.startsAt));
  await client.escalate('conv-a', grant.token!, 'hardDelete');
  await client.escalate('conv-a', grant.token!, 'write');
  client.forget('conv-a');
  const view = await client.resolve('conv-a');

  const denied = decide(view, 'write', SOURCE);
  expect(denied).toEqual({ kind: 'deny', retryAfterSeconds: view.enforcement.retryAfterSeconds });
  expect(decisionStatus(denied)).toEqual({
    proceed: false,
    status: 423,
    code: 'Locked',
    headers: { 'Retry-After': String(view.enforcement.retryAfterSeconds) },
  });

  const misdirected = decide(view, 'write', TARGET);
  expect(decisionStatus(misdirected)).toEqual({
    proceed: false,
    status: 421,
    code: 'MisdirectedRequest',
    headers: {},
    location: SOURCE,
  });
  const urlFor = (l: Location) => `https://messages.${l.region}.example/v1`;
  expect(decisionStatus(misdirected, { urlFor })).toEqual({
    proceed: false,
    status: 307,
    headers: { Location: 'https://messages.westeurope.example/v1' },
    location: SOURCE,
  });

  expect(decisionStatus(decide(null, 'write', SOURCE))).toEqual({
    proceed: false,
    status: 404,
    code: 'NotFound',
    headers: {},
  });
  const missing = await client.decideFor('conv-none', 'delete', SOURCE);
  expect(missing).toEqual({ decision: { kind: 'notFound' }, view: null, resolvedAt: null });

  // The statuses are the error table's (one home): a refusal's status is its code's.
  for (const d of [
    denied,
    misdirected,
    { kind: 'notFound' },
    { kind: 'unavailable', retryAfterSeconds: 1 },
  ] as Decision[]) {
    const answer = decisionStatus(d);
    expect(answer.status).toBe(errorKind(answer.code!).status);
  }
});

test("a stale view (an outage under 'serveStaleReads'): reads decided as usual, writes and deletes unavailable", async () => {
  h = await hostOnManualClock('dev');
  const client = new RoutingClient({ baseUrl: h.api, clock: h.clock.now });
  await client.putRoute('conv-s', SOURCE);
  const view = { ...(await client.resolve('conv-s')), stale: { code: 'Unreachable', freshUntil: 0 } };
  expect(decide(view, 'read', SOURCE)).toEqual({ kind: 'allow' });
  expect(decide(view, 'read', TARGET)).toEqual({ kind: 'notHere', location: SOURCE });
  for (const op of ['write', 'delete'] as const)
    for (const at of [SOURCE, TARGET]) {
      const decision = decide(view, op, at);
      expect(decision).toEqual({ kind: 'unavailable', retryAfterSeconds: 1 });
      expect(decisionStatus(decision)).toMatchObject({ proceed: false, status: 503, code: 'Unreachable' });
    }
});
