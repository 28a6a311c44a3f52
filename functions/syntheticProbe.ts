import { type InvocationContext, type Timer, app } from '@azure/functions';
import { inFunctionsHost } from './http/endpoint';
import { type ProbeDeps, probeNow } from './operations';
import { onServices } from './services';

/**
 * Timer trigger (`ROUTELOCK_PROBE_SCHEDULE`, default every 5 minutes): the whole lock cycle on
 * `probe-{region}`, enforcement checked on the read path at each phase, reported as availability.
 */
export async function syntheticProbeHandler(
  _timer: Timer,
  context: InvocationContext,
  deps: ProbeDeps,
): Promise<void> {
  const result = await probeNow(deps);
  if (result.success) context.log(`probe ${result.resourceId}: ok in ${result.durationMs} ms`);
  else if (result.outcome === 'skipped')
    context.log(`probe ${result.resourceId}: skipped: ${result.skipReason}`);
  else context.warn(`probe ${result.resourceId} FAILED at ${result.failedPhase}: ${result.failedAssertion}`);
}

if (inFunctionsHost()) {
  app.timer('syntheticProbe', {
    schedule: '%ROUTELOCK_PROBE_SCHEDULE%',
    handler: onServices(syntheticProbeHandler),
  });
}
