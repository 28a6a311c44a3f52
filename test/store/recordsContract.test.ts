import type { Container } from '@azure/cosmos';
import { requestAuditRecord } from '../../shared/core/audit';
import { parseConfig } from '../../shared/config';
import { RouteLockError } from '../../shared/core/errors';
import { openRequest } from '../../shared/core/forceRelease';
import { type MigrationRecord, newMigrationRecord } from '../../shared/migration/records';
import { migrationSettings } from '../../shared/migration/workflow';
import { CosmosAuditLedger } from '../../shared/core/store/cosmos/audit';
import { storeError } from '../../shared/core/store/cosmos/common';
import { CosmosForceReleaseRequests } from '../../shared/core/store/cosmos/forceRelease';
import { CosmosMigrationRecords, saveStatusAttempts } from '../../shared/migration/store/cosmos/migrations';
import {
  type StoreSubject,
  auditEntrySubject,
  forceReleaseRequestSubject,
  migrationRecordSubject,
  routeSubject,
} from '../../shared/core/store/errors';
import type { AuditLedger } from '../../shared/core/store/ports/audit';
import type { ForceReleaseRequests } from '../../shared/core/store/ports/forceRelease';
import type { MigrationRecords } from '../../shared/migration/store/ports/migrations';
import { SqliteAuditLedger } from '../../shared/core/store/sqlite/audit';
import { SqliteForceReleaseRequests } from '../../shared/core/store/sqlite/forceRelease';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import type { CosmosRequest, CosmosTestServer } from '../../testkit/cosmosServer';
import { useCosmosServers } from '../support/cosmosServers';

/**
 * The other three ports' contract, both adapters each: migration records, the audit ledger and the
 * force-release requests. The Cosmos adapters run against @vercel/cosmosdb-server, as it ships (bare
 * ETags) and issuing quoted ETags as Cosmos DB does. Every error names
 * what it is about: a conflict on anything but a route never reads "Route … already exists".
 */

interface Ports {
  migrations: MigrationRecords;
  audit: AuditLedger;
  requests: ForceReleaseRequests;
}

const servers = useCosmosServers();
let containers = 0;

/** A fresh container, as Bicep would create it (partition key `/id`). */
async function cosmosContainer(server: CosmosTestServer = servers.stock): Promise<Container> {
  const store = await server.connect();
  const container = store.containerNamed(`records${++containers}`);
  await container.database.containers.createIfNotExists({
    id: container.id,
    partitionKey: { paths: ['/id'] },
  });
  return container;
}

const backends: [string, () => Promise<Ports>][] = [
  [
    'sqlite',
    async () => ({
      migrations: new SqliteMigrationState(':memory:'),
      audit: new SqliteAuditLedger(':memory:'),
      requests: new SqliteForceReleaseRequests(':memory:'),
    }),
  ],
  ...(['stock', 'quoted ETags'] as const).map((form): [string, () => Promise<Ports>] => [
    `cosmos (${form})`,
    async () => {
      const server = form === 'stock' ? servers.stock : servers.quoted;
      const audit = await cosmosContainer(server);
      return {
        migrations: new CosmosMigrationRecords(await cosmosContainer(server)),
        audit: new CosmosAuditLedger(audit),
        requests: new CosmosForceReleaseRequests(audit),
      };
    },
  ]),
];

async function failure(promise: Promise<unknown>): Promise<RouteLockError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof RouteLockError)) throw new Error(`expected a RouteLockError, got ${String(error)}`);
  return error;
}

function migrationRecord(migrationId: string): MigrationRecord {
  return newMigrationRecord(
    {
      migrationId,
      instanceId: `mig-${migrationId}`,
      resourceId: 'conv-1',
      target: { region: 'eastus' },
      settings: migrationSettings(parseConfig({})),
      lock: { keyId: 'k1', nonce: 'bm9uY2U' },
    },
    '2026-01-01T00:00:00.000Z',
  );
}

function request(id: string, now = Date.parse('2026-01-01T00:00:00.000Z')) {
  return openRequest({
    id,
    resourceId: 'conv-1',
    migrationId: 'm-1',
    actor: { id: 'oid-alice', name: 'Alice' },
    reason: 'stuck',
    now,
  });
}

describe.each(backends)('records contract: %s', (_name, open) => {
  let ports: Ports;
  beforeEach(async () => {
    ports = await open();
  });

  describe('migration records', () => {
    test('create, get, and a repeated create answered false, not an error', async () => {
      const record = migrationRecord('m-1');
      expect(await ports.migrations.create(record)).toBe(true);
      expect(await ports.migrations.get('m-1')).toEqual(record);
      expect(await ports.migrations.create({ ...record, instanceId: 'other' })).toBe(false);
      expect(await ports.migrations.get('m-1')).toEqual(record);
      expect(await ports.migrations.get('m-unknown')).toBeNull();
    });

    test('saveStatus keeps the record and replaces its status', async () => {
      const record = migrationRecord('m-2');
      await ports.migrations.create(record);
      const status = { ...record.status, status: 'Completed' as const, phase: 'released' as const };
      await ports.migrations.saveStatus('m-2', status, true);
      expect(await ports.migrations.get('m-2')).toEqual({ ...record, status, done: true });
    });

    test('createIfNoActive: one unfinished migration per resource; done releases it', async () => {
      const first = migrationRecord('m-a');
      const second = { ...migrationRecord('m-b'), target: { region: 'northeurope' } };
      expect(await ports.migrations.createIfNoActive(first)).toEqual({ record: first, created: true });
      // another migration of the resource: refused, answered with the one that stands
      expect(await ports.migrations.createIfNoActive(second)).toEqual({ record: first, created: false });
      expect(await ports.migrations.get('m-b')).toBeNull();
      // the same migration again: its record
      expect(await ports.migrations.createIfNoActive(first)).toEqual({ record: first, created: false });
      // another resource is independent
      const elsewhere = { ...migrationRecord('m-c'), resourceId: 'conv-2' };
      expect((await ports.migrations.createIfNoActive(elsewhere)).created).toBe(true);
      const status = { ...first.status, status: 'Completed' as const };
      await ports.migrations.saveStatus('m-a', status, true);
      expect(await ports.migrations.createIfNoActive(second)).toEqual({ record: second, created: true });
      expect(await ports.migrations.get('m-a')).toEqual({ ...first, status, done: true });
    });

    test('createIfNoActive: of 20 concurrent claims exactly one wins, all others get its record', async () => {
      const claims = await Promise.all(
        Array.from({ length: 20 }, (_, i) => ports.migrations.createIfNoActive(migrationRecord(`m-${i}`))),
      );
      const winners = claims.filter((c) => c.created);
      expect(winners).toHaveLength(1);
      for (const claim of claims) expect(claim.record).toEqual(winners[0]!.record);
      let written = 0;
      for (let i = 0; i < 20; i += 1) if (await ports.migrations.get(`m-${i}`)) written += 1;
      expect(written).toBe(1);
    });

    test('amendUnfinished merges into an unfinished status, and never touches a finished one', async () => {
      const record = migrationRecord('m-am');
      await ports.migrations.create(record);
      const note = { cancelRequestedAt: '2026-01-01T00:00:00.000Z', cancelRequestedBy: 'op-1' };
      await ports.migrations.amendUnfinished('m-am', note);
      expect((await ports.migrations.get('m-am'))?.status).toEqual({ ...record.status, ...note });
      // the workflow ended meanwhile: a later note must not undo its final status
      const final = { ...record.status, status: 'Completed' as const, phase: 'swapped' as const };
      await ports.migrations.saveStatus('m-am', final, true);
      await ports.migrations.amendUnfinished('m-am', { cancelRequestedBy: 'op-2' });
      expect(await ports.migrations.get('m-am')).toEqual({ ...record, status: final, done: true });
      expect((await failure(ports.migrations.amendUnfinished('m-none', note))).code).toBe('NotFound');
    });

    test('saveStatus of an unknown record is NotFound naming the migration record', async () => {
      const error = await failure(
        ports.migrations.saveStatus('m-none', migrationRecord('m-none').status, false),
      );
      expect(error.code).toBe('NotFound');
      expect(error.message).toBe('No migration record m-none.');
    });
  });

  describe('audit ledger', () => {
    const entry = (
      at: string,
      op: 'forceReleaseRequested' | 'forceReleaseApproved' = 'forceReleaseApproved',
    ) => requestAuditRecord(request('fr-a'), op, { id: 'oid-bob', name: 'Bob' }, at, 'm-1');

    test("a resource's records, oldest first, at most limit, without the store's fields", async () => {
      const first = entry('2026-01-01T00:00:01.000Z', 'forceReleaseRequested');
      const second = entry('2026-01-01T00:00:02.000Z');
      const third = entry('2026-01-01T00:00:03.000Z');
      for (const record of [second, third, first]) await ports.audit.append(record);
      expect(await ports.audit.list('conv-1', 10)).toEqual([first, second, third]);
      expect(await ports.audit.list('conv-1', 2)).toEqual([first, second]);
      expect(await ports.audit.list('conv-other', 10)).toEqual([]);
    });

    test('appending a record twice keeps one (a change feed may deliver a version twice)', async () => {
      const record = entry('2026-01-01T00:00:05.000Z');
      await ports.audit.append(record);
      await ports.audit.append(record);
      expect(await ports.audit.list('conv-1', 10)).toEqual([record]);
    });

    test('the first append of an id is kept: a later one under the same id changes nothing (append-only)', async () => {
      const record = entry('2026-01-01T00:00:06.000Z');
      const later = entry('2026-01-01T00:00:07.000Z');
      await ports.audit.append(record);
      await ports.audit.append(later);
      await ports.audit.append({ ...record, reason: 'rewritten', actorName: 'Mallory' });
      expect(await ports.audit.list('conv-1', 10)).toEqual([record, later]);
    });
  });

  describe('force-release requests', () => {
    test('create then get returns the request as created; unknown is null', async () => {
      const created = request('fr-1');
      await ports.requests.create(created);
      expect(await ports.requests.get('fr-1')).toEqual(created);
      expect(await ports.requests.get('fr-unknown')).toBeNull();
    });

    test('a second create of one id is AlreadyExists naming the force-release request', async () => {
      await ports.requests.create(request('fr-2'));
      const error = await failure(ports.requests.create(request('fr-2')));
      expect(error.code).toBe('AlreadyExists');
      expect(error.message).toBe('Force-release request fr-2 already exists.');
      expect(error.message).not.toMatch(/route/i);
    });

    test('save increments the version; a save from a stale version is PreconditionFailed', async () => {
      const created = request('fr-3');
      await ports.requests.create(created);
      const saved = await ports.requests.save({ ...created, status: 'obsolete' });
      expect(saved).toEqual({ ...created, status: 'obsolete', version: created.version + 1 });
      expect(await ports.requests.get('fr-3')).toEqual(saved);
      const error = await failure(ports.requests.save({ ...created, reason: 'stale' }));
      expect(error.code).toBe('PreconditionFailed');
      expect(error.message).toMatch(/^Force-release request fr-3 /);
      expect(error.message).not.toMatch(/route/i);
      expect(await ports.requests.get('fr-3')).toEqual(saved);
    });
  });
});

describe('Cosmos DB errors name what they are about', () => {
  const sdk = (code: number) => Object.assign(new Error('sdk text'), { code });
  const subjects: [StoreSubject, string, string, string][] = [
    [routeSubject('r-1'), 'Route r-1 already exists.', 'No route for resource r-1.', 'Route r-1 '],
    [
      migrationRecordSubject('m-1'),
      'Migration record m-1 already exists.',
      'No migration record m-1.',
      'Migration record m-1 ',
    ],
    [
      auditEntrySubject('a-1', 'r-1'),
      'Audit entry a-1 already exists.',
      'No audit entry a-1.',
      'Audit entry a-1 ',
    ],
    [
      forceReleaseRequestSubject('fr-1', 'r-1'),
      'Force-release request fr-1 already exists.',
      'No force-release request fr-1.',
      'Force-release request fr-1 ',
    ],
  ];

  test.each(subjects)('%j', (subject, conflict, missing, changed) => {
    expect(storeError(sdk(409), subject)).toMatchObject({ code: 'AlreadyExists', message: conflict });
    expect(storeError(sdk(404), subject)).toMatchObject({ code: 'NotFound', message: missing });
    const precondition = storeError(sdk(412), subject);
    expect(precondition.code).toBe('PreconditionFailed');
    expect(precondition.message.startsWith(changed)).toBe(true);
    for (const error of [storeError(sdk(409), subject), storeError(sdk(503), subject)]) {
      expect(error.message).not.toContain('sdk text');
    }
  });

  test('a migration record conflict does not read as a route', () => {
    expect(storeError(sdk(409), migrationRecordSubject('m-1')).message).not.toMatch(/route/i);
  });
});

describe.each([
  ['stock', () => servers.stock],
  ['quoted ETags', () => servers.quoted],
])('Cosmos saveStatus under a concurrent writer (%s)', (_name, server) => {
  /**
   * Another writer changes the record after saveStatus has read it and before its write reaches the
   * stand-in (the interceptor holds that write back while it writes). `instanceId` stands for any field
   * saveStatus does not own.
   */
  /** A write of an item of `container`: a replace (PUT …/docs/{id}) or an upsert (POST …/docs). */
  const isItemWrite = (container: Container, req: CosmosRequest) =>
    (req.method === 'PUT' && req.path.includes(`/colls/${container.id}/docs/`)) ||
    (req.method === 'POST' &&
      req.path.endsWith(`/colls/${container.id}/docs`) &&
      req.headers['x-ms-documentdb-is-upsert'] === 'true');

  async function raced(options: { every?: boolean; dropIfMatch?: boolean } = {}) {
    const container = await cosmosContainer(server());
    const records = new CosmosMigrationRecords(container);
    const record = migrationRecord('m-race');
    await records.create(record);
    let concurrent = 0;
    let saveWrites = 0;
    let writing = false;
    server().intercept(async (req) => {
      if (writing || !isItemWrite(container, req)) return;
      saveWrites += 1;
      if (options.dropIfMatch) delete req.headers['if-match'];
      if (concurrent > 0 && !options.every) return;
      writing = true;
      try {
        const { resource } = await container.item('m-race', 'm-race').read<MigrationRecord>();
        concurrent += 1;
        await container.item('m-race', 'm-race').replace({ ...resource!, instanceId: `other-${concurrent}` });
      } finally {
        writing = false;
      }
    });
    const status = { ...record.status, status: 'Completed' as const, phase: 'released' as const };
    const outcome = await records.saveStatus('m-race', status, true).then(
      () => 'ok',
      (error: unknown) => (error instanceof RouteLockError ? error.code : String(error)),
    );
    server().intercept(undefined);
    return { outcome, stored: await records.get('m-race'), record, status, saveWrites, concurrent };
  }

  test("the other writer's change is kept and the status lands on top of it", async () => {
    const { outcome, stored, record, status, saveWrites } = await raced();
    expect(outcome).toBe('ok');
    expect(stored).toEqual({ ...record, instanceId: 'other-1', status, done: true });
    expect(saveWrites).toBe(2); // a 412, a fresh read, the write that lands
  });

  test('negative control: the same write sent unconditionally overwrites the change (the lost update)', async () => {
    const { outcome, stored, record, status } = await raced({ dropIfMatch: true });
    expect(outcome).toBe('ok');
    expect(stored).toEqual({ ...record, status, done: true });
    expect(stored?.instanceId).not.toBe('other-1');
  });

  test('a writer that wins every time: PreconditionFailed after a bounded number of tries, its change kept', async () => {
    const { outcome, stored, saveWrites, concurrent } = await raced({ every: true });
    expect(outcome).toBe('PreconditionFailed');
    expect(saveWrites).toBe(saveStatusAttempts);
    expect(stored?.instanceId).toBe(`other-${concurrent}`);
    expect(stored?.done).toBe(false);
  });

  test('a record deleted between the read and the write is NotFound, not recreated', async () => {
    const container = await cosmosContainer(server());
    const records = new CosmosMigrationRecords(container);
    await records.create(migrationRecord('m-gone'));
    let armed = true;
    server().intercept(async (req) => {
      if (!armed || !isItemWrite(container, req)) return;
      armed = false;
      await container.item('m-gone', 'm-gone').delete();
    });
    const error = await failure(records.saveStatus('m-gone', migrationRecord('m-gone').status, true));
    server().intercept(undefined);
    expect(error.code).toBe('NotFound');
    expect(await records.get('m-gone')).toBeNull();
  });
});
