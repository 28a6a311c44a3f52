import { type InvocationContext, type Timer, app } from '@azure/functions';
import * as df from 'durable-functions';
import { DurableMigrationService } from './durable/service';
import { inFunctionsHost } from './http/endpoint';
import { type Services, onServices } from './services';

/**
 * Timer trigger (`ROUTELOCK_SWEEP_SCHEDULE`): purge the Durable history of finished migrations, so the
 * task hub keeps no migration's state past its end (the migration records keep its story).
 */
export async function purgeHistoryHandler(
  _timer: Timer,
  context: InvocationContext,
  { migrations }: Pick<Services, 'migrations'>,
): Promise<void> {
  const service = migrations(context);
  if (!(service instanceof DurableMigrationService)) return; // the embedded host has no task hub
  const { purged, recorded } = await service.purgeFinished();
  context.log(
    `purge: ${purged} finished orchestration(s) purged, ${recorded} failed status(es) recorded first`,
  );
}

if (inFunctionsHost()) {
  app.timer('purgeHistory', {
    schedule: '%ROUTELOCK_SWEEP_SCHEDULE%',
    extraInputs: [df.input.durableClient()],
    handler: onServices(purgeHistoryHandler),
  });
}
