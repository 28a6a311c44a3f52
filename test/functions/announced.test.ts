import { entityTag } from '../../shared/core/lock/document';
import type { LockGrant, RouteView } from '../../shared/core/lock/view';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import type { ManualClock } from '../../testkit/clock';
import { type Called, type CallInit, call, handlerServices } from '../support/handlers';
import { productionTiming as timing, seconds } from '../support/timing';

/**
 * Announced locks over HTTP through the registered handlers (real HttpRequest / InvocationContext,
 * production timing, fake clock): the pre-lock's `announced` field behind ROUTELOCK_ANNOUNCED_LOCKS, the
 * announce route with escalate's token, If-Match and error mapping, and its role. The rules' boundaries
 * are test/lock/announced.table.test.ts's; here each answer's status, code and header is the point.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const S = seconds(timing.clockSkewSeconds);
const L = seconds(timing.announceLeadSeconds);
const ID = 'conv-a';
const ON = { ROUTELOCK_ANNOUNCED_LOCKS: 'true' };

let clock: ManualClock;
let store: LocationStore;

async function setup(env: Record<string, string> = ON): Promise<void> {
  store = new SqliteStore(':memory:');
  ({ clock } = await handlerServices(env, store));
  expect((await call('putRoute', { params: { id: ID }, body: { location: SOURCE } })).status).toBe(201);
}

const post = (name: string, body: unknown, init: Omit<CallInit, 'params' | 'body'> = {}) =>
  call(name, { params: { id: ID }, body, ...init });
const prelockBody = (extra: object = {}) => ({ migrationId: 'm-a', owner: 'orch', target: TARGET, ...extra });
const stored = () => store.read(ID, { from: 'writeRegion' });

function expectProblem(res: Called, status: number, code: string): void {
  expect({ status: res.status, code: (res.body as { code?: string } | null)?.code }).toEqual({
    status,
    code,
  });
  expect(res.headers.get('content-type')).toBe('application/problem+json');
}

/** An announced pre-lock, taken and past its start on every clock: the holder may announce. */
async function announcedAndStarted(): Promise<LockGrant> {
  const grant = (await post('prelock', prelockBody({ announced: true }))).body as LockGrant;
  clock.set(Date.parse(grant.startsAt) + S);
  return grant;
}

describe('with ROUTELOCK_ANNOUNCED_LOCKS=true', () => {
  beforeEach(() => setup());

  test('an announced migration: pre-lock → hard-delete wait → announce → activation refused before W + S, granted at it → swap', async () => {
    const taken = await post('prelock', prelockBody({ announced: true }));
    expect(taken.status).toBe(200);
    const grant = taken.body as LockGrant;
    expect(taken.headers.get('etag')).toBe(entityTag(grant.etag));
    expect(grant).toMatchObject({
      phase: 'hardDelete',
      announceLeadSeconds: timing.announceLeadSeconds,
      hardDeleteAt: grant.startsAt,
    });
    expect(grant).not.toHaveProperty('writeWindowAt');
    expect(Date.parse(grant.startsAt) - Date.parse(grant.acquiredAt)).toBe(L);
    const view = (await call('getRoute', { params: { id: ID } })).body as RouteView;
    expect(view.lock).toMatchObject({ phase: 'hardDelete', announced: true });
    expect(view.lock).not.toHaveProperty('writeWindowAt');

    // the hard-delete lock is held from the start: escalating to it waits for startsAt + S, then is a no-op
    clock.set(Date.parse(grant.startsAt) + S - 1000);
    const early = await post('escalate', { token: grant.token, phase: 'hardDelete' });
    expectProblem(early, 409, 'ConvergencePending');
    expect(early.headers.get('retry-after')).toBe('1');
    clock.set(Date.parse(grant.startsAt) + S);
    const hd = await post('escalate', { token: grant.token, phase: 'hardDelete' });
    expect(hd.status).toBe(200);
    expect((hd.body as LockGrant).etag).toBe(grant.etag);

    // before a window: the write lock is refused, naming the announcement
    expectProblem(await post('escalate', { token: grant.token, phase: 'write' }), 409, 'InvalidTransition');

    const announced = await post(
      'announce',
      { token: grant.token, phase: 'write' },
      { headers: { 'if-match': entityTag(grant.etag) } },
    );
    expect(announced.status).toBe(200);
    const window = announced.body as LockGrant;
    expect(announced.headers.get('etag')).toBe(entityTag(window.etag));
    expect(announced.headers.get('cache-control')).toBe('no-store');
    expect(window).not.toHaveProperty('token');
    const W = clock.now() + L;
    expect(window).toMatchObject({ phase: 'hardDelete', writeWindowAt: new Date(W).toISOString() });
    expect(Date.parse(window.writeWindowUntil!)).toBeGreaterThan(W + S);
    expect((await stored()).doc).toMatchObject({ schemaVersion: 2, lastChange: { op: 'announce' } });
    const viewed = (await call('getRoute', { params: { id: ID } })).body as RouteView;
    expect(viewed.lock).toMatchObject({ announced: true, writeWindowAt: window.writeWindowAt });

    // a retried announcement (its answer lost): 200, the same window, nothing written
    const again = await post('announce', { token: grant.token, phase: 'write' });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ writeWindowAt: window.writeWindowAt, etag: window.etag });

    clock.set(W + S - 1);
    const tooSoon = await post('escalate', { token: grant.token, phase: 'write' });
    expectProblem(tooSoon, 409, 'ConvergencePending');
    expect(tooSoon.headers.get('retry-after')).toBe('1');
    expect((await stored()).etag).toBe(window.etag);

    clock.set(W + S);
    const activated = await post('escalate', { token: grant.token, phase: 'write' });
    expect(activated.status).toBe(200);
    const write = activated.body as LockGrant;
    expect(write).toMatchObject({ phase: 'write', writeAt: new Date(W + S).toISOString() });
    expect(write.writeWindowAt).toBe(window.writeWindowAt);
    const during = (await call('getRoute', { params: { id: ID } })).body as RouteView;
    expect(during.enforcement).toMatchObject({ write: 'deny', delete: 'deny' });

    const swapped = await post('swap', { token: grant.token, writeAt: write.writeAt });
    expect(swapped.status).toBe(200);
    expect(swapped.body).toMatchObject({ location: TARGET, lock: null });
    expect((await stored()).doc).toMatchObject({
      schemaVersion: 2,
      lastMigration: { announceLeadSeconds: timing.announceLeadSeconds },
    });
  });

  test('announce: `at` sets a later window; a stale If-Match is 412, another token 423, a lapsed lock 410, nothing written by any', async () => {
    const grant = await announcedAndStarted();
    const before = await stored();
    expectProblem(
      await post('announce', { token: grant.token, phase: 'write' }, { headers: { 'if-match': '"stale"' } }),
      412,
      'PreconditionFailed',
    );
    expectProblem(await post('announce', { token: 'not-the-token', phase: 'write' }), 423, 'Locked');
    expect((await stored()).etag).toBe(before.etag);

    const at = new Date(clock.now() + L + seconds(600)).toISOString();
    const later = await post('announce', { token: grant.token, phase: 'write', at });
    expect(later.status).toBe(200);
    expect((later.body as LockGrant).writeWindowAt).toBe(at);

    clock.set(Date.parse(grant.expiresAt));
    const lapsed = await stored();
    expectProblem(await post('announce', { token: grant.token, phase: 'write' }), 410, 'LockExpired');
    expect((await stored()).etag).toBe(lapsed.etag);
  });

  test('a pre-lock with `announced: false` or without it is the legacy pre-lock, and announce on it is 409', async () => {
    const legacy = await post('prelock', prelockBody({ announced: false }));
    expect(legacy.status).toBe(200);
    const grant = legacy.body as LockGrant;
    expect(grant.phase).toBe('prelock');
    expect(grant).not.toHaveProperty('announceLeadSeconds');
    const view = (await call('getRoute', { params: { id: ID } })).body as RouteView;
    expect(view.lock).not.toHaveProperty('announced');
    const before = await stored();
    expect(before.doc.schemaVersion).toBe(1);
    expectProblem(await post('announce', { token: grant.token, phase: 'write' }), 409, 'InvalidTransition');
    expect((await stored()).etag).toBe(before.etag);
  });

  test('404 for a route that does not exist', async () => {
    expectProblem(
      await call('announce', { params: { id: 'conv-none' }, body: { token: 't', phase: 'write' } }),
      404,
      'NotFound',
    );
  });
});

describe('with ROUTELOCK_ANNOUNCED_LOCKS off (the default)', () => {
  beforeEach(() => setup({}));

  test('`announced: true` is 400 naming the variable, and the route is unchanged', async () => {
    const before = await stored();
    const refused = await post('prelock', prelockBody({ announced: true }), {
      headers: { 'idempotency-key': 'k-1' },
    });
    expectProblem(refused, 400, 'BadRequest');
    expect((refused.body as { detail: string }).detail).toContain('ROUTELOCK_ANNOUNCED_LOCKS');
    expect((refused.body as { errors: string[] }).errors).toEqual([
      expect.stringMatching(/^announced: .*ROUTELOCK_ANNOUNCED_LOCKS/),
    ]);
    const after = await stored();
    expect(after.etag).toBe(before.etag);
    expect(after.doc).toEqual(before.doc);
    // the same body without it takes today's pre-lock
    const legacy = await post('prelock', prelockBody(), { headers: { 'idempotency-key': 'k-1' } });
    expect(legacy.status).toBe(200);
    expect((legacy.body as LockGrant).phase).toBe('prelock');
  });

  test('negative control: the same request on a host with the flag on is taken', async () => {
    await setup(ON);
    expect((await post('prelock', prelockBody({ announced: true }))).status).toBe(200);
  });
});

describe('bad bodies are 400, never 500, and write nothing', () => {
  beforeEach(() => setup());

  test.each([
    ['announced as a string', prelockBody({ announced: 'true' })],
    ['announced as a number', prelockBody({ announced: 1 })],
    ['announced null', prelockBody({ announced: null })],
    ['announced as an object', prelockBody({ announced: { on: true } })],
  ])('pre-lock: %s', async (_why, body) => {
    const before = await stored();
    const res = await post('prelock', body);
    expectProblem(res, 400, 'BadRequest');
    expect((res.body as { errors: string[] }).errors).toEqual([expect.stringMatching(/^announced: /)]);
    expect((await stored()).etag).toBe(before.etag);
  });

  test.each<[string, Omit<CallInit, 'params'>]>([
    ['no token', { body: { phase: 'write' } }],
    ['an empty token', { body: { token: '', phase: 'write' } }],
    ['a number token', { body: { token: 42, phase: 'write' } }],
    ['no phase', { body: { token: 'TOKEN' } }],
    ['phase hardDelete', { body: { token: 'TOKEN', phase: 'hardDelete' } }],
    ['phase prelock', { body: { token: 'TOKEN', phase: 'prelock' } }],
    ['at that is not an instant', { body: { token: 'TOKEN', phase: 'write', at: 'tomorrow' } }],
    ['at as a number', { body: { token: 'TOKEN', phase: 'write', at: 1767225600000 } }],
    ['at null', { body: { token: 'TOKEN', phase: 'write', at: null } }],
    ['an unknown field', { body: { token: 'TOKEN', phase: 'write', effectiveAt: '2026-01-01T00:00:00Z' } }],
    ['an array', { body: ['TOKEN'] }],
    ['an empty body', { rawBody: '', headers: { 'content-type': 'application/json' } }],
    ['not JSON', { rawBody: '{"token":', headers: { 'content-type': 'application/json' } }],
    [
      'a bad If-Match list',
      { body: { token: 'TOKEN', phase: 'write' }, headers: { 'if-match': '"a", "b"' } },
    ],
  ])('announce: %s', async (_why, init) => {
    const grant = await announcedAndStarted();
    const before = await stored();
    const body = JSON.parse(
      JSON.stringify(init.body ?? null).replace('"TOKEN"', JSON.stringify(grant.token)),
    );
    const res = await call('announce', {
      params: { id: ID },
      ...init,
      ...(init.body === undefined ? {} : { body }),
    });
    expectProblem(res, 400, 'BadRequest');
    expect((await stored()).etag).toBe(before.etag);
  });

  test('negative control: the same announcement with a well-formed body is taken', async () => {
    const grant = await announcedAndStarted();
    const at = new Date(clock.now() + L).toISOString().replace('Z', '+00:00');
    expect((await post('announce', { token: grant.token, phase: 'write', at })).status).toBe(200);
  });

  test('an announce on a bad id is 400, and a probe id is reserved', async () => {
    for (const id of ['-bad', 'probe-westeurope']) {
      const res = await call('announce', { params: { id }, body: { token: 't', phase: 'write' } });
      expectProblem(res, 400, 'BadRequest');
    }
  });
});

describe('the role and the caller', () => {
  const reader = { oid: 'c3333333-0000-4000-8000-000000000003', roles: ['Routes.Read', 'Ops.Read'] };
  const holder = { oid: 'd4444444-0000-4000-8000-000000000004', roles: ['Locks.Write'] };

  test('a caller with read roles only gets 403 on announce; Locks.Write alone is enough', async () => {
    await setup();
    const grant = await announcedAndStarted();
    const before = await stored();
    const refused = await post('announce', { token: grant.token, phase: 'write' }, { principal: reader });
    expectProblem(refused, 403, 'Forbidden');
    expect((await stored()).etag).toBe(before.etag);
    // the control: the lock role, and nothing else, announces
    expect(
      (await post('announce', { token: grant.token, phase: 'write' }, { principal: holder })).status,
    ).toBe(200);
  });

  test('no identity is 401; the headers App Service also sets (-name, -id) are never read as one', async () => {
    await setup();
    const grant = await announcedAndStarted();
    const before = await stored();
    expectProblem(
      await post('announce', { token: grant.token, phase: 'write' }, { principal: null }),
      401,
      'Unauthenticated',
    );
    const forged = await post(
      'announce',
      { token: grant.token, phase: 'write' },
      {
        principal: null,
        headers: {
          'x-ms-client-principal-name': 'admin@contoso.example',
          'x-ms-client-principal-id': holder.oid,
        },
      },
    );
    expectProblem(forged, 401, 'Unauthenticated');
    expect((await stored()).etag).toBe(before.etag);
  });

  test('under ROUTELOCK_AUTH=entra a well-formed principal header holding Locks.Write is ignored: 401, nothing written', async () => {
    await setup(ON);
    const grant = await announcedAndStarted();
    const before = await stored();
    const now = clock.now();
    ({ clock } = await handlerServices(
      {
        ...ON,
        ROUTELOCK_AUTH: 'entra',
        ROUTELOCK_ENTRA_TENANT_ID: '00000000-0000-4000-8000-00000000000f',
        ROUTELOCK_ENTRA_AUDIENCES: 'api://routelock',
      },
      store,
    ));
    clock.set(now);
    for (const name of ['announce', 'prelock']) {
      const body =
        name === 'announce' ? { token: grant.token, phase: 'write' } : prelockBody({ announced: true });
      expectProblem(await post(name, body, { principal: holder }), 401, 'Unauthenticated');
    }
    expect((await stored()).etag).toBe(before.etag);
  });
});
