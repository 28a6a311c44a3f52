import type { LocationDocument, StoredDocument } from '../shared/core/lock/document';
import type {
  ListOptions,
  ListPage,
  PriorityOption,
  ReadOptions,
} from '../shared/core/store/ports/locations';
import { ForwardingStore } from './forwardingStore';

const quoted = (etag: string) => `"${etag}"`;
const isQuoted = (etag: string) => etag.length >= 2 && etag.startsWith('"') && etag.endsWith('"');

/**
 * Cosmos DB's ETags as the real service hands them out, over a stand-in whose ETags are bare (SQLite,
 * @vercel/cosmosdb-server): every ETag leaves quoted (`"00000000-…"`), and a condition must come back in
 * exactly that form. A bare or re-quoted ETag matches nothing, as it would not on Cosmos DB, so a layer
 * that strips or adds quotes on the way to the store gets its 412.
 */
export class QuotingStore extends ForwardingStore {
  private static out(stored: StoredDocument): StoredDocument {
    return { ...stored, etag: quoted(stored.etag) };
  }
  private static in(ifMatch: string): string {
    return isQuoted(ifMatch) ? ifMatch.slice(1, -1) : `${ifMatch} (not an ETag this store handed out)`;
  }

  override async read(id: string, options: ReadOptions): Promise<StoredDocument> {
    return QuotingStore.out(await super.read(id, options));
  }
  override async create(doc: LocationDocument, options?: PriorityOption): Promise<StoredDocument> {
    return QuotingStore.out(await super.create(doc, options));
  }
  override async replace(
    doc: LocationDocument,
    ifMatch: string,
    options?: PriorityOption,
  ): Promise<StoredDocument> {
    return QuotingStore.out(await super.replace(doc, QuotingStore.in(ifMatch), options));
  }
  override delete(id: string, ifMatch: string, options?: PriorityOption): Promise<void> {
    return super.delete(id, QuotingStore.in(ifMatch), options);
  }
  override async list(options: ListOptions): Promise<ListPage> {
    const page = await super.list(options);
    return { ...page, items: page.items.map((item) => QuotingStore.out(item)) };
  }
}
