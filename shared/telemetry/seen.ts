/**
 * What the change handler processed, kept for the reconciliation (shared/telemetry/reconcile.ts): per
 * resource, the keys of the most recent versions and lock ends whose telemetry was sent. Application
 * Insights holds the events themselves, but the app cannot read it back without a query API and a
 * reader role; this record costs one small item per resource, bounded, beside the audit ledger.
 * Adapters: shared/store/sqlite/telemetry.ts (the embedded host), shared/store/cosmos/telemetry.ts
 * (container `audit`, kind "telemetrySeen").
 */
export interface SeenVersions {
  /** Add `keys` to what `resourceId`'s record holds (idempotent: a key kept already stays once). */
  record(resourceId: string, keys: readonly string[]): Promise<void>;
  /** Every key kept for these resources. */
  seen(resourceIds: readonly string[]): Promise<Set<string>>;
}

/**
 * Keys kept per resource: a migration writes about six versions (create, pre-lock, two escalations, a
 * swap, a renew or two) and the reconciliation asks only about a document's current version and the lock
 * end it carries, so 32 covers several migrations between two runs; older keys can no longer be asked for.
 */
export const SEEN_KEYS_PER_RESOURCE = 32;

/** `existing` with `added` appended (a key at most once, in first-seen order), the newest kept. */
export function mergeSeenKeys(existing: readonly string[], added: readonly string[]): string[] {
  const merged = [...existing];
  for (const key of added) if (!merged.includes(key)) merged.push(key);
  return merged.slice(-SEEN_KEYS_PER_RESOURCE);
}

/** In memory: for tests and hosts without a store of their own. */
export class MemorySeenVersions implements SeenVersions {
  private readonly keys = new Map<string, string[]>();
  async record(resourceId: string, keys: readonly string[]): Promise<void> {
    this.keys.set(resourceId, mergeSeenKeys(this.keys.get(resourceId) ?? [], keys));
  }
  async seen(resourceIds: readonly string[]): Promise<Set<string>> {
    return new Set(resourceIds.flatMap((id) => this.keys.get(id) ?? []));
  }
}
