import { isRouteLockError } from '../../shared/core/errors';
import type { Decision } from '../../shared/core/client';
import { type LocationDocument, sameLocation } from '../../shared/core/lock/document';
import { type Enforcement, type Operation, type RouteView, enforcement } from '../../shared/core/lock/view';
import { type Tier, controlsWithHotBursts } from './controls';
import type { Service } from './services';
import { type Fleet, harnessError, note, regionData, truthOrNull, violation } from './state';
import { heldReadKey } from './services';
import { LANDING_STEP_MS, LOCATIONS, locationKey, pick } from './world';

/**
 * A user's request: to a location's service and one of its tiers, following one redirect, checked
 * against the write region at that very instant.
 */
async function userOp(
  f: Fleet,
  resourceId: string,
  location: string,
  tierIndex: number,
  op: Operation,
): Promise<void> {
  let serving = location;
  for (let hop = 0; hop < 2; hop += 1) {
    const service = f.services.get(serving) as Service;
    const tier = service.tiers[tierIndex] as Tier;
    const at = f.clock.now();
    // The write region's copy as the request begins: a lock committed after this is one the request
    // could not have seen; the in-flight grace, not the service, has to cover it.
    const beforeStored = await f.writeRegion.read(resourceId, { from: 'writeRegion' }).catch((e: unknown) => {
      if (isRouteLockError(e, 'NotFound')) return null; // the route-deleting actor is at work
      throw e;
    });
    if (!beforeStored) {
      f.stats.userOps.noRoute += 1;
      return;
    }
    let before = beforeStored.doc;
    let beforeEtag = beforeStored.etag;
    let view: RouteView;
    try {
      view = (await tier.view(resourceId)).view;
    } catch (error) {
      if (isRouteLockError(error, 'StoreUnavailable')) {
        f.stats.userOps.unavailable += 1;
        return;
      }
      if (isRouteLockError(error, 'NotFound')) {
        f.stats.userOps.noRoute += 1;
        return;
      }
      throw error;
    }
    // Time moves during a resolve only when it joined a hot resource's slow read (hotBursts): its answer
    // is that read's, so it is judged as that read began (a request that resolved then, §5.8); its own
    // in-flight budget still counts from its own start, and a resolve that used it all up gives up.
    let judgedAt = at;
    if (f.clock.now() !== at) {
      const joined = f.bursts.get(`${serving} ${resourceId}`);
      if (!joined)
        throw new Error(
          `harness: virtual time moved during one user operation (${op} at ${serving} tier ${tierIndex}, ${f.clock.now() - at} ms)`,
        );
      f.stats.userOps.joined += 1;
      judgedAt = joined.at;
      before = joined.before.doc;
      beforeEtag = joined.before.etag;
      if (op !== 'read' && f.clock.now() - at >= 0.9 * f.inFlightBoundMs) {
        f.stats.userOps.gaveUp += 1;
        return;
      }
    }
    const decision = f.decideAs(view, op, service.serves);
    if (tier === service.client) countClientDecision(f, op, decision);
    if (decision.kind === 'notHere') {
      f.stats.userOps.redirected += 1;
      serving = locationKey(decision.location);
      continue;
    }
    // Judged in true time, allowing each service the clock offset the declared skew allows: a
    // decision is wrong only if it is wrong on every clock within maxOffset of true time.
    const [early, inForce, late] = [judgedAt - f.maxOffsetMs, judgedAt, judgedAt + f.maxOffsetMs].map((t) =>
      enforcement(before, t, f.timing),
    ) as [Enforcement, Enforcement, Enforcement];
    const where = `${op} at ${serving} (tier ${f.tierNames[tierIndex]}, clock ${service.offsetMs >= 0 ? '+' : ''}${service.offsetMs} ms)`;
    if (op === 'read') {
      f.stats.userOps.reads += 1;
      return;
    }
    const verdict = (e: Enforcement) => (op === 'write' ? e.write : e.delete);
    if (decision.kind === 'deny') {
      f.stats.userOps.refused += 1;
      const afterDoc = await truthOrNull(f, resourceId);
      const views = [early, inForce, late];
      if (afterDoc)
        for (const t of [judgedAt - f.maxOffsetMs, judgedAt, judgedAt + f.maxOffsetMs])
          views.push(enforcement(afterDoc, t, f.timing));
      if (!views.some((e) => verdict(e) === 'deny'))
        violation(
          f,
          resourceId,
          `${where} refused with no write lock in force (a lock outlived its lease)`,
          'decision',
        );
      return;
    }
    // A lock that committed while this request resolved its route is one it could not have seen:
    // judged as the request began (`before`), and left to the in-flight grace and the data oracle.
    const now = await f.writeRegion.read(resourceId, { from: 'writeRegion' }).catch(() => null);
    if (now?.etag !== beforeEtag) f.stats.userOps.raced += 1;
    judgeAccepted(f, { resourceId, where, op, decision, before, service, early, late });
    // Requests take a while to land what they decided, within the declared in-flight bound.
    const land = () =>
      landDecision(f, resourceId, serving, op, decision.kind === 'tombstone', where, judgedAt, inForce);
    // what is left of the request's in-flight budget (all of it, unless its resolve joined a slow read)
    const resolvedAt = f.clock.now();
    const steps = Math.floor((0.9 * f.inFlightBoundMs - (resolvedAt - at)) / LANDING_STEP_MS);
    if (steps > 0) {
      const landAt = resolvedAt + LANDING_STEP_MS * (1 + Math.floor(f.random() * steps));
      void f.scheduler.timer(landAt).promise.then(land).catch(harnessError(f, resourceId));
    } else {
      await land();
    }
    return;
  }
}

/**
 * A hot resource (docs/design.md §5.8): for up to four resources being migrated, one tier of the service
 * where the route lives gets a slow write-region read of it (throttled: a tenth of the in-flight grace to
 * twice it), and six writes arrive at that tier while it is in flight. With the configured join bound (50 ms)
 * only those within 50 ms join it, and land within the grace of when it began (or give up when it outlasts
 * their budget); with the control's bound (twice the grace) they join it late, take an answer older than the
 * grace, and land after the copies started.
 */
export function hotBursts(f: Fleet): void {
  if (f.inFlightBoundMs <= 0 || !controlsWithHotBursts.has(f.control)) return;
  const migrating = [...f.running.keys()];
  for (let b = 0; b < Math.min(4, migrating.length); b += 1) {
    const resourceId = pick(f.random, migrating);
    const tierIndex = Math.floor(f.random() * (f.tierNames.length - 1)); // a router's tier, not the client
    // a tenth of the grace to twice it: short ones let a joiner land, long ones outlast its budget
    const heldMs = Math.round(f.inFlightBoundMs * (0.1 + 1.9 * f.random()));
    const followersAt = Array.from({ length: 6 }, () => Math.floor(f.random() * heldMs));
    void hotBurst(f, resourceId, tierIndex, heldMs, followersAt).catch(harnessError(f, resourceId));
  }
}

async function hotBurst(
  f: Fleet,
  resourceId: string,
  tierIndex: number,
  heldMs: number,
  followersAt: number[],
): Promise<void> {
  const before = await f.writeRegion.read(resourceId, { from: 'writeRegion' }).catch(() => null);
  if (!before) return;
  const serving = locationKey(before.doc.location);
  const burstKey = `${serving} ${resourceId}`;
  // one burst at a time per service and resource (two may have been drawn in one round)
  if (f.bursts.has(burstKey)) return;
  const at = f.clock.now();
  const service = f.services.get(serving) as Service;
  const tier = service.tiers[tierIndex] as Tier;
  const key = heldReadKey(serving, tierIndex, resourceId);
  f.heldReads.set(key, heldMs);
  // The leader: a read; its router's write-region read (if it needs one) is the slow one.
  const leader = tier.view(resourceId).catch(() => undefined);
  const slow = !f.heldReads.has(key);
  f.heldReads.delete(key);
  if (!slow) return; // served from cache, or a nearest copy first: nothing held open
  f.stats.userOps.bursts += 1;
  f.bursts.set(burstKey, { at, before });
  for (const offset of followersAt)
    void f.scheduler
      .timer(at + offset)
      .promise.then(() => userOp(f, resourceId, serving, tierIndex, 'write'))
      .catch(harnessError(f, resourceId));
  await leader;
  // the joiners' continuations run at this instant too; the record goes with the next instant
  void f.scheduler.timer(f.clock.now() + 1).promise.then(() => f.bursts.delete(burstKey));
}

/** What the client tier decided: redirects, reads, and the writes and deletes the oracles judge. */
function countClientDecision(f: Fleet, op: Operation, decision: Decision): void {
  const c = f.stats.clientTier;
  if (decision.kind === 'notHere') c.redirects += 1;
  else if (op === 'read') c.reads += 1;
  else c.decisions += 1;
}

/**
 * An accepted write or delete, judged as the request began (`before`) on every clock within the skew
 * (`early`, `late`): only at the committed location, never during the write lock, no physical delete
 * while any lock is in force.
 */
function judgeAccepted(
  f: Fleet,
  request: {
    resourceId: string;
    where: string;
    op: Operation;
    decision: Decision;
    before: LocationDocument;
    service: Service;
    early: Enforcement;
    late: Enforcement;
  },
): void {
  const { resourceId, where, op, decision, before, service, early, late } = request;
  if (!sameLocation(before.location, service.location))
    violation(
      f,
      resourceId,
      `${where} accepted; the route is at ${locationKey(before.location)}`,
      'decision',
    );
  if (op === 'write' && early.write !== 'allow' && late.write !== 'allow')
    violation(f, resourceId, `${where} accepted during the write lock`, 'decision');
  if (op === 'delete' && early.delete === 'deny' && late.delete === 'deny')
    violation(
      f,
      resourceId,
      `${where}: ${decision.kind === 'tombstone' ? 'tombstone' : 'delete'} accepted during the write lock`,
      'decision',
    );
  else if (
    op === 'delete' &&
    decision.kind === 'allow' &&
    early.delete !== 'allow' &&
    late.delete !== 'allow'
  )
    violation(
      f,
      resourceId,
      `${where}: physical delete accepted while the ${before.lock?.phase} lock is in force`,
      'decision',
    );
}

/** A decided write or delete lands (a while after its decision, under a lock committed meanwhile or not). */
async function landDecision(
  f: Fleet,
  resourceId: string,
  serving: string,
  op: Operation,
  tombstone: boolean,
  where: string,
  decidedAt: number,
  decided: Enforcement,
): Promise<void> {
  const items = regionData(f, serving);
  let late = '';
  if (f.clock.now() > decidedAt) {
    late = ` (landed ${f.clock.now() - decidedAt} ms after its decision)`;
    const doc = await truthOrNull(f, resourceId);
    const now = doc ? enforcement(doc, f.clock.now(), f.timing) : decided;
    const verdict = (e: Enforcement) => (op === 'write' ? e.write : e.delete);
    if (verdict(decided) === 'allow' && verdict(now) !== 'allow') {
      f.stats.userOps.landedUnderLock += 1;
      late += ', under a lock that committed meanwhile';
    }
  }
  if (op === 'write') {
    const itemId = `${resourceId}.i${++f.itemSerial}`;
    items.write(resourceId, itemId);
    (f.expected.get(resourceId) as Set<string>).add(itemId);
    f.stats.userOps.writes += 1;
    note(f, resourceId, `${where}: accepted ${itemId}${late}`);
    return;
  }
  const live = items.shelf(resourceId).live;
  if (live.length === 0) return;
  const itemId = pick(f.random, live);
  (f.expected.get(resourceId) as Set<string>).delete(itemId);
  f.stats.userOps.deletes += 1;
  if (tombstone) {
    f.stats.userOps.tombstoned += 1;
    items.tombstone(resourceId, itemId);
    note(f, resourceId, `${where}: tombstoned ${itemId}${late}`);
  } else {
    items.shelf(resourceId).remove(itemId);
    note(f, resourceId, `${where}: deleted ${itemId}${late}`);
  }
}

/** One round of user traffic: as many requests as resources, each to a random resource, location and tier. */
export async function traffic(f: Fleet): Promise<void> {
  hotBursts(f);
  for (let i = 0; i < f.options.resources; i += 1) {
    const r = f.random();
    const op: Operation = r < 0.45 ? 'read' : r < 0.85 ? 'write' : 'delete';
    await userOp(
      f,
      pick(f.random, f.resources),
      locationKey(pick(f.random, LOCATIONS)),
      Math.floor(f.random() * f.tierNames.length),
      op,
    );
  }
}
