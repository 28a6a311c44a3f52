import type { AuditRecord } from '../../audit';

/**
 * The audit ledger port: append-only records with deterministic ids. Appending an id already kept is a
 * success that changes nothing (the first append wins): the write path and the change feed both append
 * each record, and the feed may deliver a version twice.
 * Adapters: core/store/sqlite/audit and core/store/cosmos/audit (container `audit`). What a
 * record says is derived in core/audit.
 */
export interface AuditLedger {
  append(record: AuditRecord): Promise<void>;
  /** A resource's records, oldest first, at most `limit`. */
  list(resourceId: string, limit: number): Promise<AuditRecord[]>;
}
