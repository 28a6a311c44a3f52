import type { Scheduler } from '../shared/migration/scheduler';
import type { ManualClock } from './clock';

interface VirtualTimer {
  fireAt: number;
  order: number;
  resolve: () => void;
  cancelled: boolean;
}

/**
 * Virtual time: timers fire only when `runUntilIdle` advances the clock to them, after the work already
 * released has settled. Lets tests and benchmarks run a migration's hours of waiting in microseconds.
 */
export class VirtualScheduler implements Scheduler {
  private timers: VirtualTimer[] = [];
  private order = 0;

  constructor(readonly clock: ManualClock) {}

  now(): number {
    return this.clock.now();
  }

  timer(fireAt: number) {
    let entry: VirtualTimer | undefined;
    const promise = new Promise<void>((resolve) => {
      entry = { fireAt, order: this.order++, resolve, cancelled: false };
      this.timers.push(entry);
    });
    return {
      promise,
      cancel: () => {
        if (entry) entry.cancelled = true;
      },
    };
  }

  get pendingTimers(): number {
    return this.timers.filter((t) => !t.cancelled).length;
  }

  /**
   * Keep advancing while `busy()` says work remains: work in flight that has not yet armed its next
   * timer gets macrotask turns; otherwise the next timer fires.
   */
  async runWhile(busy: () => boolean): Promise<void> {
    while (busy()) {
      await this.runUntilIdle();
      if (busy() && this.pendingTimers === 0) await new Promise<void>((r) => setImmediate(r));
    }
  }

  /** Advance through every pending timer, in time order, until nothing is left waiting. */
  async runUntilIdle(options: { settleTurns?: number; maxTimers?: number } = {}): Promise<number> {
    const turns = options.settleTurns ?? 4;
    let fired = 0;
    for (;;) {
      for (let i = 0; i < turns; i += 1) await new Promise<void>((r) => setImmediate(r));
      this.timers = this.timers.filter((t) => !t.cancelled);
      if (this.timers.length === 0) return fired;
      this.timers.sort((a, b) => a.fireAt - b.fireAt || a.order - b.order);
      const next = this.timers[0] as VirtualTimer;
      if (next.fireAt > this.clock.now()) this.clock.set(next.fireAt);
      const due = this.timers.filter((t) => t.fireAt <= this.clock.now());
      this.timers = this.timers.filter((t) => t.fireAt > this.clock.now());
      for (const t of due) t.resolve();
      fired += due.length;
      if (options.maxTimers !== undefined && fired >= options.maxTimers) return fired;
    }
  }
}
