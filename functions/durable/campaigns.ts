import type { DurableClient, DurableOrchestrationStatus } from 'durable-functions';
import type { CampaignLauncher } from '../../shared/campaign/service';
import { RouteLockError } from '../../shared/core/errors';
import { boundedId, maxInstanceIdLength } from '../../shared/migration/instanceId';

/** The campaign orchestrator's function name (functions/campaignOrchestrator.ts registers it). */
export const CAMPAIGN_ORCHESTRATOR = 'campaignOrchestrator';
/** The external event that ends the orchestrator's wait between ticks (a pause, new limits …). */
export const WAKE_EVENT = 'wake';

/** What the campaign orchestrator is started (and continued as new) with. */
export interface CampaignOrchestrationInput {
  campaignId: string;
}

/**
 * One instance per campaign: `campaign:{campaignId}`. The extension refuses ids longer than 256
 * characters and the task hub keys (Azure Storage table keys, the management URLs) cannot hold
 * `/ \ # ?` or control characters; campaign ids are written as resource ids
 * (functions/http/validation.ts: letters, digits and `._:@-`), so only the length needs care.
 */
export const campaignInstanceId = (campaignId: string): string =>
  boundedId('campaign:', campaignId, maxInstanceIdLength);

/** States in which an instance is (or is about to be) ticking: launching again would do nothing. */
const ticking = new Set(['Pending', 'Running', 'ContinuedAsNew', 'Suspended']);

const unavailable = (what: string, error: unknown): RouteLockError =>
  new RouteLockError(
    'OrchestrationStatusUnavailable',
    `The Durable Functions task hub did not ${what}; retry shortly.`, // its own text stays in `cause`
    { retryAfterSeconds: 1, cause: error },
  );

/**
 * Campaigns on Durable Functions: an eternal orchestration per campaign that ticks until the campaign
 * has ended. Launch is getStatus (404: absent) and startNew when nothing is ticking; host.json's
 * `overridableExistingInstanceStates: NonRunningStates` makes the extension refuse a startNew over a
 * running instance, so the loser of two concurrent launches gets an error, reads the status again
 * and finds it running. Even if two orchestrations did tick one campaign (or an activity ran twice:
 * activities are at-least-once), the limits hold: every start is reserved on the campaign record by
 * ETag compare-and-swap before it is made (shared/campaign/tick.ts), so two tickers share the one
 * budget, and a member's migration id is deterministic, so a repeated start joins, never duplicates.
 */
export class DurableCampaignLauncher implements CampaignLauncher {
  constructor(private readonly client: DurableClient) {}

  private async instance(instanceId: string): Promise<DurableOrchestrationStatus | null> {
    try {
      return await this.client.getStatus(instanceId);
    } catch (error) {
      if (/HTTP 404/.test((error as Error).message)) return null;
      throw unavailable('answer', error);
    }
  }

  async launch(campaignId: string): Promise<void> {
    const instanceId = campaignInstanceId(campaignId);
    const current = await this.instance(instanceId);
    if (current && ticking.has(String(current.runtimeStatus))) return;
    const input: CampaignOrchestrationInput = { campaignId };
    try {
      await this.client.startNew(CAMPAIGN_ORCHESTRATOR, { instanceId, input });
    } catch (error) {
      // A concurrent launch started it first: the extension refused ours, and that is what we wanted.
      const after = await this.instance(instanceId);
      if (after && ticking.has(String(after.runtimeStatus))) return;
      throw unavailable('start the campaign', error);
    }
  }

  /**
   * Tick soon: the `wake` event to a ticking instance. One that is not ticking (an operator terminated
   * it, or it failed) is launched again, and a new instance ticks at once: a campaign whose runner died
   * is healed by the next pause, resume, cancel or change. Best effort, as the contract says: a task
   * hub that does not answer is not worth failing a change already saved over (its caller would
   * answer 503); the orchestration sees the change at its next tick anyway.
   */
  async wake(campaignId: string): Promise<void> {
    const instanceId = campaignInstanceId(campaignId);
    try {
      const current = await this.instance(instanceId);
      // durable-js resolves a 410 (it ended meanwhile) as it does a 202
      if (current && ticking.has(String(current.runtimeStatus)))
        await this.client.raiseEvent(instanceId, WAKE_EVENT, {});
      else await this.launch(campaignId);
    } catch {
      // best effort (above)
    }
  }
}
