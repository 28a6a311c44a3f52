import type { Container, IndexingPolicy, SqlParameter } from '@azure/cosmos';
import { type MigrationRecord, runsRecord } from '../../records';
import { boundedId } from '../../instanceId';
import type { MigrationStatus } from '../../types';
import {
  type StoreSubject,
  changedSinceRead,
  migrationRecordSubject,
  notFound,
} from '../../../core/store/errors';
import {
  type ActiveClaim,
  type MigrationRecordPage,
  type MigrationRecordQuery,
  type MigrationRecords,
  decodeMigrationCursor,
  encodeMigrationCursor,
} from '../ports/migrations';
import { newestFirstPage, storeError, withoutSystemFields } from '../../../core/store/cosmos/common';

/**
 * How many times saveStatus re-reads after another writer changed the record between its read and its
 * write, before it answers PreconditionFailed (retriable: the caller's retry policy takes it from there).
 */
export const saveStatusAttempts = 5;

/** How many times createIfNoActive goes round (a claim released or taken over under it) before PreconditionFailed. */
export const claimAttempts = 5;

/**
 * The id of a resource's "active migration" claim, an item of its own in `migrations` (Cosmos DB ids
 * hold at most 255 characters). `~` keeps it apart from every migration id, which cannot contain one.
 */
export const activeClaimId = (resourceId: string): string => boundedId('active~', resourceId, 255);

/**
 * Container `migrations`' indexing policy: the default (every path) plus the composite index that
 * `ORDER BY c.createdAt DESC, c.migrationId DESC` needs: Cosmos DB serves an ORDER BY on two properties
 * only from one (and the same index read backwards serves the ascending order). Bicep deploys exactly
 * this (infra/bicep/modules/cosmos.bicep; test/store/migrationList.test.ts compares them), and a
 * key-authenticated emulator gets it when the container is created.
 */
export const migrationsIndexingPolicy: IndexingPolicy = {
  indexingMode: 'consistent',
  automatic: true,
  includedPaths: [{ path: '/*' }],
  excludedPaths: [{ path: '/"_etag"/?' }],
  compositeIndexes: [
    [
      { path: '/createdAt', order: 'descending' },
      { path: '/migrationId', order: 'descending' },
    ],
  ],
};

/**
 * The claim: which migration holds the resource, and the record of the run that took it (a start's, or a
 * retry's reopened one), so a loser can answer with it at once and write it when its winner has not.
 */
export interface ClaimItem {
  id: string;
  kind: 'activeMigration';
  resourceId: string;
  migrationId: string;
  record: MigrationRecord;
}

/**
 * Azure: records in Cosmos DB container `migrations` (partition key `/id`, created by Bicep), and per
 * resource an `active~{resourceId}` claim item: created only-if-absent (a 409 loses), deleted when its
 * migration's record is saved done. Two items in two partitions, so no transaction holds both: the claim
 * is written first and carries its run's record, and whoever finds a claim without that record (none
 * yet, or a retry's ended earlier run) writes it: a claim is stale only once its own run is done.
 */
export class CosmosMigrationRecords implements MigrationRecords {
  constructor(private readonly container: Container) {}

  async createIfNoActive(record: MigrationRecord): Promise<ActiveClaim> {
    const subject = migrationRecordSubject(record.migrationId);
    for (let attempt = 1; attempt <= claimAttempts; attempt += 1) {
      const existing = await this.get(record.migrationId);
      if (existing) return { record: existing, created: false };
      const taken = await this.takeClaim(record, subject);
      if (taken.kind === 'held') return { record: taken.record, created: false };
      if (taken.kind === 'again') continue;
      await this.create(record); // false only when a loser already wrote it from this claim
      return { record, created: true };
    }
    throw changedSinceRead(subject);
  }

  /**
   * An operator's retry: the claim first, as a start takes it (create-only; a claim whose migration is
   * done is taken over from its version), then the record replaced on the ETag read before, so of two
   * concurrent retries one replaces it; the other finds it no longer an ended Failed one.
   */
  async reopenIfNoActive(record: MigrationRecord): Promise<ActiveClaim> {
    const subject = migrationRecordSubject(record.migrationId);
    for (let attempt = 1; attempt <= claimAttempts; attempt += 1) {
      const stored = await this.stored(record.migrationId);
      if (!stored) throw notFound(subject);
      const existing = recordFrom(stored.item);
      // This run's record already (a loser finished the reopen from this retry's claim): it won.
      if (!existing.done && runsRecord(record.input, existing)) return { record: existing, created: true };
      if (!existing.done || existing.status.status !== 'Failed') return { record: existing, created: false };
      const taken = await this.takeClaim(record, subject);
      if (taken.kind === 'held') {
        return { record: taken.record, created: runsRecord(record.input, taken.record) };
      }
      if (taken.kind === 'again') continue;
      try {
        await this.container
          .item(record.migrationId, record.migrationId)
          .replace(
            { id: record.migrationId, ...record },
            { accessCondition: { type: 'IfMatch', condition: stored.etag } },
          );
        return { record, created: true };
      } catch (error) {
        const mapped = storeError(error, subject);
        if (mapped.code !== 'PreconditionFailed') throw mapped;
        // The record changed since the read: a loser wrote this run's record from its claim (the next read
        // finds it ours), or another retry of this migration won (the claim names that run).
      }
    }
    throw changedSinceRead(subject);
  }

  /**
   * Take the resource's claim for `record` (a start's or a retry's): created only-if-absent; a claim
   * whose run is done (its release missed) is taken over, only from the version read. `held`: an
   * unfinished migration holds it (`recordOf` writes its record first when its winner has not yet);
   * `again`: it changed meanwhile, look again.
   */
  private async takeClaim(
    record: MigrationRecord,
    subject: StoreSubject,
  ): Promise<{ kind: 'taken' } | { kind: 'held'; record: MigrationRecord } | { kind: 'again' }> {
    const claimId = activeClaimId(record.resourceId);
    const claim: ClaimItem = {
      id: claimId,
      kind: 'activeMigration',
      resourceId: record.resourceId,
      migrationId: record.migrationId,
      record,
    };
    try {
      await this.container.items.create(claim);
      return { kind: 'taken' };
    } catch (error) {
      const mapped = storeError(error, subject);
      if (mapped.code !== 'AlreadyExists') throw mapped;
    }
    const held = await this.storedItem<ClaimItem>(claimId, subject);
    if (!held) return { kind: 'again' }; // released meanwhile
    const standing = await this.recordOf(held.item, subject);
    if (!standing) return { kind: 'again' };
    if (!standing.done) return { kind: 'held', record: standing };
    try {
      await this.container
        .item(claimId, claimId)
        .replace(claim, { accessCondition: { type: 'IfMatch', condition: held.etag } });
      return { kind: 'taken' };
    } catch (error) {
      const mapped = storeError(error, subject);
      if (mapped.code !== 'PreconditionFailed' && mapped.code !== 'NotFound') throw mapped;
      return { kind: 'again' };
    }
  }

  /**
   * The record of the claim's run, written from the claim when its winner has not written it (yet): a
   * start's missing record is created; a retry's reopen is finished over the ended run's record (on the
   * ETag read, so only over that version). A done record of another run is not the claim's run ending:
   * taken for stale, a start could take the claim between the retry's two writes and run alongside it.
   * Null: the record changed meanwhile, look again. Protected: the race test's negative control.
   */
  protected async recordOf(claim: ClaimItem, subject: StoreSubject): Promise<MigrationRecord | null> {
    const stored = await this.stored(claim.migrationId);
    if (!stored) {
      await this.create(claim.record);
      return (await this.get(claim.migrationId)) ?? claim.record;
    }
    const standing = recordFrom(stored.item);
    if (!standing.done || runsRecord(claim.record.input, standing)) return standing;
    try {
      await this.container
        .item(claim.migrationId, claim.migrationId)
        .replace(
          { id: claim.migrationId, ...claim.record },
          { accessCondition: { type: 'IfMatch', condition: stored.etag } },
        );
      return claim.record;
    } catch (error) {
      const mapped = storeError(error, subject);
      if (mapped.code !== 'PreconditionFailed' && mapped.code !== 'NotFound') throw mapped;
      return null;
    }
  }

  /** Delete the resource's claim if this migration still holds it (conditional: never another's). */
  private async release(resourceId: string, migrationId: string): Promise<void> {
    const claimId = activeClaimId(resourceId);
    const subject = migrationRecordSubject(migrationId);
    const held = await this.storedItem<ClaimItem>(claimId, subject);
    if (!held || held.item.migrationId !== migrationId) return;
    try {
      await this.container
        .item(claimId, claimId)
        .delete({ accessCondition: { type: 'IfMatch', condition: held.etag } });
    } catch (error) {
      const mapped = storeError(error, subject);
      // Gone or taken over since the read: either way no longer this migration's to release.
      if (mapped.code !== 'NotFound' && mapped.code !== 'PreconditionFailed') throw mapped;
    }
  }

  async create(record: MigrationRecord): Promise<boolean> {
    try {
      await this.container.items.create({ id: record.migrationId, ...record });
      return true;
    } catch (error) {
      const mapped = storeError(error, migrationRecordSubject(record.migrationId));
      if (mapped.code === 'AlreadyExists') return false;
      throw mapped;
    }
  }

  async get(migrationId: string): Promise<MigrationRecord | null> {
    const stored = await this.stored(migrationId);
    return stored ? recordFrom(stored.item) : null;
  }

  /**
   * The status replaced on the record as it is when the write lands, as SQLite's one-transaction update
   * does: a replace conditional on the ETag it read (passed back exactly as received), and on a 412 a
   * fresh read and another try, so another writer's change between the read and the write is kept, never
   * overwritten by the copy read before it. A record deleted meanwhile is NotFound, not recreated.
   */
  async saveStatus(migrationId: string, status: MigrationStatus, done: boolean): Promise<void> {
    const subject = migrationRecordSubject(migrationId);
    for (let attempt = 1; ; attempt += 1) {
      const stored = await this.stored(migrationId);
      if (!stored) throw notFound(subject);
      try {
        await this.container
          .item(migrationId, migrationId)
          .replace(
            { ...stored.item, status, done },
            { accessCondition: { type: 'IfMatch', condition: stored.etag } },
          );
        // After the record: a claim left behind (this release failing) is taken over by the next start.
        if (done) await this.release(String(stored.item.resourceId), migrationId);
        return;
      } catch (error) {
        const mapped = storeError(error, subject);
        if (mapped.code !== 'PreconditionFailed' || attempt >= saveStatusAttempts) throw mapped;
      }
    }
  }

  async amendUnfinished(migrationId: string, patch: Partial<MigrationStatus>): Promise<void> {
    const subject = migrationRecordSubject(migrationId);
    for (let attempt = 1; ; attempt += 1) {
      const stored = await this.stored(migrationId);
      if (!stored) throw notFound(subject);
      if (stored.item.done) return;
      try {
        // on the ETag read: a final status saved meanwhile makes this 412, and the next read sees it done
        await this.container
          .item(migrationId, migrationId)
          .replace(
            { ...stored.item, status: { ...(stored.item.status as MigrationStatus), ...patch } },
            { accessCondition: { type: 'IfMatch', condition: stored.etag } },
          );
        return;
      } catch (error) {
        const mapped = storeError(error, subject);
        if (mapped.code !== 'PreconditionFailed' || attempt >= saveStatusAttempts) throw mapped;
      }
    }
  }

  /**
   * A page, newest first: `TOP limit + 1` of the records after the cursor (the claims, `kind:
   * "activeMigration"`, left out), so a page never reads more than one record beyond itself, and the
   * position is ours (the last record's sort key), not the SDK's cross-partition token.
   */
  async list(query: MigrationRecordQuery): Promise<MigrationRecordPage> {
    const where = ['NOT IS_DEFINED(c.kind)'];
    const parameters: SqlParameter[] = [];
    if (query.states !== undefined) {
      const names = query.states.map((_, i) => `@state${i}`);
      where.push(names.length > 0 ? `c.status.status IN (${names.join(', ')})` : 'false');
      query.states.forEach((state, i) => parameters.push({ name: `@state${i}`, value: state }));
    }
    if (query.resourceId !== undefined) {
      where.push('c.resourceId = @resourceId');
      parameters.push({ name: '@resourceId', value: query.resourceId });
    }
    if (query.campaignId !== undefined) {
      where.push('c.campaignId = @campaignId');
      parameters.push({ name: '@campaignId', value: query.campaignId });
    }
    const cursor = query.continuation === undefined ? undefined : decodeMigrationCursor(query.continuation);
    try {
      const page = await newestFirstPage(this.container, {
        where,
        parameters,
        idField: 'migrationId',
        after: cursor && { createdAt: cursor.createdAt, id: cursor.migrationId },
        limit: query.limit,
      });
      const records = page.items.map((item) => {
        const { id: _id, ...record } = withoutSystemFields(item);
        return record as unknown as MigrationRecord;
      });
      const last = records.at(-1);
      return page.more && last ? { records, continuation: encodeMigrationCursor(last) } : { records };
    } catch (error) {
      throw storeError(error, migrationRecordSubject('(list)'));
    }
  }

  /** The item as stored (with its `id`, without the service's fields) and its ETag; null when missing. */
  private stored(
    migrationId: string,
  ): Promise<{ item: Record<string, unknown> & { id: string }; etag: string } | null> {
    return this.storedItem(migrationId, migrationRecordSubject(migrationId));
  }

  private async storedItem<T extends object = Record<string, unknown>>(
    id: string,
    subject: StoreSubject,
  ): Promise<{ item: T & { id: string }; etag: string } | null> {
    try {
      const { resource, etag } = await this.container.item(id, id).read<T & { id: string }>();
      if (!resource) return null;
      const own = (resource as { _etag?: unknown })._etag;
      const version = etag ?? (typeof own === 'string' ? own : undefined);
      // Without the version, a write could only be unconditional: refuse rather than risk a lost update.
      if (!version) throw storeError({ code: 'NoEtag' }, subject);
      return { item: withoutSystemFields(resource), etag: version };
    } catch (error) {
      const mapped = storeError(error, subject);
      if (mapped.code === 'NotFound') return null;
      throw mapped;
    }
  }
}

/** The record in a stored item: its id is its migrationId; `id` exists only because Cosmos DB requires one. */
function recordFrom(item: Record<string, unknown> & { id: string }): MigrationRecord {
  const { id: _id, ...record } = item;
  return record as unknown as MigrationRecord;
}
