import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import { InvocationContext } from '@azure/functions';
import type { DurableClient } from 'durable-functions';
import { DurableMigrationService, ORCHESTRATOR } from '../../functions/durable/service';
import { migrationQueueHandler, poisonOutput } from '../../functions/migrationQueue';
import { createServices } from '../../functions/services';
import { ManualClock } from '../../testkit/clock';
import { scratchConfig } from '../support/scratch';
import { RouteLockError } from '../../shared/core/errors';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import type { MigrationInput } from '../../shared/migration/types';
import { migrationSettings } from '../../shared/migration/workflow';
import { Router } from '../../shared/core/router';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import type { TelemetryEvent } from '../../shared/migration/telemetry/lockTelemetry';
import { type TelemetrySink, nullSink } from '../../shared/migration/telemetry/sink';

/**
 * Starting migrations on Durable Functions, against a fake DurableClient that behaves as the extension
 * does with `overridableExistingInstanceStates: NonRunningStates`: getStatus 404s for an unknown
 * instance, and startNew refuses an instance id that is running.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

class FakeDurableClient {
  instances = new Map<string, { runtimeStatus: string; input: MigrationInput; customStatus?: unknown }>();
  starts = 0;
  /** startNew throws (the task hub refused it) when set. */
  failStart = false;
  /** Let two concurrent starts both see "absent" before either has started. */
  delayStart = 0;
  async getStatus(instanceId: string) {
    const instance = this.instances.get(instanceId);
    if (!instance)
      throw new Error(
        `DurableClient error: Durable Functions extension replied with HTTP 404 response. ${instanceId}`,
      );
    return { instanceId, ...instance };
  }
  async startNew(name: string, options: { instanceId: string; input: MigrationInput }) {
    expect(name).toBe(ORCHESTRATOR);
    if (this.delayStart) await new Promise((r) => setTimeout(r, this.delayStart));
    if (this.failStart) throw new Error('task hub unavailable');
    const existing = this.instances.get(options.instanceId);
    if (existing && ['Pending', 'Running'].includes(existing.runtimeStatus)) {
      throw new Error(`An instance with ID '${options.instanceId}' already exists.`);
    }
    this.starts += 1;
    this.instances.set(options.instanceId, { runtimeStatus: 'Running', input: options.input });
    return options.instanceId;
  }
  async getStatusBy(filter: { runtimeStatus: string[] }) {
    return [...this.instances.entries()]
      .filter(([, i]) => filter.runtimeStatus.includes(i.runtimeStatus))
      .map(([instanceId, i]) => ({ instanceId, ...i }));
  }
  async purgeInstanceHistoryBy(filter: { runtimeStatus: string[] }) {
    const doomed = [...this.instances.entries()].filter(([, i]) =>
      filter.runtimeStatus.includes(i.runtimeStatus),
    );
    for (const [id] of doomed) this.instances.delete(id);
    return { instancesDeleted: doomed.length };
  }
}

async function setup() {
  const config = scratchConfig();
  const clock = new ManualClock();
  const store = new SqliteStore(':memory:');
  const router = new Router({ store, timing: config.timing, clock: clock.now });
  await router.createRoute('conv-d', SOURCE);
  const records = new SqliteMigrationState(':memory:');
  const client = new FakeDurableClient();
  const events: TelemetryEvent[] = [];
  const sink: TelemetrySink = { ...nullSink, event: (e) => void events.push(e) };
  const service = new DurableMigrationService(
    client as unknown as DurableClient,
    records,
    router,
    migrationSettings(config),
    clock.now,
    TokenKeyring.ephemeral(),
    sink,
  );
  const ended = () => events.filter((e) => e.name === 'MigrationEnded');
  return { config, clock, store, router, records, client, service, ended };
}

describe('DurableMigrationService', () => {
  test('absent instance: startNew with migrate-{resourceId} and the settings in the input; a record is kept', async () => {
    const h = await setup();
    const started = await h.service.start({ resourceId: 'conv-d', target: TARGET, migrationId: 'm-d1' });
    expect(started).toEqual({ migrationId: 'm-d1', instanceId: 'migrate-conv-d', created: true });
    const instance = h.client.instances.get('migrate-conv-d')!;
    expect(instance.input).toMatchObject({
      migrationId: 'm-d1',
      resourceId: 'conv-d',
      target: TARGET,
      settings: { retryAttempts: 5 },
    });
    expect(await h.records.get('m-d1')).toMatchObject({ instanceId: 'migrate-conv-d', done: false });
    // the lock seed: 32 random bytes made at start, nothing derived from an id or a time
    expect(instance.input.lock).toEqual({
      keyId: expect.any(String),
      nonce: expect.stringMatching(/^[\w-]{43}$/),
    });
    expect(JSON.stringify(instance.input)).not.toMatch(/token|idempotencyKey/i);
  });

  test('running to the same target: the running migration is returned; to another target: MigrationInProgress', async () => {
    const h = await setup();
    await h.service.start({ resourceId: 'conv-d', target: TARGET, migrationId: 'm-d1' });
    expect(await h.service.start({ resourceId: 'conv-d', target: TARGET })).toEqual({
      migrationId: 'm-d1',
      instanceId: 'migrate-conv-d',
      created: false,
    });
    await expect(
      h.service.start({ resourceId: 'conv-d', target: { region: 'northeurope' } }),
    ).rejects.toMatchObject({ code: 'MigrationInProgress' });
    expect(h.client.starts).toBe(1);
  });

  test('a terminal instance is replaced by a new migration', async () => {
    const h = await setup();
    await h.service.start({ resourceId: 'conv-d', target: TARGET, migrationId: 'm-d1' });
    h.client.instances.get('migrate-conv-d')!.runtimeStatus = 'Completed';
    const second = await h.service.start({ resourceId: 'conv-d', target: TARGET, migrationId: 'm-d2' });
    expect(second).toMatchObject({ migrationId: 'm-d2', created: true });
    expect(h.client.starts).toBe(2);
  });

  test('two concurrent starts: the loser of startNew answers with the winner, never a duplicate', async () => {
    const h = await setup();
    h.client.delayStart = 10;
    const [a, b] = await Promise.all([
      h.service.start({ resourceId: 'conv-d', target: TARGET }),
      h.service.start({ resourceId: 'conv-d', target: TARGET }),
    ]);
    expect(h.client.starts).toBe(1);
    expect(a.migrationId).toBe(b.migrationId);
    expect([a.created, b.created].sort()).toEqual([false, true]);
  });

  test('status: from the running instance custom status, from the record once done, 404 when unknown', async () => {
    const h = await setup();
    await h.service.start({ resourceId: 'conv-d', target: TARGET, migrationId: 'm-d1' });
    expect(await h.service.status('m-d1')).toMatchObject({ status: 'Pending' });
    const instance = h.client.instances.get('migrate-conv-d')!;
    instance.customStatus = { migrationId: 'm-d1', status: 'Running', phase: 'hardDelete' };
    expect(await h.service.status('m-d1')).toMatchObject({ status: 'Running', phase: 'hardDelete' });
    instance.runtimeStatus = 'Failed';
    expect(await h.service.status('m-d1')).toMatchObject({ status: 'Failed', error: 'orchestration failed' });
    await h.records.saveStatus(
      'm-d1',
      {
        migrationId: 'm-d1',
        resourceId: 'conv-d',
        status: 'Completed',
        phase: 'swapped',
        target: TARGET,
        timeline: { prelockAt: null, hardDeleteAt: null, writeAt: null, swappedAt: null },
      },
      true,
    );
    expect(await h.service.status('m-d1')).toMatchObject({ status: 'Completed' });
    await expect(h.service.status('m-nope')).rejects.toBeInstanceOf(RouteLockError);
  });

  test('purging finished orchestrations loses nothing: a failed one is recorded first, a running one stays', async () => {
    const h = await setup();
    for (const id of ['conv-a', 'conv-b', 'conv-c']) await h.router.createRoute(id, SOURCE);
    await h.service.start({ resourceId: 'conv-a', target: TARGET, migrationId: 'm-a' });
    await h.service.start({ resourceId: 'conv-b', target: TARGET, migrationId: 'm-b' });
    await h.service.start({ resourceId: 'conv-c', target: TARGET, migrationId: 'm-c' });
    // m-a completed (its orchestrator recorded the outcome); m-b's orchestration failed unrecorded
    h.client.instances.get('migrate-conv-a')!.runtimeStatus = 'Completed';
    await h.records.saveStatus('m-a', { ...(await h.service.status('m-a')), status: 'Completed' }, true);
    h.client.instances.get('migrate-conv-b')!.runtimeStatus = 'Failed';
    expect(await h.service.purgeFinished()).toEqual({ purged: 2, recorded: 1 });
    expect([...h.client.instances.keys()]).toEqual(['migrate-conv-c']);
    expect(await h.service.status('m-a')).toMatchObject({ status: 'Completed' });
    expect(await h.service.status('m-b')).toMatchObject({ status: 'Failed', error: 'orchestration failed' });
    expect(await h.service.status('m-c')).toMatchObject({ status: 'Pending' });
  });

  test('negative control: purging without recording first leaves a failed migration reading as unfinished', async () => {
    const h = await setup();
    await h.service.start({ resourceId: 'conv-d', target: TARGET, migrationId: 'm-d' });
    h.client.instances.get('migrate-conv-d')!.runtimeStatus = 'Failed';
    await h.client.purgeInstanceHistoryBy({ runtimeStatus: ['Failed'] });
    expect((await h.service.status('m-d')).status).toBe('Pending');
  });

  describe('an end no orchestration recorded sends MigrationEnded, as recordOutcome does', () => {
    const failedEnd = (migrationId: string) => ({
      name: 'MigrationEnded',
      properties: expect.objectContaining({
        eventKey: `MigrationEnded:${migrationId}:1`,
        migrationId,
        resourceId: 'conv-d',
        outcome: 'Failed',
        code: 'InternalError',
        stoppedAt: 'starting',
      }),
      measurements: expect.objectContaining({ attempts: 1 }),
    });

    test.each(['Failed', 'Terminated'])(
      'an orchestration %s: the purge records it and sends one',
      async (runtime) => {
        const h = await setup();
        await h.service.start({ resourceId: 'conv-d', target: TARGET, migrationId: 'm-d' });
        h.client.instances.get('migrate-conv-d')!.runtimeStatus = runtime;
        expect(h.ended()).toEqual([]); // a read saves nothing and sends nothing
        await h.service.status('m-d');
        expect(h.ended()).toEqual([]);
        expect(await h.service.purgeFinished()).toMatchObject({ recorded: 1 });
        expect(h.ended()).toEqual([failedEnd('m-d')]);
        // the saved status shows where it stopped, dated by the record's claim
        expect((await h.service.status('m-d')).stopped).toMatchObject({
          phase: 'starting',
          code: 'InternalError',
          at: (await h.records.get('m-d'))!.createdAt,
        });
        await h.service.purgeFinished(); // done already: nothing more
        expect(h.ended()).toHaveLength(1);
      },
    );

    test('an instance that ended unrecorded, found by the next start (endIfStale): one', async () => {
      const h = await setup();
      await h.service.start({ resourceId: 'conv-d', target: TARGET, migrationId: 'm-d' });
      h.client.instances.get('migrate-conv-d')!.runtimeStatus = 'Terminated';
      expect(
        await h.service.start({ resourceId: 'conv-d', target: TARGET, migrationId: 'm-e' }),
      ).toMatchObject({
        created: true,
      });
      expect(h.ended()).toEqual([failedEnd('m-d')]);
    });

    test('a start the task hub refused: one', async () => {
      const h = await setup();
      h.client.failStart = true;
      await expect(
        h.service.start({ resourceId: 'conv-d', target: TARGET, migrationId: 'm-d' }),
      ).rejects.toThrow('task hub unavailable');
      expect(h.ended()).toEqual([failedEnd('m-d')]);
    });
  });

  test('a missing route is NotFound and starts nothing', async () => {
    const h = await setup();
    await expect(h.service.start({ resourceId: 'ghost', target: TARGET })).rejects.toMatchObject({
      code: 'NotFound',
    });
    expect(h.client.starts).toBe(0);
  });
});

describe('the Functions queue trigger handler', () => {
  test('valid message starts; an invalid one goes to the poison output unchanged, its reason logged', async () => {
    const h = await setup();
    const services = await createServices(h.config, {
      store: h.store,
      records: h.records,
      clock: h.clock.now,
      migrations: () => h.service,
    });
    const outputs = new Map<unknown, unknown>();
    const warnings: string[] = [];
    const context = () => {
      const c = new InvocationContext({
        functionName: 'migrationQueue',
        logHandler: (level, ...args) => void (level === 'warning' && warnings.push(String(args[0]))),
      });
      c.extraOutputs.set = (output: unknown, value: unknown) => void outputs.set(output, value);
      return c;
    };
    await migrationQueueHandler({ resourceId: 'conv-d', target: TARGET }, context(), services);
    expect(h.client.starts).toBe(1);
    await migrationQueueHandler('{"resourceId": 7}', context(), services);
    // the original message, as the host's own poison copy; the reason is in the log
    expect(outputs.get(poisonOutput)).toBe('{"resourceId": 7}');
    expect(warnings).toEqual([expect.stringMatching(/invalid migration message: resourceId/)]);
    await migrationQueueHandler({ resourceId: 'ghost', target: TARGET }, context(), services);
    expect(outputs.get(poisonOutput)).toBe(JSON.stringify({ resourceId: 'ghost', target: TARGET }));
    expect(h.client.starts).toBe(1);
  });
});
