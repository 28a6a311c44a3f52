import { request as httpRequest } from 'node:http';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { RoutingClient, RoutingServiceError, decide } from '../../shared/core/client';
import { ManualClock } from '../../testkit/clock';
import type { LockGrant, RouteView } from '../../shared/core/lock/view';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { assertNoSecrets } from '../support/secrets';
import { useCosmosServers } from '../support/cosmosServers';

/**
 * End to end over real HTTP: the embedded host on a free loopback port, serving the registered
 * handlers, on SQLite and on Cosmos DB (@vercel/cosmosdb-server, stock and issuing quoted ETags).
 * Production timing on a fake clock.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };

const servers = useCosmosServers();

const stores: [string, () => Promise<LocationStore>][] = [
  ['sqlite', async () => new SqliteStore(':memory:')],
  ['cosmos', async () => servers.stock.connect()],
  // ETags in quotes, compared exactly, as Cosmos DB issues them (testkit/cosmosServer.ts)
  ['cosmos (quoted ETags)', async () => servers.quoted.connect()],
];

describe.each(stores)('embedded host over HTTP on %s', (_name, openStore) => {
  let host: LocalHost;
  let clock: ManualClock;
  let api: string;
  const logLines: string[] = [];
  const tokens: string[] = [];

  beforeEach(async () => {
    clock = new ManualClock(Date.UTC(2026, 5, 1));
    host = await startLocalHost({
      env: { PORT: '0', ROUTELOCK_PROFILE: 'production' },
      clock: clock.now,
      store: await openStore(),
      log: (level, message, fields) => logLines.push(JSON.stringify({ level, message, ...fields })),
    });
    api = `${host.url}/api`;
  });
  afterEach(async () => {
    await host.close();
  });
  afterAll(() => {
    expect(logLines.length).toBeGreaterThan(20);
    for (const line of logLines) assertNoSecrets(line, tokens);
  });

  const send = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    fetch(`${api}${path}`, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  test('30 concurrent pre-locks: exactly one 200, 29 × 423 with Retry-After; the token is in no GET', async () => {
    expect((await send('PUT', '/routes/hot-1', { location: SOURCE })).status).toBe(201);
    const responses = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        send('POST', '/routes/hot-1/prelock', { migrationId: `m-${i}`, owner: `o-${i}`, target: TARGET }),
      ),
    );
    const ok = responses.filter((r) => r.status === 200);
    const locked = responses.filter((r) => r.status === 423);
    expect(ok).toHaveLength(1);
    expect(locked).toHaveLength(29);
    for (const r of locked) {
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(r.headers.get('content-type')).toBe('application/problem+json');
    }
    const grant = (await ok[0]!.json()) as LockGrant;
    tokens.push(grant.token!);
    for (const r of locked) assertNoSecrets(await r.text(), [grant.token!]);
    const get = await send('GET', '/routes/hot-1');
    const text = await get.text();
    assertNoSecrets(text, [grant.token!]);
    expect(JSON.parse(text)).toMatchObject({ lock: { phase: 'prelock' } });
  });

  test('DELETE of an unlocked route is 204 (If-Match from the ETag header or none); a stale one is 412', async () => {
    expect((await send('PUT', '/routes/del-1', { location: SOURCE })).status).toBe(201);
    expect((await send('PUT', '/routes/del-2', { location: SOURCE })).status).toBe(201);
    const etag = (await send('GET', '/routes/del-1')).headers.get('etag') ?? '';
    expect((await send('DELETE', '/routes/del-1', undefined, { 'if-match': etag })).status).toBe(204);
    expect((await send('GET', '/routes/del-1')).status).toBe(404);
    const before = (await send('GET', '/routes/del-2')).headers.get('etag') ?? '';
    const pre = await send('POST', '/routes/del-2/prelock', { migrationId: 'm', owner: 'o', target: TARGET });
    const { token } = (await pre.json()) as LockGrant;
    tokens.push(token!);
    expect((await send('POST', '/routes/del-2/release', { token })).status).toBe(200);
    expect((await send('DELETE', '/routes/del-2', undefined, { 'if-match': before })).status).toBe(412);
    expect((await send('DELETE', '/routes/del-2')).status).toBe(204);
  });

  test('Cache-Control clamps as the pending lock nears startsAt, then no-store', async () => {
    await send('PUT', '/routes/cc-1', { location: SOURCE });
    const grant = (await (
      await send('POST', '/routes/cc-1/prelock', { migrationId: 'm', owner: 'o', target: TARGET })
    ).json()) as LockGrant;
    tokens.push(grant.token!);
    const startsAt = Date.parse(grant.startsAt);
    const seen: string[] = [];
    for (const before of [3600, 65, 40, 20, 6, 5, 0]) {
      clock.set(startsAt - before * 1000);
      seen.push((await send('GET', '/routes/cc-1')).headers.get('cache-control') ?? '');
    }
    expect(seen).toEqual([
      'private, max-age=60',
      'private, max-age=60',
      'private, max-age=35',
      'private, max-age=15',
      'private, max-age=1',
      'no-store',
      'no-store',
    ]);
  });

  test('full walk prelock → hardDelete → write → swap, enforcement checked at each step through RoutingClient', async () => {
    const client = new RoutingClient({ baseUrl: api, clock: clock.now });
    await client.putRoute('walk-1', SOURCE);
    const decisions = async () => {
      client.forget('walk-1');
      const view = await client.resolve('walk-1');
      return {
        read: decide(view, 'read', SOURCE).kind,
        write: decide(view, 'write', SOURCE),
        delete: decide(view, 'delete', SOURCE).kind,
        atTarget: decide(view, 'write', TARGET),
      };
    };
    expect(await decisions()).toEqual({
      read: 'allow',
      write: { kind: 'allow' },
      delete: 'allow',
      atTarget: { kind: 'notHere', location: SOURCE },
    });

    const grant = await client.prelock(
      'walk-1',
      { migrationId: 'm-walk', owner: 'orch', target: TARGET },
      { idempotencyKey: 'walk-key' },
    );
    tokens.push(grant.token!);
    expect(await decisions()).toMatchObject({ read: 'allow', write: { kind: 'allow' }, delete: 'allow' });
    const early = await client.escalate('walk-1', grant.token!, 'hardDelete').catch((e: unknown) => e);
    expect(early).toBeInstanceOf(RoutingServiceError);
    expect(early).toMatchObject({ status: 409, code: 'ConvergencePending' });

    clock.set(Date.parse(grant.startsAt) + 5000 + 1000); // started on every clock: + the 5 s skew margin
    const hd = await client.escalate('walk-1', grant.token!, 'hardDelete', { ifMatch: grant.etag });
    expect(await decisions()).toMatchObject({ read: 'allow', write: { kind: 'allow' }, delete: 'tombstone' });

    clock.advance(60_000);
    const w = await client.escalate('walk-1', grant.token!, 'write', { ifMatch: hd.etag });
    const during = await decisions();
    expect(during).toMatchObject({
      read: 'allow',
      delete: 'deny',
      write: { kind: 'deny', retryAfterSeconds: 5 },
    });

    clock.advance(13_000);
    const swapped = await client.swap('walk-1', grant.token!, w.writeAt!, { ifMatch: w.etag });
    expect(swapped).toMatchObject({
      location: TARGET,
      lock: null,
      secondary: { role: 'retiredSource', location: SOURCE },
    });
    const after = await decisions();
    expect(after).toMatchObject({ read: 'notHere', write: { kind: 'notHere', location: TARGET } });
    const atTarget = decide(await client.resolve('walk-1'), 'write', TARGET);
    expect(atTarget).toEqual({ kind: 'allow' });
  });

  test('RoutingClient honours Cache-Control and never serves a started lock from its cache', async () => {
    const client = new RoutingClient({ baseUrl: api, clock: clock.now, clockSkewSeconds: 5 });
    await client.putRoute('cache-1', SOURCE);
    const before = client.requests;
    for (let i = 0; i < 5; i += 1) await client.resolve('cache-1');
    expect(client.requests - before).toBe(1); // max-age=60: one fetch, four cache hits
    clock.advance(61_000);
    await client.resolve('cache-1');
    expect(client.requests - before).toBe(2);

    const grant = await client.prelock('cache-1', { migrationId: 'm', owner: 'o', target: TARGET });
    tokens.push(grant.token!);
    clock.set(Date.parse(grant.startsAt) + 1);
    const n = client.requests;
    for (let i = 0; i < 4; i += 1) await client.resolve('cache-1');
    expect(client.requests - n).toBe(4); // no-store, and a started lock is always re-fetched
  });

  test('HTTP-level errors are problems too: 404 path, 405 with Allow, bad percent-encoding, oversize body', async () => {
    const unknown = await send('GET', '/nowhere');
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: 'NotFound' });
    const wrongMethod = await send('PATCH', '/routes/x', { location: SOURCE });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('PUT, GET, DELETE');
    const badEncoding = await send('GET', '/routes/%E0%A4%A');
    expect(badEncoding.status).toBe(400);
    expect(badEncoding.headers.get('content-type')).toBe('application/problem+json');
    const huge = await send('PUT', '/routes/x', { location: SOURCE, pad: 'x'.repeat(2 * 1024 * 1024) });
    expect(huge.status).toBe(413);
    const unicode = await send('GET', `/routes/${encodeURIComponent('conv-✓')}`);
    expect(unicode.status).toBe(400);
  });

  test('an odd method (TRACE) gets 405 and the host stays up', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${api}/routes/x`, { method: 'TRACE' }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(405);
    expect((await send('GET', '/health')).status).toBe(200);
  });
});

describe('health reports the store', () => {
  test('cosmos', async () => {
    const host = await startLocalHost({
      env: { PORT: '0' },
      store: await servers.stock.connect(),
      log: () => undefined,
    });
    try {
      expect(await (await fetch(`${host.url}/api/health`)).json()).toEqual({ status: 'ok', store: 'cosmos' });
      expect(host.config.timing.profile).toBe('dev'); // the embedded host's default
    } finally {
      await host.close();
    }
  });
});

describe('views stay views', () => {
  test('a route view has exactly the docs/design.md §4 fields', async () => {
    const host = await startLocalHost({
      env: { PORT: '0' },
      store: new SqliteStore(':memory:'),
      log: () => undefined,
    });
    try {
      const res = await fetch(`${host.url}/api/routes/v-1`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ location: SOURCE }),
      });
      const view = (await res.json()) as RouteView;
      expect(Object.keys(view).sort()).toEqual([
        'enforcement',
        'etag',
        'location',
        'lock',
        'resourceId',
        'secondary',
      ]);
    } finally {
      await host.close();
    }
  });
});
