import type { ForceReleaseRequest } from '../../shared/core/audit';
import { approveRequest, openRequest } from '../../shared/core/forceRelease';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { type TestPrincipal, asPrincipal } from '../support/principals';

/**
 * Force-release identities are object ids. The attack this pins: one caller presenting several names
 * (x-ms-client-principal-name values, body `actor` fields, or display names inside its principal)
 * opening a request and approving it "as two others". Over real HTTP, embedded host on loopback,
 * ROUTELOCK_AUTH=appservice.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const MALLORY = 'a0000000-0000-4000-8000-00000000000a';
const BOB = 'b0000000-0000-4000-8000-00000000000b';
const CAROL = 'c0000000-0000-4000-8000-00000000000c';
const ops = ['Ops.Read', 'Ops.Operator', 'Ops.Approver'];

let host: LocalHost;
let api: string;
beforeEach(async () => {
  host = await startLocalHost({
    env: { PORT: '0', ROUTELOCK_AUTH: 'appservice' },
    store: new SqliteStore(':memory:'),
    log: () => undefined,
  });
  api = `${host.url}/api`;
});
afterEach(async () => {
  await host.close();
});

async function send(
  method: string,
  path: string,
  as: TestPrincipal | null,
  body: unknown = {},
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${api}${path}`, {
    method,
    headers: {
      ...(method === 'GET' ? {} : { 'content-type': 'application/json' }),
      ...(as ? asPrincipal(as) : {}),
      ...headers,
    },
    ...(method === 'GET' ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : null) as Record<string, unknown> };
}

async function lockedRoute(id: string) {
  const writer = { oid: 'd0000000-0000-4000-8000-00000000000d', roles: ['Routes.Write', 'Locks.Write'] };
  expect((await send('PUT', `/routes/${id}`, writer, { location: SOURCE })).status).toBe(201);
  const grant = await send('POST', `/routes/${id}/prelock`, writer, {
    migrationId: 'm-stuck',
    owner: 'o',
    target: TARGET,
  });
  expect(grant.status).toBe(200);
}

const lockOf = async (id: string) => (await host.services.store.read(id, { from: 'writeRegion' })).doc.lock;

test('one caller under three names cannot open and approve its own force-release', async () => {
  await lockedRoute('conv-x');
  // a forgeable display-name header is no identity at all
  const byName = await send(
    'POST',
    '/ops/routes/conv-x/force-release',
    null,
    { reason: 'stuck' },
    {
      'x-ms-client-principal-name': 'alice@contoso',
    },
  );
  expect(byName).toMatchObject({ status: 401, body: { code: 'Unauthenticated' } });

  const opened = await send(
    'POST',
    '/ops/routes/conv-x/force-release',
    { oid: MALLORY, name: 'alice', roles: ops },
    {
      reason: 'stuck',
    },
  );
  expect(opened).toMatchObject({ status: 201, body: { requestedBy: MALLORY, requestedByName: 'alice' } });
  const id = opened.body.id as string;
  const approve = (as: TestPrincipal, body: unknown = {}, headers: Record<string, string> = {}) =>
    send('POST', `/ops/force-release/${id}/approve`, as, body, headers);

  // the same object id under other names, a principal-name header or a body actor
  expect(await approve({ oid: MALLORY, name: 'bob', roles: ops })).toMatchObject({
    status: 403,
    body: { code: 'Forbidden' },
  });
  expect(
    await approve({ oid: MALLORY, name: 'carol', roles: ops }, {}, { 'x-ms-client-principal-name': 'carol' }),
  ).toMatchObject({ status: 403, body: { code: 'Forbidden' } });
  expect(await approve({ oid: MALLORY, roles: ops }, { actor: 'dave' })).toMatchObject({
    status: 400,
    body: { code: 'BadRequest', detail: expect.stringContaining('ROUTELOCK_AUTH=none') },
  });
  // an approver counts once, whatever it calls itself; an operator without Ops.Approver cannot approve
  expect(await approve({ oid: BOB, name: 'bob', roles: ['Ops.Approver'] })).toMatchObject({
    status: 200,
    body: { released: false },
  });
  expect(await approve({ oid: BOB, name: 'robert', roles: ['Ops.Approver'] })).toMatchObject({
    status: 409,
    body: { code: 'DuplicateApproval' },
  });
  expect(await approve({ oid: CAROL, roles: ['Ops.Operator', 'Ops.Read'] })).toMatchObject({
    status: 403,
    body: { code: 'Forbidden', detail: expect.stringContaining('Ops.Approver') },
  });
  expect(await lockOf('conv-x')).not.toBeNull();

  // a second, distinct approver releases it
  expect(await approve({ oid: CAROL, name: 'carol', roles: ['Ops.Approver'] })).toMatchObject({
    status: 200,
    body: { released: true, route: { location: SOURCE, lock: null } },
  });
  const request = (await send('GET', `/ops/force-release/${id}`, { oid: BOB, roles: ['Ops.Read'] }))
    .body as unknown as ForceReleaseRequest;
  expect(request.approvals).toEqual([
    { actor: BOB, name: 'bob', at: expect.any(String) },
    { actor: CAROL, name: 'carol', at: expect.any(String) },
  ]);

  // the ledger records object ids, the names beside them for humans
  await new Promise((r) => setTimeout(r, 50)); // the change stream is asynchronous
  const audit = (await send('GET', '/routes/conv-x/audit', { oid: BOB, roles: ['Ops.Read'] })).body as {
    items: { op: string; actor: string; actorName?: string }[];
  };
  expect(audit.items.map(({ op, actor, actorName }) => ({ op, actor, actorName }))).toEqual([
    { op: 'forceReleaseRequested', actor: MALLORY, actorName: 'alice' },
    { op: 'forceReleaseApproved', actor: BOB, actorName: 'bob' },
    { op: 'forceReleaseApproved', actor: CAROL, actorName: 'carol' },
    { op: 'forceRelease', actor: `${MALLORY},${BOB},${CAROL}`, actorName: undefined },
  ]);
});

describe('the approval rule', () => {
  const T = Date.UTC(2026, 5, 1);

  test('object ids: the same id under another name is the requester (refused)', () => {
    const request = openRequest({
      id: 'fr-1',
      resourceId: 'r',
      migrationId: 'm',
      actor: { id: MALLORY, name: 'alice' },
      reason: 'stuck',
      now: T,
    });
    expect(() => approveRequest(request, { id: MALLORY, name: 'bob' }, T + 1)).toThrow(
      expect.objectContaining({ code: 'Forbidden' }),
    );
    const once = approveRequest(request, { id: BOB, name: 'bob' }, T + 1).request;
    expect(() => approveRequest(once, { id: BOB, name: 'robert' }, T + 2)).toThrow(
      expect.objectContaining({ code: 'DuplicateApproval' }),
    );
  });

  test('negative control: compared by display name, one person under three names is "ready"', () => {
    // the negative control: the name as the identity
    const request = openRequest({
      id: 'fr-2',
      resourceId: 'r',
      migrationId: 'm',
      actor: 'alice',
      reason: 'x',
      now: T,
    });
    const first = approveRequest(request, 'bob', T + 1);
    const second = approveRequest(first.request, 'carol', T + 2);
    expect(second.ready).toBe(true);
  });
});
