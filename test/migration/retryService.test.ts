import type { DurableClient } from 'durable-functions';
import { DurableMigrationService, ORCHESTRATOR } from '../../functions/durable/service';
import { parseConfig } from '../../shared/config';
import { newMigrationInput, newMigrationRecord } from '../../shared/migration/records';
import { InProcessMigrationService } from '../../shared/migration/inProcessService';
import { type HttpCall, type MigrationInput, WORKFLOW_VERSION } from '../../shared/migration/types';
import { migrationSettings } from '../../shared/migration/workflow';
import { Router } from '../../shared/core/router';
import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import { ManualClock } from '../../testkit/clock';
import { copiesOnly, virtualRunner } from '../support/migrationHarness';

/**
 * `retry(migrationId, actor)` (docs/design.md §6.3): a new attempt of an ended, Failed migration, same id,
 * through the per-resource claim a start takes, its status keeping the earlier attempts; on both
 * MigrationService implementations.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const OTHER = { region: 'northeurope' };
const OPERATOR = { id: 'operator-1' };

const code = (promise: Promise<unknown>) =>
  promise.then(
    () => 'resolved',
    (error: { code?: string }) => error.code,
  );

describe('in-process', () => {
  function setup() {
    let refuse = true;
    const h = virtualRunner({
      env: {
        ROUTELOCK_PROFILE: 'dev',
        ROUTELOCK_MIGRATION_ATTEMPTS: '1',
        ROUTELOCK_REGIONS: 'westeurope,eastus,northeurope',
        ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p', url: 'https://p.test/migrate' }]),
      },
      http: copiesOnly((_call: HttpCall) =>
        Promise.resolve(refuse ? { status: 422, body: 'no' } : { status: 200, body: null }),
      ),
    });
    const service = new InProcessMigrationService(h.runner, h.router);
    return { h, service, accept: () => (refuse = false) };
  }

  test('a Failed migration retried by an operator: the same id, attempt 2, attempt 1 kept', async () => {
    const { h, service, accept } = setup();
    await h.router.createRoute('r-1', SOURCE);
    const { migrationId } = await service.start({ resourceId: 'r-1', target: TARGET });
    await h.settle();
    const failed = await service.status(migrationId);
    expect(failed).toMatchObject({ status: 'Failed', attempt: 1 });
    accept();
    expect(await service.retry(migrationId, OPERATOR)).toEqual({
      migrationId,
      instanceId: 'migrate-r-1',
      created: true,
    });
    // running again: a second retry, or a retry of a running migration, is refused
    expect(await code(service.retry(migrationId, OPERATOR))).toBe('MigrationNotRetriable');
    await h.settle();
    const status = await service.status(migrationId);
    expect(status).toMatchObject({ status: 'Completed', attempt: 2 });
    expect(status.attempts?.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'Failed'],
      [2, 'Completed'],
    ]);
    expect(status.attempts?.[0]?.reason).toBe(failed.error);
    // Completed is not retriable; an unknown id is not found
    expect(await code(service.retry(migrationId, OPERATOR))).toBe('MigrationNotRetriable');
    expect(await code(service.retry('m-unknown', OPERATOR))).toBe('NotFound');
  });

  test('a retry while another migration of the resource runs: MigrationInProgress; concurrent retries: one wins', async () => {
    const { h, service } = setup();
    await h.router.createRoute('r-2', SOURCE);
    const { migrationId } = await service.start({ resourceId: 'r-2', target: TARGET });
    await h.settle();
    const other = await service.start({ resourceId: 'r-2', target: OTHER });
    expect(await code(service.retry(migrationId, OPERATOR))).toBe('MigrationInProgress');
    await h.settle();
    expect((await service.status(other.migrationId)).status).toBe('Failed');
    const outcomes = await Promise.all(
      Array.from({ length: 10 }, () => code(service.retry(migrationId, OPERATOR))),
    );
    expect(outcomes.filter((o) => o === 'resolved')).toHaveLength(1);
    expect(outcomes.filter((o) => o !== 'resolved')).toEqual(Array(9).fill('MigrationNotRetriable'));
    await h.settle();
  });
});

describe('Durable Functions', () => {
  class FakeClient {
    instances = new Map<string, { runtimeStatus: string; input: MigrationInput }>();
    async getStatus(instanceId: string) {
      const instance = this.instances.get(instanceId);
      if (!instance) throw new Error('Durable Functions extension replied with HTTP 404 response.');
      return { instanceId, ...instance };
    }
    async startNew(name: string, options: { instanceId: string; input: MigrationInput }) {
      expect(name).toBe(ORCHESTRATOR);
      if (this.instances.get(options.instanceId)?.runtimeStatus === 'Running') throw new Error('exists');
      this.instances.set(options.instanceId, { runtimeStatus: 'Running', input: options.input });
      return options.instanceId;
    }
  }

  test('retry: the record reopened under the claim, the instance started anew with a fresh seed and the earlier attempts', async () => {
    const config = parseConfig({});
    const clock = new ManualClock();
    const router = new Router({
      store: new SqliteStore(':memory:'),
      timing: config.timing,
      clock: clock.now,
    });
    await router.createRoute('conv-r', SOURCE);
    const records = new SqliteMigrationState(':memory:');
    const client = new FakeClient();
    const keyring = TokenKeyring.ephemeral();
    const settings = migrationSettings(config);
    const service = new DurableMigrationService(
      client as unknown as DurableClient,
      records,
      router,
      settings,
      clock.now,
      keyring,
    );
    const input = newMigrationInput({
      migrationId: 'm-r',
      instanceId: 'migrate-conv-r',
      resourceId: 'conv-r',
      target: TARGET,
      settings,
      lock: keyring.newSeed(),
    });
    const record = newMigrationRecord(input, new Date(clock.now()).toISOString());
    await records.create(record);
    const attempts = [1, 2, 3].map((attempt) => ({
      attempt,
      startedAt: record.createdAt,
      endedAt: record.createdAt,
      outcome: 'Failed' as const,
      reason: `store down (${attempt})`,
    }));
    await records.saveStatus('m-r', { ...record.status, status: 'Failed', attempt: 3, attempts }, true);
    client.instances.set('migrate-conv-r', { runtimeStatus: 'Completed', input });

    expect(await service.retry('m-r', OPERATOR)).toEqual({
      migrationId: 'm-r',
      instanceId: 'migrate-conv-r',
      created: true,
    });
    const started = client.instances.get('migrate-conv-r')!;
    expect(started.runtimeStatus).toBe('Running');
    expect(started.input).toMatchObject({
      migrationId: 'm-r',
      earlierAttempts: attempts,
      workflowVersion: WORKFLOW_VERSION,
    });
    expect(started.input.lock.nonce).not.toBe(input.lock.nonce);
    expect(await records.get('m-r')).toMatchObject({
      done: false,
      status: { status: 'Pending', attempt: 4, attempts },
    });
    expect(await code(service.retry('m-r', OPERATOR))).toBe('MigrationNotRetriable');
    // a start of the resource joins the retried migration (the claim holds it)
    expect(await service.start({ resourceId: 'conv-r', target: TARGET })).toMatchObject({
      migrationId: 'm-r',
      created: false,
    });
  });
});
