import { RouteLockError } from '../shared/core/errors';
import { ForwardingStore, type StoreCall } from './forwardingStore';

/** Wraps a store; while `down`, every call fails as a throttled or unavailable Cosmos account would. */
export class FaultyStore extends ForwardingStore {
  down = false;

  protected override async around<T>(_call: StoreCall, work: () => Promise<T>): Promise<T> {
    if (this.down)
      throw new RouteLockError('StoreUnavailable', 'Store throttled (429).', { retryAfterSeconds: 2 });
    return work();
  }
}
