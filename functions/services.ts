import { type Clock, systemClock } from '../shared/clock';
import { type Config, getConfig } from '../shared/config';
import { Router } from '../shared/router';
import { openStore } from '../shared/store/open';
import type { LocationStore } from '../shared/store/port';

/**
 * The composition root: configuration, store and router, built once per process. In Azure the first
 * invocation builds them; the embedded host and the tests hand in their own with `useServices`.
 */
export interface Services {
  config: Config;
  store: LocationStore;
  router: Router;
  clock: Clock;
}

let current: Promise<Services> | undefined;

export async function createServices(
  config: Config,
  options: { clock?: Clock; store?: LocationStore } = {},
): Promise<Services> {
  const clock = options.clock ?? systemClock;
  const store = options.store ?? (await openStore(config.store));
  const router = new Router({ store, timing: config.timing, clock });
  return { config, store, router, clock };
}

export function services(): Promise<Services> {
  if (!current) {
    const starting = Promise.resolve().then(() => createServices(getConfig()));
    // A failed start (store unreachable) is retried by the next request rather than cached forever.
    starting.catch(() => {
      if (current === starting) current = undefined;
    });
    current = starting;
  }
  return current;
}

export function useServices(value: Services): void {
  current = Promise.resolve(value);
}
