import type { LocationDocument, StoredDocument } from '../shared/lock/document';
import type {
  ListOptions,
  ListPage,
  LocationStore,
  ReadFrom,
  StoreCounters,
} from '../shared/store/ports/locations';

/** One call that goes through a wrapper: the method, and the document it names (a list names none). */
export interface StoreCall {
  method: 'read' | 'create' | 'replace' | 'delete' | 'list';
  id?: string;
}

export const isWriteCall = (call: StoreCall): boolean =>
  call.method === 'create' || call.method === 'replace' || call.method === 'delete';

/**
 * A store that hands every call to `inner`: the base of the test wrappers (lagging replicas, faults,
 * observers), each overriding only what it changes. `around` wraps every call but `close`: a wrapper
 * that treats all calls alike (an outage, injected faults) overrides it alone.
 */
export class ForwardingStore<Inner extends LocationStore = LocationStore> implements LocationStore {
  constructor(protected readonly inner: Inner) {}

  get kind(): string {
    return this.inner.kind;
  }
  get counters(): StoreCounters {
    return this.inner.counters;
  }

  protected around<T>(_call: StoreCall, work: () => Promise<T>): Promise<T> {
    return work();
  }

  read(id: string, options: { from: ReadFrom }): Promise<StoredDocument> {
    return this.around({ method: 'read', id }, () => this.inner.read(id, options));
  }
  create(doc: LocationDocument): Promise<StoredDocument> {
    return this.around({ method: 'create', id: doc.id }, () => this.inner.create(doc));
  }
  replace(doc: LocationDocument, ifMatch: string): Promise<StoredDocument> {
    return this.around({ method: 'replace', id: doc.id }, () => this.inner.replace(doc, ifMatch));
  }
  delete(id: string, ifMatch: string): Promise<void> {
    return this.around({ method: 'delete', id }, () => this.inner.delete(id, ifMatch));
  }
  list(options: ListOptions): Promise<ListPage> {
    return this.around({ method: 'list' }, () => this.inner.list(options));
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
