import { RouteLockError } from '../../shared/core/errors';
import { newLocationDocument } from '../../shared/core/lock/document';
import type { ChangeListing, LocationStore } from '../../shared/core/store/ports/locations';
import { changeListingOf } from '../../shared/core/store/ports/locations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { AuditTrail, AuditedLocationStore } from '../../shared/migration/auditTrail';
import { nullSink } from '../../shared/migration/telemetry/sink';
import { SqliteAuditLedger } from '../../shared/core/store/sqlite/audit';
import { useCosmosServers } from '../support/cosmosServers';

/** The listing by change time both adapters give the reconciliation: the window, the pages, a forged token. */

const servers = useCosmosServers();
const adapters: [string, () => Promise<LocationStore & ChangeListing>][] = [
  ['sqlite', async () => new SqliteStore(':memory:')],
  ['cosmos (@vercel/cosmosdb-server)', async () => servers.stock.connect()],
  ['cosmos (@vercel/cosmosdb-server, quoted ETags)', async () => servers.quoted.connect()],
];

describe.each(adapters)('listChanged: %s', (_name, open) => {
  test('documents last written in [since, until), every one once across pages, each with its ETag', async () => {
    const store = await open();
    try {
      const before = Date.now() - 2000;
      const written = new Map<string, string>();
      for (let i = 0; i < 7; i += 1) {
        const { etag } = await store.create(newLocationDocument(`lc-${i}`, { region: 'westeurope' }));
        written.set(`lc-${i}`, etag);
      }
      const until = Date.now() + 2000;
      const seen = new Map<string, string>();
      let continuation: string | undefined;
      let pages = 0;
      do {
        const page = await store.listChanged({ since: before, until, limit: 3, continuation });
        for (const item of page.items) {
          expect(seen.has(item.doc.id)).toBe(false);
          seen.set(item.doc.id, item.etag);
          expect(item.storedAt).toEqual(expect.any(Number));
        }
        continuation = page.continuation ?? undefined;
        pages += 1;
      } while (continuation && pages < 10);
      expect(seen).toEqual(written);
      expect(pages).toBeGreaterThanOrEqual(3);
      // negative control: a window that ends before the writes lists none of them
      const earlier = await store.listChanged({ since: before - 60_000, until: before - 30_000, limit: 10 });
      expect(earlier.items).toEqual([]);
      // a token no store handed out is refused (the stand-in does not check the SDK's own tokens)
      if (store.kind === 'sqlite')
        await expect(
          store.listChanged({ since: before, until, limit: 3, continuation: 'bm90LWEtdG9rZW4' }),
        ).rejects.toBeInstanceOf(RouteLockError);
    } finally {
      await store.close();
    }
  }, 30_000);
});

test('changeListingOf looks through the audit decorator; a store without a listing has none', () => {
  const store = new SqliteStore(':memory:');
  const ledger = new SqliteAuditLedger(':memory:');
  const audited = new AuditedLocationStore(store, new AuditTrail({ ledger, sink: nullSink }));
  expect(changeListingOf(audited)).toBe(store);
  expect(changeListingOf({ ...audited, unwrapped: undefined } as unknown as LocationStore)).toBeUndefined();
});
