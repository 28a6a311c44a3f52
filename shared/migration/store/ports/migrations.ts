import type { MigrationRecord } from '../../records';
import type { MigrationState, MigrationStatus } from '../../types';
import { decodeNewestFirstCursor, encodeNewestFirstCursor } from '../../../core/store/continuation';

/**
 * The migration records port: migrationId → the instance that runs it, its input and its latest status.
 * Adapters: migration/store/sqlite/migrations (the embedded host, with its runner's journal) and
 * migration/store/cosmos/migrations (container `migrations` in Azure). Failures are RouteLockErrors
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
   * An operator's retry (design §6.3): replace an ended, Failed migration's record with `record`
   * (same migrationId, a new input and status, not done) under the same per-resource claim, so a retry races
   * starts as safely as a start does. `created: false` with the record that stands when the migration is not
   * an ended Failed one, or the resource has another unfinished migration. NotFound when unknown.
   */
  reopenIfNoActive(record: MigrationRecord): Promise<ActiveClaim>;
  get(migrationId: string): Promise<MigrationRecord | null>;
  /** `done: true` also releases the resource's claim, when this migration holds it. */
  saveStatus(migrationId: string, status: MigrationStatus, done: boolean): Promise<void>;
  /**
   * Merge `patch` into the status of a record still unfinished, atomically against the record's own
   * writes; a finished record is left as it is (an operator's note, e.g. a cancel request, must never
   * undo the final status the workflow saved meanwhile). NotFound when there is no record.
   */
  amendUnfinished(migrationId: string, patch: Partial<MigrationStatus>): Promise<void>;
  /**
   * A page of records, newest first (createdAt descending, then migrationId descending), paged in the
   * store with a keyset cursor: never more than `limit + 1` records read for a page.
   */
  list(query: MigrationRecordQuery): Promise<MigrationRecordPage>;
}

export interface MigrationRecordQuery {
  /** Records whose stored status is one of these; absent: any. */
  states?: readonly MigrationState[] | undefined;
  resourceId?: string | undefined;
  campaignId?: string | undefined;
  limit: number;
  /** Opaque, from the previous page. */
  continuation?: string | undefined;
}

export interface MigrationRecordPage {
  records: MigrationRecord[];
  /** Absent on the last page. */
  continuation?: string;
}

/** Where a page of the list ends: the last record's sort key (createdAt, then migrationId). */
export interface MigrationCursor {
  createdAt: string;
  migrationId: string;
}

/**
 * The list's continuation for both adapters: the last record's sort key, in the stores' one keyset
 * codec (../../../core/store/continuation).
 */
export function encodeMigrationCursor(last: Pick<MigrationRecord, 'createdAt' | 'migrationId'>): string {
  return encodeNewestFirstCursor(last.createdAt, last.migrationId);
}

export function decodeMigrationCursor(continuation: string): MigrationCursor {
  const { createdAt, id } = decodeNewestFirstCursor(continuation);
  return { createdAt, migrationId: id };
}

export interface ActiveClaim {
  record: MigrationRecord;
  created: boolean;
}

/** One journaled step result of the in-process runner. */
export type JournalEntry = { value: unknown } | { error: { message: string; code?: string } };
