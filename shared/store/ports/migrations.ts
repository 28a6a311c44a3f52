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
  /**
   * Create the record unless its resource has an unfinished migration: the per-resource "active
   * migration" claim, so of any number of concurrent starts exactly one gets `created: true`. The others
   * get the record that stands: the one with this migrationId if it exists, else the resource's
   * unfinished one. A stale claim (its migration done, the release missed) is taken over.
   */
  createIfNoActive(record: MigrationRecord): Promise<ActiveClaim>;
  /**
   * An operator's retry (issue 18): replace an ended, Failed migration's record with `record` (same
   * migrationId, a new input and status, not done) under the same per-resource claim, so a retry races
   * starts as safely as a start does. `created: false` with the record that stands when the migration is
   * not an ended Failed one, or the resource has another unfinished migration. NotFound when unknown.
   */
  reopenIfNoActive(record: MigrationRecord): Promise<ActiveClaim>;
  get(migrationId: string): Promise<MigrationRecord | null>;
  /** `done: true` also releases the resource's claim, when this migration holds it. */
  saveStatus(migrationId: string, status: MigrationStatus, done: boolean): Promise<void>;
}

export interface ActiveClaim {
  record: MigrationRecord;
  created: boolean;
}

/** One journaled step result of the in-process runner. */
export type JournalEntry = { value: unknown } | { error: { message: string; code?: string } };
