import { type InvocationContext, type Timer, app } from '@azure/functions';
import { sweepOrphans } from '../shared/migration/sweeper';
import { inFunctionsHost } from './http/endpoint';
import { type Services, onServices } from './services';

/** Timer trigger (`ROUTELOCK_SWEEP_SCHEDULE`, default every 15 minutes): reclaim expired locks. */
export async function orphanSweeperHandler(
  _timer: Timer,
  context: InvocationContext,
  { router, clock, sink }: Pick<Services, 'router' | 'clock' | 'sink'>,
): Promise<void> {
  const { scanned, reclaimed } = await sweepOrphans({ router, clock, sink });
  await sink.flush();
  context.log(`sweeper: ${scanned} locked route(s) scanned, ${reclaimed.length} orphan(s) reclaimed`);
}

if (inFunctionsHost()) {
  app.timer('orphanSweeper', {
    schedule: '%ROUTELOCK_SWEEP_SCHEDULE%',
    handler: onServices(orphanSweeperHandler),
  });
}
