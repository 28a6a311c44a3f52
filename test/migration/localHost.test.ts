import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import type { MigrationStatus } from '../../shared/migration/types';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { type ParticipantServer, startParticipant } from '../support/participantServer';

/**
 * Migrations through the embedded host's in-process runner, over HTTP, on real timers with a fast
 * profile (convergence delay 1 s), against a fake participant server.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const FAST = {
  PORT: '0',
  ROUTELOCK_PROFILE: 'dev',
  ROUTELOCK_CACHE_TIERS: 'local=1',
  ROUTELOCK_REPLICATION_BOUND_SECONDS: '0',
  ROUTELOCK_SAFETY_BUFFER_SECONDS: '0',
  ROUTELOCK_RETRY_INTERVAL_SECONDS: '1',
  ROUTELOCK_RETRY_ATTEMPTS: '3',
};

let participant: ParticipantServer;
let host: LocalHost;
let api: string;

async function start(env: Record<string, string> = {}, withParticipant = false) {
  participant = await startParticipant();
  host = await startLocalHost({
    env: {
      ...FAST,
      ...(withParticipant
        ? { ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'messages', url: participant.url }]) }
        : {}),
      ...env,
    },
    store: new SqliteStore(':memory:'),
    log: () => undefined,
  });
  api = `${host.url}/api`;
  await put('conv-1');
}

afterEach(async () => {
  await host?.close();
  await participant?.close();
});

const post = (path: string, body: unknown) =>
  fetch(`${api}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
const put = (id: string, location = SOURCE) =>
  fetch(`${api}/routes/${id}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ location }),
  });

async function startMigration(body: unknown) {
  const res = await post('/migrations', body);
  return {
    status: res.status,
    location: res.headers.get('location'),
    body: (await res.json()) as Record<string, string>,
  };
}

async function waitFor(
  statusUrl: string,
  done = (s: MigrationStatus) => !['Pending', 'Running'].includes(s.status),
  timeoutMs = 20_000,
) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const status = (await (await fetch(`${host.url}${statusUrl}`)).json()) as MigrationStatus;
    if (done(status)) return status;
    if (Date.now() > until) throw new Error(`migration still ${JSON.stringify(status)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const route = async (id = 'conv-1') =>
  (await fetch(`${api}/routes/${id}`)).json() as Promise<{ location: unknown; lock: unknown }>;

describe('migrations on the embedded host', () => {
  test('a lock-only migration: 202, then Completed with the timeline, and the route moved', async () => {
    await start();
    const started = await startMigration({ resourceId: 'conv-1', target: TARGET });
    expect(started.status).toBe(202);
    expect(started.body).toEqual({
      migrationId: expect.stringMatching(/^m-/),
      instanceId: 'migrate-conv-1',
      statusUrl: `/api/migrations/${started.body.migrationId}`,
    });
    expect(started.location).toBe(started.body.statusUrl);
    const status = await waitFor(started.body.statusUrl as string);
    expect(status).toMatchObject({
      status: 'Completed',
      phase: 'swapped',
      resourceId: 'conv-1',
      target: TARGET,
    });
    for (const at of Object.values(status.timeline)) expect(at).toEqual(expect.any(String));
    const t = status.timeline;
    expect(Date.parse(t.hardDeleteAt!) - Date.parse(t.prelockAt!)).toBeGreaterThanOrEqual(1000); // the convergence wait
    expect(await route()).toMatchObject({ location: TARGET, lock: null });
  });

  test('a participant answering 202 + Location is polled until 200, for both copies', async () => {
    await start({}, true);
    participant.behave('bulkCopy', { kind: 'poll', polls: 2 });
    participant.behave('deltaCopy', { kind: 'poll', polls: 1 });
    const started = await startMigration({ resourceId: 'conv-1', target: TARGET, migrationId: 'm-poll' });
    const status = await waitFor(started.body.statusUrl as string);
    expect(status).toMatchObject({ status: 'Completed' });
    const steps = participant.requests.map((r) => (r.method === 'POST' ? `POST ${r.step}` : 'GET'));
    expect(steps.filter((s) => s === 'POST bulkCopy')).toHaveLength(1);
    expect(steps.filter((s) => s === 'GET').length).toBeGreaterThanOrEqual(3);
    expect(steps.indexOf('POST deltaCopy')).toBeGreaterThan(steps.indexOf('GET'));
    expect(await route()).toMatchObject({ location: TARGET, lock: null });
  });

  test('a failing participant: Failed with the reason, the lock released, the route unchanged', async () => {
    // one attempt: a retry with a fresh lock would wait the dev profile's 10 s (test/migration/attempts.test.ts)
    await start({ ROUTELOCK_MIGRATION_ATTEMPTS: '1' }, true);
    participant.behave('bulkCopy', { kind: 'status', status: 422 });
    const started = await startMigration({ resourceId: 'conv-1', target: TARGET });
    const status = await waitFor(started.body.statusUrl as string);
    expect(status).toMatchObject({ status: 'Failed', phase: 'released' });
    expect(status.error).toMatch(/participant messages answered 422 to bulkCopy/);
    expect(await route()).toMatchObject({ location: SOURCE, lock: null });
  });

  test('a delta copy that overruns the write budget: the write lock is released, the delta retried, then swap', async () => {
    await start(
      {
        ROUTELOCK_WRITE_LEASE_SECONDS: '3',
        ROUTELOCK_WRITE_BUDGET_SECONDS: '3',
        ROUTELOCK_DELTA_RETRY_DELAY_SECONDS: '1',
      },
      true,
    );
    participant.behave('deltaCopy', { kind: 'slow', ms: 6000, onlyFirstJob: true });
    const started = await startMigration({ resourceId: 'conv-1', target: TARGET });
    const status = await waitFor(started.body.statusUrl as string, undefined, 30_000);
    expect(status).toMatchObject({ status: 'Completed', deltaAttempts: 2 });
    const deltas = participant.requests.filter((r) => r.method === 'POST' && r.step === 'deltaCopy');
    expect(deltas.length).toBeGreaterThanOrEqual(2);
    expect(await route()).toMatchObject({ location: TARGET, lock: null });
  }, 40_000);

  test('two concurrent starts for one resource: one migration; another target while it runs: 409', async () => {
    await start();
    const [a, b] = await Promise.all([
      startMigration({ resourceId: 'conv-1', target: TARGET }),
      startMigration({ resourceId: 'conv-1', target: TARGET }),
    ]);
    expect(a.status).toBe(202);
    expect(b.status).toBe(202);
    expect(b.body.migrationId).toBe(a.body.migrationId);
    const other = await post('/migrations', { resourceId: 'conv-1', target: { region: 'northeurope' } });
    expect(other.status).toBe(409);
    expect(await other.json()).toMatchObject({ code: 'MigrationInProgress' });
    await waitFor(a.body.statusUrl as string);
    expect(host.state.unfinished()).toHaveLength(0);
  });

  test('NoOp when the resource already sits at the target; Conflict when another lock holds it', async () => {
    await start();
    const noop = await startMigration({ resourceId: 'conv-1', target: SOURCE });
    expect(await waitFor(noop.body.statusUrl as string)).toMatchObject({ status: 'NoOp' });
    const grant = await post('/routes/conv-1/prelock', {
      migrationId: 'manual',
      owner: 'operator',
      target: TARGET,
    });
    expect(grant.status).toBe(200);
    const conflict = await startMigration({ resourceId: 'conv-1', target: TARGET });
    const status = await waitFor(conflict.body.statusUrl as string);
    expect(status).toMatchObject({ status: 'Conflict' });
    expect(status.error).toMatch(/^Locked/);
  });

  test('bad requests: 404 for a missing route or migration, 400 for a bad body, and nothing starts', async () => {
    await start();
    expect((await post('/migrations', { resourceId: 'ghost', target: TARGET })).status).toBe(404);
    expect((await post('/migrations', { resourceId: 'conv-1', target: TARGET, extra: 1 })).status).toBe(400);
    expect((await post('/migrations', { resourceId: 'conv-1' })).status).toBe(400);
    expect((await fetch(`${api}/migrations/m-nope`)).status).toBe(404);
    expect(host.state.recent(10)).toHaveLength(0);
  });
});
