import type { ReconciliationConfig } from '../settings';
import { bareEtag } from '../../core/lock/document';
import type { ChangeListing } from '../../core/store/ports/locations';
import { type ChangedVersion, type TelemetryGapFound, reconcile, telemetryGapEvent } from './reconcile';
import type { SeenVersions } from './seen';
import type { TelemetrySink } from './sink';

/**
 * One reconciliation run (the shell around shared/migration/telemetry/reconcile.ts): page through the documents
 * last written in the window, look up what the change handler recorded as seen for each page, and emit a
 * `TelemetryGap` per gap and `telemetryGaps` once per run. The window ends `graceSeconds` before now (a
 * change the feed has not delivered yet, or a batch its trigger is still retrying, is no gap: config
 * holds the grace to the retry horizon on Cosmos DB) and reaches `windowSeconds` back; runs overlap, and
 * a gap found twice carries the same `eventKey`. Bounded: at most `maxPages` pages of `pageSize`, oldest
 * change first; a run the bound stops says so (`truncated` on its `telemetryGaps`, shown by the
 * workbook's telemetry-health panel): the rest of its window is not checked, by it or by a later run.
 */
export interface ReconciliationDeps {
  listing: ChangeListing;
  seen: SeenVersions;
  sink: TelemetrySink;
  now: () => number;
  settings: Pick<ReconciliationConfig, 'windowSeconds' | 'graceSeconds'>;
  pageSize?: number;
  maxPages?: number;
}

export interface ReconciliationRun {
  since: string;
  until: string;
  checked: number;
  gaps: TelemetryGapFound[];
  /**
   * Whether the page bound stopped the run before the window's end. Nothing carries on from there: the
   * changes after the last page read are unchecked (`telemetryGaps` says `truncated: "true"`).
   */
  truncated: boolean;
}

export async function runReconciliation(deps: ReconciliationDeps): Promise<ReconciliationRun> {
  const { windowSeconds, graceSeconds } = deps.settings;
  const until = deps.now() - graceSeconds * 1000;
  const since = until - windowSeconds * 1000;
  // A lock end is checked back to one window before this one (see `reconcile`).
  const endsSince = new Date(since - windowSeconds * 1000).toISOString();
  const pageSize = deps.pageSize ?? 100;
  const maxPages = deps.maxPages ?? 100;
  const gaps: TelemetryGapFound[] = [];
  let checked = 0;
  let continuation: string | undefined;
  let pages = 0;
  do {
    const page = await deps.listing.listChanged({ since, until, limit: pageSize, continuation });
    pages += 1;
    const changed: ChangedVersion[] = page.items.map((item) => ({
      doc: item.doc,
      version: bareEtag(item.etag),
    }));
    const seen = await deps.seen.seen([...new Set(changed.map((c) => c.doc.id))]);
    gaps.push(...reconcile(changed, seen, endsSince));
    checked += changed.length;
    continuation = page.continuation ?? undefined;
  } while (continuation !== undefined && pages < maxPages);
  for (const gap of gaps) deps.sink.event(telemetryGapEvent(gap));
  const truncated = continuation !== undefined;
  deps.sink.metric({
    name: 'telemetryGaps',
    value: gaps.length,
    properties: { truncated: String(truncated) },
  });
  await deps.sink.flush();
  return {
    since: new Date(since).toISOString(),
    until: new Date(until).toISOString(),
    checked,
    gaps,
    truncated,
  };
}

/**
 * The embedded host's reconciliation loop: one run every `intervalSeconds` of wall-clock time (the store
 * dates its writes by it; a test's virtual scheduler never sees this timer), one at a time, a failure
 * logged and tried again at the next tick. Unref'd: it never keeps a process alive. Returns its stop.
 */
export function reconciliationLoop(
  run: () => Promise<unknown>,
  intervalSeconds: number,
  onError: (error: unknown) => void,
): () => void {
  let running = false;
  const handle = setInterval(() => {
    if (running) return;
    running = true;
    run()
      .catch(onError)
      .finally(() => {
        running = false;
      });
  }, intervalSeconds * 1000);
  handle.unref();
  return () => clearInterval(handle);
}
