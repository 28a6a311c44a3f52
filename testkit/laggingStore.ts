import type { Clock } from '../shared/core/clock';
import { RouteLockError } from '../shared/core/errors';
import type { LocationDocument, StoredDocument } from '../shared/core/lock/document';
import {
  type ListOptions,
  type ListPage,
  type LocationStore,
  type ReadFrom,
  countRead,
  newCounters,
} from '../shared/core/store/ports/locations';
import { ForwardingStore } from './forwardingStore';

/**
 * A store whose "nearest" replica lags: it serves the newest version written at least `lagMs()` ago,
 * as a bounded-staleness replica may. Write-region reads and all writes go to the inner store.
 */
export class LaggingStore extends ForwardingStore {
  private readonly ownCounters = newCounters();
  private readonly history = new Map<string, { at: number; version: StoredDocument | null }[]>();

  constructor(
    inner: LocationStore,
    private readonly clock: Clock,
    private readonly lagMs: () => number,
  ) {
    super(inner);
  }

  override get kind(): string {
    return `lagging(${this.inner.kind})`;
  }
  override get counters() {
    return this.ownCounters;
  }

  override async read(id: string, { from }: { from: ReadFrom }): Promise<StoredDocument> {
    countRead(this.counters, from);
    if (from === 'writeRegion') return this.inner.read(id, { from });
    const visibleAt = this.clock() - this.lagMs();
    const versions = this.history.get(id) ?? [];
    let seen: StoredDocument | null = null;
    for (const v of versions) if (v.at <= visibleAt) seen = v.version;
    if (!seen) throw new RouteLockError('NotFound', `No route for resource ${id}.`, { resourceId: id });
    return seen;
  }

  override async create(doc: LocationDocument): Promise<StoredDocument> {
    this.counters.creates += 1;
    return this.record(await this.inner.create(doc));
  }

  override async replace(doc: LocationDocument, ifMatch: string): Promise<StoredDocument> {
    this.counters.replaces += 1;
    return this.record(await this.inner.replace(doc, ifMatch));
  }

  override async delete(id: string, ifMatch: string): Promise<void> {
    this.counters.deletes += 1;
    await this.inner.delete(id, ifMatch);
    this.push(id, null);
  }

  override async list(options: ListOptions): Promise<ListPage> {
    this.counters.lists += 1;
    return this.inner.list(options);
  }

  /**
   * A write-region failover that loses what was written after `cutoff` (epoch ms): the versions since
   * are forgotten, and the newest one before it is answered, to be written back (null: the route did not
   * exist then). Undefined when nothing was written since: nothing was lost.
   */
  dropWrittenAfter(id: string, cutoff: number): StoredDocument | null | undefined {
    const versions = this.history.get(id) ?? [];
    const kept = versions.filter((v) => v.at <= cutoff);
    if (kept.length === versions.length) return undefined;
    this.history.set(id, kept);
    return kept.at(-1)?.version ?? null;
  }

  private record(stored: StoredDocument): StoredDocument {
    this.push(stored.doc.id, stored);
    return stored;
  }

  private push(id: string, version: StoredDocument | null): void {
    const versions = this.history.get(id) ?? [];
    versions.push({ at: this.clock(), version: version && structuredClone(version) });
    this.history.set(id, versions);
  }
}
