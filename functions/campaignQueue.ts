import { type InvocationContext, app, output } from '@azure/functions';
import * as df from 'durable-functions';
import type { Actor } from '../shared/core/audit';
import type { CampaignService } from '../shared/campaign/service';
import { isRouteLockError } from '../shared/core/errors';
import { inFunctionsHost } from './http/endpoint';
import { parse, startCampaignBody } from './http/validation';
import { asObject, poisonCopy } from './migrationQueue';
import { type Services, onServices } from './services';

/**
 * Queue trigger on `campaigns` (a queue message starts a campaign as one starts a
 * migration): messages are base64 JSON, the POST /campaigns body (at most 1,000 ids; more are appended
 * over HTTP). As on `migrations` (functions/migrationQueue.ts): a message no retry can fix (invalid, a
 * region not allowed, its campaignId taken by another target) is logged with the reason and copied to
 * `campaigns-poison` unchanged at once; a transient failure throws, so the host retries it and poisons
 * it itself at host.json's `maxDequeueCount`.
 *
 * Idempotency: a redelivered message must not start a second campaign. With a `campaignId` the same id
 * answers the standing campaign; without one, the campaign is named after the queue message's id,
 * which stays the same on every delivery of that message.
 */

export const CAMPAIGN_QUEUE = 'campaigns';
export const CAMPAIGN_POISON_QUEUE = 'campaigns-poison';

/** Who a queue-started campaign was created by: the queue, not a person. */
export const queueActor: Actor = { id: 'queue:campaigns', name: 'campaigns queue' };

export const campaignPoisonOutput = output.storageQueue({
  queueName: CAMPAIGN_POISON_QUEUE,
  connection: 'AzureWebJobsStorage',
});

export type CampaignMessageOutcome =
  { kind: 'started' | 'standing'; campaignId: string } | { kind: 'poison'; reason: string };

/** The campaign id a message without one gets: the queue message's id, the same on each redelivery. */
export const messageCampaignId = (messageId: string): string => `queue-${messageId}`;

export async function handleCampaignMessage(
  item: unknown,
  messageId: string | undefined,
  campaigns: CampaignService,
): Promise<CampaignMessageOutcome> {
  const value = asObject(item);
  if (value === undefined) return { kind: 'poison', reason: 'the message is not JSON' };
  let request;
  try {
    request = parse(startCampaignBody, value, 'message');
  } catch (error) {
    return { kind: 'poison', reason: `invalid campaign message: ${(error as Error).message}` };
  }
  const { dryRun, ...create } = request;
  if (dryRun === true)
    return {
      kind: 'poison',
      reason: 'a dry run is not accepted on the queue: a queue cannot answer (POST /api/campaigns)',
    };
  request = create;
  if (request.campaignId === undefined && messageId !== undefined) {
    request = { ...request, campaignId: messageCampaignId(messageId) };
  }
  try {
    const started = await campaigns.create(request, queueActor);
    return { kind: started.created ? 'started' : 'standing', campaignId: started.campaignId };
  } catch (error) {
    // The error table decides: a code that is not retriable fails the same way on every delivery.
    if (isRouteLockError(error) && !error.retriable) {
      return { kind: 'poison', reason: `${error.code}: ${error.message}` };
    }
    throw error; // transient: let the queue retry it
  }
}

/** The queue message's id as the Functions host hands it over (trigger metadata `id`). */
function messageIdOf(context: InvocationContext): string | undefined {
  const id = context.triggerMetadata?.id;
  return typeof id === 'string' && id !== '' ? id : undefined;
}

export async function campaignQueueHandler(
  item: unknown,
  context: InvocationContext,
  { campaigns }: Pick<Services, 'campaigns'>,
): Promise<void> {
  const outcome = await handleCampaignMessage(item, messageIdOf(context), campaigns(context));
  if (outcome.kind === 'poison') {
    context.warn(`campaign message rejected: ${outcome.reason}`);
    context.extraOutputs.set(campaignPoisonOutput, poisonCopy(item));
  } else {
    context.log(`campaign ${outcome.kind}: ${outcome.campaignId}`);
  }
}

if (inFunctionsHost()) {
  app.storageQueue('campaignQueue', {
    queueName: CAMPAIGN_QUEUE,
    connection: 'AzureWebJobsStorage',
    extraInputs: [df.input.durableClient()],
    extraOutputs: [campaignPoisonOutput],
    handler: onServices(campaignQueueHandler),
  });
}
