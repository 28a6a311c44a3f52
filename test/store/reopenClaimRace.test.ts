import type { Container } from '@azure/cosmos';
import { parseConfig } from '../../shared/config';
import { type MigrationRecord, newMigrationRecord } from '../../shared/migration/records';
import { retryRecord } from '../../shared/migration/service';
import { migrationSettings } from '../../shared/migration/workflow';
import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import {
  type ClaimItem,
  CosmosMigrationRecords,
  migrationsIndexingPolicy,
} from '../../shared/migration/store/cosmos/migrations';
import type { ActiveClaim } from '../../shared/migration/store/ports/migrations';
import type { CosmosRequest, CosmosTestServer } from '../../testkit/cosmosServer';
import { useCosmosServers } from '../support/cosmosServers';

/**
 * An operator's retry writes two items with no transaction: the resource's claim (naming the retried
 * migration and carrying its reopened record), then the record over the ended Failed one. A start of
 * another migration that reads the claim in between finds its migration's record done. Taken for a
 * stale claim (its run done, the release missed), the start would take the claim over and both would
 * run: two unfinished migrations of one resource. The stand-in's interceptor holds the retry's record
 * write back while the start runs, so the interleaving happens every time, on both Cosmos stand-ins.
 */

const servers = useCosmosServers();
let containers = 0;
const settings = migrationSettings(parseConfig({}));
const keyring = TokenKeyring.ephemeral();

/** The negative control's claim rule: any done record of its migration made a claim stale. */
class StaleWhenDone extends CosmosMigrationRecords {
  protected override async recordOf(claim: ClaimItem): Promise<MigrationRecord | null> {
    const standing = await this.get(claim.migrationId);
    if (standing) return standing;
    await this.create(claim.record);
    return (await this.get(claim.migrationId)) ?? claim.record;
  }
}

function migrationRecord(migrationId: string): MigrationRecord {
  return newMigrationRecord(
    {
      migrationId,
      instanceId: 'migrate-conv-r',
      resourceId: 'conv-r',
      target: { region: 'eastus' },
      settings,
      lock: keyring.newSeed(),
    },
    '2026-01-01T00:00:00.000Z',
  );
}

/** A replace (PUT …/docs/{id}) of the item `id` of `container`. */
const isReplaceOf = (container: Container, id: string, req: CosmosRequest) =>
  req.method === 'PUT' && req.path.endsWith(`/colls/${container.id}/docs/${encodeURIComponent(id)}`);

describe.each([
  ['stock', () => servers.stock],
  ['quoted ETags', () => servers.quoted],
])('a retry between its claim and its record write (%s)', (_name, server: () => CosmosTestServer) => {
  afterEach(() => server().intercept(undefined));

  /** Migration m-f of conv-r ended Failed (its claim released), and the retry that reopens it. */
  async function failedMigration(make = (c: Container) => new CosmosMigrationRecords(c)) {
    const store = await server().connect();
    const container = store.containerNamed(`reopenRace${++containers}`);
    await container.database.containers.createIfNotExists({
      id: container.id,
      partitionKey: { paths: ['/id'] },
      indexingPolicy: migrationsIndexingPolicy, // as Bicep deploys it: list's ORDER BY needs it
    });
    const records = make(container);
    const first = migrationRecord('m-f');
    expect((await records.createIfNoActive(first)).created).toBe(true);
    await records.saveStatus('m-f', { ...first.status, status: 'Failed', error: 'store down' }, true);
    const failed = (await records.get('m-f'))!;
    const reopened = retryRecord(failed, settings, keyring.newSeed(), '2026-01-01T01:00:00.000Z');
    const unfinished = async () =>
      (await records.list({ resourceId: 'conv-r', limit: 10 })).records
        .filter((r) => !r.done)
        .map((r) => r.migrationId)
        .sort();
    return { container, records, reopened, unfinished };
  }

  /**
   * The retry runs; when its record write reaches the stand-in (its claim already written), `meanwhile`
   * runs to the end, and only then does the retry's write go on.
   */
  async function retryPausedFor<T>(
    h: Awaited<ReturnType<typeof failedMigration>>,
    meanwhile: () => Promise<T>,
  ): Promise<{ retried: ActiveClaim; concurrent: T }> {
    let concurrent: Promise<T> | undefined;
    server().intercept(async (req) => {
      if (concurrent || !isReplaceOf(h.container, 'm-f', req)) return;
      concurrent = meanwhile();
      await concurrent;
    });
    const retried = await h.records.reopenIfNoActive(h.reopened);
    server().intercept(undefined);
    if (!concurrent) throw new Error('the retry never wrote its record');
    return { retried, concurrent: await concurrent };
  }

  test('a start of another migration meanwhile is refused: one unfinished migration, the retry', async () => {
    const h = await failedMigration();
    const { retried, concurrent: started } = await retryPausedFor(h, () =>
      h.records.createIfNoActive(migrationRecord('m-2')),
    );
    const unfinished = await h.unfinished();
    console.log(
      `${_name}: retry created ${retried.created}, start created ${started.created}, unfinished [${unfinished}]`,
    );
    expect(retried).toEqual({ record: h.reopened, created: true });
    // the start finished the reopen from the claim and answers with it
    expect(started).toEqual({ record: h.reopened, created: false });
    expect(await h.records.get('m-2')).toBeNull();
    expect(await h.records.get('m-f')).toEqual(h.reopened);
    expect(unfinished).toEqual(['m-f']);
  });

  test('negative control: with a claim stale once any record of its migration is done, the start takes the claim over, two run', async () => {
    const h = await failedMigration((c) => new StaleWhenDone(c));
    const { retried, concurrent: started } = await retryPausedFor(h, () =>
      h.records.createIfNoActive(migrationRecord('m-2')),
    );
    const unfinished = await h.unfinished();
    console.log(
      `${_name} old rule: retry created ${retried.created}, start created ${started.created}, ` +
        `unfinished [${unfinished}]`,
    );
    expect(retried.created).toBe(true);
    expect(started.created).toBe(true);
    expect(unfinished).toEqual(['m-2', 'm-f']);
  });

  test('a second retry meanwhile: the paused one still wins, the other gets its record', async () => {
    const h = await failedMigration();
    const other = retryRecord(
      (await h.records.get('m-f'))!,
      settings,
      keyring.newSeed(),
      '2026-01-01T01:00:01.000Z',
    );
    const { retried, concurrent: second } = await retryPausedFor(h, () => h.records.reopenIfNoActive(other));
    expect(retried).toEqual({ record: h.reopened, created: true });
    expect(second).toEqual({ record: h.reopened, created: false });
    expect(await h.unfinished()).toEqual(['m-f']);
  });

  test('a retry whose record write never lands: the next start finishes its reopen, ending it frees the resource', async () => {
    const h = await failedMigration();
    server().intercept((req) =>
      isReplaceOf(h.container, 'm-f', req) ? { status: 500, body: { message: 'retrier gone' } } : undefined,
    );
    await expect(h.records.reopenIfNoActive(h.reopened)).rejects.toBeDefined();
    server().intercept(undefined);
    expect((await h.records.get('m-f'))?.done).toBe(true); // the claim names the retry; the record not yet
    expect(await h.records.createIfNoActive(migrationRecord('m-2'))).toEqual({
      record: h.reopened,
      created: false,
    });
    expect(await h.unfinished()).toEqual(['m-f']);
    // as the service ends a claim's run no instance runs (after the start grace): the claim is released
    await h.records.saveStatus(
      'm-f',
      { ...h.reopened.status, status: 'Failed', error: 'never started' },
      true,
    );
    const next = migrationRecord('m-2');
    expect(await h.records.createIfNoActive(next)).toEqual({ record: next, created: true });
    expect(await h.unfinished()).toEqual(['m-2']);
  });

  test("the reopened run's own end with its release missed is still a stale claim, taken over", async () => {
    const h = await failedMigration();
    expect((await h.records.reopenIfNoActive(h.reopened)).created).toBe(true);
    // the record saved done, the claim's delete lost (a crash between the two writes)
    const { resource } = await h.container.item('m-f', 'm-f').read<MigrationRecord>();
    await h.container.item('m-f', 'm-f').replace({ ...resource!, done: true });
    const next = migrationRecord('m-2');
    expect(await h.records.createIfNoActive(next)).toEqual({ record: next, created: true });
    expect(await h.unfinished()).toEqual(['m-2']);
  });
});
