import type { DurableClient } from 'durable-functions';
import { DurableMigrationService } from '../../functions/durable/service';
import { parseConfig } from '../../shared/config';
import { Router } from '../../shared/core/router';
import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { ManualClock } from '../../testkit/clock';
import { newMigrationInput, newMigrationRecord } from '../../shared/migration/records';
import { InProcessMigrationService } from '../../shared/migration/inProcessService';
import { pendingStatus } from '../../shared/migration/types';
import { migrationSettings } from '../../shared/migration/workflow';
import { virtualRunner } from '../support/migrationHarness';

/**
 * A retry keeps the migration's cutover window (retryRecord). A window
 * already over can only fail the retry again (WindowClosed, never retried): the retry must be refused
 * up front, a 400 naming the window, nothing written (the record stays Failed, no attempt started), as
 * a start with that window is.
 */
test('a retry of a migration whose window is over: 400 window.notAfter, nothing reopened', async () => {
  const h = virtualRunner();
  const service = new InProcessMigrationService(h.runner, h.router);
  await h.router.createRoute('r-1', { region: 'westeurope' });
  const notAfter = new Date(h.clock.now() + 3_600_000).toISOString();
  const input = newMigrationInput({
    migrationId: 'm-1',
    instanceId: 'migrate-r-1',
    resourceId: 'r-1',
    target: { region: 'eastus' },
    settings: migrationSettings(h.config),
    lock: h.keyring.newSeed(),
    window: { notAfter },
  });
  await h.state.create(newMigrationRecord(input, new Date(h.clock.now()).toISOString()));
  await h.state.saveStatus('m-1', { ...pendingStatus(input), status: 'Failed', error: 'boom' }, true);
  h.clock.advance(2 * 3_600_000);
  await expect(service.retry('m-1', { id: 'op', kind: 'user' } as never)).rejects.toMatchObject({
    code: 'BadRequest',
    message: expect.stringContaining('window.notAfter'),
  });
  const record = await h.state.get('m-1');
  expect(record?.status.status).toBe('Failed');
  expect(h.runner.activeCount).toBe(0);
});

test('the Functions runner refuses it alike: nothing started', async () => {
  const config = parseConfig({});
  const clock = new ManualClock();
  const store = new SqliteStore(':memory:');
  const router = new Router({ store, timing: config.timing, clock: clock.now });
  await router.createRoute('r-1', { region: 'westeurope' });
  const records = new SqliteMigrationState(':memory:');
  let starts = 0;
  const client = { startNew: async () => (starts += 1), getStatus: async () => null };
  const service = new DurableMigrationService(
    client as unknown as DurableClient,
    records,
    router,
    migrationSettings(config),
    clock.now,
    TokenKeyring.ephemeral(),
  );
  const input = newMigrationInput({
    migrationId: 'm-1',
    instanceId: 'migrate-r-1',
    resourceId: 'r-1',
    target: { region: 'eastus' },
    settings: migrationSettings(config),
    lock: TokenKeyring.ephemeral().newSeed(),
    window: { notAfter: new Date(clock.now() + 3_600_000).toISOString() },
  });
  await records.create(newMigrationRecord(input, new Date(clock.now()).toISOString()));
  await records.saveStatus('m-1', { ...pendingStatus(input), status: 'Failed', error: 'boom' }, true);
  clock.advance(2 * 3_600_000);
  await expect(service.retry('m-1', { id: 'op', kind: 'user' } as never)).rejects.toMatchObject({
    code: 'BadRequest',
  });
  expect(starts).toBe(0);
  expect((await records.get('m-1'))?.status.status).toBe('Failed');
});
