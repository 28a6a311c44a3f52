import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { handleMigrationMessage } from '../../functions/migrationQueue';
import type { Services } from '../../functions/services';
import type { PreflightReport } from '../../shared/migration/preflight';
import { newMigrationInput, newMigrationRecord } from '../../shared/migration/records';
import { migrationSettings } from '../../shared/migration/workflow';
import type { MigrationService } from '../../shared/migration/service';
import type { TelemetrySink } from '../../shared/migration/telemetry/sink';
import { call, handlerServices } from '../support/handlers';

/**
 * POST /api/migrations {dryRun: true} through the registered handler over a SQLite file (docs/design.md
 * §6.2): 200 with the preflight report, nothing written anywhere, the participants asked `step: "preflight"`.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const starter = { oid: '00000000-0000-4000-8000-00000000000b', roles: ['Migrations.Write'] };
const reader = { oid: '00000000-0000-4000-8000-00000000000a', roles: ['Ops.Read'] };

interface Fake {
  url: string;
  bodies: Record<string, unknown>[];
  server: Server;
}

async function participant(status: number, body: unknown = { ok: true }): Promise<Fake> {
  const bodies: Record<string, unknown>[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString()));
    req.on('end', () => {
      bodies.push(JSON.parse(text) as Record<string, unknown>);
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/migrate`, bodies, server };
}

/** A port nothing listens on: a participant that is down. */
async function downUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/migrate`;
}

const events: unknown[] = [];
const sink: TelemetrySink = {
  event: (e) => events.push(e),
  metric: (m) => events.push(m),
  availability: (a) => events.push(a),
  flush: () => Promise.resolve(),
};
const refusingMigrations = {
  start: () => Promise.reject(new Error('a dry run must never start a migration')),
} as unknown as MigrationService;

let dir: string;
let services: Services;
let fakes: Fake[];

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dryrun-'));
  fakes = [
    await participant(200, { reachable: true, items: 3 }),
    await participant(404),
    await participant(500),
  ];
  const participants = [
    { name: 'ready', url: fakes[0]!.url },
    { name: 'absent', url: fakes[1]!.url },
    { name: 'broken', url: fakes[2]!.url },
    { name: 'down', url: await downUrl() },
    { name: 'elsewhere', url: fakes[0]!.url, resources: ['other-*'] },
  ];
  ({ services } = await handlerServices(
    {
      ROUTELOCK_SQLITE_PATH: join(dir, 'routelock.db'),
      ROUTELOCK_PARTICIPANTS: JSON.stringify(participants),
      ROUTELOCK_RETRY_ATTEMPTS: '1',
    },
    undefined,
    { sink, migrations: () => refusingMigrations },
  ));
  await services.router.createRoute('r-1', SOURCE);
  events.length = 0;
});

afterEach(async () => {
  for (const f of fakes) await new Promise<void>((resolve) => f.server.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

async function snapshot() {
  const stored = await services.store.read('r-1', { from: 'writeRegion' }).catch(() => null);
  return {
    doc: stored === null ? null : { etag: stored.etag, doc: stored.doc },
    records: (await services.records.list({ limit: 100 })).records,
    audit: await services.audit.list('r-1', 100),
    db: readFileSync(join(dir, 'routelock.db')).length,
  };
}

test('a dry run writes nothing and reports each check and participant', async () => {
  const before = await snapshot();
  const counters = { ...services.store.counters };
  const res = await call('startMigration', {
    body: { resourceId: 'r-1', target: TARGET, dryRun: true },
    principal: starter,
  });
  expect(res.status).toBe(200);
  const report = res.body as PreflightReport;
  expect(report).toMatchObject({ dryRun: true, resourceId: 'r-1', target: TARGET, ok: false });
  const byName = Object.fromEntries(report.checks.map((c) => [c.participant ?? c.check, c]));
  for (const route of [
    'routeExists',
    'notLocked',
    'notAtTarget',
    'regionAllowed',
    'noRetiredSourceWindow',
    'noMigrationRunning',
  ])
    expect(byName[route]?.ok).toBe(true);
  expect(byName.ready).toMatchObject({ ok: true, outcome: 'ready' });
  expect(byName.ready?.detail).toContain('"items":3');
  expect(byName.absent).toMatchObject({ ok: true, outcome: 'notImplemented' });
  expect(byName.broken).toMatchObject({ ok: false, outcome: 'transient' });
  expect(byName.down).toMatchObject({ ok: false, outcome: 'transient' });
  expect(byName.elsewhere).toBeUndefined(); // out of scope: not asked
  expect(report.timing.bulkCopyDuration).toBe('unknown');
  expect(typeof report.timing.convergenceWaitSeconds).toBe('number');
  // the participants were asked `preflight`, with no lock-derived field
  expect(fakes[0]!.bodies).toEqual([{ resourceId: 'r-1', from: SOURCE, to: TARGET, step: 'preflight' }]);
  // nothing written: the document, its ETag, the records, the audit, the telemetry, the store's writes
  expect(await snapshot()).toEqual(before);
  expect(events).toEqual([]);
  const after = services.store.counters;
  expect([after.creates, after.replaces, after.deletes]).toEqual([
    counters.creates,
    counters.replaces,
    counters.deletes,
  ]);
});

test('a live lock and a running migration of the resource are failing checks naming them', async () => {
  await services.router.prelock('r-1', {
    migrationId: 'm-rival',
    owner: 'ops-7',
    target: { region: 'northeurope' },
  });
  const settings = migrationSettings(services.config);
  const input = newMigrationInput({
    migrationId: 'm-running',
    instanceId: 'migrate-r-1',
    resourceId: 'r-1',
    target: TARGET,
    settings,
    lock: services.keyring.newSeed(),
  });
  expect(await services.records.create(newMigrationRecord(input, new Date().toISOString()))).toBe(true);
  const before = await snapshot();
  const res = await call('startMigration', { body: { resourceId: 'r-1', target: TARGET, dryRun: true } });
  expect(res.status).toBe(200);
  const checks = (res.body as PreflightReport).checks;
  const locked = checks.find((c) => c.check === 'notLocked');
  expect(locked?.ok).toBe(false);
  expect(locked?.detail).toMatch(/ops-7 \(migration m-rival\), phase prelock until \d{4}-/);
  const running = checks.find((c) => c.check === 'noMigrationRunning');
  expect(running?.ok).toBe(false);
  expect(running?.detail).toContain('m-running');
  expect(await snapshot()).toEqual(before);
});

test('a missing route is a failing check in a 200 report; participants are not asked', async () => {
  const res = await call('startMigration', { body: { resourceId: 'nope', target: TARGET, dryRun: true } });
  expect(res.status).toBe(200);
  const report = res.body as PreflightReport;
  expect(report.ok).toBe(false);
  expect(report.checks.find((c) => c.check === 'routeExists')?.ok).toBe(false);
  expect(fakes[0]!.bodies).toEqual([]);
});

test('a bad dryRun is 400 and a reader may not dry-run (Migrations.Write)', async () => {
  const bad = await call('startMigration', { body: { resourceId: 'r-1', target: TARGET, dryRun: 'yes' } });
  expect(bad.status).toBe(400);
  expect((bad.body as { errors: string[] }).errors.some((e) => e.startsWith('dryRun:'))).toBe(true);
  const forbidden = await call('startMigration', {
    body: { resourceId: 'r-1', target: TARGET, dryRun: true },
    principal: reader,
  });
  expect(forbidden.status).toBe(403);
});

test('the queue refuses a dry run: poison with the reason, nothing started', async () => {
  const outcome = await handleMigrationMessage(
    JSON.stringify({ resourceId: 'r-1', target: TARGET, dryRun: true }),
    refusingMigrations,
  );
  expect(outcome.kind).toBe('poison');
  expect((outcome as { reason: string }).reason).toContain('queue cannot answer');
  const bad = await handleMigrationMessage(
    { resourceId: 'r-1', target: TARGET, dryRun: 1 },
    refusingMigrations,
  );
  expect(bad.kind).toBe('poison');
});
