import type { DurableClient } from 'durable-functions';
import { DurableMigrationService } from '../../functions/durable/service';
import { RouteLockError } from '../../shared/core/errors';
import { InProcessMigrationService } from '../../shared/migration/inProcessService';
import {
  type MigrationList,
  type MigrationListQuery,
  type MigrationService,
} from '../../shared/migration/service';
import type { MigrationInput, MigrationStatus } from '../../shared/migration/types';
import { migrationSettings } from '../../shared/migration/workflow';
import { Router } from '../../shared/core/router';
import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import { encodeContinuation } from '../../shared/core/store/continuation';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import { parseConfig } from '../../shared/config';
import { ManualClock } from '../../testkit/clock';
import { virtualRunner } from '../support/migrationHarness';

/**
 * `MigrationService.list` on both runners: the in-process runner (virtual time, real migrations run to
 * their end) and the Durable service (a fake DurableClient, as test/migration/durableService.test.ts
 * has it), whose unfinished records take their live status from their instance.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const id = (i: number) => `r-${String(i).padStart(2, '0')}`;

/** Every page of a query. */
async function walk(service: MigrationService, query: Omit<MigrationListQuery, 'continuation'>) {
  const pages: MigrationList[] = [];
  let continuation: string | undefined;
  do {
    const page = await service.list({ ...query, continuation });
    pages.push(page);
    continuation = page.continuation;
  } while (continuation !== undefined && pages.length < 100);
  return pages;
}
const ids = (pages: MigrationList[]) => pages.flatMap((p) => p.items.map((s) => s.resourceId));

async function failure(promise: Promise<unknown>): Promise<RouteLockError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof RouteLockError)) throw new Error(`expected a RouteLockError, got ${String(error)}`);
  return error;
}

describe('in-process runner', () => {
  async function started(count: number) {
    const h = virtualRunner();
    const service = new InProcessMigrationService(h.runner, h.router);
    for (let i = 1; i <= count + 1; i += 1) await h.router.createRoute(id(i), SOURCE);
    for (let i = 1; i <= count; i += 1) {
      await service.start({ resourceId: id(i), target: TARGET });
      h.clock.advance(1000);
    }
    await h.settle();
    return { h, service };
  }

  test('25 migrations, limit 10: newest first over three pages, no duplicates, no gaps, one started between pages left out', async () => {
    const { h, service } = await started(25);
    const first = await service.list({ limit: 10 });
    expect(first.items.map((s) => s.resourceId)).toEqual(Array.from({ length: 10 }, (_, i) => id(25 - i)));
    await service.start({ resourceId: id(26), target: TARGET });
    const second = await service.list({ limit: 10, continuation: first.continuation });
    const third = await service.list({ limit: 10, continuation: second.continuation });
    expect(third.continuation).toBeUndefined();
    expect('continuation' in third).toBe(false);
    const all = ids([first, second, third]);
    expect(all).toEqual(Array.from({ length: 25 }, (_, i) => id(25 - i)));
    expect(new Set(all).size).toBe(25);
    // the one started meanwhile heads a fresh walk, and it is running
    await h.settle();
    expect((await service.list({ limit: 1 })).items[0]?.resourceId).toBe(id(26));
  });

  test('filters by status, resourceId and campaignId; a limit outside 1 to 1000 is a 400', async () => {
    const { h, service } = await started(3);
    await h.router.createRoute('r-late', SOURCE);
    h.clock.advance(1000);
    await service.start({ resourceId: 'r-late', target: TARGET }); // not settled: still in its first steps
    const completed = ids(await walk(service, { status: 'Completed', limit: 2 }));
    expect(completed).toEqual([id(3), id(2), id(1)]);
    const unfinished = (await service.list({})).items.filter((s) => s.resourceId === 'r-late');
    expect(unfinished[0]?.status).toMatch(/Pending|Running/);
    expect(ids([await service.list({ status: unfinished[0]!.status })])).toEqual(['r-late']);
    expect(ids([await service.list({ resourceId: id(2) })])).toEqual([id(2)]);
    expect(ids([await service.list({ campaignId: 'camp-1' })])).toEqual([]);
    expect((await service.list({})).items).toHaveLength(4);
    for (const limit of [0, 1001, 2.5]) {
      expect((await failure(service.list({ limit }))).code).toBe('BadRequest');
    }
    await h.settle();
  });

  test('a continuation the store did not hand out is a 400', async () => {
    const { service } = await started(2);
    for (const continuation of ['%%%', encodeContinuation('[1,2]')]) {
      const error = await failure(service.list({ limit: 1, continuation }));
      expect(error.code).toBe('BadRequest');
    }
  });
});

/** The extension's client as the Durable service uses it (getStatus 404s for an unknown instance). */
class FakeDurableClient {
  instances = new Map<string, { runtimeStatus: string; input: MigrationInput; customStatus?: unknown }>();
  statusReads = 0;
  async getStatus(instanceId: string) {
    this.statusReads += 1;
    const instance = this.instances.get(instanceId);
    if (!instance) throw new Error(`Durable Functions extension replied with HTTP 404 response.`);
    return { instanceId, ...instance };
  }
  async startNew(_name: string, options: { instanceId: string; input: MigrationInput }) {
    this.instances.set(options.instanceId, { runtimeStatus: 'Running', input: options.input });
    return options.instanceId;
  }
}

describe('Durable service', () => {
  async function setup(count: number) {
    const config = parseConfig({});
    const clock = new ManualClock();
    const router = new Router({
      store: new SqliteStore(':memory:'),
      timing: config.timing,
      clock: clock.now,
    });
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
    const started: string[] = [];
    for (let i = 1; i <= count + 1; i += 1) await router.createRoute(id(i), SOURCE);
    for (let i = 1; i <= count; i += 1) {
      started.push((await service.start({ resourceId: id(i), target: TARGET })).migrationId);
      clock.advance(1000);
    }
    /** Its instance ended and it recorded its outcome (what the orchestrator's last activity does). */
    const finish = async (i: number, status: MigrationStatus['status']) => {
      const migrationId = started[i - 1]!;
      const record = (await records.get(migrationId))!;
      await records.saveStatus(migrationId, { ...record.status, status }, true);
      client.instances.get(record.instanceId)!.runtimeStatus = 'Completed';
    };
    /** Running, its progress in the instance's custom status only (the record still says Pending). */
    const progress = async (i: number) => {
      const record = (await records.get(started[i - 1]!))!;
      const instance = client.instances.get(record.instanceId)!;
      instance.customStatus = { ...record.status, status: 'Running', phase: 'prelock' };
    };
    return { clock, router, records, client, service, started, finish, progress };
  }

  test('25 migrations, limit 10: newest first, three pages, no duplicates or gaps, one started between pages left out', async () => {
    const { service, finish } = await setup(25);
    for (let i = 1; i <= 25; i += 2) await finish(i, 'Completed');
    const first = await service.list({ limit: 10 });
    await service.start({ resourceId: id(26), target: TARGET });
    const second = await service.list({ limit: 10, continuation: first.continuation });
    const third = await service.list({ limit: 10, continuation: second.continuation });
    expect(third.continuation).toBeUndefined();
    expect(ids([first, second, third])).toEqual(Array.from({ length: 25 }, (_, i) => id(25 - i)));
  });

  test("an unfinished record lists with its instance's live status, and a status filter sees that, not the record's", async () => {
    const { service, client, records, finish, progress, started } = await setup(25);
    for (let i = 1; i <= 25; i += 1) {
      if (i === 22) continue;
      if (i % 5 === 0) await progress(i);
      else if (i % 5 === 1) await finish(i, 'Failed');
      else await finish(i, 'Completed');
    }
    // an instance that failed without recording its outcome: Failed, though its record is unfinished
    const broken = (await records.get(started[22 - 1]!))!;
    expect(broken).toMatchObject({ done: false, status: { status: 'Pending' } });
    client.instances.get(broken.instanceId)!.runtimeStatus = 'Failed';

    const running = await walk(service, { status: 'Running', limit: 10 });
    expect(ids(running)).toEqual([id(25), id(20), id(15), id(10), id(5)]);
    expect(running.flatMap((p) => p.items).every((s) => s.phase === 'prelock')).toBe(true);
    // pages may be short (the filter is applied to the live status), never wrong, and end
    expect(running.every((p) => p.items.length <= 10)).toBe(true);
    const failed = ids(await walk(service, { status: 'Failed', limit: 4 }));
    expect(failed).toEqual([id(22), id(21), id(16), id(11), id(6), id(1)]);
    const everything = await walk(service, { limit: 10 });
    expect(ids(everything)).toHaveLength(25);
    const byResource = Object.fromEntries(
      everything.flatMap((p) => p.items).map((s) => [s.resourceId, s.status]),
    );
    expect(byResource[id(20)]).toBe('Running');
    expect(byResource[id(22)]).toBe('Failed');
    expect(byResource[id(24)]).toBe('Completed');
  });

  test('only unfinished records ask the task hub: an ended one answers from its record', async () => {
    const { service, client, finish } = await setup(10);
    for (let i = 1; i <= 8; i += 1) await finish(i, 'Completed');
    const before = client.statusReads;
    const page = await service.list({ limit: 10 });
    expect(page.items).toHaveLength(10);
    expect(client.statusReads - before).toBe(2);
  });

  test('bad input: a continuation the store did not hand out, a limit out of range', async () => {
    const { service } = await setup(2);
    expect((await failure(service.list({ continuation: 'nope!' }))).code).toBe('BadRequest');
    expect((await failure(service.list({ limit: 0 }))).code).toBe('BadRequest');
  });
});
