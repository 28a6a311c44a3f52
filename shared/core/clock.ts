/** Epoch milliseconds. Injected everywhere time matters so tests can drive it. */
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();
