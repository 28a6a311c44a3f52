import type { Container } from '@azure/cosmos';
import { handleMigrationMessage } from '../../functions/migrationQueue';
import type { Services } from '../../functions/services';
import type { PreflightReport } from '../../shared/migration/preflight';
import { InProcessMigrationService } from '../../shared/migration/inProcessService';
import { type MigrationRequest, type MigrationService } from '../../shared/migration/service';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { virtualRunner } from '../support/migrationHarness';
import type { CutoverWindow } from '../../shared/migration/types';
import {
  CosmosCampaignRecords,
  campaignsIndexingPolicy,
  campaignsPartitionKey,
} from '../../shared/campaign/store/cosmos/campaigns';
import { SqliteCampaignRecords } from '../../shared/campaign/store/sqlite/campaigns';
import { SOURCE, TARGET, campaignHarness, operator } from '../campaign/harness';
import { campaignRecord } from '../support/campaignRecord';
import { useCosmosServers } from '../support/cosmosServers';
import { call, handlerServices } from '../support/handlers';
import { watchLocks, writeLocks, writeLocksOutside } from './windowSupport';

/**
 * A cutover window on the requests (docs/design.md §6.10): POST /migrations and POST /campaigns validate it
 * (a bad one is a 400 naming the field, nothing written), the dry run reports it, a campaign keeps it
 * on its record (SQLite and Cosmos alike) and passes it to every member's start.
 */

const servers = useCosmosServers();

describe('POST /migrations and /campaigns with a window', () => {
  let services: Services;
  const started: MigrationRequest[] = [];
  beforeEach(async () => {
    started.length = 0;
    ({ services } = await handlerServices({}));
    await services.router.createRoute('r-1', SOURCE);
  });

  const bad: [string, CutoverWindow | Record<string, unknown>, string][] = [
    ['notBefore not RFC 3339', { notBefore: 'tomorrow' }, 'window.notBefore: must be an RFC 3339'],
    [
      'notAfter before notBefore',
      { notBefore: '2026-02-02T00:00:00Z', notAfter: '2026-02-01T00:00:00Z' },
      'window.notAfter: must be after notBefore',
    ],
    ['bad HH:MM', { daily: { start: '9:00', end: '10:00', timeZone: 'UTC' } }, 'window.daily.start:'],
    ['start = end', { daily: { start: '09:00', end: '09:00', timeZone: 'UTC' } }, 'window.daily.end:'],
    [
      'unknown zone',
      { daily: { start: '09:00', end: '10:00', timeZone: 'Europe/Atlantis' } },
      'window.daily.timeZone: unknown IANA time zone',
    ],
    ['unknown field', { opensAt: '09:00' }, 'window: unknown field(s) opensAt'],
    ['daily without a zone', { daily: { start: '09:00', end: '10:00' } }, 'window.daily.timeZone:'],
  ];

  test.each(bad)('a bad window (%s): 400 naming the field, nothing written', async (_name, window, field) => {
    for (const [name, body] of [
      ['startMigration', { resourceId: 'r-1', target: TARGET, window }],
      ['startCampaign', { target: TARGET, resources: ['r-1'], window }],
    ] as const) {
      const res = await call(name, { body });
      expect(res.status).toBe(400);
      expect((res.body as { errors: string[] }).errors.join('; ')).toContain(field);
    }
    expect((await services.records.list({ limit: 10 })).records).toEqual([]);
    expect((await services.campaignRecords.list({ limit: 10 })).records).toEqual([]);
  });

  test('a notAfter already past (by the host clock): 400 naming it, no record', async () => {
    // the migrations on the in-process runner over the handlers' store (its clock also reads 00:00Z)
    const store = new SqliteStore(':memory:');
    const m = virtualRunner({ store });
    ({ services } = await handlerServices({}, store, {
      migrations: () => new InProcessMigrationService(m.runner, m.router),
    }));
    await services.router.createRoute('r-1', SOURCE);
    const window = { notAfter: '2025-12-31T23:00:00Z' }; // the handler clock reads 2026-01-01T00:00Z
    const res = await call('startMigration', { body: { resourceId: 'r-1', target: TARGET, window } });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toContain('window.notAfter: is already past');
    expect(m.state.activeFor('r-1')).toBeNull();
    // a campaign's create checks it by its clock too (the campaign harness's reads 2026-01-01T00:00Z)
    const c = campaignHarness();
    try {
      await expect(
        c.campaigns.create({ target: TARGET, resources: ['r-1'], window }, operator),
      ).rejects.toMatchObject({
        code: 'BadRequest',
        message: expect.stringMatching(/^window\.notAfter: is already past/),
      });
      expect((await c.records.list({ limit: 10 })).records).toEqual([]);
    } finally {
      c.cleanup();
    }
    expect((await services.records.list({ limit: 10 })).records).toEqual([]);
    expect((await services.campaignRecords.list({ limit: 10 })).records).toEqual([]);
  });

  test('a good window reaches the service as sent; the dry run reports windowReachable and the next slot', async () => {
    const recording = {
      start: (request: MigrationRequest) => {
        started.push(request);
        return Promise.resolve({ migrationId: 'm-1', instanceId: 'migrate-r-1', created: true });
      },
    } as unknown as MigrationService;
    ({ services } = await handlerServices({}, undefined, { migrations: () => recording }));
    await services.router.createRoute('r-1', SOURCE);
    const window = { daily: { start: '22:00', end: '23:00', timeZone: 'Europe/Berlin' } };
    expect(
      (await call('startMigration', { body: { resourceId: 'r-1', target: TARGET, window } })).status,
    ).toBe(202);
    expect(started.map((r) => r.window)).toEqual([window]);

    const dry = await call('startMigration', {
      body: { resourceId: 'r-1', target: TARGET, window, dryRun: true },
    });
    const report = dry.body as PreflightReport;
    expect(report.checks.find((c) => c.check === 'windowReachable')).toMatchObject({ ok: true });
    // 22:00 in Berlin in winter is 21:00Z
    expect(report.timing.nextWriteSlotAt).toBe('2026-01-01T21:00:00.000Z');
    const far = await call('startMigration', {
      body: {
        resourceId: 'r-1',
        target: TARGET,
        window: { notBefore: '2026-02-01T00:00:00Z' },
        dryRun: true,
      },
    });
    const farReport = far.body as PreflightReport;
    expect(farReport.ok).toBe(false);
    expect(farReport.checks.find((c) => c.check === 'windowReachable')?.detail).toMatch(/WindowUnreachable/);
    const none = await call('startMigration', { body: { resourceId: 'r-1', target: TARGET, dryRun: true } });
    expect((none.body as PreflightReport).checks.map((c) => c.check)).not.toContain('windowReachable');
    expect(started).toHaveLength(1); // the dry runs started nothing
  });
});

test('the migrations queue: a bad window goes to the poison queue naming the field; a good one reaches the start', async () => {
  const started: MigrationRequest[] = [];
  const migrations = {
    start: (request: MigrationRequest) => {
      started.push(request);
      return Promise.resolve({ migrationId: 'm-q', instanceId: 'migrate-r-1', created: true });
    },
  } as unknown as MigrationService;
  const message = (window: unknown) => ({ resourceId: 'r-1', target: TARGET, window });
  expect(await handleMigrationMessage(message({ notBefore: 'soon' }), migrations)).toMatchObject({
    kind: 'poison',
    reason: expect.stringContaining('window.notBefore: must be an RFC 3339'),
  });
  const window = { daily: { start: '01:00', end: '05:00', timeZone: 'America/New_York' } };
  expect(await handleMigrationMessage(message(window), migrations)).toMatchObject({ kind: 'started' });
  expect(started.map((r) => r.window)).toEqual([window]);
});

describe('a campaign keeps its window and passes it to every member', () => {
  let containers = 0;
  async function cosmosContainer(): Promise<Container> {
    const store = await servers.stock.connect();
    const container = store.containerNamed(`windowCampaigns${++containers}`);
    await container.database.containers.createIfNotExists({
      id: container.id,
      partitionKey: { paths: [campaignsPartitionKey] },
      indexingPolicy: campaignsIndexingPolicy,
    });
    return container;
  }
  const window: CutoverWindow = {
    notAfter: '2026-01-02T00:00:00Z',
    daily: { start: '00:30', end: '01:00', timeZone: 'UTC' },
  };

  test.each([
    ['sqlite', async () => new SqliteCampaignRecords(':memory:')],
    ['cosmos', async () => new CosmosCampaignRecords(await cosmosContainer())],
  ] as const)('the record round-trips with its window (%s)', async (_name, open) => {
    const records = await open();
    const record = campaignRecord('c-w', { target: TARGET, createdBy: 'operator-1', window });
    await records.create(record);
    expect((await records.get('c-w'))?.record.window).toEqual(window);
  });

  test('each member migration carries the window and takes its write lock only inside it', async () => {
    // dev timing: a 1 h lock cap, a 60 s write budget, the hard-delete lease renewed every 40 s
    const h = campaignHarness();
    try {
      await h.routes(['r-1', 'r-2']);
      const locks = watchLocks(h.parts.activities, h.clock.now);
      const { campaignId } = await h.campaigns.create(
        { target: TARGET, resources: ['r-1', 'r-2'], window },
        operator,
      );
      expect(await h.campaigns.status(campaignId)).toMatchObject({ window });
      await h.settle();
      const records = await h.migrationRecords(campaignId);
      expect(records.map((r) => r.input.window)).toEqual([window, window]);
      expect(records.map((r) => r.status.status)).toEqual(['Completed', 'Completed']);
      const opens = Date.parse('2026-01-01T00:30:00Z');
      expect(writeLocks(locks)).toHaveLength(2);
      expect(writeLocksOutside(locks, [[opens, opens + 30 * 60_000]], 60_000)).toEqual([]);
      expect(locks.filter((c) => c.name === 'renew' && c.phase === 'hardDelete').length).toBeGreaterThan(
        2 * 40,
      );
    } finally {
      h.cleanup();
    }
  });
});
