import { type HeldCopy, readAction, windowFrom, withinTtl } from '../shared/core/lock/readPolicy';

/**
 * Broken read policies, planted through the router's `readAction` seam (shared/core/router.ts
 * `RouterSeams`) by tests and verify's negative controls: each is a way to get the announced read path
 * wrong, and each must be caught by the assertion that guards it.
 * - `leaveOnOwnTimestamps`: a replica copy is judged as if the write region had shown it, so a write lock
 *   or window that looks dead on the copy's own timestamps ends the read-through (it may have been
 *   renewed or activated since);
 * - `replicaInWindow`: in the window a copy past its TTL is refreshed from the nearest replica, and a
 *   replica's fresh copy is served there, replacing the write region's;
 * - `servedPastTtl`: outside the window a copy is served whatever its age;
 * - `legacyForAll`: every lock read by the legacy rule (a reader built before announced locks): safe,
 *   but it reads the write region from every lock's start.
 */
export type ReadPolicyBug = 'leaveOnOwnTimestamps' | 'replicaInWindow' | 'servedPastTtl' | 'legacyForAll';

export function plantedReadAction(bug: ReadPolicyBug): typeof readAction {
  return (copy, now, timing) => {
    if (copy === undefined) return readAction(copy, now, timing);
    if (bug === 'leaveOnOwnTimestamps')
      return readAction({ ...copy, provenance: 'writeRegion' }, now, timing);
    if (bug === 'legacyForAll') return readAction(asLegacy(copy), now, timing);
    const real = readAction(copy, now, timing);
    const fresh = withinTtl(copy, now, timing);
    const inWindow = now >= windowFrom(copy, timing.clockSkewSeconds);
    if (bug === 'servedPastTtl') return !inWindow && !fresh ? { kind: 'serve' } : real;
    if (!inWindow) return real;
    if (!fresh) return { kind: 'refresh' };
    return copy.provenance === 'replica' ? { kind: 'serve' } : real;
  };
}

/** The copy with its lock's announcement dropped: what a reader that does not know the field sees. */
function asLegacy(copy: HeldCopy): HeldCopy {
  const lock = copy.doc.lock;
  if (lock === null || lock.announceLeadSeconds === undefined) return copy;
  const { announceLeadSeconds: _lead, ...legacy } = lock;
  return { ...copy, doc: { ...copy.doc, lock: legacy } };
}
