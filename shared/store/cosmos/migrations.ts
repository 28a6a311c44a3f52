import type { Container } from '@azure/cosmos';
import type { MigrationRecord } from '../../migration/records';
import type { MigrationStatus } from '../../migration/types';
import { migrationRecordSubject, notFound } from '../errors';
import type { MigrationRecords } from '../ports/migrations';
import { storeError, withoutSystemFields } from './common';

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
    try {
      const { resource } = await this.container
        .item(migrationId, migrationId)
        .read<Record<string, unknown>>();
      if (!resource) return null;
      // The record's id is its migrationId; `id` exists only because Cosmos DB requires one.
      const { id: _id, ...record } = withoutSystemFields(resource);
      return record as unknown as MigrationRecord;
    } catch (error) {
      const mapped = storeError(error, migrationRecordSubject(migrationId));
      if (mapped.code === 'NotFound') return null;
      throw mapped;
    }
  }

  async saveStatus(migrationId: string, status: MigrationStatus, done: boolean): Promise<void> {
    const record = await this.get(migrationId);
    if (!record) throw notFound(migrationRecordSubject(migrationId));
    try {
      await this.container.items.upsert({ id: migrationId, ...record, status, done });
    } catch (error) {
      throw storeError(error, migrationRecordSubject(migrationId));
    }
  }
}
