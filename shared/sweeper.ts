import type { Clock } from './clock';
import { isRouteLockError } from './errors';
import { isLive } from './lock/state';
import { knowsSchemaOf, sameEtag } from './lock/document';
import type { Router } from './router';

/**
 * The orphan sweeper: finds locks whose parent lease has expired and clears them with a conditional
 * write (`lastChange: reclaim`, which the change feed turns into OrphanedLockReclaimed and an audit
 * record). Expired locks already restrict nothing; this keeps the documents and dashboards honest.
 */
export async function sweepOrphans(options: {
  router: Router;
  clock: Clock;
  pageSize?: number;
}): Promise<{ scanned: number; reclaimed: { resourceId: string; ageSeconds: number }[] }> {
  let scanned = 0;
  const reclaimed: { resourceId: string; ageSeconds: number }[] = [];
  let continuation: string | undefined;
  do {
    // Through the router, which sends it low priority (docs/design.md §5.7).
    const page = await options.router.listRoutes({
      lockedOnly: true,
      limit: options.pageSize ?? 100,
      continuation,
    });
    for (const { doc, etag } of page.items) {
      scanned += 1;
      // A newer schema's orphan is left to a library that knows it (its reclaim would be refused).
      if (!doc.lock || isLive(doc.lock, options.clock()) || !knowsSchemaOf(doc)) continue;
      try {
        const stored = await options.router.reclaim(doc.id);
        if (sameEtag(stored.etag, etag) || stored.doc.lastChange?.op !== 'reclaim') continue; // nothing written
        reclaimed.push({ resourceId: doc.id, ageSeconds: stored.doc.lastChange.ageSeconds ?? 0 });
      } catch (error) {
        // Renewed or re-locked since the page was read: not an orphan any more (or, since, of a newer schema).
        if (
          !isRouteLockError(error, 'Locked') &&
          !isRouteLockError(error, 'PreconditionFailed') &&
          !isRouteLockError(error, 'UnsupportedSchemaVersion')
        )
          throw error;
      }
    }
    continuation = page.continuation ?? undefined;
  } while (continuation);
  return { scanned, reclaimed };
}
