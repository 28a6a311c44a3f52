import type { Clock } from '../shared/core/clock';

/** A clock that only moves when told to: for tests, simulations and benchmarks on virtual time. */
export class ManualClock {
  constructor(private current: number = Date.UTC(2026, 0, 1)) {}
  readonly now: Clock = () => this.current;
  advance(ms: number): number {
    this.current += ms;
    return this.current;
  }
  advanceSeconds(seconds: number): number {
    return this.advance(seconds * 1000);
  }
  set(ms: number): void {
    this.current = ms;
  }
}
