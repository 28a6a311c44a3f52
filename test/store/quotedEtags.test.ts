import { RoutingClient } from '../../shared/core/client';
import { parseConfig } from '../../shared/config';
import { isRouteLockError } from '../../shared/core/errors';
import { ForceReleaseService } from '../../shared/core/forceRelease';
import { newLocationDocument } from '../../shared/core/lock/document';
import type { LockGrant, RouteView } from '../../shared/core/lock/view';
import { Router } from '../../shared/core/router';
import { CosmosAuditLedger } from '../../shared/core/store/cosmos/audit';
import { CosmosForceReleaseRequests } from '../../shared/core/store/cosmos/forceRelease';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { ManualClock } from '../../testkit/clock';
import { QuotingStore } from '../../testkit/quotingStore';
import { call, handlerServices } from '../support/handlers';
import { useCosmosServers } from '../support/cosmosServers';

/**
 * Cosmos DB quotes its ETags; the stand-ins do not. Three ways to meet quoted ETags: the Cosmos test
 * server configured to issue them as Cosmos DB does (testkit/cosmosServer.ts, `quotedEtags`: the real
 * CosmosStore and SDK, nothing wrapped), and a store that hands them out quoted and accepts them back only
 * in that form (testkit/quotingStore.ts) over SQLite and over the stock test server. On each: the library
 * keeps them opaque, the HTTP ETag header carries exactly one pair of quotes, a caller's If-Match from
 * either the header or a grant's `etag` names its version, a stale one is still 412, and an unlocked route
 * deletes on a quoting emulator too (never a 412).
 */

const servers = useCosmosServers();

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'northeurope' };

const backends: [string, () => Promise<LocationStore>][] = [
  ['the Cosmos test server issuing quoted ETags (real CosmosStore)', async () => servers.quoted.connect()],
  ['SQLite behind QuotingStore', async () => new QuotingStore(new SqliteStore(':memory:'))],
  [
    'the stock Cosmos test server behind QuotingStore',
    async () => new QuotingStore(await servers.stock.connect()),
  ],
];

describe.each(backends)('quoted ETags on %s', (_name, open) => {
  test('the stand-in is as strict as Cosmos DB: a bare ETag matches nothing (negative control)', async () => {
    const store = await open();
    const created = await store.create(newLocationDocument('strict-1', SOURCE));
    expect(created.etag).toMatch(/^"[^"]+"$/);
    const bare = created.etag.slice(1, -1);
    const refused = await store.replace(created.doc, bare).catch((error: unknown) => error);
    expect(isRouteLockError(refused, 'PreconditionFailed')).toBe(true);
    const deleteRefused = await store.delete('strict-1', bare).catch((error: unknown) => error);
    expect(isRouteLockError(deleteRefused, 'PreconditionFailed')).toBe(true);
    const replaced = await store.replace(created.doc, created.etag);
    expect(replaced).toMatchObject({ doc: { id: 'strict-1' } });
    expect(replaced.etag).toMatch(/^"[^"]+"$/);
    // list hands out the same form as a point read
    const listed = await store.list({ lockedOnly: false, limit: 10 });
    expect(listed.items.find((i) => i.doc.id === 'strict-1')?.etag).toBe(replaced.etag);
    await store.delete('strict-1', replaced.etag);
    expect(await store.read('strict-1', { from: 'writeRegion' }).catch((e: unknown) => e)).toMatchObject({
      code: 'NotFound',
    });
  });

  test('over HTTP: one pair of quotes on the wire, If-Match from the header or the body, stale is 412', async () => {
    await handlerServices({}, await open());
    const put = await call('putRoute', { params: { id: 'q-1' }, body: { location: SOURCE } });
    expect(put.status).toBe(201);
    const got = await call('getRoute', { params: { id: 'q-1' } });
    const header = got.headers.get('etag') ?? '';
    expect(header).toMatch(/^"[^"]+"$/); // an RFC 9110 entity-tag, not `""…""`
    // the body's etag is bare on every backend, as before: the header is it in one pair of quotes
    expect(`"${(got.body as RouteView).etag}"`).toBe(header);

    // If-Match from the header: the pre-lock decides on that version.
    const pre = await call('prelock', {
      params: { id: 'q-1' },
      body: { migrationId: 'm-q', owner: 'orch', target: TARGET },
      headers: { 'if-match': header },
    });
    expect(pre.status).toBe(200);
    const grant = pre.body as LockGrant;
    expect(pre.headers.get('etag')).toBe(`"${grant.etag}"`);

    // A stale If-Match (the version before the pre-lock) is 412, and changes nothing.
    const stale = await call('renew', {
      params: { id: 'q-1' },
      body: { token: grant.token },
      headers: { 'if-match': header },
    });
    expect(stale.status).toBe(412);

    // If-Match as clients build it from the body's etag, quoted or bare: the same version, honoured.
    const renewed = await call('renew', {
      params: { id: 'q-1' },
      body: { token: grant.token },
      headers: { 'if-match': `"${grant.etag}"` },
    });
    expect(renewed.status).toBe(200);
    const again = await call('renew', {
      params: { id: 'q-1' },
      body: { token: grant.token },
      headers: { 'if-match': (renewed.body as LockGrant).etag },
    });
    expect(again.status).toBe(200);
    const released = await call('release', {
      params: { id: 'q-1' },
      body: { token: grant.token },
      headers: { 'if-match': (again.body as LockGrant).etag },
    });
    expect(released.status).toBe(200);
  });

  test('DELETE /routes/{id} of an unlocked route is 204: without If-Match, with the header, with the body etag', async () => {
    await handlerServices({}, await open());
    for (const id of ['d-none', 'd-header', 'd-body', 'd-stale']) {
      expect((await call('putRoute', { params: { id }, body: { location: SOURCE } })).status).toBe(201);
    }
    expect((await call('deleteRoute', { params: { id: 'd-none' } })).status).toBe(204);

    const header = (await call('getRoute', { params: { id: 'd-header' } })).headers.get('etag') ?? '';
    const byHeader = await call('deleteRoute', {
      params: { id: 'd-header' },
      headers: { 'if-match': header },
    });
    expect(byHeader.status).toBe(204);

    const body = (await call('getRoute', { params: { id: 'd-body' } })).body as RouteView;
    const byBody = await call('deleteRoute', {
      params: { id: 'd-body' },
      headers: { 'if-match': body.etag },
    });
    expect(byBody.status).toBe(204);

    const before = (await call('getRoute', { params: { id: 'd-stale' } })).headers.get('etag') ?? '';
    // a new version: pre-locked and released again
    const pre = await call('prelock', {
      params: { id: 'd-stale' },
      body: { migrationId: 'm-d', owner: 'orch', target: TARGET },
    });
    expect(pre.status).toBe(200);
    const token = (pre.body as LockGrant).token;
    expect((await call('release', { params: { id: 'd-stale' }, body: { token } })).status).toBe(200);
    const stale = await call('deleteRoute', { params: { id: 'd-stale' }, headers: { 'if-match': before } });
    expect(stale.status).toBe(412);

    for (const id of ['d-none', 'd-header', 'd-body']) {
      expect((await call('getRoute', { params: { id } })).status).toBe(404);
    }
    expect((await call('getRoute', { params: { id: 'd-stale' } })).status).toBe(200);
  });
});

test('force release over quoted ETags: the request saves and the route release write both land', async () => {
  const store = await servers.quoted.connect();
  const container = store.containerNamed(`audit${Date.now()}`);
  await container.database.containers.createIfNotExists({
    id: container.id,
    partitionKey: { paths: ['/id'] },
  });
  const clock = new ManualClock();
  const router = new Router({ store, timing: parseConfig({}).timing, clock: clock.now });
  const service = new ForceReleaseService(
    router,
    new CosmosAuditLedger(container),
    new CosmosForceReleaseRequests(container),
    clock.now,
  );
  await router.createRoute('fr-q', SOURCE);
  await router.prelock('fr-q', { migrationId: 'm-fr', owner: 'o', target: TARGET });
  const request = await service.open('fr-q', 'alice', 'stuck');
  clock.advance(60_000);
  expect((await service.approve(request.id, 'bob')).released).toBe(false);
  clock.advance(60_000);
  expect(await service.approve(request.id, 'carol')).toMatchObject({
    released: true,
    request: { status: 'released' },
  });
  expect((await store.read('fr-q', { from: 'writeRegion' })).doc.lock).toBeNull();
});

test('RoutingClient sends a grant etag back as one entity-tag, whatever form the store gave it', async () => {
  const sent: (string | null)[] = [];
  const fetchImpl = (async (_url: string, init?: RequestInit) => {
    sent.push(new Headers(init?.headers).get('if-match'));
    // A whole grant: the client checks the shape of what it is answered.
    const grant = {
      migrationId: 'm',
      phase: 'prelock',
      startsAt: '2026-06-01T00:00:00.000Z',
      expiresAt: '2026-06-01T00:10:00.000Z',
      maxExpiresAt: '2026-06-01T01:00:00.000Z',
      phaseExpiresAt: '2026-06-01T00:10:00.000Z',
      convergenceDelaySeconds: 3,
      acquiredAt: '2026-06-01T00:00:00.000Z',
      etag: 'x',
    };
    return new Response(JSON.stringify(grant), {
      status: 200,
      headers: { 'content-type': 'application/json' },
    });
  }) as typeof fetch;
  const client = new RoutingClient({ baseUrl: 'http://routing.test/api', fetch: fetchImpl });
  await client.renew('r-1', 'token', undefined, { ifMatch: '"quoted-by-cosmos"' });
  await client.renew('r-1', 'token', undefined, { ifMatch: 'bare-from-a-stand-in' });
  expect(sent).toEqual(['"quoted-by-cosmos"', '"bare-from-a-stand-in"']);
});
