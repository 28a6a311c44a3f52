import type { DurableClient } from 'durable-functions';
import { DurableMigrationService } from '../../functions/durable/service';
import { parseConfig } from '../../shared/config';
import { CANCEL_EVENT, type MigrationInput, type MigrationStatus } from '../../shared/migration/types';
import { migrationSettings } from '../../shared/migration/workflow';
import { Router } from '../../shared/core/router';
import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import { ManualClock } from '../../testkit/clock';

/**
 * DurableMigrationService.cancel: the `cancel` external event (never a terminate), the request kept on
 * the record so the status shows it at once, and the answers shared with the in-process runner.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const operator = { id: 'operator-1' };

class FakeDurableClient {
  instances = new Map<string, { runtimeStatus: string; input: MigrationInput; customStatus?: unknown }>();
  raised: { instanceId: string; name: string; data: unknown }[] = [];
  failRaise = false;
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
  async raiseEvent(instanceId: string, name: string, data: unknown) {
    if (this.failRaise) throw new Error('DurableClient error: HTTP 500');
    this.raised.push({ instanceId, name, data });
  }
  async terminate() {
    throw new Error('cancel must never terminate an orchestration');
  }
}

async function setup() {
  const config = parseConfig({});
  const clock = new ManualClock();
  const store = new SqliteStore(':memory:');
  const router = new Router({ store, timing: config.timing, clock: clock.now });
  await router.createRoute('conv-d', SOURCE);
  const records = new SqliteMigrationState(':memory:');
  const client = new FakeDurableClient();
  const service = new DurableMigrationService(
    client as unknown as DurableClient,
    records,
    router,
    migrationSettings(config),
    clock.now,
    TokenKeyring.ephemeral(),
  );
  const { migrationId, instanceId } = await service.start({ resourceId: 'conv-d', target: TARGET });
  const instance = client.instances.get(instanceId)!;
  return { clock, records, client, service, migrationId, instanceId, instance };
}

const published = (input: MigrationInput, patch: Partial<MigrationStatus>): MigrationStatus => ({
  migrationId: input.migrationId,
  resourceId: input.resourceId,
  status: 'Running',
  phase: 'hardDelete',
  target: input.target,
  timeline: { prelockAt: null, hardDeleteAt: null, writeAt: null, swappedAt: null },
  ...patch,
});

describe('DurableMigrationService.cancel', () => {
  test('a running migration: raises the cancel event with who and when; the status shows the request at once; a second cancel answers the same', async () => {
    const { client, service, migrationId, instanceId, instance, clock } = await setup();
    instance.customStatus = published(instance.input, {});
    const answered = await service.cancel(migrationId, operator);
    const requestedAt = new Date(clock.now()).toISOString();
    expect(client.raised).toEqual([
      { instanceId, name: CANCEL_EVENT, data: { requestedAt, by: 'operator-1' } },
    ]);
    expect(answered).toMatchObject({
      status: 'Running',
      phase: 'hardDelete',
      cancelRequestedAt: requestedAt,
    });
    expect(await service.status(migrationId)).toEqual(answered);
    clock.advance(5000);
    expect(await service.cancel(migrationId, { id: 'operator-2' })).toEqual(answered);
    expect(client.raised).toHaveLength(1);
  });

  test('after the swap: 409 AlreadySwapped, and no event', async () => {
    const { client, service, migrationId, instance } = await setup();
    instance.customStatus = published(instance.input, { phase: 'swapped', status: 'Completed' });
    await expect(service.cancel(migrationId, operator)).rejects.toMatchObject({ code: 'AlreadySwapped' });
    expect(client.raised).toHaveLength(0);
  });

  test('an ended migration answers its status unchanged', async () => {
    const { client, records, service, migrationId, instance } = await setup();
    const failed = published(instance.input, { status: 'Failed', phase: 'released', error: 'x' });
    await records.saveStatus(migrationId, failed, true);
    // unchanged but for `stopped`, which an undated failure takes from its record's claim
    expect(await service.cancel(migrationId, operator)).toEqual({
      ...failed,
      stopped: { phase: 'starting', code: 'InternalError', reason: 'x', at: expect.any(String) },
    });
    expect(client.raised).toHaveLength(0);
  });

  test('an instance of a workflow version this code does not run: 409 MigrationNotCancellable, nothing raised', async () => {
    const { client, records, service, migrationId, instance } = await setup();
    const record = (await records.get(migrationId))!;
    const db = (
      records as unknown as { db: { prepare: (sql: string) => { run: (...a: unknown[]) => void } } }
    ).db;
    db.prepare('UPDATE migrations SET record = ? WHERE migration_id = ?').run(
      JSON.stringify({ ...record, input: { ...record.input, workflowVersion: 2 } }),
      migrationId,
    );
    instance.customStatus = published(instance.input, {});
    await expect(service.cancel(migrationId, operator)).rejects.toMatchObject({
      code: 'MigrationNotCancellable',
    });
    expect(client.raised).toHaveLength(0);
  });

  test('unknown: 404; a task hub that refuses the event: OrchestrationStatusUnavailable (retriable)', async () => {
    const { client, service, migrationId } = await setup();
    await expect(service.cancel('m-none', operator)).rejects.toMatchObject({ code: 'NotFound' });
    client.failRaise = true;
    await expect(service.cancel(migrationId, operator)).rejects.toMatchObject({
      code: 'OrchestrationStatusUnavailable',
    });
    // a refused event is not taken for a request: the retry raises it
    expect((await service.status(migrationId)).cancelRequestedAt).toBeUndefined();
    client.failRaise = false;
    await service.cancel(migrationId, operator);
    expect(client.raised).toHaveLength(1);
  });
});
