import { RouteLockError } from '../../shared/errors';
import type { Scheduler } from '../../shared/migration/scheduler';
import type { LocationStore } from '../../shared/store/ports/locations';
import { ForwardingStore, type StoreCall, isWriteCall } from '../../testkit/forwardingStore';
import type { VirtualScheduler } from '../../testkit/virtualScheduler';
import type { FleetStats } from './types';
import { type Random, pick } from './world';

/**
 * The store's misbehaviour, drawn from a seeded generator. Sits above the lagging replicas and the
 * write region, below every router; the oracles read the write region directly.
 */
export class FaultInjectingStore extends ForwardingStore {
  calls = 0;
  readonly faults: FleetStats['faults'] = {
    throttled: 0,
    unavailable: 0,
    readTimeout: 0,
    writeTimeoutLost: 0,
    writeTimeoutCommitted: 0,
    conflict: 0,
  };
  enabled = true;

  constructor(
    inner: LocationStore,
    private readonly random: Random,
    private readonly rate: number,
  ) {
    super(inner);
  }

  override get kind(): string {
    return `faulty(${this.inner.kind})`;
  }

  private draw(write: boolean): 'none' | 'throttled' | 'unavailable' | 'timeout' | 'conflict' {
    this.calls += 1;
    if (!this.enabled || this.random() >= this.rate) return 'none';
    return write
      ? pick(this.random, ['throttled', 'unavailable', 'timeout', 'conflict'] as const)
      : pick(this.random, ['throttled', 'unavailable', 'timeout'] as const);
  }

  private fail(kind: StoreFault): never {
    return storeFault(kind);
  }

  /** Reads and lists: a 412 has no meaning there. */
  private async readLike<T>(work: () => Promise<T>): Promise<T> {
    const fault = this.draw(false);
    if (fault === 'throttled' || fault === 'unavailable') {
      this.faults[fault] += 1;
      this.fail(fault);
    }
    if (fault === 'timeout') {
      this.faults.readTimeout += 1;
      this.fail('timeout');
    }
    return work();
  }

  private async writeLike<T>(id: string, work: () => Promise<T>): Promise<T> {
    const fault = this.draw(true);
    if (fault === 'throttled' || fault === 'unavailable') {
      this.faults[fault] += 1;
      this.fail(fault);
    }
    if (fault === 'timeout') {
      // The caller cannot tell a timeout that committed from one that did not.
      if (this.random() < 0.5) {
        this.faults.writeTimeoutLost += 1;
        this.fail('timeout');
      }
      await work(); // a refusal (412, 409) is answered as it is: nothing committed
      this.faults.writeTimeoutCommitted += 1;
      this.fail('timeout');
    }
    if (fault === 'conflict') {
      // A real 412: another writer commits first (the same document again, a new ETag).
      const current = await this.inner.read(id, { from: 'writeRegion' }).catch(() => undefined);
      if (current) {
        this.faults.conflict += 1;
        await this.inner.replace(current.doc, current.etag);
      }
    }
    return work();
  }

  protected override around<T>(call: StoreCall, work: () => Promise<T>): Promise<T> {
    return isWriteCall(call) ? this.writeLike(call.id as string, work) : this.readLike(work);
  }
}

/**
 * An orchestrator instance's time: the shared virtual scheduler, read through its own clock offset. The
 * instance may stall (an overloaded or paused process): `stallUntil`, asked as a timer fires, may start
 * a stall, and every timer due during one fires when it ends (true time).
 */
export class InstanceScheduler implements Scheduler {
  constructor(
    private readonly inner: VirtualScheduler,
    private readonly offsetMs: number,
    private readonly stallUntil: () => Promise<number | undefined>,
  ) {}
  private stalledUntil = 0;
  now(): number {
    return this.inner.now() + this.offsetMs;
  }
  timer(fireAt: number) {
    const first = this.inner.timer(fireAt - this.offsetMs);
    let cancelled = false;
    let late: { promise: Promise<void>; cancel(): void } | undefined;
    const promise = first.promise.then(async () => {
      if (this.inner.now() >= this.stalledUntil) this.stalledUntil = (await this.stallUntil()) ?? 0;
      const until = this.stalledUntil;
      if (until <= this.inner.now()) return;
      late = this.inner.timer(until);
      if (cancelled) late.cancel();
      await late.promise;
    });
    return {
      promise,
      cancel: () => {
        cancelled = true;
        first.cancel();
        late?.cancel();
      },
    };
  }
}

export type StoreFault = 'throttled' | 'unavailable' | 'timeout';

/** A store fault as the adapters raise it (the routing store's and the campaign store's alike). */
export function storeFault(kind: StoreFault): never {
  const message = {
    throttled: 'Store throttled the request (429).',
    unavailable: 'Store unavailable (503).',
    timeout: 'Store request timed out.',
  }[kind];
  throw new RouteLockError('StoreUnavailable', message, { retryAfterSeconds: 1 });
}
