import type { MigrationRecord } from '../../migration/records';
import type { MigrationStatus } from '../../migration/types';

/**
 * The migration records port: migrationId → the instance that runs it, its input and its latest status.
 * Adapters: shared/store/sqlite/migrations.ts (the embedded host, with its runner's journal) and
 * shared/store/cosmos/migrations.ts (container `migrations` in Azure). Failures are RouteLockErrors
 * naming a migration record.
 */
export interface MigrationRecords {
  /** Create the record; false when one with this id exists already (a repeated start). */
  create(record: MigrationRecord): Promise<boolean>;
  get(migrationId: string): Promise<MigrationRecord | null>;
  saveStatus(migrationId: string, status: MigrationStatus, done: boolean): Promise<void>;
}

/** One journaled step result of the in-process runner. */
export type JournalEntry = { value: unknown } | { error: { message: string; code?: string } };
