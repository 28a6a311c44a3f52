import type { Clock } from './clock';

/**
 * Concurrent reads of one key share one in-flight read (design §5.8, "coalescing"): a caller may
 * join a read only if that read began no earlier than `joinBoundMs` ago. A joined answer is as old as the
 * read it joined, so the bound counts against the in-flight grace exactly like the time a request spends
 * between resolving its route and writing (the copies wait that grace out): ROUTELOCK_COALESCE_JOIN_MS,
 * bounded by `timingInequalities` (migration/settings) (at most a tenth of ROUTELOCK_INFLIGHT_GRACE_SECONDS).
 *
 * The one home of the join rule: Router (store reads) and RoutingClient (HTTP reads) both use it.
 */
/**
 * The grace is shared 1 : 9 between the join bounds and a request's own in-flight time (design §5.8,
 * inequality 5): joins may take at most 1/COALESCE_GRACE_SHARE of it. Config checks the server's bound
 * against it, RoutingClient its own and the server's together.
 */
export const COALESCE_GRACE_SHARE = 10;

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

  constructor(private options: SharedReadsOptions) {
    if (!Number.isFinite(options.joinBoundMs) || options.joinBoundMs < 0)
      throw new RangeError(`joinBoundMs must be a finite number ≥ 0, got ${options.joinBoundMs}`);
  }

  /**
   * A new join bound, for reads started or joined from now on (a client that learnt a smaller grace
   * from its server). Checked as the constructor checks it.
   */
  setJoinBoundMs(joinBoundMs: number): void {
    if (!Number.isFinite(joinBoundMs) || joinBoundMs < 0)
      throw new RangeError(`joinBoundMs must be a finite number ≥ 0, got ${joinBoundMs}`);
    this.options = { ...this.options, joinBoundMs };
  }

  /**
   * Whether a read that began at `startedAt` may be joined at `now` (the rule, for tests). A read dated
   * after `now` (a clock that stepped back) is joinable: its answer is no older than the caller.
   */
  static mayJoin(startedAt: number, now: number, joinBoundMs: number): boolean {
    return now - startedAt <= joinBoundMs;
  }

  /**
   * `read()`'s answer, or the answer of a joinable read of `key` already in flight. A read too old to
   * join is replaced by a fresh one (later callers join the fresh one); the old one still answers its own
   * callers. A rejection is shared by the callers of that read only: once it settles, the next call reads.
   */
  run(key: K, read: () => Promise<V>): Promise<V> {
    const now = this.options.clock();
    const current = this.inFlight.get(key);
    if (current !== undefined && SharedReads.mayJoin(current.startedAt, now, this.options.joinBoundMs)) {
      this.joined += 1;
      return current.promise;
    }
    this.started += 1;
    let promise: Promise<V>;
    try {
      promise = read();
    } catch (error) {
      // A read that throws before its promise exists is nobody else's: not shared.
      return Promise.reject(error);
    }
    const entry: InFlight<V> = { startedAt: now, promise };
    this.inFlight.set(key, entry);
    const settle = (): void => {
      // A newer read of the key may have replaced this one: leave it.
      if (this.inFlight.get(key) === entry) this.inFlight.delete(key);
    };
    promise.then(settle, settle);
    return promise;
  }

  /**
   * When the read of `key` in flight began (undefined: none), for tests and diagnostics. Callers that
   * date a joined answer carry the start in the answer itself (the Router's TimedRead, the client's
   * request start): the entry is gone once the read settles.
   */
  startedAt(key: K): number | undefined {
    return this.inFlight.get(key)?.startedAt;
  }

  /**
   * Let no later caller join the read of `key` in flight (its callers still get its answer): after a
   * write of `key`, a read begun before it must not answer a request made after it.
   */
  forget(key: K): void {
    this.inFlight.delete(key);
  }

  /**
   * `forget(key)`, but only while the read in flight is `promise`'s: a caller dropping a read it started
   * must not drop a newer one that replaced it.
   */
  forgetRead(key: K, promise: Promise<V>): void {
    if (this.inFlight.get(key)?.promise === promise) this.inFlight.delete(key);
  }

  get size(): number {
    return this.inFlight.size;
  }
}

/**
 * The response header of `GET /api/routes/{id}` that says how long before the request arrived its view
 * was last known true (ms; the start of the store read it joined, 0 for a cached copy or a read begun for
 * it). A RoutingClient dates the view from its request's start less this, so it needs no copy of the
 * server's join bound (`serverCoalesceJoinMs` is its fallback when the header is absent: an older server).
 */
export const READ_LEAD_HEADER = 'Routelock-Read-Lead-Ms';
