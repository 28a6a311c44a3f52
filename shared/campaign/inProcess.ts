import type { Scheduler } from '../migration/scheduler';
import type { CampaignRecords } from './store/ports/campaigns';
import type { CampaignLauncher, TickResult } from './service';
import type { CampaignState } from './types';

/**
 * The embedded host's campaign runner: one loop per campaign that ticks, then waits on a scheduler
 * timer until the tick's `nextTickAt` or a wake (a pause, resume, cancel, new limits or resources).
 *
 * It needs no journal of its own, unlike the migration runner: a migration's workflow is a sequence of
 * steps whose results must be replayed in order, but a campaign's whole state is in the store (its
 * record and its members), and each tick reads it afresh, acts on it and writes it back idempotently
 * (campaignTick in tick.ts). The store is the journal: a runner that crashed mid-tick resumes by
 * ticking again (`resumeAll` on start-up), and what the lost tick did is either saved or done again.
 */

export interface InProcessCampaignRunnerOptions {
  tick: (campaignId: string) => Promise<TickResult>;
  scheduler: Scheduler;
  campaigns: CampaignRecords;
  log?: (message: string, fields: Record<string, unknown>) => void;
  /** The wait after a tick that threw, doubled on each one after, 60 s at most (default 1 s). */
  retryMs?: number;
}

/** The states whose campaigns still tick. */
export const tickingStates: readonly CampaignState[] = ['Running', 'Paused', 'Cancelling'];

const MAX_RETRY_MS = 60_000;

interface Loop {
  done: Promise<void>;
  /** A wake that came while the loop was ticking: tick again at once. */
  woken: boolean;
  /** Ends the current wait (set while it waits). */
  wakeUp: () => void;
}

export class InProcessCampaignRunner implements CampaignLauncher {
  private readonly loops = new Map<string, Loop>();
  private stopped = false;

  constructor(private readonly options: InProcessCampaignRunnerOptions) {}

  /**
   * Start the campaign's loop unless it has one (never two); one it has ticks again, so a campaign
   * reopened while its last tick ran (resources added as it completed) is not left without a loop.
   */
  launch(campaignId: string): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.loops.has(campaignId)) return this.wake(campaignId);
    const loop: Loop = { done: Promise.resolve(), woken: false, wakeUp: () => undefined };
    this.loops.set(campaignId, loop);
    loop.done = this.run(campaignId, loop);
    return Promise.resolve();
  }

  /** Tick soon: at once if the loop waits, right after the tick if it is ticking. */
  wake(campaignId: string): Promise<void> {
    const loop = this.loops.get(campaignId);
    if (loop) {
      loop.woken = true;
      loop.wakeUp();
    }
    return Promise.resolve();
  }

  /** Launch every campaign a previous process left unfinished: how many loops were started. */
  async resumeAll(): Promise<number> {
    const ids = await this.options.campaigns.idsInStates(tickingStates);
    let launched = 0;
    for (const id of ids) {
      if (this.stopped || this.loops.has(id)) continue;
      await this.launch(id);
      launched += 1;
    }
    return launched;
  }

  /** Stop every loop (host shutdown): waits are ended, a tick under way finishes and nothing follows. */
  stop(): void {
    this.stopped = true;
    for (const loop of this.loops.values()) loop.wakeUp();
  }

  /** Until every loop has ended (its campaign ended, or `stop()`). */
  async idle(): Promise<void> {
    while (this.loops.size > 0) await Promise.all([...this.loops.values()].map((l) => l.done));
  }

  /** Campaigns with a loop. */
  get activeCount(): number {
    return this.loops.size;
  }

  private async run(campaignId: string, loop: Loop): Promise<void> {
    try {
      await this.ticks(campaignId, loop);
    } finally {
      // at once, not a turn later: a launch that comes after this starts a new loop
      if (this.loops.get(campaignId) === loop) this.loops.delete(campaignId);
    }
  }

  private async ticks(campaignId: string, loop: Loop): Promise<void> {
    const { scheduler, log } = this.options;
    const firstRetryMs = this.options.retryMs ?? 1000;
    let failures = 0;
    while (!this.stopped) {
      loop.woken = false;
      let nextTickAt: number;
      try {
        const result = await this.options.tick(campaignId);
        failures = 0;
        // a wake or launch during the tick: look again (it may have reopened the campaign)
        if (result.done && !loop.woken) {
          log?.(`campaign ${result.status}`, { campaignId });
          return;
        }
        nextTickAt = result.nextTickAt;
      } catch (error) {
        // a store outage, a bug: logged and tried again later, never the end of the loop
        failures += 1;
        const waitMs = Math.min(MAX_RETRY_MS, firstRetryMs * 2 ** (failures - 1));
        log?.('campaign tick failed', { campaignId, error: (error as Error).message, retryInMs: waitMs });
        nextTickAt = scheduler.now() + waitMs;
      }
      if (this.stopped) return;
      if (loop.woken) continue;
      const timer = scheduler.timer(nextTickAt);
      await new Promise<void>((resolve) => {
        loop.wakeUp = resolve;
        void timer.promise.then(resolve);
      });
      timer.cancel();
      loop.wakeUp = () => undefined;
    }
  }
}
