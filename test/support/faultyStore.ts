import type { LocationDocument, StoredDocument } from '../../shared/lock/document';
import { RouteLockError } from '../../shared/errors';
import type { ListOptions, ListPage, LocationStore, ReadFrom } from '../../shared/store/ports/locations';

/** Wraps a store; while `down`, every call fails as a throttled or unavailable Cosmos account would. */
export class FaultyStore implements LocationStore {
  down = false;
  constructor(private readonly inner: LocationStore) {}
  get kind() {
    return this.inner.kind;
  }
  get counters() {
    return this.inner.counters;
  }
  private check(): void {
    if (this.down)
      throw new RouteLockError('StoreUnavailable', 'Store throttled (429).', { retryAfterSeconds: 2 });
  }
  async read(id: string, options: { from: ReadFrom }): Promise<StoredDocument> {
    this.check();
    return this.inner.read(id, options);
  }
  async create(doc: LocationDocument): Promise<StoredDocument> {
    this.check();
    return this.inner.create(doc);
  }
  async replace(doc: LocationDocument, ifMatch: string): Promise<StoredDocument> {
    this.check();
    return this.inner.replace(doc, ifMatch);
  }
  async delete(id: string, ifMatch: string): Promise<void> {
    this.check();
    return this.inner.delete(id, ifMatch);
  }
  async list(options: ListOptions): Promise<ListPage> {
    this.check();
    return this.inner.list(options);
  }
  async close(): Promise<void> {
    return this.inner.close();
  }
}
