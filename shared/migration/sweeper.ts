import type { Clock } from '../core/clock';
import { isRouteLockError } from '../core/errors';
import { liveLock } from '../core/lock/state';
import { bareEtag, knowsSchemaOf, sameEtag } from '../core/lock/document';
import type { Router } from '../core/router';
import { versionEventKey } from './telemetry/lockTelemetry';
import type { TelemetrySink } from './telemetry/sink';

/**
 * The orphan sweeper: finds locks whose parent lease has expired and clears them with a conditional
 * write (`lastChange: reclaim`, which the change feed turns into OrphanedLockReclaimed and an audit
 * record). Expired locks already restrict nothing; this keeps the documents and dashboards honest.
 * Each orphan found is reported (`OrphanedLockFound`, keyed on the version read, so two sweeps of the
 * same version count once) before the reclaim is tried: a reclaim that keeps failing still shows.
 */
export async function sweepOrphans(options: {
  router: Router;
  clock: Clock;
  pageSize?: number;
  sink?: Pick<TelemetrySink, 'event'>;
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
      const now = options.clock();
      if (!doc.lock || liveLock(doc, now) || !knowsSchemaOf(doc)) continue;
      options.sink?.event({
        name: 'OrphanedLockFound',
        properties: {
          eventKey: versionEventKey('OrphanedLockFound', doc.id, bareEtag(etag)),
          resourceId: doc.id,
          migrationId: doc.lock.migrationId,
          phase: doc.lock.phase,
          expiredAt: doc.lock.expiresAt,
        },
        measurements: { ageSeconds: Math.max(0, Math.floor((now - Date.parse(doc.lock.expiresAt)) / 1000)) },
      });
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
