import type { LockGrant, RouteView } from '../../shared/core/lock/view';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { FaultyStore } from '../../testkit/faultyStore';
import { type Called, call, handlerServices } from '../support/handlers';
import { assertNoSecrets } from '../support/secrets';
import type { ManualClock } from '../../testkit/clock';
import type { Services } from '../../functions/services';

import { productionTiming } from '../support/timing';

/** The holder escalates once the lock has started on every clock: startsAt + the skew margin. */
const ESCALATE_AFTER_START = productionTiming.clockSkewSeconds * 1000;

/**
 * Every endpoint and every error code of docs/design.md §4, through the registered handlers with real
 * HttpRequest / InvocationContext objects (production timing, fake clock).
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };

let clock: ManualClock;
let services: Services;
let faulty: FaultyStore;
const logs: string[] = [];
const tokens: string[] = [];

beforeEach(async () => {
  faulty = new FaultyStore(new SqliteStore(':memory:'));
  ({ clock, services } = await handlerServices({}, faulty));
});

function expectProblem(res: Called, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/problem+json');
  expect(res.body).toMatchObject({
    status,
    code,
    type: `urn:routelock:problem:${code}`,
    title: expect.any(String),
    detail: expect.any(String),
  });
}

async function put(id = 'conv-1', location: object = SOURCE) {
  return call('putRoute', { params: { id }, body: { location } }, logs);
}
async function prelock(
  id = 'conv-1',
  body: object = { migrationId: 'm-1', owner: 'orch', target: TARGET },
  headers = {},
) {
  const res = await call('prelock', { params: { id }, body, headers }, logs);
  if (res.status === 200) tokens.push((res.body as LockGrant).token!);
  return res;
}
const post = (name: string, body: object, id = 'conv-1', headers: Record<string, string> = {}) =>
  call(name, { params: { id }, body, headers }, logs);

async function toWrite(id = 'conv-1') {
  await put(id);
  const grant = (await prelock(id)).body as LockGrant;
  clock.set(Date.parse(grant.startsAt) + ESCALATE_AFTER_START);
  await post('escalate', { token: grant.token, phase: 'hardDelete' }, id);
  const w = await post('escalate', { token: grant.token, phase: 'write' }, id);
  return { token: grant.token!, grant: w.body as LockGrant };
}

afterAll(() => {
  // Nothing any handler logged, across this file, carries a token.
  expect(tokens.length).toBeGreaterThan(5);
  for (const line of logs) assertNoSecrets(line, tokens);
});

describe('GET /health', () => {
  test('200 with the store kind', async () => {
    const res = await call('health');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok', store: 'sqlite' });
  });
});

describe('PUT /routes/{id}', () => {
  test("the probe's ids are reserved: 400 for every caller, whatever the case, and nothing is created", async () => {
    for (const id of ['probe-westeurope', 'PROBE-x', 'Probe-local']) {
      expectProblem(await put(id), 400, 'BadRequest');
      expectProblem(await call('getRoute', { params: { id } }), 400, 'BadRequest');
    }
    // the control: the same name without the reserved prefix is an ordinary route
    expect((await put('probed-westeurope')).status).toBe(201);
  });

  test('201 with the route view, ETag and Location; 200 when identical; 409 AlreadyExists otherwise', async () => {
    const created = await put();
    expect(created.status).toBe(201);
    expect(created.headers.get('etag')).toBe(`"${(created.body as RouteView).etag}"`);
    expect(created.headers.get('location')).toBe('/api/routes/conv-1');
    expect(created.body).toMatchObject({
      resourceId: 'conv-1',
      location: SOURCE,
      lock: null,
      secondary: null,
    });
    expect((await put()).status).toBe(200);
    expectProblem(await put('conv-1', TARGET), 409, 'AlreadyExists');
  });

  test.each([
    ['a bad id', { params: { id: '-bad' }, body: { location: SOURCE } }],
    ['a 256-char id', { params: { id: 'a'.repeat(256) }, body: { location: SOURCE } }],
    ['an id with a slash', { params: { id: 'a/b' }, body: { location: SOURCE } }],
    ['a bad region', { params: { id: 'x' }, body: { location: { region: 'West Europe' } } }],
    [
      'a bad account',
      { params: { id: 'x' }, body: { location: { region: 'westeurope', account: 'UPPER' } } },
    ],
    ['an unknown field', { params: { id: 'x' }, body: { location: SOURCE, extra: 1 } }],
    ['an unknown nested field', { params: { id: 'x' }, body: { location: { ...SOURCE, zone: 2 } } }],
    [
      '__proto__',
      {
        params: { id: 'x' },
        rawBody: '{"location":{"region":"westeurope"},"__proto__":{"admin":true}}',
        headers: { 'content-type': 'application/json' },
      },
    ],
    ['a missing field', { params: { id: 'x' }, body: {} }],
    ['a wrong type', { params: { id: 'x' }, body: { location: 'westeurope' } }],
    ['an array body', { params: { id: 'x' }, body: [1] }],
    [
      'not JSON',
      { params: { id: 'x' }, rawBody: '{"location":', headers: { 'content-type': 'application/json' } },
    ],
    ['an empty body', { params: { id: 'x' }, rawBody: '', headers: { 'content-type': 'application/json' } }],
    [
      'invalid UTF-8',
      {
        params: { id: 'x' },
        rawBody: Buffer.from([0x7b, 0xff, 0x7d]),
        headers: { 'content-type': 'application/json' },
      },
    ],
  ])('400 BadRequest for %s, and nothing is written', async (_name, init) => {
    const res = await call('putRoute', init);
    expectProblem(res, 400, 'BadRequest');
    expect(services.store.counters.creates).toBe(0);
  });

  test('413 over 64 KiB, 415 for a non-JSON media type', async () => {
    const big = JSON.stringify({ location: SOURCE, pad: 'x'.repeat(70 * 1024) });
    expectProblem(
      await call('putRoute', {
        params: { id: 'x' },
        rawBody: big,
        headers: { 'content-type': 'application/json' },
      }),
      413,
      'PayloadTooLarge',
    );
    expectProblem(
      await call('putRoute', {
        params: { id: 'x' },
        rawBody: 'region=westeurope',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
      415,
      'UnsupportedMediaType',
    );
    expect(services.store.counters.creates).toBe(0);
  });
});

describe('GET /routes/{id}', () => {
  test('200 with ETag and Cache-Control; 404 NotFound; 400 for a bad id', async () => {
    await put();
    const res = await call('getRoute', { params: { id: 'conv-1' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('private, max-age=60');
    expect(res.headers.get('etag')).toBe(`"${(res.body as RouteView).etag}"`);
    expectProblem(await call('getRoute', { params: { id: 'nope' } }), 404, 'NotFound');
    expectProblem(await call('getRoute', { params: { id: '../etc' } }), 400, 'BadRequest');
  });

  test('Cache-Control is clamped as a pending lock nears startsAt, then no-store', async () => {
    await put();
    const grant = (await prelock()).body as LockGrant;
    const startsAt = Date.parse(grant.startsAt);
    const cc = async () =>
      (await call('getRoute', { params: { id: 'conv-1' } })).headers.get('cache-control');
    expect(await cc()).toBe('private, max-age=60');
    clock.set(startsAt - 35_000);
    expect(await cc()).toBe('private, max-age=30'); // 35 s to start, minus 5 s skew
    clock.set(startsAt - 5_000);
    expect(await cc()).toBe('no-store');
  });
});

describe('POST /routes/{id}/prelock', () => {
  test('200 with a token only here; 423 Locked with Retry-After for a second migration', async () => {
    await put();
    const res = await prelock();
    expect(res.status).toBe(200);
    const grant = res.body as LockGrant;
    expect(grant.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(grant).toMatchObject({ migrationId: 'm-1', phase: 'prelock', convergenceDelaySeconds: 7500 });
    const again = await prelock('conv-1', { migrationId: 'm-2', owner: 'other', target: TARGET });
    expectProblem(again, 423, 'Locked');
    expect(Number(again.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(JSON.stringify(again.body)).not.toContain(grant.token);
  });

  test('404 for a missing route, 409 AlreadyAtTarget', async () => {
    expectProblem(await prelock('ghost'), 404, 'NotFound');
    await put();
    expectProblem(
      await prelock('conv-1', { migrationId: 'm', owner: 'o', target: SOURCE }),
      409,
      'AlreadyAtTarget',
    );
  });

  test('Idempotency-Key replay: a fresh token that replaces the first', async () => {
    await put();
    const first = (await prelock('conv-1', undefined, { 'idempotency-key': 'k-1' })).body as LockGrant;
    const second = (await prelock('conv-1', undefined, { 'idempotency-key': 'k-1' })).body as LockGrant;
    expect(second.token).not.toBe(first.token);
    expect(second.startsAt).toBe(first.startsAt);
    expectProblem(await post('renew', { token: first.token }), 423, 'Locked');
    expect((await post('renew', { token: second.token })).status).toBe(200);
    expectProblem(await prelock('conv-1', undefined, { 'idempotency-key': '' }), 400, 'BadRequest');
  });

  test('412 PreconditionFailed for a stale If-Match, and nothing is written', async () => {
    const created = (await put()).body as RouteView;
    await prelock();
    await post('release', { token: tokens[tokens.length - 1]! });
    const before = services.store.counters.replaces;
    const res = await prelock('conv-1', undefined, { 'if-match': `"${created.etag}"` });
    expectProblem(res, 412, 'PreconditionFailed');
    expect(services.store.counters.replaces).toBe(before);
  });
});

describe('POST /routes/{id}/escalate', () => {
  test('409 ConvergencePending with Retry-After before startsAt; 200 after; 409 InvalidTransition backwards', async () => {
    await put();
    const grant = (await prelock()).body as LockGrant;
    clock.set(Date.parse(grant.startsAt) - 10_000);
    const early = await post('escalate', { token: grant.token, phase: 'hardDelete' });
    expectProblem(early, 409, 'ConvergencePending');
    // until the lock has started on every clock: startsAt + the 5 s skew margin
    expect(early.headers.get('retry-after')).toBe('15');
    clock.set(Date.parse(grant.startsAt) + ESCALATE_AFTER_START);
    const hd = await post('escalate', { token: grant.token, phase: 'hardDelete' });
    expect(hd.status).toBe(200);
    expect(hd.body).toMatchObject({ phase: 'hardDelete' });
    expect(hd.body).not.toHaveProperty('token');
    await post('escalate', { token: grant.token, phase: 'write' });
    expectProblem(
      await post('escalate', { token: grant.token, phase: 'hardDelete' }),
      409,
      'InvalidTransition',
    );
  });

  test('423 Locked for another token, 410 LockExpired after the lease, 400 for a bad phase', async () => {
    await put();
    const grant = (await prelock()).body as LockGrant;
    clock.set(Date.parse(grant.startsAt) + ESCALATE_AFTER_START);
    expectProblem(await post('escalate', { token: 'not-the-token', phase: 'hardDelete' }), 423, 'Locked');
    expectProblem(await post('escalate', { token: grant.token, phase: 'prelock' }), 400, 'BadRequest');
    expectProblem(await post('escalate', { token: 42, phase: 'write' }), 400, 'BadRequest');
    clock.set(Date.parse(grant.expiresAt));
    expectProblem(await post('escalate', { token: grant.token, phase: 'hardDelete' }), 410, 'LockExpired');
  });
});

describe('POST /routes/{id}/renew', () => {
  test('200 extends; 409 FreezeBudgetExceeded at the write budget; 409 MaxLeaseReached at the cap', async () => {
    const { token, grant } = await toWrite();
    const writeAt = Date.parse(grant.phaseExpiresAt) - 300_000;
    clock.set(writeAt + 250_000);
    const renewed = await post('renew', { token });
    expect(renewed.status).toBe(200);
    expect(Date.parse((renewed.body as LockGrant).phaseExpiresAt)).toBe(writeAt + 550_000);
    clock.set(writeAt + 500_000);
    await post('renew', { token });
    clock.set(writeAt + 700_000);
    await post('renew', { token });
    clock.set(writeAt + 850_000);
    expectProblem(await post('renew', { token }), 409, 'FreezeBudgetExceeded');

    await post('release', { token, phase: 'write', writeAt: new Date(writeAt).toISOString() });
    const cap = Date.parse(grant.maxExpiresAt);
    for (let t = writeAt + 3600_000; t < cap; t += 3600_000) {
      clock.set(t);
      const r = await post('renew', { token, phase: 'hardDelete' });
      if (r.status !== 200) {
        expectProblem(r, 409, 'MaxLeaseReached');
        return;
      }
    }
    throw new Error('never reached the cap');
  });

  test('410 after the lease, 423 for another token', async () => {
    await put();
    const grant = (await prelock()).body as LockGrant;
    expectProblem(await post('renew', { token: 'other' }), 423, 'Locked');
    clock.set(Date.parse(grant.expiresAt) + 1);
    expectProblem(await post('renew', { token: grant.token }), 410, 'LockExpired');
  });
});

describe('POST /routes/{id}/swap and /release', () => {
  test('writeAt pins a swap or downgrade to its write-lock attempt: another attempt is 409, changing nothing', async () => {
    const { token, grant: first } = await toWrite('conv-att');
    const down = await post('release', { token, phase: 'write', writeAt: first.writeAt }, 'conv-att');
    expect(down.status).toBe(200);
    clock.advance(60_000);
    const second = (await post('escalate', { token, phase: 'write' }, 'conv-att')).body as LockGrant;
    expect(second.writeAt).not.toBe(first.writeAt);
    const late = await post('swap', { token, writeAt: first.writeAt }, 'conv-att');
    expectProblem(late, 409, 'InvalidTransition');
    expectProblem(
      await post('release', { token, phase: 'write', writeAt: first.writeAt }, 'conv-att'),
      409,
      'InvalidTransition',
    );
    expectProblem(await post('release', { token, writeAt: first.writeAt }, 'conv-att'), 400, 'BadRequest');
    const own = await post('swap', { token, writeAt: second.writeAt }, 'conv-att');
    expect(own.status).toBe(200);
    expect((own.body as { location: unknown }).location).toEqual(TARGET);
  });

  test('swap: 409 InvalidTransition without a write lock, 200 with the new location, 200 on replay', async () => {
    await put();
    const grant = (await prelock()).body as LockGrant;
    // over HTTP a swap names its write-lock attempt
    expectProblem(await post('swap', { token: grant.token }), 400, 'BadRequest');
    expectProblem(
      await post('swap', { token: grant.token, writeAt: grant.acquiredAt }),
      409,
      'InvalidTransition',
    );
    clock.set(Date.parse(grant.startsAt) + ESCALATE_AFTER_START);
    await post('escalate', { token: grant.token, phase: 'hardDelete' });
    const { writeAt } = (await post('escalate', { token: grant.token, phase: 'write' })).body as LockGrant;
    expectProblem(await post('swap', { token: 'other', writeAt }), 423, 'Locked');
    const swapped = await post('swap', { token: grant.token, writeAt });
    expect(swapped.status).toBe(200);
    expect(swapped.body).toMatchObject({
      location: TARGET,
      lock: null,
      secondary: { role: 'retiredSource', location: SOURCE },
    });
    expect((await post('swap', { token: grant.token, writeAt })).status).toBe(200);
    expectProblem(await post('swap', { token: 'other', writeAt }), 410, 'LockExpired');
  });

  test('release: 200 and the location unchanged; downgrade keeps the hard-delete lock; 410 / 423', async () => {
    const { token, grant } = await toWrite();
    expectProblem(await post('release', { token, phase: 'write' }), 400, 'BadRequest'); // names its attempt
    const down = await post('release', { token, phase: 'write', writeAt: grant.writeAt });
    expect(down.status).toBe(200);
    expect(down.body).toMatchObject({
      lock: { phase: 'hardDelete' },
      enforcement: { write: 'allow', delete: 'tombstone' },
    });
    // a downgrade replayed (its first answer lost): 200, nothing changes
    const again = await post('release', { token, phase: 'write', writeAt: grant.writeAt });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({
      lock: { phase: 'hardDelete' },
      etag: (down.body as { etag: string }).etag,
    });
    expectProblem(await post('release', { token: 'other' }), 423, 'Locked');
    const released = await post('release', { token });
    expect(released.body).toMatchObject({ location: SOURCE, lock: null, secondary: null });
    expect((await post('release', { token })).status).toBe(200); // replay
    expectProblem(await post('release', { token: 'other' }), 410, 'LockExpired');
    expectProblem(await post('release', { token, phase: 'read' }), 400, 'BadRequest');
  });
});

describe('DELETE /routes/{id}', () => {
  test('423 while locked, 204 after release, 404 when gone', async () => {
    await put();
    const grant = (await prelock()).body as LockGrant;
    const locked = await call('deleteRoute', { params: { id: 'conv-1' } });
    expectProblem(locked, 423, 'Locked');
    expect(locked.headers.get('retry-after')).not.toBeNull();
    await post('release', { token: grant.token });
    expect((await call('deleteRoute', { params: { id: 'conv-1' } })).status).toBe(204);
    expectProblem(await call('deleteRoute', { params: { id: 'conv-1' } }), 404, 'NotFound');
  });

  test('409 ConvergencePending during the retired-source window after a swap; 204 once it ends', async () => {
    const { token, grant } = await toWrite('conv-del');
    expect((await post('swap', { token, writeAt: grant.writeAt }, 'conv-del')).status).toBe(200);
    const early = await call('deleteRoute', { params: { id: 'conv-del' } });
    expectProblem(early, 409, 'ConvergencePending');
    expect(Number(early.headers.get('retry-after'))).toBeGreaterThan(0);
    // the route, its retired source and the finished migration are all still there
    const view = (await call('getRoute', { params: { id: 'conv-del' } })).body as { secondary: unknown };
    expect(view.secondary).toMatchObject({ role: 'retiredSource' });
    clock.advance(Number(early.headers.get('retry-after')) * 1000);
    expect((await call('deleteRoute', { params: { id: 'conv-del' } })).status).toBe(204);
  });
});

describe('GET /routes', () => {
  test('lists live locks only with locked=true, pages with continuation; 400 for bad queries', async () => {
    for (const id of ['a-1', 'a-2', 'a-3']) await put(id);
    await prelock('a-2');
    const locked = await call('listRoutes', { query: 'locked=true' });
    expect((locked.body as { items: RouteView[] }).items.map((i) => i.resourceId)).toEqual(['a-2']);
    const page1 = (await call('listRoutes', { query: 'limit=2' })).body as {
      items: RouteView[];
      continuation: string;
    };
    expect(page1.items).toHaveLength(2);
    const page2 = (
      await call('listRoutes', { query: `limit=2&continuation=${encodeURIComponent(page1.continuation)}` })
    ).body as {
      items: RouteView[];
      continuation: null;
    };
    expect(page2).toMatchObject({ continuation: null });
    expect([...page1.items, ...page2.items].map((i) => i.resourceId)).toEqual(['a-1', 'a-2', 'a-3']);
    expectProblem(await call('listRoutes', { query: 'limit=0' }), 400, 'BadRequest');
    expectProblem(await call('listRoutes', { query: 'locked=maybe' }), 400, 'BadRequest');
    expectProblem(await call('listRoutes', { query: 'sort=id' }), 400, 'BadRequest');
    expectProblem(await call('listRoutes', { query: 'limit=1&limit=2' }), 400, 'BadRequest');
  });
});

describe('store reads behind a GET', () => {
  const reads = () => ({
    nearest: services.store.counters.nearestReads,
    writeRegion: services.store.counters.writeRegionReads,
  });
  const delta = async (run: () => Promise<unknown>) => {
    const before = reads();
    await run();
    const after = reads();
    return { nearest: after.nearest - before.nearest, writeRegion: after.writeRegion - before.writeRegion };
  };

  test('unlocked and cached: 0 reads; started lock: 1 read, from the write region; If-Match mutations: 0 reads', async () => {
    await put();
    const get = () => call('getRoute', { params: { id: 'conv-1' } });
    services.router.forget('conv-1');
    expect(await delta(get)).toEqual({ nearest: 1, writeRegion: 0 }); // a miss
    expect(await delta(get)).toEqual({ nearest: 0, writeRegion: 0 });
    const grant = (await prelock()).body as LockGrant;
    clock.set(Date.parse(grant.startsAt) + ESCALATE_AFTER_START);
    const hd = (await post('escalate', { token: grant.token, phase: 'hardDelete' })).body as LockGrant;
    expect(await delta(get)).toEqual({ nearest: 0, writeRegion: 1 });
    expect(await delta(get)).toEqual({ nearest: 0, writeRegion: 1 });
    const withIfMatch = () =>
      post('escalate', { token: grant.token, phase: 'write' }, 'conv-1', { 'if-match': `"${hd.etag}"` });
    expect(await delta(withIfMatch)).toEqual({ nearest: 0, writeRegion: 0 });
  });
});

describe('store outage', () => {
  test('503 StoreUnavailable with Retry-After on every endpoint that touches the store', async () => {
    await put();
    services.router.forget('conv-1'); // a cached unlocked route would be served without the store
    faulty.down = true;
    for (const res of [
      await call('getRoute', { params: { id: 'conv-1' } }),
      await put('conv-2'),
      await prelock(),
      await call('listRoutes'),
      await call('deleteRoute', { params: { id: 'conv-1' } }),
    ]) {
      expectProblem(res, 503, 'StoreUnavailable');
      expect(res.headers.get('retry-after')).toBe('2');
    }
  });
});

describe('the token never leaves through a read', () => {
  test('GET, list, swap and release bodies and headers never carry the token or its hash', async () => {
    const { token, grant } = await toWrite('secret-1');
    const { createHash } = await import('node:crypto');
    const hash = createHash('sha256').update(token).digest('hex');
    const outputs: Called[] = [
      await call('getRoute', { params: { id: 'secret-1' } }),
      await call('listRoutes', { query: 'locked=true' }),
      await post('renew', { token }, 'secret-1'),
      await post('escalate', { token: 'x', phase: 'write' }, 'secret-1'),
      await post('swap', { token, writeAt: grant.writeAt }, 'secret-1'),
      await call('getRoute', { params: { id: 'secret-1' } }),
    ];
    for (const out of outputs) {
      assertNoSecrets(out.text, [token, hash]);
      assertNoSecrets(JSON.stringify([...out.headers.entries()]), [token, hash]);
    }
  });
});
