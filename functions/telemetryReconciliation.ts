import { type InvocationContext, type Timer, app } from '@azure/functions';
import { changeListingOf } from '../shared/core/store/ports/locations';
import { runReconciliation } from '../shared/migration/telemetry/reconciliation';
import { inFunctionsHost } from './http/endpoint';
import { changeFeedConfigured } from './lockTelemetry';
import { type Services, onServices } from './services';

/**
 * Timer trigger (`ROUTELOCK_RECONCILE_SCHEDULE`, default every 15 minutes): compare the documents written
 * in the last window with what the change feed handler recorded as seen, and emit a `TelemetryGap` per
 * change the telemetry missed and `telemetryGaps` per run (docs/design.md §8).
 */
export async function telemetryReconciliationHandler(
  _timer: Timer,
  context: InvocationContext,
  { store, seen, sink, clock, config }: Pick<Services, 'store' | 'seen' | 'sink' | 'clock' | 'config'>,
): Promise<void> {
  const listing = changeListingOf(store);
  if (!listing) {
    context.log(`reconciliation: the ${store.kind} store cannot list documents by change time; skipped`);
    return;
  }
  const run = await runReconciliation({
    listing,
    seen,
    sink,
    now: clock,
    settings: config.operations.reconciliation,
  });
  context.log(
    `reconciliation ${run.since}..${run.until}: ${run.checked} version(s) checked, ${run.gaps.length} gap(s)${run.truncated ? ' (page bound reached)' : ''}`,
  );
}

/**
 * Registered with the change-feed trigger only (the same connection check): without the trigger nothing
 * records what the telemetry saw, and every change would be reported a gap. Returns whether it did.
 */
export function registerTelemetryReconciliation(
  register: typeof app.timer = app.timer,
  env: Record<string, string | undefined> = process.env,
): boolean {
  if (!changeFeedConfigured(env)) return false;
  register('telemetryReconciliation', {
    schedule: '%ROUTELOCK_RECONCILE_SCHEDULE%',
    handler: onServices(telemetryReconciliationHandler),
  });
  return true;
}

if (inFunctionsHost()) registerTelemetryReconciliation();
