import * as df from 'durable-functions';
import type { ActivityHandler, OrchestrationContext, OrchestrationHandler } from 'durable-functions';
import type { ActivityName, MigrationInput } from '../shared/migration/types';
import { migrationWorkflow } from '../shared/migration/workflow';
import { ORCHESTRATOR } from './durable/service';
import { activityFunctionName, retryOptions, runOnDurable } from './durable/runOnDurable';
import { inFunctionsHost } from './http/endpoint';
import { services } from './services';

/**
 * The migration orchestration on Durable Functions: the shared workflow (docs/design.md §6) run by
 * `runOnDurable`, then the final status recorded so it outlives the instance id's reuse.
 */
export const migrationOrchestrator: OrchestrationHandler = function* (context: OrchestrationContext) {
  const input = context.df.getInput<MigrationInput>();
  const status = yield* runOnDurable(context, migrationWorkflow(input), input.settings);
  yield context.df.callActivityWithRetry(
    activityFunctionName('recordOutcome'),
    retryOptions(input.settings),
    { status },
  );
  return status;
};

export const activityNames: ActivityName[] = [
  'prelock',
  'escalate',
  'announce',
  'renew',
  'swap',
  'release',
  'readRoute',
  'recordOutcome',
  'callParticipant',
];

/** One Durable activity per lock operation, each a thin call into the routing library. */
export function activityHandler(name: ActivityName): ActivityHandler {
  return async (input: unknown) => {
    const { activities } = await services();
    return (activities[name] as (input: unknown) => Promise<unknown>)(input);
  };
}

if (inFunctionsHost()) {
  df.app.orchestration(ORCHESTRATOR, migrationOrchestrator);
  for (const name of activityNames)
    df.app.activity(activityFunctionName(name), { handler: activityHandler(name) });
}
