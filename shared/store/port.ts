import { RouteLockError } from '../errors';
import type { LocationDocument, StoredDocument } from '../lock/document';

/**
 * The store port. Adapters: SQLite (embedded default) and Cosmos DB (production). Every failure is a
 * RouteLockError: NotFound, AlreadyExists, PreconditionFailed, StoreUnavailable (transient, with
 * retry-after), StoreRejected (the store refused the request itself: not retriable) or BadRequest (a
 * continuation no store handed out).
 */

/** "nearest": the closest replica, possibly lagging. "writeRegion": the authoritative copy. */
export type ReadFrom = 'nearest' | 'writeRegion';

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
  read(id: string, options: { from: ReadFrom }): Promise<StoredDocument>;
  create(doc: LocationDocument): Promise<StoredDocument>;
  /** Conditional on `ifMatch`: 412 PreconditionFailed when the stored ETag differs. */
  replace(doc: LocationDocument, ifMatch: string): Promise<StoredDocument>;
  delete(id: string, ifMatch: string): Promise<void>;
  /** A page of documents in a stable order; `lockedOnly` keeps those carrying lock state. */
  list(options: ListOptions): Promise<ListPage>;
  close(): Promise<void>;
}

export interface ListOptions {
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
 * Continuation tokens, for both adapters: the adapter's own position (an id, the SDK's token) as
 * base64url, so it survives a query string. A token that does not decode and re-encode to itself is not
 * one a store handed out: the caller's 400.
 */
export function encodeContinuation(position: string): string {
  return Buffer.from(position, 'utf8').toString('base64url');
}

export function decodeContinuation(continuation: string): string {
  const position = Buffer.from(continuation, 'base64url').toString('utf8');
  if (position === '' || encodeContinuation(position) !== continuation) throw badContinuation();
  return position;
}

export function badContinuation(cause?: unknown): RouteLockError {
  return new RouteLockError(
    'BadRequest',
    'The continuation token is not valid: pass back the continuation of the previous page unchanged.',
    cause === undefined ? {} : { cause },
  );
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
