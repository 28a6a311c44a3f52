import { type LocationDocument, sameLocation } from '../shared/core/lock/document';
import * as realRules from '../shared/core/lock/rules';
import { isLive } from '../shared/core/lock/state';
import { sha256Hex } from '../shared/core/lock/token';
import type { LockRules } from '../shared/core/router';
import type { Activities } from '../shared/migration/activities';

/**
 * The bugs verify plants to show its oracles catch them, always through an injection seam (the router's
 * rules, a store wrapper), never by editing the library. Tests plant them too, to show a guard holds.
 */
export type Bug =
  | 'none'
  | 'tokenCheckSkipped'
  | 'unconditionalWrite'
  | 'swapInTwoWrites'
  /** The replay rule before the security fix: key alone, and keys derived from the migration id. */
  | 'replayTrustsKeyAlone';

export function plantedRules(bug: Bug): Partial<LockRules> | undefined {
  if (bug === 'replayTrustsKeyAlone') {
    // The planted bug: a live pre-lock whose key hash, migration and target match is re-tokened for
    // anyone, whatever owner or principal asks.
    return {
      prelock: (doc, req, now, cfg) => {
        const lock = doc.lock;
        if (
          lock &&
          isLive(lock, now) &&
          lock.phase === 'prelock' &&
          req.idempotencyKey !== undefined &&
          lock.idempotencyKeyHash === sha256Hex(req.idempotencyKey) &&
          lock.migrationId === req.migrationId &&
          sameLocation(lock.target, req.target)
        )
          return { doc: { ...doc, lock: { ...lock, tokenHash: sha256Hex(req.newToken) } }, changed: true };
        return realRules.prelock(doc, req, now, cfg);
      },
    };
  }
  if (bug === 'swapInTwoWrites') {
    // The planted bug: a swap's first call moves the location and leaves the lock; the next one (the real
    // rule, on a document already at the target) clears the lock.
    return {
      swap: (doc, req, now, cfg) =>
        doc.lock && !sameLocation(doc.location, doc.lock.target)
          ? { doc: { ...doc, location: doc.lock.target }, changed: true }
          : realRules.swap(doc, req, now, cfg),
    };
  }
  if (bug !== 'tokenCheckSkipped') return undefined;
  // The planted bug: whatever token is presented is taken for the holder's.
  const trust = (doc: LocationDocument, token: string): LocationDocument =>
    doc.lock ? { ...doc, lock: { ...doc.lock, tokenHash: sha256Hex(token) } } : doc;
  return {
    escalate: (doc, req, now, cfg) => defaultRulesCall('escalate')(trust(doc, req.token), req, now, cfg),
    swap: (doc, req, now, cfg) => defaultRulesCall('swap')(trust(doc, req.token), req, now, cfg),
    renew: (doc, req, now, cfg) => defaultRulesCall('renew')(trust(doc, req.token), req, now, cfg),
  };
}

// The real rules, for the planted variants to delegate to.
const defaultRulesCall = <K extends 'escalate' | 'swap' | 'renew'>(name: K) =>
  realRules[name] as LockRules[K];

/**
 * A planted bug in how participants' answers are judged, injected through the activities (the seam both
 * runners call): `anyTwoHundredIsDone` is the rule before the strict contract (docs/design.md §6.5) — every
 * 2xx counts as done — planted by handing the workflow a 200 for any 2xx the participant answered.
 */
export type ParticipantBug = 'anyTwoHundredIsDone';

export function plantParticipantBug(activities: Activities, bug: ParticipantBug): void {
  if (bug !== 'anyTwoHundredIsDone') return;
  const call = activities.callParticipant;
  activities.callParticipant = async (input) => {
    const result = await call(input);
    if (!result.ok || result.value.status < 200 || result.value.status > 299) return result;
    return { ok: true, value: { status: 200, body: null } };
  };
}

/**
 * Confirmation switched off (the negative control of docs/design.md §6.11), planted through the activities:
 * the replica read after a swap answers what the swap itself answered, as a workflow that trusts the
 * acknowledged swap would, so a swap a failover dropped is reported Completed.
 */
export function plantUnconfirmedSwap(activities: Activities): void {
  const { swap, readRoute } = activities;
  let swapped: Awaited<ReturnType<Activities['swap']>> | undefined;
  activities.swap = async (input) => (swapped = await swap(input));
  activities.readRoute = async (input) =>
    input.from === 'replica' && swapped?.ok ? { ok: true, value: swapped.value.view } : readRoute(input);
}
