import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { RoutingClient, RoutingServiceError, decide } from '../../shared/core/client';
import { ManualClock } from '../../testkit/clock';
import type { LockGrant } from '../../shared/core/lock/view';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { assertNoSecrets } from '../support/secrets';
import { productionTiming as timing, seconds } from '../support/timing';

/**
 * An announced migration end to end over real HTTP: the embedded host on a free loopback port (SQLite in
 * memory, production timing on a fake clock), driven by RoutingClient's lock calls, as an orchestrator
 * outside this app would. A host with ROUTELOCK_ANNOUNCED_LOCKS on takes it; one with it off refuses it
 * and changes nothing.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const S = seconds(timing.clockSkewSeconds);
const L = seconds(timing.announceLeadSeconds);

let on: LocalHost;
let off: LocalHost;
let clock: ManualClock;
const logLines: string[] = [];
const tokens: string[] = [];

beforeAll(async () => {
  clock = new ManualClock(Date.UTC(2026, 5, 1));
  const log = (level: string, message: string, fields?: object) =>
    logLines.push(JSON.stringify({ level, message, ...fields }));
  const env = { PORT: '0', ROUTELOCK_PROFILE: 'production' };
  on = await startLocalHost({
    env: { ...env, ROUTELOCK_ANNOUNCED_LOCKS: 'true' },
    clock: clock.now,
    store: new SqliteStore(':memory:'),
    log,
  });
  off = await startLocalHost({ env, clock: clock.now, store: new SqliteStore(':memory:'), log });
});
afterAll(async () => {
  await on.close();
  await off.close();
  expect(logLines.length).toBeGreaterThan(5);
  for (const line of logLines) assertNoSecrets(line, tokens);
});

const clientOf = (host: LocalHost) => new RoutingClient({ baseUrl: `${host.url}/api`, clock: clock.now });

async function refusal(promise: Promise<unknown>): Promise<{ status: number; code: string } | 'ok'> {
  try {
    await promise;
    return 'ok';
  } catch (error) {
    if (error instanceof RoutingServiceError) return { status: error.status, code: error.code };
    throw error;
  }
}

test('pre-lock announced → hard-delete wait → announce → activation refused before W + S, granted at it → swap', async () => {
  const client = clientOf(on);
  await client.putRoute('ann-1', SOURCE);
  const decisions = async () => {
    client.forget('ann-1');
    const view = await client.resolve('ann-1');
    return { write: decide(view, 'write', SOURCE).kind, delete: decide(view, 'delete', SOURCE).kind };
  };

  const grant = await client.prelock(
    'ann-1',
    { migrationId: 'm-ann', owner: 'orch', target: TARGET, announced: true },
    { idempotencyKey: 'ann-key' },
  );
  tokens.push(grant.token!);
  expect(grant).toMatchObject({ phase: 'hardDelete', announceLeadSeconds: timing.announceLeadSeconds });
  expect(Date.parse(grant.startsAt) - Date.parse(grant.acquiredAt)).toBe(L);
  // announced, not yet in force: nothing restricted
  expect(await decisions()).toEqual({ write: 'allow', delete: 'allow' });
  expect(await refusal(client.escalate('ann-1', grant.token!, 'hardDelete'))).toEqual({
    status: 409,
    code: 'ConvergencePending',
  });

  clock.set(Date.parse(grant.startsAt) + S);
  const hd = await client.escalate('ann-1', grant.token!, 'hardDelete', { ifMatch: grant.etag });
  expect(hd.etag).toBe(grant.etag); // already held: nothing written
  expect(await decisions()).toEqual({ write: 'allow', delete: 'tombstone' });

  const window: LockGrant = await client.announce(
    'ann-1',
    { token: grant.token!, phase: 'write' },
    { ifMatch: hd.etag },
  );
  const W = Date.parse(window.writeWindowAt!);
  expect(W).toBe(clock.now() + L);
  expect(Date.parse(window.writeWindowUntil!)).toBeGreaterThan(W + S);
  // a fresh read (a copy held from before may be served until the window's lead has passed)
  client.forget('ann-1');
  const view = await client.resolve('ann-1');
  expect(view.lock).toMatchObject({ announced: true, writeWindowAt: window.writeWindowAt });

  clock.set(W + S - 1000);
  expect(await refusal(client.escalate('ann-1', grant.token!, 'write'))).toEqual({
    status: 409,
    code: 'ConvergencePending',
  });
  expect(await decisions()).toEqual({ write: 'allow', delete: 'tombstone' });

  clock.set(W + S);
  const write = await client.escalate('ann-1', grant.token!, 'write', { ifMatch: window.etag });
  expect(write).toMatchObject({ phase: 'write', writeAt: new Date(W + S).toISOString() });
  expect(await decisions()).toEqual({ write: 'deny', delete: 'deny' });

  clock.advance(10_000);
  const swapped = await client.swap('ann-1', grant.token!, write.writeAt!, { ifMatch: write.etag });
  expect(swapped).toMatchObject({ location: TARGET, lock: null });
});

test('announce with `at` sooner than the lead is raised to it; a retry naming a later `at` keeps the window announced', async () => {
  const client = clientOf(on);
  await client.putRoute('ann-2', SOURCE);
  const grant = await client.prelock('ann-2', {
    migrationId: 'm-2',
    owner: 'orch',
    target: TARGET,
    announced: true,
  });
  tokens.push(grant.token!);
  clock.set(Date.parse(grant.startsAt) + S);
  const soon = new Date(clock.now() + seconds(60)).toISOString();
  const raised = await client.announce('ann-2', { token: grant.token!, phase: 'write', at: soon });
  expect(raised.writeWindowAt).toBe(new Date(clock.now() + L).toISOString());
  // the first answer lost, the caller retries with another slot: the window readers already hold stays
  const later = new Date(clock.now() + L + seconds(3600)).toISOString();
  const retried = await client.announce('ann-2', { token: grant.token!, phase: 'write', at: later });
  expect(retried).toMatchObject({ writeWindowAt: raised.writeWindowAt, etag: raised.etag });
});

test('a legacy pre-lock through the client sends no `announced`, and announce on it is 409', async () => {
  const client = clientOf(on);
  await client.putRoute('ann-3', SOURCE);
  const grant = await client.prelock('ann-3', { migrationId: 'm-3', owner: 'orch', target: TARGET });
  tokens.push(grant.token!);
  expect(grant.phase).toBe('prelock');
  expect(grant).not.toHaveProperty('announceLeadSeconds');
  expect(await refusal(client.announce('ann-3', { token: grant.token!, phase: 'write' }))).toEqual({
    status: 409,
    code: 'InvalidTransition',
  });
});

test('ROUTELOCK_ANNOUNCED_LOCKS off: the announced pre-lock is 400 naming it, and the route is unchanged', async () => {
  const client = clientOf(off);
  const created = await client.putRoute('ann-4', SOURCE);
  const refused = await client
    .prelock('ann-4', { migrationId: 'm-4', owner: 'orch', target: TARGET, announced: true })
    .catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(RoutingServiceError);
  expect(refused).toMatchObject({ status: 400, code: 'BadRequest' });
  expect((refused as Error).message).toContain('ROUTELOCK_ANNOUNCED_LOCKS');
  client.forget('ann-4');
  const after = await client.resolve('ann-4');
  expect(after).toMatchObject({ lock: null, etag: created.etag, location: SOURCE });
  // negative control: the same host takes the pre-lock that does not ask
  const legacy = await client.prelock('ann-4', { migrationId: 'm-4', owner: 'orch', target: TARGET });
  tokens.push(legacy.token!);
  expect(legacy.phase).toBe('prelock');
});

test('raw HTTP: bad announce bodies and a bad announced value are 400 problems, never 5xx', async () => {
  const api = `${on.url}/api`;
  const bodies: [string, string][] = [
    ['prelock', '{"migrationId":"m-5","owner":"o","target":{"region":"eastus"},"announced":"yes"}'],
    ['announce', '{"token":"t","phase":"hardDelete"}'],
    ['announce', '{"token":"t","phase":"write","at":"soon"}'],
    ['announce', '{"token":"t","phase":"write","extra":1}'],
    ['announce', '{"token":'],
  ];
  await clientOf(on).putRoute('ann-5', SOURCE);
  for (const [route, body] of bodies) {
    const res = await fetch(`${api}/routes/ann-5/${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect({ route, body, status: res.status, type: res.headers.get('content-type') }).toEqual({
      route,
      body,
      status: 400,
      type: 'application/problem+json',
    });
    await res.arrayBuffer();
  }
});

test('RoutingClient sends `announced` and `at` only when given: a caller that does not ask sends what it always did', async () => {
  const sent: Record<string, unknown>[] = [];
  const recording: typeof fetch = (input, init) => {
    if (typeof init?.body === 'string') sent.push(JSON.parse(init.body) as Record<string, unknown>);
    return fetch(input, init);
  };
  const client = new RoutingClient({ baseUrl: `${on.url}/api`, clock: clock.now, fetch: recording });
  await client.putRoute('ann-6', SOURCE);
  await client.putRoute('ann-7', SOURCE);
  const legacy = await client.prelock('ann-6', { migrationId: 'm-6', owner: 'orch', target: TARGET });
  const announced = await client.prelock('ann-7', {
    migrationId: 'm-7',
    owner: 'orch',
    target: TARGET,
    announced: true,
  });
  tokens.push(legacy.token!, announced.token!);
  clock.set(Date.parse(announced.startsAt) + S);
  await client.announce('ann-7', { token: announced.token!, phase: 'write' });
  expect(sent.slice(2).map((body) => Object.keys(body).sort())).toEqual([
    ['migrationId', 'owner', 'target'],
    ['announced', 'migrationId', 'owner', 'target'],
    ['phase', 'token'],
  ]);
  expect(sent[3]).toMatchObject({ announced: true });
});
