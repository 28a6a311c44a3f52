import type { DurableClient } from 'durable-functions';
import { DurableMigrationService, ORCHESTRATOR, unstartedGraceMs } from '../../functions/durable/service';
import { parseConfig } from '../../shared/config';
import { resourceIdPattern } from '../../functions/http/validation';
import { RouteLockError } from '../../shared/core/errors';
import { InProcessRunner } from '../../shared/migration/inProcess';
import type { MigrationRecord } from '../../shared/migration/records';
import { InProcessMigrationService } from '../../shared/migration/inProcessService';
import { type StartedMigration } from '../../shared/migration/service';
import { instanceIdFor, maxInstanceIdLength } from '../../shared/migration/instanceId';
import type { MigrationInput } from '../../shared/migration/types';
import { migrationSettings } from '../../shared/migration/workflow';
import { Router } from '../../shared/core/router';
import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import { CosmosMigrationRecords, activeClaimId } from '../../shared/migration/store/cosmos/migrations';
import type { MigrationRecords } from '../../shared/migration/store/ports/migrations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import { ManualClock } from '../../testkit/clock';
import { type CosmosTestServer, startCosmosServer } from '../../testkit/cosmosServer';
import { virtualRunner } from '../support/migrationHarness';

/**
 * docs/design.md §6.2: N concurrent starts of one resource start exactly one migration, every other
 * caller gets today's answer for a second start (that migration for the same target, 409
 * `MigrationInProgress` for another), and no record is left Pending. Negative controls: a
 * check-then-start (no claim) is caught.
 */

const N = 20;
const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const OTHER = { region: 'northeurope' };

/**
 * A DurableClient with the race the Durable docs warn of: a `startNew` for an instance id while another
 * `startNew` for it is still in flight reports success, yet starts nothing (the first one's input runs).
 * A `startNew` for a running instance throws, as with `NonRunningStates`. `failStarts` makes it throw.
 */
class RacyDurableClient {
  instances = new Map<string, { runtimeStatus: string; input: MigrationInput }>();
  startNewCalls = 0;
  started = 0;
  failStarts = 0;
  private readonly inFlight = new Map<string, Promise<void>>();
  async getStatus(instanceId: string) {
    await tick();
    const instance = this.instances.get(instanceId);
    if (!instance)
      throw new Error(`Durable Functions extension replied with HTTP 404 response. ${instanceId}`);
    return { instanceId, ...instance };
  }
  async startNew(name: string, options: { instanceId: string; input: MigrationInput }) {
    expect(name).toBe(ORCHESTRATOR);
    expect(options.instanceId.length).toBeLessThanOrEqual(maxInstanceIdLength);
    this.startNewCalls += 1;
    if (this.failStarts > 0) {
      this.failStarts -= 1;
      throw new Error('task hub unavailable');
    }
    const pending = this.inFlight.get(options.instanceId);
    if (pending) {
      await pending;
      return options.instanceId; // "success": nothing started
    }
    const run = (async () => {
      // The extension takes a while to create the instance (an HTTP call, a queue message): the window.
      await new Promise((r) => setTimeout(r, 100));
      const existing = this.instances.get(options.instanceId);
      if (existing && ['Pending', 'Running'].includes(existing.runtimeStatus)) {
        throw new Error(`An instance with ID '${options.instanceId}' already exists.`);
      }
      this.started += 1;
      this.instances.set(options.instanceId, { runtimeStatus: 'Running', input: options.input });
    })();
    this.inFlight.set(options.instanceId, run);
    try {
      await run;
    } finally {
      this.inFlight.delete(options.instanceId);
    }
    return options.instanceId;
  }
}

const tick = () => new Promise((r) => setImmediate(r));

/** Remembers every record a start wrote, to check afterwards that none is left Pending. */
function watched(records: MigrationRecords, ids: Set<string>): MigrationRecords {
  return {
    createIfNoActive: async (record) => {
      ids.add(record.migrationId);
      return records.createIfNoActive(record);
    },
    reopenIfNoActive: (record) => records.reopenIfNoActive(record),
    create: (record) => records.create(record),
    get: (id) => records.get(id),
    saveStatus: (id, status, done) => records.saveStatus(id, status, done),
    amendUnfinished: (id, patch) => records.amendUnfinished(id, patch),
    list: (query) => records.list(query),
  };
}

/** A check-then-start: a record per start, no per-resource claim (the negative control). */
function withoutClaim(records: MigrationRecords): MigrationRecords {
  return {
    createIfNoActive: async (record) => {
      const created = await records.create(record);
      return { record: created ? record : ((await records.get(record.migrationId)) ?? record), created };
    },
    reopenIfNoActive: (record) => records.reopenIfNoActive(record),
    create: (record) => records.create(record),
    get: (id) => records.get(id),
    saveStatus: (id, status, done) => records.saveStatus(id, status, done),
    amendUnfinished: (id, patch) => records.amendUnfinished(id, patch),
    list: (query) => records.list(query),
  };
}

let cosmos: CosmosTestServer;
let containers = 0;
beforeAll(async () => {
  cosmos = await startCosmosServer();
});
afterAll(async () => {
  await cosmos.close();
});

const backends: [string, () => Promise<MigrationRecords>][] = [
  ['sqlite', async () => new SqliteMigrationState(':memory:')],
  [
    'cosmos',
    async () => {
      const store = await cosmos.connect();
      const container = store.containerNamed(`startRace${++containers}`);
      await container.database.containers.createIfNotExists({
        id: container.id,
        partitionKey: { paths: ['/id'] },
      });
      return new CosmosMigrationRecords(container);
    },
  ],
];

async function durable(records: MigrationRecords, resourceId = 'conv-r') {
  const config = parseConfig({});
  const clock = new ManualClock();
  const router = new Router({ store: new SqliteStore(':memory:'), timing: config.timing, clock: clock.now });
  await router.createRoute(resourceId, SOURCE);
  const client = new RacyDurableClient();
  const written = new Set<string>();
  const service = new DurableMigrationService(
    client as unknown as DurableClient,
    watched(records, written),
    router,
    migrationSettings(config),
    clock.now,
    TokenKeyring.ephemeral(),
  );
  /** Records written and still Pending that no instance runs: stuck forever. */
  const stuck = async () => {
    const out: string[] = [];
    for (const id of written) {
      const record = await records.get(id);
      if (!record || record.done) continue;
      const instance = client.instances.get(record.instanceId);
      if (instance?.input.migrationId !== id) out.push(id);
    }
    return out;
  };
  const recordsWritten = async () => {
    let count = 0;
    for (const id of written) if (await records.get(id)) count += 1;
    return count;
  };
  return { clock, client, service, written, stuck, recordsWritten, records };
}

type Answer = StartedMigration | { code: string };

async function concurrently(start: (target: typeof TARGET) => Promise<StartedMigration>) {
  // Half the callers ask for one target, half for another: whoever wins, both answers get exercised.
  return Promise.all(
    Array.from({ length: N }, (_, i) =>
      start(i % 2 ? OTHER : TARGET).catch((error: unknown): Answer => {
        if (error instanceof RouteLockError) return { code: error.code };
        throw error;
      }),
    ),
  );
}

function tally(answers: Answer[]) {
  const created = answers.filter((a): a is StartedMigration => 'created' in a && a.created);
  const joined = answers.filter((a): a is StartedMigration => 'created' in a && !a.created);
  const conflicts = answers.filter((a) => 'code' in a && a.code === 'MigrationInProgress');
  return { created, joined, conflicts, other: N - created.length - joined.length - conflicts.length };
}

describe.each(backends)('Durable runner, records on %s', (_name, open) => {
  test(`${N} concurrent starts: one startNew, one instance, everyone else told, no record Pending`, async () => {
    const h = await durable(await open());
    const answers = await concurrently((target) => h.service.start({ resourceId: 'conv-r', target }));
    const t = tally(answers);
    expect(t.created).toHaveLength(1);
    expect(h.client.startNewCalls).toBe(1);
    expect(h.client.started).toBe(1);
    expect(t.other).toBe(0);
    const winner = t.created[0]!;
    for (const a of t.joined) expect(a.migrationId).toBe(winner.migrationId);
    expect(t.joined.length + t.conflicts.length).toBe(N - 1);
    expect(t.joined.length).toBeGreaterThan(0);
    expect(t.conflicts.length).toBeGreaterThan(0);
    expect(await h.stuck()).toEqual([]);
    expect(await h.recordsWritten()).toBe(1); // a loser writes no record at all
    console.log(
      `durable/${_name}: ${N} starts → startNew ${h.client.startNewCalls}, instances ${h.client.started}, ` +
        `joined ${t.joined.length}, 409 ${t.conflicts.length}, records ${await h.recordsWritten()}, stuck 0`,
    );
  });

  test('negative control: without the claim (check-then-start) records are left Pending forever', async () => {
    const h = await durable(withoutClaim(await open()));
    const answers = await concurrently((target) => h.service.start({ resourceId: 'conv-r', target }));
    const stuck = await h.stuck();
    console.log(
      `durable/${_name} without claim: ${N} starts → startNew ${h.client.startNewCalls}, ` +
        `instances ${h.client.started}, created ${tally(answers).created.length}, stuck ${stuck.length}`,
    );
    expect(h.client.startNewCalls).toBeGreaterThan(1);
    expect(stuck.length).toBeGreaterThan(0);
  });

  test('startNew failing after the claim: the record ends Failed, the claim is released, a retry starts', async () => {
    const h = await durable(await open());
    h.client.failStarts = 1;
    await expect(
      h.service.start({ resourceId: 'conv-r', target: TARGET, migrationId: 'm-fail' }),
    ).rejects.toThrow('task hub unavailable');
    expect(await h.records.get('m-fail')).toMatchObject({
      done: true,
      status: { status: 'Failed', error: 'the orchestration could not be started' },
    });
    const retry = await h.service.start({ resourceId: 'conv-r', target: OTHER, migrationId: 'm-next' });
    expect(retry).toMatchObject({ migrationId: 'm-next', created: true });
    expect(await h.stuck()).toEqual([]);
  });

  test('a starter that died between the claim and startNew: joined within the grace, ended Failed after', async () => {
    const h = await durable(await open());
    const config = parseConfig({});
    const input: MigrationInput = {
      migrationId: 'm-dead',
      instanceId: instanceIdFor('conv-r'),
      resourceId: 'conv-r',
      target: TARGET,
      settings: migrationSettings(config),
      lock: { keyId: 'k1', nonce: 'bm9uY2U' },
    };
    const dead: MigrationRecord = {
      migrationId: 'm-dead',
      instanceId: input.instanceId,
      resourceId: 'conv-r',
      target: TARGET,
      createdAt: new Date(h.clock.now()).toISOString(),
      input,
      status: {
        migrationId: 'm-dead',
        resourceId: 'conv-r',
        status: 'Pending',
        phase: 'starting',
        target: TARGET,
        timeline: { prelockAt: null, hardDeleteAt: null, writeAt: null, swappedAt: null },
      },
      done: false,
    };
    expect((await h.records.createIfNoActive(dead)).created).toBe(true); // …and then the process died
    expect(await h.service.start({ resourceId: 'conv-r', target: TARGET })).toMatchObject({
      migrationId: 'm-dead',
      created: false,
    });
    h.clock.advance(unstartedGraceMs);
    const next = await h.service.start({ resourceId: 'conv-r', target: OTHER });
    expect(next.created).toBe(true);
    expect(await h.records.get('m-dead')).toMatchObject({
      done: true,
      status: { status: 'Failed', error: 'the orchestration never started' },
    });
  });

  test.each([248, 249, 255])(
    'a %i-character resource id gets an instance id within the limit',
    async (length) => {
      const resourceId = `r${'x'.repeat(length - 1)}`;
      const h = await durable(await open(), resourceId);
      const answers = await concurrently((target) => h.service.start({ resourceId, target }));
      expect(tally(answers).created).toHaveLength(1);
      expect(h.client.started).toBe(1);
      const [instanceId] = [...h.client.instances.keys()];
      expect(instanceId).toBe(instanceIdFor(resourceId));
      expect(instanceId!.length).toBeLessThanOrEqual(maxInstanceIdLength);
      expect(await h.stuck()).toEqual([]);
    },
  );
});

describe.each(backends)(
  'retry of a Failed migration (%s): concurrent retries, one new attempt',
  (_name, open) => {
    test('10 concurrent retries: one reopens the record and starts the instance; the others get 409', async () => {
      const h = await durable(await open());
      const first = await h.service.start({ resourceId: 'conv-r', target: TARGET, migrationId: 'm-f' });
      const record = (await h.records.get('m-f'))!;
      await h.records.saveStatus('m-f', { ...record.status, status: 'Failed', error: 'store down' }, true);
      h.client.instances.get(first.instanceId)!.runtimeStatus = 'Completed';
      const before = h.client.startNewCalls;
      const answers = await Promise.all(
        Array.from({ length: 10 }, () =>
          h.service.retry('m-f', { id: 'operator' }).then(
            (started) => (started.created ? 'created' : 'joined'),
            (error: { code?: string }) => error.code ?? 'error',
          ),
        ),
      );
      expect(answers.filter((a) => a === 'created')).toHaveLength(1);
      expect(answers.filter((a) => a !== 'created')).toEqual(Array(9).fill('MigrationNotRetriable'));
      expect(h.client.startNewCalls - before).toBe(1);
      expect(await h.records.get('m-f')).toMatchObject({
        done: false,
        status: {
          status: 'Pending',
          attempt: 2,
          attempts: [{ attempt: 1, outcome: 'Failed', reason: 'store down' }],
        },
      });
      // the resource is claimed by the retried migration: a start of another target is refused
      await expect(h.service.start({ resourceId: 'conv-r', target: OTHER })).rejects.toMatchObject({
        code: 'MigrationInProgress',
      });
    });
  },
);

test('Cosmos: a claim whose release never landed is taken over by the next start', async () => {
  const store = await cosmos.connect();
  const container = store.containerNamed(`startRace${++containers}`);
  await container.database.containers.createIfNotExists({
    id: container.id,
    partitionKey: { paths: ['/id'] },
  });
  const records = new CosmosMigrationRecords(container);
  const h = await durable(records);
  const first = await h.service.start({ resourceId: 'conv-r', target: TARGET, migrationId: 'm-1' });
  expect(first.created).toBe(true);
  // the record saved done, the claim's delete lost (a crash between the two writes)
  const { resource } = await container.item('m-1', 'm-1').read<MigrationRecord>();
  await container.item('m-1', 'm-1').replace({ ...resource!, done: true });
  h.client.instances.get(first.instanceId)!.runtimeStatus = 'Completed';
  expect(
    (await container.item(activeClaimId('conv-r'), activeClaimId('conv-r')).read()).resource,
  ).toBeTruthy();
  const second = await h.service.start({ resourceId: 'conv-r', target: OTHER, migrationId: 'm-2' });
  expect(second).toMatchObject({ migrationId: 'm-2', created: true });
  await records.saveStatus('m-2', { ...(await records.get('m-2'))!.status, status: 'Completed' }, true);
  expect(
    (await container.item(activeClaimId('conv-r'), activeClaimId('conv-r')).read()).resource,
  ).toBeUndefined();
});

describe('instance and claim ids', () => {
  test('migrate-{resourceId} while it fits (248 characters), then capped with a hash, deterministic', () => {
    const at = (n: number, c = 'x') => `r${c.repeat(n - 1)}`;
    expect(instanceIdFor(at(248))).toBe(`migrate-${at(248)}`);
    expect(instanceIdFor(at(248))).toHaveLength(256);
    for (const n of [249, 255]) {
      const id = instanceIdFor(at(n));
      expect(id).toHaveLength(maxInstanceIdLength);
      expect(id).toMatch(/^migrate-rx+~[0-9a-f]{32}$/);
      expect(instanceIdFor(at(n))).toBe(id);
    }
    // same 215-character head, different tails: different ids
    expect(instanceIdFor(at(255))).not.toBe(instanceIdFor(`${at(250)}yyyyy`));
    // the hashed form is never another resource's plain form: resource ids hold no `~`
    expect(resourceIdPattern.test(instanceIdFor(at(255)).slice('migrate-'.length))).toBe(false);
    expect(activeClaimId(at(248))).toHaveLength(255);
    expect(activeClaimId(at(255))).toHaveLength(255);
    expect(activeClaimId('conv-1')).toBe('active~conv-1');
  });
});

describe('in-process runner', () => {
  /** The harness's parts, with a runner over `state` (so the negative control can swap the claim out). */
  async function inProcess(state?: SqliteMigrationState) {
    const h = virtualRunner();
    await h.router.createRoute('conv-r', SOURCE);
    let n = 0;
    const runner = state
      ? new InProcessRunner({
          activities: h.activities,
          keyring: h.keyring,
          state,
          scheduler: h.scheduler,
          settings: migrationSettings(h.config),
          newId: () => `m-${++n}`,
          http: async () => ({ status: 599, body: 'no participant stub in this test' }),
        })
      : h.runner;
    return { h, runner, service: new InProcessMigrationService(runner, h.router), state: state ?? h.state };
  }

  test(`${N} concurrent starts: one run, everyone else told, nothing left Pending`, async () => {
    const { h, runner, service, state } = await inProcess();
    const answers = await concurrently((target) => service.start({ resourceId: 'conv-r', target }));
    const t = tally(answers);
    expect(t.created).toHaveLength(1);
    expect(runner.activeCount).toBe(1);
    expect(t.other).toBe(0);
    for (const a of t.joined) expect(a.migrationId).toBe(t.created[0]!.migrationId);
    expect(t.joined.length + t.conflicts.length).toBe(N - 1);
    expect(state.unfinished().map((r) => r.migrationId)).toEqual([t.created[0]!.migrationId]);
    console.log(
      `in-process: ${N} starts → runs ${runner.activeCount}, joined ${t.joined.length}, 409 ${t.conflicts.length}`,
    );
    await h.scheduler.runWhile(() => runner.activeCount > 0);
    expect(state.unfinished()).toEqual([]);
  });

  test('negative control: without the claim every start runs its own migration', async () => {
    class NoClaim extends SqliteMigrationState {
      override createUnlessActive(record: MigrationRecord) {
        return { record, created: this.createPlain(record) };
      }
      private createPlain(record: MigrationRecord): boolean {
        // a check-then-start: insert whenever this migration id is new
        const before = this.unfinished().length;
        void this.create(record);
        return this.unfinished().length > before;
      }
    }
    const { runner, service } = await inProcess(new NoClaim(':memory:'));
    const answers = await concurrently((target) => service.start({ resourceId: 'conv-r', target }));
    expect(tally(answers).created.length).toBeGreaterThan(1);
    expect(runner.activeCount).toBeGreaterThan(1);
  });
});

describe.each(backends)('a retry racing a start of another migration, records on %s', (_name, open) => {
  test('the retry wins the resource; the start is 409 MigrationInProgress; the reopened record is not ended', async () => {
    const h = await durable(await open());
    const first = await h.service.start({ resourceId: 'conv-r', target: TARGET, migrationId: 'm-f' });
    const record = (await h.records.get('m-f'))!;
    await h.records.saveStatus('m-f', { ...record.status, status: 'Failed', error: 'store down' }, true);
    h.client.instances.get(first.instanceId)!.runtimeStatus = 'Completed';
    const settle = <T>(p: Promise<T>) =>
      p.then(
        (value) => ({ value }),
        (error: RouteLockError) => ({ code: error.code }),
      );
    const retry = settle(h.service.retry('m-f', { id: 'operator' }));
    // the start comes while the retry's startNew is in flight: its old instance (ended) is not the
    // reopened record's run, and the reopened claim is younger than the start grace
    await new Promise((r) => setTimeout(r, 20));
    const start = settle(h.service.start({ resourceId: 'conv-r', target: OTHER, migrationId: 'm-n' }));
    const [retried, started] = await Promise.all([retry, start]);
    expect(retried).toMatchObject({ value: { migrationId: 'm-f', created: true } });
    expect(started).toEqual({ code: 'MigrationInProgress' });
    expect(await h.records.get('m-n')).toBeNull();
    expect((await h.records.get('m-f'))?.done).toBe(false);
    expect(h.client.instances.get(first.instanceId)?.input.migrationId).toBe('m-f');
    expect(await h.stuck()).toEqual([]);
  });
});
