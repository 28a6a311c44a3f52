import { RouteLockError } from '../../shared/core/errors';
import { sameLocation } from '../../shared/core/lock/document';
import type { Scheduler } from '../../shared/migration/scheduler';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { ForwardingStore, type StoreCall, isWriteCall } from '../../testkit/forwardingStore';
import type { LaggingStore } from '../../testkit/laggingStore';
import type { VirtualScheduler } from '../../testkit/virtualScheduler';
import type { CommitWatchingStore } from './oracles';
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

/** Share of swaps a write-region failover follows before they replicate (rare, seeded). */
export const FAILOVER_SHARE = 0.05;

/**
 * A write-region failover that drops the acknowledged writes its replicas had not received
 * (docs/design.md §6.11): under bounded staleness the write region acknowledges a write before the other
 * regions hold it, so a failover loses the last replication window's writes. Now and then (FAILOVER_SHARE of
 * swaps, seeded) one comes right after a swap, before it replicated: the route reverts to the newest version
 * the lagging replica held, the one before the swap (LaggingStore forgets what came after), and the route is
 * back at its source under the write lock that copied the delta. Only that route, and only the swap: a wider
 * window would also revert earlier lock steps the services already acted on, a loss the rules re-check at the
 * next step and the decision oracles would blame on the store; the swap is the loss the confirmation
 * (workflow/confirm.ts) is there to notice.
 */
export class WriteRegionFailover {
  count = 0;
  /** Swaps a failover took back (the route back at its source). */
  swapsLost = 0;

  constructor(
    private readonly deps: {
      random: Random;
      scheduler: VirtualScheduler;
      replicas: LaggingStore;
      writeRegion: CommitWatchingStore;
      /** The harness's record of the route's retired-source window, reverted with the route. */
      retiredUntil: Map<string, number>;
      onFailover: (resourceId: string, message: string) => void;
      onError: (resourceId: string) => (error: unknown) => void;
    },
  ) {}

  /** A swap committed: now and then a failover follows before it replicates. */
  afterSwap(resourceId: string): void {
    if (this.deps.random() >= FAILOVER_SHARE) return;
    // at the same instant, once the swap's write has returned through every layer (it was acknowledged)
    void this.deps.scheduler
      .timer(this.deps.scheduler.now())
      .promise.then(() => this.failOver(resourceId))
      .catch(this.deps.onError(resourceId));
  }

  private async failOver(resourceId: string): Promise<void> {
    const { scheduler, replicas, writeRegion, retiredUntil } = this.deps;
    // the writes of this instant (the swap) never reached the replica that takes over
    const kept = replicas.dropWrittenAfter(resourceId, scheduler.now() - 1);
    if (!kept) return;
    const current = await writeRegion.read(resourceId, { from: 'writeRegion' }).catch(() => null);
    if (!current) return;
    this.count += 1;
    if (!sameLocation(current.doc.location, kept.doc.location)) this.swapsLost += 1;
    await writeRegion.restore(kept.doc);
    const secondary = kept.doc.secondary;
    if (secondary?.role === 'retiredSource')
      retiredUntil.set(resourceId, Date.parse(secondary.writesBlockedUntil));
    else retiredUntil.delete(resourceId);
    this.deps.onFailover(
      resourceId,
      `write-region failover: the swap is lost, the route back at ${kept.doc.location.region}`,
    );
  }
}
