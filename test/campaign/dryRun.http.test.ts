import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { handleCampaignMessage } from '../../functions/campaignQueue';
import type { Services } from '../../functions/services';
import type { CampaignService } from '../../shared/campaign/service';
import type { CampaignPreflightReport, CampaignRecord } from '../../shared/campaign/types';
import { countsFrom, emptyHistogram } from '../../shared/campaign/plan';
import { newMigrationInput, newMigrationRecord } from '../../shared/migration/records';
import type { MigrationService } from '../../shared/migration/service';
import { migrationSettings } from '../../shared/migration/workflow';
import type { TelemetrySink } from '../../shared/migration/telemetry/sink';
import type { ManualClock } from '../../testkit/clock';
import { call, handlerServices } from '../support/handlers';

/**
 * POST /api/campaigns {dryRun: true} through the registered handler over SQLite files (docs/design.md §6.2):
 * 200 with the campaign preflight report (each resource's migration preflight, the participants asked
 * once), a bad body a 400 like a create's, and nothing written anywhere, a repeat included.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const starter = { oid: '00000000-0000-4000-8000-00000000000b', roles: ['Migrations.Write'] };
const reader = { oid: '00000000-0000-4000-8000-00000000000a', roles: ['Ops.Read'] };

const events: unknown[] = [];
const sink: TelemetrySink = {
  event: (e) => events.push(e),
  metric: (m) => events.push(m),
  availability: (a) => events.push(a),
  flush: () => Promise.resolve(),
};
const refuse = (what: string) => () => Promise.reject(new Error(`a dry run must never ${what}`));
const refusingMigrations = { start: refuse('start a migration') } as unknown as MigrationService;
const refusingCampaigns = { create: refuse('create a campaign') } as unknown as CampaignService;

let dir: string;
let services: Services;
let clock: ManualClock;
let asked: Record<string, unknown>[];
let participant: Server;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cdry-'));
  asked = [];
  participant = createServer((req, res) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString()));
    req.on('end', () => {
      asked.push(JSON.parse(text) as Record<string, unknown>);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ready":true}');
    });
  });
  await new Promise<void>((resolve) => participant.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(participant.address() as AddressInfo).port}/migrate`;
  ({ services, clock } = await handlerServices(
    {
      ROUTELOCK_SQLITE_PATH: join(dir, 'routelock.db'),
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'store', url }]),
      ROUTELOCK_RETRY_ATTEMPTS: '1',
      ROUTELOCK_MIGRATION_ATTEMPTS: '3',
    },
    undefined,
    { sink, migrations: () => refusingMigrations, campaigns: () => refusingCampaigns },
  ));
  const { router, store } = services;
  for (const id of ['ok-1', 'ok-2', 'locked', 'retired', 'running']) await router.createRoute(id, SOURCE);
  await router.createRoute('there', TARGET);
  await router.prelock('locked', {
    migrationId: 'm-rival',
    owner: 'ops-7',
    target: { region: 'northeurope' },
  });
  const stored = await store.read('retired', { from: 'writeRegion' });
  await store.replace(
    {
      ...stored.doc,
      secondary: {
        location: { region: 'northeurope' },
        role: 'retiredSource',
        writesBlockedUntil: new Date(clock.now() + 600_000).toISOString(),
      },
    },
    stored.etag,
  );
  const input = newMigrationInput({
    migrationId: 'm-running',
    instanceId: 'migrate-running',
    resourceId: 'running',
    target: TARGET,
    settings: migrationSettings(services.config),
    lock: services.keyring.newSeed(),
  });
  expect(await services.records.create(newMigrationRecord(input, new Date(clock.now()).toISOString()))).toBe(
    true,
  );
  events.length = 0;
});

afterEach(async () => {
  await new Promise<void>((resolve) => participant.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

/** Everything a dry run could write: routes, migration records, the campaign and its members, the file. */
async function snapshot(campaignId = 'c-dry') {
  const routes = await services.store.list({ lockedOnly: false, limit: 100 });
  return {
    routes: routes.items,
    records: (await services.records.list({ limit: 100 })).records,
    campaign: await services.campaignRecords.get(campaignId),
    campaigns: (await services.campaignRecords.list({ limit: 100 })).records,
    members: await services.campaignRecords.countMembers(campaignId),
    db: readFileSync(join(dir, 'routelock.db')),
  };
}

const mixed = ['ok-1', 'locked', 'nope', 'there', 'retired', 'running', 'ok-2', 'ok-1'];

test('each resource gets its migration preflight: counts by reason, the skipped named, nothing written', async () => {
  const before = await snapshot();
  const counters = { ...services.store.counters };
  const body = { campaignId: 'c-dry', target: TARGET, resources: mixed, maxConcurrent: 2, dryRun: true };
  const res = await call('startCampaign', { body, principal: starter });
  expect(res.status).toBe(200);
  const report = res.body as CampaignPreflightReport;
  expect(report).toMatchObject({
    dryRun: true,
    campaignId: 'c-dry',
    target: TARGET,
    ok: true,
    source: { kind: 'ids', duplicates: 1 },
    resourceCount: 7,
    wouldStart: 2,
    limits: { maxConcurrent: 2 },
  });
  expect(report.skipped).toEqual({
    count: 5,
    byReason: {
      notLocked: 1,
      routeExists: 1,
      notAtTarget: 1,
      noRetiredSourceWindow: 1,
      noMigrationRunning: 1,
    },
    resources: [
      { resourceId: 'locked', reason: 'notLocked', detail: expect.stringContaining('ops-7') },
      { resourceId: 'nope', reason: 'routeExists', detail: 'no route nope' },
      { resourceId: 'there', reason: 'notAtTarget', detail: expect.any(String) },
      { resourceId: 'retired', reason: 'noRetiredSourceWindow', detail: expect.any(String) },
      { resourceId: 'running', reason: 'noMigrationRunning', detail: expect.stringContaining('m-running') },
    ],
    truncated: false,
  });
  // the participant asked once, about the first resource that would start, as a migration dry run asks
  expect(asked).toEqual([{ resourceId: 'ok-1', from: SOURCE, to: TARGET, step: 'preflight' }]);
  const participantCheck = report.checks.find((c) => c.check === 'participant');
  expect(participantCheck).toMatchObject({
    ok: true,
    participant: 'store',
    resourceId: 'ok-1',
    outcome: 'ready',
  });
  expect(report.checks.find((c) => c.check === 'campaignIdFree')?.ok).toBe(true);
  expect(report.timing).toMatchObject({ bulkCopyDuration: 'unknown', migrationAttempts: 3 });
  expect(report.estimate).toMatchObject({
    migrations: 2,
    waves: 1,
    limitedBy: 'none',
    bulkCopyDuration: 'unknown',
  });
  expect(report.estimate.lowerBoundSeconds).toBe(report.estimate.perMigrationMinimumSeconds);
  // nothing written: the routes, the records, no campaign record or member, no telemetry, no store write
  expect(await snapshot()).toEqual(before);
  expect(events).toEqual([]);
  const after = services.store.counters;
  expect([after.creates, after.replaces, after.deletes]).toEqual([
    counters.creates,
    counters.replaces,
    counters.deletes,
  ]);
  // and again with the same campaignId: the same report, still nothing written
  const again = await call('startCampaign', { body, principal: starter });
  expect(again.body).toEqual(report);
  expect(await snapshot()).toEqual(before);
});

test('a from selection is the routes now at the region, to its limit, as the tick selects them', async () => {
  const res = await call('startCampaign', {
    body: { target: TARGET, from: { region: 'westeurope', limit: 4 }, dryRun: true },
  });
  expect(res.status).toBe(200);
  const report = res.body as CampaignPreflightReport;
  expect(report.source).toEqual({ kind: 'from', region: 'westeurope', limit: 4 });
  expect(report.resourceCount).toBe(4);
  const all = await call('startCampaign', {
    body: { target: TARGET, from: { region: 'westeurope' }, dryRun: true },
  });
  const whole = all.body as CampaignPreflightReport;
  // every route at westeurope ('there' sits at the target region): ok-1, ok-2 start; three skipped
  expect({ count: whole.resourceCount, start: whole.wouldStart, by: whole.skipped.byReason }).toEqual({
    count: 5,
    start: 2,
    by: { notLocked: 1, noRetiredSourceWindow: 1, noMigrationRunning: 1 },
  });
});

test('a failing campaign-wide check: nothing to start, a taken campaign id', async () => {
  const none = await call('startCampaign', {
    body: { target: TARGET, resources: ['nope', 'locked'], dryRun: true },
  });
  const report = none.body as CampaignPreflightReport;
  expect(report.ok).toBe(false);
  expect(report.checks.find((c) => c.check === 'resourcesToStart')?.ok).toBe(false);
  expect(report.timing).toBeNull();
  expect(report.estimate).toMatchObject({ migrations: 0, lowerBoundSeconds: 0 });
  expect(asked).toEqual([]);

  const at = new Date(clock.now()).toISOString();
  const standing: CampaignRecord = {
    campaignId: 'c-taken',
    target: { region: 'northeurope' },
    limits: { maxConcurrent: 10 },
    status: 'Running',
    source: { kind: 'ids' },
    createdAt: at,
    updatedAt: at,
    createdBy: 'oid-alice',
    pages: 0,
    reserved: 0,
    counts: countsFrom({}),
    recentStarts: [],
    writeLockHistogram: emptyHistogram(),
  };
  await services.campaignRecords.create(standing);
  const before = await snapshot('c-taken');
  const taken = await call('startCampaign', {
    body: { campaignId: 'c-taken', target: TARGET, resources: ['ok-1'], dryRun: true },
  });
  const check = (taken.body as CampaignPreflightReport).checks.find((c) => c.check === 'campaignIdFree');
  expect(check).toMatchObject({ ok: false, detail: expect.stringContaining('409 CampaignExists') });
  expect(await snapshot('c-taken')).toEqual(before);
});

test('a body a create refuses is the same 400; a reader may not dry-run (Migrations.Write)', async () => {
  const cases: [Record<string, unknown>, string][] = [
    [{ target: TARGET, resources: ['ok-1'], from: { region: 'westeurope' } }, 'resources'],
    [{ target: TARGET, resources: [] }, 'resources'],
    [{ target: TARGET, resources: ['ok-1'], maxConcurrent: 0 }, 'maxConcurrent'],
    [{ target: TARGET, resources: ['ok-1'], dryRun: 'yes' }, 'dryRun'],
    [{ target: TARGET, resources: ['probe-1'] }, 'resources.0'],
  ];
  for (const [body, field] of cases) {
    const res = await call('startCampaign', { body: { dryRun: true, ...body } });
    expect({ field, status: res.status }).toEqual({ field, status: 400 });
    expect((res.body as { errors: string[] }).errors.some((e) => e.startsWith(`${field}:`))).toBe(true);
  }
  // beyond the zod schema, the create's own rule: no more attempts than ROUTELOCK_MIGRATION_ATTEMPTS
  const attempts = await call('startCampaign', {
    body: { target: TARGET, resources: ['ok-1'], migrationAttempts: 5, dryRun: true },
  });
  expect(attempts.status).toBe(400);
  expect((attempts.body as { detail: string }).detail).toContain('migrationAttempts');
  const forbidden = await call('startCampaign', {
    body: { target: TARGET, resources: ['ok-1'], dryRun: true },
    principal: reader,
  });
  expect(forbidden.status).toBe(403);
});

test('a window is validated as a create validates it, and checked once: reachable or not', async () => {
  const at = (ms: number) => new Date(clock.now() + ms).toISOString();
  const body = (window: unknown) => ({ target: TARGET, resources: ['ok-1', 'ok-2'], window, dryRun: true });
  const open = await call('startCampaign', { body: body({ notAfter: at(7 * 86_400_000) }) });
  expect(open.status).toBe(200);
  const report = open.body as CampaignPreflightReport;
  expect(report.window).toEqual({ notAfter: at(7 * 86_400_000) });
  expect(report.checks.filter((c) => c.check === 'windowReachable')).toEqual([
    expect.objectContaining({ ok: true }),
  ]);
  expect(report.timing?.nextWriteSlotAt).toEqual(expect.any(String));
  // a slot a month away is past a new lock's cap: not ok, and no resource blamed for it
  const far = (await call('startCampaign', { body: body({ notBefore: at(30 * 86_400_000) }) }))
    .body as CampaignPreflightReport;
  expect(far.ok).toBe(false);
  expect(far.checks.find((c) => c.check === 'windowReachable')).toMatchObject({
    ok: false,
    detail: expect.stringContaining('WindowUnreachable'),
  });
  expect(far).toMatchObject({ wouldStart: 2, skipped: { count: 0 } });
  // a malformed window, or one already over by the host's clock: the create's 400
  const malformed = await call('startCampaign', {
    body: body({ daily: { start: '25:00', end: '04:00', timeZone: 'Europe/Amsterdam' } }),
  });
  expect(malformed.status).toBe(400);
  const over = await call('startCampaign', { body: body({ notAfter: at(-60_000) }) });
  expect(over.status).toBe(400);
  expect((over.body as { detail: string }).detail).toContain('window.notAfter');
});

test("openapi.yaml's CampaignPreflightReport names every field the report has, and requires those it always has", async () => {
  const spec = parse(readFileSync(join(__dirname, '../../openapi.yaml'), 'utf8')) as {
    components: { schemas: Record<string, { required: string[]; properties: Record<string, unknown> }> };
  };
  const schema = spec.components.schemas.CampaignPreflightReport!;
  const res = await call('startCampaign', {
    body: {
      campaignId: 'c-doc',
      target: TARGET,
      resources: ['ok-1'],
      window: { notAfter: new Date(clock.now() + 86_400_000).toISOString() },
      dryRun: true,
    },
  });
  const keys = Object.keys(res.body as object).sort();
  expect(keys).toEqual(Object.keys(schema.properties).sort());
  const minimal = await call('startCampaign', {
    body: { target: TARGET, from: { region: 'westeurope' }, dryRun: true },
  });
  expect(Object.keys(minimal.body as object).sort()).toEqual([...schema.required].sort());
});

test('the queue refuses a campaign dry run: poison with the reason, nothing created', async () => {
  const outcome = await handleCampaignMessage(
    { target: TARGET, resources: ['ok-1'], dryRun: true },
    'msg-1',
    refusingCampaigns,
  );
  expect(outcome).toEqual({ kind: 'poison', reason: expect.stringContaining('queue cannot answer') });
});
