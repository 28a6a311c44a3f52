/**
 * What the change handler processed, kept for the reconciliation (shared/migration/telemetry/reconcile.ts): per
 * resource, the keys of the most recent versions and lock ends whose telemetry was sent. Application
 * Insights holds the events themselves, but the app cannot read it back without a query API and a
 * reader role; this record costs one small item per resource, bounded, beside the audit ledger.
 * Adapters: shared/migration/store/sqlite/telemetry.ts (the embedded host), shared/migration/store/cosmos/telemetry.ts
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
 * swap, a renew or two; a long copy renews every lease/3) and the reconciliation asks only about a
 * document's current version and the lock end it carries, so 32 covers several migrations between two
 * runs; older keys can no longer be asked for. Lock ends (`end:` keys) are kept apart, 8 of them: one per
 * migration, so a long migration's renewals cannot evict the end of the one before it (which the next
 * versions carry on in `lastMigration`, and the reconciliation asks about).
 */
export const SEEN_KEYS_PER_RESOURCE = 32;
export const SEEN_ENDS_PER_RESOURCE = 8;

/** The prefix of a lock end's key (shared/migration/telemetry/reconcile.ts `endSeenKey`). */
export const END_SEEN_PREFIX = 'end:';

/**
 * `existing` with `added` appended (a key at most once, in first-seen order), the newest kept: the last
 * SEEN_KEYS_PER_RESOURCE version keys and, apart from them, the last SEEN_ENDS_PER_RESOURCE end keys.
 */
export function mergeSeenKeys(existing: readonly string[], added: readonly string[]): string[] {
  const merged = [...existing];
  for (const key of added) if (!merged.includes(key)) merged.push(key);
  const ends = merged.filter((key) => key.startsWith(END_SEEN_PREFIX)).slice(-SEEN_ENDS_PER_RESOURCE);
  const versions = merged.filter((key) => !key.startsWith(END_SEEN_PREFIX)).slice(-SEEN_KEYS_PER_RESOURCE);
  return [...ends, ...versions];
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
