import type { InvocationContext } from '@azure/functions';
import * as df from 'durable-functions';
import type { ActivityOptions } from 'durable-functions';
import type { TickDeps, TickResult } from '../shared/campaign/service';
import { campaignSettings, campaignTick } from '../shared/campaign/tick';
import { RouteLockError, isRouteLockError } from '../shared/core/errors';
import { CAMPAIGN_TICK_ACTIVITY, type CampaignTickInput } from './campaignOrchestrator';
import { inFunctionsHost } from './http/endpoint';
import { type Services, onServices } from './services';

/** What a tick needs of the Functions host's services. */
export type CampaignTickServices = Pick<
  Services,
  'config' | 'campaignRecords' | 'records' | 'store' | 'router' | 'clock' | 'sink' | 'migrations'
>;

/**
 * A tick's dependencies in the Functions host: the core's stores and router, and the migrations of
 * this invocation's Durable client (DurableMigrationService: a tick starts migrations through the
 * ordinary start path and asks the task hub about long-unfinished ones). That is why the activity
 * takes a durable client input: an activity trigger may, like any function (durable-js 3.5.0
 * ActivityOptions.extraInputs; `df.getClient` finds the `durableClient` binding among them).
 */
export function campaignTickDeps(services: CampaignTickServices, context: InvocationContext): TickDeps {
  return {
    campaigns: services.campaignRecords,
    migrations: services.migrations(context),
    records: services.records,
    store: services.store,
    router: services.router,
    now: services.clock,
    settings: campaignSettings(services.config),
    sink: services.sink,
  };
}

/**
 * The `campaignTick` activity. A transient failure throws (the orchestrator's RetryOptions retry it,
 * then it waits and ticks again). A campaign with no record has nothing to run: the runner stops, its
 * reason logged, rather than tick a missing record forever.
 */
export async function campaignTickHandler(
  input: unknown,
  context: InvocationContext,
  services: CampaignTickServices,
): Promise<TickResult> {
  const campaignId = (input as Partial<CampaignTickInput> | null)?.campaignId;
  if (typeof campaignId !== 'string')
    throw new RouteLockError('BadRequest', 'The campaign tick needs {campaignId}.');
  try {
    return await campaignTick(campaignTickDeps(services, context), campaignId);
  } catch (error) {
    if (!isRouteLockError(error, 'NotFound') || (await services.campaignRecords.get(campaignId))) throw error;
    context.warn(`campaign ${campaignId} has no record: its runner stops`);
    return { done: true, status: 'Cancelled', nextTickAt: services.clock() };
  }
}

/** Its registration: the durable client input is what `services.migrations(context)` starts with. */
export const campaignTickActivity = {
  extraInputs: [df.input.durableClient()],
  handler: onServices(campaignTickHandler),
} satisfies ActivityOptions;

if (inFunctionsHost()) df.app.activity(CAMPAIGN_TICK_ACTIVITY, campaignTickActivity);
