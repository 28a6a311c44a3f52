import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DurableClient } from 'durable-functions';
import { DurableMigrationService } from '../../functions/durable/service';
import { parseConfig } from '../../shared/config';
import { InProcessMigrationService } from '../../shared/migration/inProcessService';
import type { MigrationInput } from '../../shared/migration/types';
import { migrationSettings } from '../../shared/migration/workflow';
import { Router } from '../../shared/core/router';
import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { ManualClock } from '../../testkit/clock';
import type { PreflightReport } from '../../shared/migration/types';
import { newMigrationInput, newMigrationRecord } from '../../shared/migration/records';
import { call, handlerServices } from '../support/handlers';
import { virtualRunner } from '../support/migrationHarness';

/**
 * A start that names a cutover window must not silently join a running
 * migration of the resource that has no window, or another one: the caller asked that the write lock be
 * taken only inside its window, and the migration it joined takes it whenever. Same window (a retried
 * request): it joins, as a repeated start always did; no window on the second start: it joins.
 */
const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const nights = { daily: { start: '22:00', end: '04:00', timeZone: 'Europe/Berlin' } };

async function running(window?: typeof nights) {
  const h = virtualRunner();
  const service = new InProcessMigrationService(h.runner, h.router);
  await h.router.createRoute('r-1', SOURCE);
  const first = await service.start({ resourceId: 'r-1', target: TARGET, ...(window ? { window } : {}) });
  expect(first.created).toBe(true);
  return { h, service, first };
}

test('a start with a window does not join a running migration without one: 409 MigrationInProgress', async () => {
  const { service } = await running();
  await expect(service.start({ resourceId: 'r-1', target: TARGET, window: nights })).rejects.toMatchObject({
    code: 'MigrationInProgress',
  });
});

test('nor one with another window', async () => {
  const { service } = await running(nights);
  const other = { daily: { ...nights.daily, start: '23:00' } };
  await expect(service.start({ resourceId: 'r-1', target: TARGET, window: other })).rejects.toMatchObject({
    code: 'MigrationInProgress',
  });
});

test('the same window, or none, joins as before', async () => {
  const { service, first } = await running(nights);
  expect(await service.start({ resourceId: 'r-1', target: TARGET, window: { ...nights } })).toMatchObject({
    migrationId: first.migrationId,
    created: false,
  });
  expect(await service.start({ resourceId: 'r-1', target: TARGET })).toMatchObject({
    migrationId: first.migrationId,
    created: false,
  });
});

/** The Functions runner: the running orchestration's input, or the claim's record, decides alike. */
class FakeDurableClient {
  instances = new Map<string, { runtimeStatus: string; input: MigrationInput }>();
  async getStatus(instanceId: string) {
    const instance = this.instances.get(instanceId);
    if (!instance)
      throw new Error(`Durable Functions extension replied with HTTP 404 response. ${instanceId}`);
    return { instanceId, ...instance };
  }
  async startNew(_name: string, options: { instanceId: string; input: MigrationInput }) {
    this.instances.set(options.instanceId, { runtimeStatus: 'Running', input: options.input });
    return options.instanceId;
  }
}

test.each([
  ['the orchestration runs', false],
  ['only the claim stands (the instance not yet visible)', true],
])('the Functions runner refuses it too (%s)', async (_name, hidden) => {
  const config = parseConfig({});
  const clock = new ManualClock();
  const store = new SqliteStore(':memory:');
  const router = new Router({ store, timing: config.timing, clock: clock.now });
  await router.createRoute('r-1', SOURCE);
  const client = new FakeDurableClient();
  const service = new DurableMigrationService(
    client as unknown as DurableClient,
    new SqliteMigrationState(':memory:'),
    router,
    migrationSettings(config),
    clock.now,
    TokenKeyring.ephemeral(),
  );
  await service.start({ resourceId: 'r-1', target: TARGET, migrationId: 'm-1' });
  if (hidden) client.instances.clear();
  await expect(service.start({ resourceId: 'r-1', target: TARGET, window: nights })).rejects.toMatchObject({
    code: 'MigrationInProgress',
  });
  expect(await service.start({ resourceId: 'r-1', target: TARGET })).toMatchObject({
    migrationId: 'm-1',
    created: false,
  });
});

test('the dry run says so: a start with another window would get 409, not join', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'r19b-'));
  const { services } = await handlerServices({ ROUTELOCK_SQLITE_PATH: join(dir, 'routelock.db') });
  await services.router.createRoute('r-1', SOURCE);
  const input = newMigrationInput({
    migrationId: 'm-running',
    instanceId: 'migrate-r-1',
    resourceId: 'r-1',
    target: TARGET,
    settings: migrationSettings(services.config),
    lock: services.keyring.newSeed(),
  });
  expect(await services.records.create(newMigrationRecord(input, new Date(0).toISOString()))).toBe(true);
  const detail = async (window?: typeof nights) => {
    const res = await call('startMigration', {
      body: { resourceId: 'r-1', target: TARGET, dryRun: true, ...(window ? { window } : {}) },
    });
    return (res.body as PreflightReport).checks.find((c) => c.check === 'noMigrationRunning')?.detail;
  };
  try {
    expect(await detail()).toContain('a start would join it');
    expect(await detail(nights)).toContain('409 MigrationInProgress');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
