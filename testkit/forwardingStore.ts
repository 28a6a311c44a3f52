import type { LocationDocument, StoredDocument } from '../shared/core/lock/document';
import type {
  ListOptions,
  ListPage,
  LocationStore,
  PriorityOption,
  ReadOptions,
  RequestPriority,
  StoreCounters,
} from '../shared/core/store/ports/locations';

/**
 * One call that goes through a wrapper: the method, the document it names (a list names none), and
 * the priority it asked for (absent: none, the store's default).
 */
export interface StoreCall {
  method: 'read' | 'create' | 'replace' | 'delete' | 'list';
  id?: string;
  priority?: RequestPriority;
}

const priorityOf = (options: PriorityOption | undefined) =>
  options?.priority === undefined ? {} : { priority: options.priority };

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

  read(id: string, options: ReadOptions): Promise<StoredDocument> {
    return this.around({ method: 'read', id, ...priorityOf(options) }, () => this.inner.read(id, options));
  }
  create(doc: LocationDocument, options?: PriorityOption): Promise<StoredDocument> {
    return this.around({ method: 'create', id: doc.id, ...priorityOf(options) }, () =>
      this.inner.create(doc, options),
    );
  }
  replace(doc: LocationDocument, ifMatch: string, options?: PriorityOption): Promise<StoredDocument> {
    return this.around({ method: 'replace', id: doc.id, ...priorityOf(options) }, () =>
      this.inner.replace(doc, ifMatch, options),
    );
  }
  delete(id: string, ifMatch: string, options?: PriorityOption): Promise<void> {
    return this.around({ method: 'delete', id, ...priorityOf(options) }, () =>
      this.inner.delete(id, ifMatch, options),
    );
  }
  list(options: ListOptions): Promise<ListPage> {
    return this.around({ method: 'list', ...priorityOf(options) }, () => this.inner.list(options));
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
