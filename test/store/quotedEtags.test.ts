import { RoutingClient } from '../../shared/client';
import { isRouteLockError } from '../../shared/errors';
import { newLocationDocument } from '../../shared/lock/document';
import type { LockGrant, RouteView } from '../../shared/lock/view';
import type { LocationStore } from '../../shared/store/ports/locations';
import { SqliteStore } from '../../shared/store/sqlite/locations';
import { type CosmosTestServer, startCosmosServer } from '../../testkit/cosmosServer';
import { QuotingStore } from '../../testkit/quotingStore';
import { call, handlerServices } from '../support/handlers';

/**
 * Cosmos DB quotes its ETags; the stand-ins do not. Over a store that hands ETags out quoted and accepts
 * them back only in that form (testkit/quotingStore.ts), on SQLite and on the Cosmos test server: the
 * library keeps them opaque, the HTTP ETag header carries exactly one pair of quotes, a caller's If-Match
 * from either the header or a grant's `etag` names its version, and a stale one is still 412.
 */

let cosmos: CosmosTestServer;
beforeAll(async () => {
  cosmos = await startCosmosServer();
});
afterAll(async () => {
  await cosmos.close();
});

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'northeurope' };

const backends: [string, () => Promise<LocationStore>][] = [
  ['SQLite', async () => new QuotingStore(new SqliteStore(':memory:'))],
  ['Cosmos test server', async () => new QuotingStore(await cosmos.connect())],
];

describe.each(backends)('quoted ETags on %s', (_name, open) => {
  test('the stand-in is as strict as Cosmos DB: a bare ETag matches nothing (negative control)', async () => {
    const store = await open();
    const created = await store.create(newLocationDocument('strict-1', SOURCE));
    expect(created.etag).toMatch(/^"[^"]+"$/);
    const bare = created.etag.slice(1, -1);
    const refused = await store.replace(created.doc, bare).catch((error: unknown) => error);
    expect(isRouteLockError(refused, 'PreconditionFailed')).toBe(true);
    await expect(store.replace(created.doc, created.etag)).resolves.toMatchObject({
      doc: { id: 'strict-1' },
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
  });
});

test('RoutingClient sends a grant etag back as one entity-tag, whatever form the store gave it', async () => {
  const sent: (string | null)[] = [];
  const fetchImpl = (async (_url: string, init?: RequestInit) => {
    sent.push(new Headers(init?.headers).get('if-match'));
    return new Response(JSON.stringify({ etag: 'x' }), {
      status: 200,
      headers: { 'content-type': 'application/json' },
    });
  }) as typeof fetch;
  const client = new RoutingClient({ baseUrl: 'http://routing.test/api', fetch: fetchImpl });
  await client.renew('r-1', 'token', undefined, { ifMatch: '"quoted-by-cosmos"' });
  await client.renew('r-1', 'token', undefined, { ifMatch: 'bare-from-a-stand-in' });
  expect(sent).toEqual(['"quoted-by-cosmos"', '"bare-from-a-stand-in"']);
});
