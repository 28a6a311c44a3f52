/** Time for the in-process runner: the wall clock, or a virtual clock that a driver advances. */
export interface Scheduler {
  now(): number;
  /** Resolves once `fireAt` has come; after `cancel()` it never resolves. */
  timer(fireAt: number): { promise: Promise<void>; cancel(): void };
}

const MAX_TIMEOUT = 2 ** 31 - 1;

export const realScheduler: Scheduler = {
  now: () => Date.now(),
  timer(fireAt) {
    let handle: NodeJS.Timeout | undefined;
    let cancelled = false;
    const promise = new Promise<void>((resolve) => {
      const arm = () => {
        if (cancelled) return;
        const wait = fireAt - Date.now();
        if (wait <= 0) return resolve();
        handle = setTimeout(arm, Math.min(wait, MAX_TIMEOUT));
      };
      arm();
    });
    return {
      promise,
      cancel() {
        cancelled = true;
        if (handle) clearTimeout(handle);
      },
    };
  },
};
