import { type LocationDocument, sameLocation } from '../../shared/core/lock/document';
import { hardDeleteInForce, isLive, writeLockInForce } from '../../shared/core/lock/state';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { ForwardingStore } from '../../testkit/forwardingStore';
import { type Fleet, regionData, truthOrNull, violation } from './state';
import type { ViolationKind } from './types';
import { afterSwap } from './routeDeleter';
import { locationKey } from './world';

/** The write region, checking every committed version against the previous one: no partial cutover. */
export class CommitWatchingStore extends ForwardingStore {
  private readonly last = new Map<string, LocationDocument>();

  constructor(
    inner: LocationStore,
    private readonly now: () => number,
    private readonly violation: (resourceId: string, message: string, kind: ViolationKind) => void,
    private readonly onSwap: (before: LocationDocument, after: LocationDocument) => void,
    /** The end of the latest retired-source window of a route, kept by the harness across a delete. */
    private readonly retiredUntil: (resourceId: string) => number | undefined,
    /** The most any clock is ahead of (or behind) true time: the declared skew's half. */
    private readonly maxOffsetMs: number,
    /** Every committed version after the one before it (the harness's read statistics). */
    private readonly onCommit: (before: LocationDocument, after: LocationDocument) => void = () => undefined,
  ) {
    super(inner);
  }
  override async create(doc: LocationDocument) {
    const stored = await this.inner.create(doc);
    this.last.set(doc.id, stored.doc);
    return stored;
  }
  override async replace(doc: LocationDocument, ifMatch: string) {
    const stored = await this.inner.replace(doc, ifMatch);
    const before = this.last.get(doc.id);
    this.last.set(doc.id, stored.doc);
    if (before) {
      this.checkVersion(before, stored.doc);
      this.onCommit(before, stored.doc);
    }
    return stored;
  }

  /**
   * A failover's revert (verify/fleet/faults.ts): the write region holds `doc` again. Not a protocol
   * write, so not checked; the next write is checked against it.
   */
  async restore(doc: LocationDocument): Promise<void> {
    const current = await this.inner.read(doc.id, { from: 'writeRegion' });
    const stored = await this.inner.replace(doc, current.etag);
    this.last.set(doc.id, stored.doc);
  }

  private checkVersion(before: LocationDocument, after: LocationDocument): void {
    const now = this.now();
    const problems: string[] = [];
    const lock = after.lock;
    if (lock && Date.parse(lock.expiresAt) > Date.parse(lock.maxExpiresAt))
      problems.push('a lock lease past its cap');
    for (const phaseEnd of [lock?.hardDeleteExpiresAt, lock?.writeExpiresAt])
      if (lock && phaseEnd && Date.parse(phaseEnd) > Date.parse(lock.expiresAt))
        problems.push('a phase lease past its parent lease');
    // Live on every clock within the skew: even one that is maxOffset ahead of true time.
    const liveEverywhere = (l: LocationDocument['lock']) => isLive(l, now + this.maxOffsetMs);
    if (before.lock && lock && liveEverywhere(before.lock) && before.lock.migrationId !== lock.migrationId)
      problems.push(`a live lock of ${before.lock.migrationId} replaced by one of ${lock.migrationId}`);
    // A phase boundary as the clock furthest ahead sees it: nothing may extend or build on a phase that
    // clock already sees over (the clock-skew margins).
    const ahead = now + this.maxOffsetMs;
    const was = before.lock;
    if (was && lock && was.migrationId === lock.migrationId) {
      const later = (a: string | undefined, b: string | undefined) =>
        a !== undefined && b !== undefined && Date.parse(a) > Date.parse(b);
      if (was.phase === 'write' && lock.phase === 'write' && later(lock.writeExpiresAt, was.writeExpiresAt))
        if (!writeLockInForce(was, ahead))
          problems.push(
            `the write lock extended after a clock within the skew saw it end (${was.writeExpiresAt})`,
          );
      if (
        was.phase === 'hardDelete' &&
        lock.phase === 'hardDelete' &&
        later(lock.hardDeleteExpiresAt, was.hardDeleteExpiresAt) &&
        !hardDeleteInForce(was, ahead)
      )
        problems.push(
          `the hard-delete lock extended after a clock within the skew saw it end (${was.hardDeleteExpiresAt})`,
        );
      if (was.phase === 'hardDelete' && lock.phase === 'write' && !hardDeleteInForce(was, ahead))
        problems.push(
          `escalated to write after a clock within the skew saw the hard-delete lock end (${was.hardDeleteExpiresAt})`,
        );
    }
    if (lock?.phase === 'prelock' && before.lock?.migrationId !== lock.migrationId) {
      // A new migration's pre-lock: never while the retired source of the route's last swap is still
      // write-blocked on every clock, whatever happened to the route in between (a delete, a re-create).
      const until = this.retiredUntil(after.id);
      if (until !== undefined && now + this.maxOffsetMs < until)
        this.violation(
          after.id,
          `${lock.migrationId} pre-locked ${Math.round((until - now) / 1000)} s before the retired-source window of its last swap ends (${new Date(until).toISOString()})`,
          'window',
        );
    }
    if (!sameLocation(before.location, after.location)) {
      this.checkCutover(before, after, problems);
      this.onSwap(before, after);
    }
    for (const p of problems) this.violation(after.id, p, 'version');
  }

  private checkCutover(before: LocationDocument, after: LocationDocument, problems: string[]): void {
    const now = this.now();
    // In force on every clock within the skew (the one furthest ahead lets writes in first).
    if (!before.lock || !writeLockInForce(before.lock, now + this.maxOffsetMs))
      problems.push('the location changed without a write lock in force (on every clock)');
    else if (!sameLocation(after.location, before.lock.target))
      problems.push("the location changed to somewhere other than the lock's target");
    if (after.lock !== null) problems.push('the location changed but the lock stayed (partial cutover)');
    if (after.secondary?.role !== 'retiredSource' || !sameLocation(after.secondary.location, before.location))
      problems.push('the location changed without retiring the source');
  }
}

/** After a swap, once requests in flight have landed, the new location must hold what was acknowledged. */
export const checkData = (f: Fleet, id: string, when: string): Promise<void> =>
  truthOrNull(f, id).then((doc) => {
    if (!doc) return; // deleted for a moment: checked again at the end
    const live = new Set(regionData(f, doc.location).shelf(id).live);
    const want = f.expected.get(id) as Set<string>;
    const lost = [...want].filter((item) => !live.has(item) && !f.reported.has(item));
    const back = [...live].filter((item) => !want.has(item) && !f.reported.has(item));
    for (const item of [...lost, ...back]) f.reported.add(item);
    const at = `at ${locationKey(doc.location)} ${when}`;
    if (lost.length > 0)
      violation(
        f,
        id,
        `${lost.length} acknowledged write(s) missing ${at}: ${lost.slice(0, 3).join(', ')}`,
        'data',
      );
    if (back.length > 0)
      violation(f, id, `${back.length} deleted item(s) back ${at}: ${back.slice(0, 3).join(', ')}`, 'data');
  });

/**
 * A swap committed: its retired-source window is kept for the route (it outlives a delete), the data
 * at the new location is checked once requests in flight have landed, and the route-deleting actor
 * may come.
 */
export function swapped(f: Fleet, before: LocationDocument, after: LocationDocument): void {
  if (after.secondary?.role === 'retiredSource')
    f.retiredUntil.set(after.id, Date.parse(after.secondary.writesBlockedUntil));
  if (before.location.region === after.location.region) f.stats.accountMoves.swapped += 1;
  void f.scheduler
    .timer(f.clock.now() + f.inFlightBoundMs + 1)
    .promise.then(() => checkData(f, after.id, 'after its swap'));
  afterSwap(f, after.id);
}
