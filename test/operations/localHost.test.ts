import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import type { MigrationStatus } from '../../shared/migration/types';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import type { MetricsSnapshot } from '../../shared/migration/telemetry/sink';
import { assertNoSecrets } from '../support/secrets';

/** Operating the embedded host over HTTP: metrics, audit, force-release, the probe, and clean logs. */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
let host: LocalHost;
let api: string;
const logs: string[] = [];

beforeEach(async () => {
  host = await startLocalHost({
    env: {
      PORT: '0',
      ROUTELOCK_CACHE_TIERS: 'local=1',
      ROUTELOCK_REPLICATION_BOUND_SECONDS: '0',
      ROUTELOCK_SAFETY_BUFFER_SECONDS: '0',
    },
    store: new SqliteStore(':memory:'),
    log: (level, message, fields) => logs.push(JSON.stringify({ level, message, ...fields })),
  });
  api = `${host.url}/api`;
});
afterEach(async () => {
  await host.close();
});

const send = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
  const res = await fetch(`${api}${path}`, {
    method,
    // The embedded host wants a JSON media type on every POST and PUT, even a body-less one (CSRF).
    headers: {
      ...(body === undefined && method !== 'POST' && method !== 'PUT'
        ? {}
        : { 'content-type': 'application/json' }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : null, text };
};

test('after a migration: /api/metrics shows its write lock, the audit lists it, and no log line holds the token', async () => {
  await send('PUT', '/routes/conv-m', { location: SOURCE });
  const started = await send('POST', '/migrations', { resourceId: 'conv-m', target: TARGET });
  const statusUrl = (started.body as { statusUrl: string }).statusUrl;
  const migrationId = (started.body as { migrationId: string }).migrationId;
  // The journal holds the lock seed only; the token derives from it under the host's key ring.
  const record = await host.state.get(migrationId);
  const { token, idempotencyKey } = host.services.keyring.credentials(record!.input.lock);
  const tokens = new Set([token, idempotencyKey]);
  let status: MigrationStatus;
  for (;;) {
    for (const entry of host.state.journal(migrationId).values()) assertNoSecrets(entry, [...tokens]);
    status = (await (await fetch(`${host.url}${statusUrl}`)).json()) as MigrationStatus;
    if (status.status !== 'Running' && status.status !== 'Pending') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  expect(status.status).toBe('Completed');
  const metrics = (await send('GET', '/metrics')).body as unknown as MetricsSnapshot;
  expect(metrics.writeLockSeconds.count).toBe(1);
  expect(metrics.migrationSeconds.count).toBe(1);
  expect(metrics.convergenceWaitSeconds.max).toBeGreaterThanOrEqual(1);
  expect(metrics.events).toMatchObject({ LockAcquired: 3, LockReleased: 1, MigrationSwapped: 1 });
  const audit = (await send('GET', '/routes/conv-m/audit')).body as {
    items: { op: string; migrationId: string }[];
  };
  expect(audit.items).toEqual([expect.objectContaining({ op: 'swap', migrationId: status.migrationId })]);
  // the telemetry also went to structured log lines
  expect(logs.some((l) => l.includes('"telemetry":"metric"') && l.includes('writeLockSeconds'))).toBe(true);
  expect(logs.length).toBeGreaterThan(0);
  for (const line of logs) assertNoSecrets(line, [...tokens]);
});

test('force-release over HTTP: actor from the body under ROUTELOCK_AUTH=none, two approvals, then released', async () => {
  await send('PUT', '/routes/conv-f', { location: SOURCE });
  const grant = await send('POST', '/routes/conv-f/prelock', {
    migrationId: 'm-f',
    owner: 'o',
    target: TARGET,
  });
  const token = (grant.body as { token: string }).token;
  // Under ROUTELOCK_AUTH=none every caller is the one local identity: x-ms-client-principal-name is never read.
  const byHeader = await send(
    'POST',
    '/ops/routes/conv-f/force-release',
    { reason: 'stuck' },
    { 'x-ms-client-principal-name': 'mallory@contoso' },
  );
  expect(byHeader).toMatchObject({ status: 201, body: { requestedBy: 'local' } });
  const opened = await send('POST', '/ops/routes/conv-f/force-release', { reason: 'stuck', actor: 'alice' });
  expect(opened.status).toBe(201);
  const id = (opened.body as { id: string }).id;
  expect((await send('POST', `/ops/force-release/${id}/approve`, { actor: 'alice' })).body).toMatchObject({
    code: 'Forbidden',
  });
  expect((await send('POST', `/ops/force-release/${id}/approve`, { actor: 'bob' })).body).toMatchObject({
    released: false,
  });
  expect((await send('POST', `/ops/force-release/${id}/approve`, { actor: 'bob' })).body).toMatchObject({
    code: 'DuplicateApproval',
  });
  // a display-name header is not an identity: this approval is the local identity's
  const done = await send('POST', `/ops/force-release/${id}/approve`, undefined, {
    'x-ms-client-principal-name': 'carol@contoso',
  });
  expect(done.body).toMatchObject({ released: true, route: { location: SOURCE, lock: null } });
  expect((await send('GET', `/ops/force-release/${id}`)).body).toMatchObject({
    status: 'released',
    approvals: [{ actor: 'bob' }, { actor: 'local' }],
  });
  expect(
    (await send('POST', '/ops/routes/conv-f/force-release', { reason: 'again', actor: 'alice' })).body,
  ).toMatchObject({ code: 'NotLocked' });
  await new Promise((r) => setTimeout(r, 50)); // the change stream is asynchronous
  const ops = ((await send('GET', '/routes/conv-f/audit')).body as { items: { op: string }[] }).items.map(
    (r) => r.op,
  );
  expect(ops).toEqual([
    'forceReleaseRequested',
    'forceReleaseRequested',
    'forceReleaseApproved',
    'forceReleaseApproved',
    'forceRelease',
  ]);
  // the old holder's token is dead
  expect(
    (await send('POST', '/routes/conv-f/swap', { token, writeAt: new Date().toISOString() })).status,
  ).toBe(410);
  for (const line of logs) assertNoSecrets(line, [token]);
});

test('POST /api/ops/probe runs the probe and the metrics count it', async () => {
  const result = await send('POST', '/ops/probe');
  expect(result.body).toMatchObject({ success: true, resourceId: 'probe-local' });
  expect(((await send('GET', '/metrics')).body as { probes: { runs: number } }).probes.runs).toBe(1);
}, 20_000);
