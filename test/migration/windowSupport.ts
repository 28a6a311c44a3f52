import type { ActivityInputs } from '../../shared/migration/types';
import type { Activities } from '../../shared/migration/activities';

/**
 * What the cutover-window tests watch (docs/design.md §6.10): every lock activity with the time it ran, and
 * the oracle the negative control holds the workflow to, written apart from the rule it checks.
 */

export interface LockCall {
  name: 'prelock' | 'escalate' | 'renew' | 'release' | 'swap';
  phase?: string;
  at: number;
}

/** Record every lock activity the runner calls, at the virtual time it runs. */
export function watchLocks(activities: Activities, now: () => number): LockCall[] {
  const calls: LockCall[] = [];
  const watch = <K extends LockCall['name']>(name: K) => {
    const inner = activities[name] as (input: ActivityInputs[K]) => Promise<unknown>;
    (activities as unknown as Record<string, unknown>)[name] = (input: ActivityInputs[K]) => {
      const phase = (input as { phase?: string }).phase;
      calls.push({ name, ...(phase === undefined ? {} : { phase }), at: now() });
      return inner(input);
    };
  };
  for (const name of ['prelock', 'escalate', 'renew', 'release', 'swap'] as const) watch(name);
  return calls;
}

export const writeLocks = (calls: LockCall[]) =>
  calls.filter((c) => c.name === 'escalate' && c.phase === 'write');

/**
 * The oracle: every write lock taken at `at` may hold its whole budget inside one of the window's
 * intervals ([opens, closes), epoch ms). Answers the write locks that could not.
 */
export function writeLocksOutside(
  calls: LockCall[],
  intervals: readonly (readonly [number, number])[],
  budgetMs: number,
): LockCall[] {
  return writeLocks(calls).filter(
    (c) => !intervals.some(([opens, closes]) => opens <= c.at && c.at + budgetMs <= closes),
  );
}
