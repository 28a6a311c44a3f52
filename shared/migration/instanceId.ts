import { createHash } from 'node:crypto';

/**
 * Ids derived from a resource id that must fit a service's length limit: the Durable Functions instance
 * id and the Cosmos DB claim id. Not in types.ts: the workflow's files import no crypto (a hash is
 * deterministic, but the rule keeps them free of it), and the workflow never needs these ids.
 */

/**
 * `{prefix}{value}` when it fits in `maxLength`, else `{prefix}{head}~{32 hex of sha256(value)}`, exactly
 * `maxLength` long: deterministic, and never equal to another value's id (resource ids cannot hold `~`,
 * so a hashed form is never some other resource's plain form).
 */
export function boundedId(prefix: string, value: string, maxLength: number): string {
  const plain = `${prefix}${value}`;
  if (plain.length <= maxLength) return plain;
  const hash = createHash('sha256').update(value).digest('hex').slice(0, 32);
  return `${prefix}${value.slice(0, maxLength - prefix.length - hash.length - 1)}~${hash}`;
}

/** The Durable Functions extension refuses instance ids longer than this. */
export const maxInstanceIdLength = 256;

/** One orchestration instance per resource: `migrate-{resourceId}`, hashed past the extension's limit. */
export const instanceIdFor = (resourceId: string): string =>
  boundedId('migrate-', resourceId, maxInstanceIdLength);
