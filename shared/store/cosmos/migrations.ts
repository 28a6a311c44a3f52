import type { Container } from '@azure/cosmos';
import type { MigrationRecord } from '../../migration/records';
import type { MigrationStatus } from '../../migration/types';
import { migrationRecordSubject, notFound } from '../errors';
import type { MigrationRecords } from '../ports/migrations';
import { storeError, withoutSystemFields } from './common';

/**
 * How many times saveStatus re-reads after another writer changed the record between its read and its
 * write, before it answers PreconditionFailed (retriable: the caller's retry policy takes it from there).
 */
export const saveStatusAttempts = 5;

/** Azure: records in Cosmos DB container `migrations` (partition key `/id`, created by Bicep). */
export class CosmosMigrationRecords implements MigrationRecords {
  constructor(private readonly container: Container) {}

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
    if (!stored) return null;
    // The record's id is its migrationId; `id` exists only because Cosmos DB requires one.
    const { id: _id, ...record } = stored.item;
    return record as unknown as MigrationRecord;
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
        return;
      } catch (error) {
        const mapped = storeError(error, subject);
        if (mapped.code !== 'PreconditionFailed' || attempt >= saveStatusAttempts) throw mapped;
      }
    }
  }

  /** The item as stored (with its `id`, without the service's fields) and its ETag; null when missing. */
  private async stored(
    migrationId: string,
  ): Promise<{ item: Record<string, unknown> & { id: string }; etag: string } | null> {
    const subject = migrationRecordSubject(migrationId);
    try {
      const { resource, etag } = await this.container
        .item(migrationId, migrationId)
        .read<Record<string, unknown> & { id: string }>();
      if (!resource) return null;
      const version = etag ?? (typeof resource._etag === 'string' ? resource._etag : undefined);
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
