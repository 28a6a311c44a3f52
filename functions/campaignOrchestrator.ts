import * as df from 'durable-functions';
import type { OrchestrationContext, OrchestrationHandler, Task } from 'durable-functions';
import type { CampaignState } from '../shared/campaign/types';
import type { TickResult } from '../shared/campaign/service';
import { CAMPAIGN_ORCHESTRATOR, type CampaignOrchestrationInput, WAKE_EVENT } from './durable/campaigns';
import { inFunctionsHost } from './http/endpoint';

/** The activity that runs one tick (functions/campaignTick.ts). */
export const CAMPAIGN_TICK_ACTIVITY = 'campaignTick';
/** Its input: an object, not the bare id (durable-js JSON-encodes a string input once more). */
export interface CampaignTickInput {
  campaignId: string;
}

/**
 * Ticks per execution before `continueAsNew`. Each tick adds eight history events (the task
 * scheduled and completed, a timer created and fired, two episodes' start and end markers), and every
 * episode replays the whole history: 50 ticks keep it at about 400 events, so a replay stays cheap and
 * the history far below the extension's limits, however long the campaign runs.
 */
export const TICKS_PER_EXECUTION = 50;

/**
 * A tick whose activity failed through all its retries (the store down): the campaign is not over,
 * its state is in the store, so wait as long as the last tick asked (or this when none answered yet)
 * and tick again.
 */
export const FAILED_TICK_DELAY_MS = 30_000;

/** A tick is idempotent, so the extension may retry it freely; then the orchestrator's own delay. */
export function tickRetryOptions(): df.RetryOptions {
  const options = new df.RetryOptions(5_000, 3);
  options.backoffCoefficient = 2;
  return options;
}

/**
 * One campaign's runner on Durable Functions (docs/design.md §6.9): tick, wait until the tick's `nextTickAt`
 * or a `wake` event (a pause, resume, cancel, new limits or resources were saved), tick again, until
 * the tick says the campaign has ended; its status is the output. Deterministic under replay: time
 * comes only from the tick's answer and `currentUtcDateTime`, nothing random. Every decision is the
 * tick's (shared/campaign/tick.ts), over the store, so a crashed host, a replay or a fresh execution
 * just ticks again.
 */
export const campaignOrchestrator: OrchestrationHandler = function* (context: OrchestrationContext) {
  const { campaignId } = context.df.getInput<CampaignOrchestrationInput>();
  const retry = tickRetryOptions();
  let waitMs = FAILED_TICK_DELAY_MS;
  // The last wait's wake waiter. One that lost to its timer stays open and, being the newest waiter,
  // takes a wake raised while the next tick runs (durable-js and the extension both give an event to
  // the newest waiter of its name, see functions/durable/runOnDurable.ts): then tick again at once,
  // never wait on a fresh waiter for an event already given away.
  let waiter: Task | undefined;
  for (let tick = 0; tick < TICKS_PER_EXECUTION; tick += 1) {
    let result: TickResult | undefined;
    try {
      result = (yield context.df.callActivityWithRetry(CAMPAIGN_TICK_ACTIVITY, retry, {
        campaignId,
      } satisfies CampaignTickInput)) as TickResult;
    } catch {
      result = undefined; // failed through its retries: not the campaign's end (see FAILED_TICK_DELAY_MS)
    }
    const now = context.df.currentUtcDateTime.getTime();
    if (result?.done) return result.status satisfies CampaignState;
    if (result) waitMs = Math.max(0, result.nextTickAt - now);
    if (waiter?.isCompleted) {
      waiter = undefined;
      continue;
    }
    const timer = context.df.createTimer(new Date(now + waitMs));
    waiter = context.df.waitForExternalEvent(WAKE_EVENT);
    const winner = (yield context.df.Task.any([timer, waiter])) as unknown as Task;
    if (winner !== timer) {
      timer.cancel();
      waiter = undefined;
    }
  }
  // After a wait, so the next execution's first act is a tick: a wake the extension still buffered
  // (ContinueAsNew drops unprocessed events) would only have asked for that tick.
  context.df.continueAsNew({ campaignId } satisfies CampaignOrchestrationInput);
  return undefined;
};

if (inFunctionsHost()) df.app.orchestration(CAMPAIGN_ORCHESTRATOR, campaignOrchestrator);
