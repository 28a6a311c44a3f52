import type { Clock } from './clock';

/**
 * Concurrent reads of one key share one in-flight read (docs/design.md §5, "coalescing"): a caller may
 * join a read only if that read began no earlier than `joinBoundMs` ago. A joined answer is as old as the
 * read it joined, so the bound counts against the in-flight grace exactly like the time a request spends
 * between resolving its route and writing (the copies wait that grace out).
 *
 * The one home of the join rule: Router (store reads) and RoutingClient (HTTP reads) both use it.
 */
export interface SharedReadsOptions {
  /** How long after a read began it may still be joined; 0 joins only reads begun in the same instant. */
  joinBoundMs: number;
  clock: Clock;
}

interface InFlight<V> {
  startedAt: number;
  promise: Promise<V>;
}

export class SharedReads<K, V> {
  private readonly inFlight = new Map<K, InFlight<V>>();
  /** Reads started (not joined), for tests and benchmarks. */
  started = 0;
  /** Callers that joined a read already in flight. */
  joined = 0;

  constructor(private readonly options: SharedReadsOptions) {}

  /** Whether a read that began at `startedAt` may be joined at `now` (the rule, for tests). */
  static mayJoin(startedAt: number, now: number, joinBoundMs: number): boolean {
    return now - startedAt <= joinBoundMs;
  }

  /** `read()`'s answer, or the answer of a joinable read of `key` already in flight. */
  run(key: K, read: () => Promise<V>): Promise<V> {
    const now = this.options.clock();
    const current = this.inFlight.get(key);
    if (current !== undefined && SharedReads.mayJoin(current.startedAt, now, this.options.joinBoundMs)) {
      this.joined += 1;
      return current.promise;
    }
    this.started += 1;
    const entry: InFlight<V> = { startedAt: now, promise: read() };
    this.inFlight.set(key, entry);
    const settle = (): void => {
      // A newer read of the key may have replaced this one: leave it.
      if (this.inFlight.get(key) === entry) this.inFlight.delete(key);
    };
    entry.promise.then(settle, settle);
    return entry.promise;
  }

  get size(): number {
    return this.inFlight.size;
  }
}
