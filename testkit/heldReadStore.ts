import type { StoredDocument } from '../shared/core/lock/document';
import type { ReadOptions } from '../shared/core/store/ports/locations';
import { ForwardingStore } from './forwardingStore';

/** A read as the store's latency sees it: which document, from where. */
export interface HeldRead {
  id: string;
  from: ReadOptions['from'];
  priority: ReadOptions['priority'];
}

/**
 * A store whose reads take time: each read is taken from the inner store as it starts (its answer is as
 * old as its start, the worst case for a caller that joins it) and handed back when `hold` settles:
 * a timer for store latency (bench), a gate a test opens, a virtual-time timer (the fleet); a read
 * `hold` returns undefined for is not held at all.
 * Writes are untouched.
 */
export class HeldReadStore extends ForwardingStore {
  constructor(
    inner: ConstructorParameters<typeof ForwardingStore>[0],
    private readonly hold: (read: HeldRead) => Promise<void> | undefined,
  ) {
    super(inner);
  }

  override read(id: string, options: ReadOptions): Promise<StoredDocument> {
    const answer = this.inner.read(id, options);
    const held = this.hold({ id, from: options.from, priority: options.priority });
    if (held === undefined) return answer;
    // the answer's own failure is reported after the hold too, as a slow failing read would be
    answer.catch(() => undefined);
    return held.then(() => answer);
  }
}
