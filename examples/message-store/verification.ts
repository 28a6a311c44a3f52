import { createHash } from 'node:crypto';
import type { VerifyAnswer } from '../../shared/migration/types';
import type { MessageRow } from './regionStore';

/**
 * The `verify` step's comparison (docs/design.md §6.5), pure: what one region holds of a conversation against
 * another's, as the copies leave it. A tombstone is applied at the target as a delete (RegionStore.copyFrom),
 * so a tombstoned row counts as absent on either side; a live row is its id, text and version
 * (updatedAt, carried by the copy). It names what differs by message id only, never by content.
 */

/** A conversation's live items, sorted by id: what the target must hold once the delta is copied. */
export const liveItems = (rows: readonly MessageRow[]): MessageRow[] =>
  rows
    .filter((r) => !r.deleted)
    .sort((a, b) => (a.messageId < b.messageId ? -1 : a.messageId > b.messageId ? 1 : 0));

/** sha256 over the sorted live items' (id, version, text), each field length-prefixed so no two sets collide. */
export function digestOf(rows: readonly MessageRow[]): string {
  const hash = createHash('sha256');
  for (const row of liveItems(rows)) {
    for (const field of [row.messageId, String(row.updatedAt), row.text])
      hash.update(`${Buffer.byteLength(field)}:${field};`);
    hash.update('\n');
  }
  return `sha256:${hash.digest('hex')}`;
}

/** How many ids the detail names of each kind (it goes into the migration's status). */
const NAMED = 3;

export function compareRegions(source: readonly MessageRow[], target: readonly MessageRow[]): VerifyAnswer {
  const from = liveItems(source);
  const to = new Map(liveItems(target).map((r) => [r.messageId, r]));
  const missing: string[] = [];
  const differing: string[] = [];
  for (const row of from) {
    const there = to.get(row.messageId);
    if (!there) missing.push(row.messageId);
    else if (there.text !== row.text || there.updatedAt !== row.updatedAt) differing.push(row.messageId);
    to.delete(row.messageId);
  }
  const extra = [...to.keys()];
  const sourceDigest = digestOf(from);
  const targetDigest = digestOf([...liveItems(target)]);
  const match = sourceDigest === targetDigest && from.length === target.filter((r) => !r.deleted).length;
  const answer: VerifyAnswer = {
    match,
    sourceCount: from.length,
    targetCount: target.filter((r) => !r.deleted).length,
    digest: targetDigest,
  };
  if (match) return answer;
  const name = (label: string, ids: string[]) =>
    ids.length === 0
      ? []
      : [`${ids.length} ${label} (${ids.slice(0, NAMED).join(', ')}${ids.length > NAMED ? ', …' : ''})`];
  const parts = [
    ...name('missing at the target', missing),
    ...name('different at the target', differing),
    ...name('only at the target', extra),
  ];
  return {
    ...answer,
    detail: `${parts.join('; ')}; source ${sourceDigest.slice(0, 19)}…, target ${targetDigest.slice(0, 19)}…`,
  };
}
