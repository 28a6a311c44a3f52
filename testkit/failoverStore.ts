import type { Clock } from '../shared/core/clock';
import { type LocationDocument, type StoredDocument, sameLocation } from '../shared/core/lock/document';
import type { LocationStore, PriorityOption } from '../shared/core/store/ports/locations';
import { ForwardingStore, type StoreCall } from './forwardingStore';

/**
 * A store whose write region fails over after a swap and drops it, as a bounded-staleness account may
 * lose the writes it acknowledged within the replication window (docs/design.md §6.11): `afterMs` after a
 * swap committed (a write moving a locked route's location), the document reverts to the version before it,
 * on every read from then on, replicas included. `drops` swaps are lost at most (default 1).
 */
export class FailoverStore extends ForwardingStore {
  private readonly due: { at: number; before: LocationDocument }[] = [];
  /** Every swap the failover dropped: the document's id and when. */
  readonly dropped: { id: string; at: number }[] = [];
  private left: number;

  constructor(
    inner: LocationStore,
    private readonly clock: Clock,
    private readonly afterMs: number,
    drops = 1,
  ) {
    super(inner);
    this.left = drops;
  }

  override get kind(): string {
    return `failover(${this.inner.kind})`;
  }

  protected override async around<T>(_call: StoreCall, work: () => Promise<T>): Promise<T> {
    await this.failOver();
    return work();
  }

  override async replace(
    doc: LocationDocument,
    ifMatch: string,
    options?: PriorityOption,
  ): Promise<StoredDocument> {
    await this.failOver();
    const before = (await this.inner.read(doc.id, { from: 'writeRegion' })).doc;
    const stored = await this.inner.replace(doc, ifMatch, options);
    const swap = before.lock !== null && doc.lock === null && !sameLocation(before.location, doc.location);
    if (swap && this.left > 0) {
      this.left -= 1;
      this.due.push({ at: this.clock() + this.afterMs, before: structuredClone(before) });
    }
    return stored;
  }

  /** The failovers now due: each document back to its version before the swap. */
  private async failOver(): Promise<void> {
    const now = this.clock();
    for (const drop of this.due.filter((d) => d.at <= now)) {
      this.due.splice(this.due.indexOf(drop), 1);
      const current = await this.inner.read(drop.before.id, { from: 'writeRegion' });
      await this.inner.replace(drop.before, current.etag);
      this.dropped.push({ id: drop.before.id, at: now });
    }
  }
}
