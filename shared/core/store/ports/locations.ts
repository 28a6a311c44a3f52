import type { LocationDocument, StoredDocument } from '../../lock/document';

/**
 * The location store port (the routing documents). Adapters: core/store/sqlite/locations (embedded
 * default) and core/store/cosmos/locations (production). Every failure is a
 * RouteLockError: NotFound, AlreadyExists, PreconditionFailed, StoreUnavailable (transient, with
 * retry-after), StoreRejected (the store refused the request itself: not retriable) or BadRequest (a
 * continuation no store handed out).
 */

/** "nearest": the closest replica, possibly lagging. "writeRegion": the authoritative copy. */
export type ReadFrom = 'nearest' | 'writeRegion';

/**
 * Cosmos DB priority-based execution: when the container is busy, Cosmos DB throttles `low` requests
 * before `high` ones. The router decides it per operation (design §5.7); absent, the account's
 * default (`high`). Stores without priorities (SQLite) ignore it.
 */
export type RequestPriority = 'high' | 'low';

export interface PriorityOption {
  priority?: RequestPriority | undefined;
}

export interface StoreCounters {
  nearestReads: number;
  /** Pages listed (dashboards, sweeper); never on the request path. */
  lists: number;
  writeRegionReads: number;
  creates: number;
  replaces: number;
  deletes: number;
}

export interface LocationStore {
  /** Short name for logs and /health: "sqlite", "cosmos". */
  readonly kind: string;
  /** What this store has done since it was opened (or last reset): for tests and benchmarks. */
  readonly counters: StoreCounters;
  read(id: string, options: ReadOptions): Promise<StoredDocument>;
  /**
   * Optional: `read`, unless the stored ETag is still `etag` (HTTP and Cosmos DB's If-None-Match), then
   * `'notModified'` with no document sent or parsed. Counted as the read it is. The router's read-through
   * of a copy it holds uses it (design §5.1); a store (or wrapper) without it is read in full.
   */
  readIfChanged?(id: string, etag: string, options: ReadOptions): Promise<StoredDocument | 'notModified'>;
  create(doc: LocationDocument, options?: PriorityOption): Promise<StoredDocument>;
  /** Conditional on `ifMatch`: 412 PreconditionFailed when the stored ETag differs. */
  replace(doc: LocationDocument, ifMatch: string, options?: PriorityOption): Promise<StoredDocument>;
  delete(id: string, ifMatch: string, options?: PriorityOption): Promise<void>;
  /** A page of documents in a stable order; `lockedOnly` keeps those carrying lock state. */
  list(options: ListOptions): Promise<ListPage>;
  close(): Promise<void>;
}

export interface ReadOptions extends PriorityOption {
  from: ReadFrom;
}

export interface ListOptions extends PriorityOption {
  lockedOnly: boolean;
  limit: number;
  /** Opaque, from the previous page. */
  continuation?: string | undefined;
}

export interface ListPage {
  items: StoredDocument[];
  /** Null on the last page. */
  continuation: string | null;
}

/**
 * Documents by the store's own time of their last write, for the telemetry reconciliation
 * (design §8): SQLite's `updated_at`, Cosmos DB's `_ts` (whole seconds). Both adapters implement
 * it; it is not on LocationStore because nothing on the request path needs it and wrappers need not
 * forward it (`changeListingOf` looks through them).
 */
export interface ChangeListing {
  /** Documents last written in [since, until) (epoch ms), oldest write first, a page at a time. */
  listChanged(options: ChangedListOptions): Promise<ListPage>;
}

export interface ChangedListOptions {
  since: number;
  until: number;
  limit: number;
  /** Opaque, from the previous page. */
  continuation?: string | undefined;
}

/** The change listing of `store` or of the store it wraps (`unwrapped`), if it has one. */
export function changeListingOf(store: LocationStore): ChangeListing | undefined {
  let current: unknown = store;
  for (let depth = 0; depth < 8 && current; depth += 1) {
    if (typeof (current as Partial<ChangeListing>).listChanged === 'function')
      return current as ChangeListing;
    current = (current as { unwrapped?: unknown }).unwrapped;
  }
  return undefined;
}

export function newCounters(): StoreCounters {
  return { nearestReads: 0, writeRegionReads: 0, creates: 0, replaces: 0, deletes: 0, lists: 0 };
}

export function resetCounters(counters: StoreCounters): void {
  Object.assign(counters, newCounters());
}

export function countRead(counters: StoreCounters, from: ReadFrom): void {
  if (from === 'nearest') counters.nearestReads += 1;
  else counters.writeRegionReads += 1;
}
