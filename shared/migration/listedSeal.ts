import type { StoredDocument } from '../core/lock/document';
import type { Seal, TokenKeyring } from '../core/security/tokenKeys';

/**
 * A campaign's listed copy of a route crosses stores the router does not trust (the Durable task hub,
 * the embedded runner's journal) before the pre-lock decides on it, and its ETag is public: a copy
 * rewritten there with the route's real ETag would be decided on and written as if it were the stored
 * route. So the starter seals it under the token key ring, bound to the migration that carries it, and
 * the pre-lock decides on it only when the seal holds (docs/design.md §6.7, §9.3).
 */
export const LISTED_COPY_PURPOSE = 'listed-copy';

/** What a seal binds the copy to: its route, its migration, and that migration's random lock seed. */
export interface ListedCopyBinding {
  resourceId: string;
  migrationId: string;
  nonce: string;
}

export function sealListedCopy(
  keyring: TokenKeyring,
  binding: ListedCopyBinding,
  listed: StoredDocument,
): Seal {
  return keyring.seal(LISTED_COPY_PURPOSE, canonicalMessage(binding, listed));
}

/** The copy, when its seal holds for this binding; undefined for a missing or bad one. */
export function unsealedListedCopy(
  keyring: TokenKeyring,
  binding: ListedCopyBinding,
  listed: StoredDocument,
  seal: Seal | undefined,
): StoredDocument | undefined {
  return keyring.verifySeal(LISTED_COPY_PURPOSE, canonicalMessage(binding, listed), seal)
    ? listed
    : undefined;
}

/**
 * One text for the same values however a store re-serialised them (key order, an absent optional
 * field): the copy is JSON through the task hub and the journal, so sorted keys and dropped
 * `undefined`s are the canonical form. `storedAt` is left out: the pre-lock does not decide on it.
 */
function canonicalMessage(binding: ListedCopyBinding, listed: StoredDocument): string {
  const { resourceId, migrationId, nonce } = binding;
  return canonicalJson({ resourceId, migrationId, nonce, doc: listed.doc, etag: listed.etag });
}

export function canonicalJson(value: unknown): string {
  return JSON.stringify(sorted(value));
}

function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted);
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, item]) => item !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, item]) => [key, sorted(item)] as const);
  return Object.fromEntries(entries);
}
