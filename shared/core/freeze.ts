/**
 * `value` and everything reachable from it made read-only (in place), for objects that many holders
 * share and none may change: the parsed config, the router's cached documents. An already frozen
 * object is taken as frozen all the way down, so a shared subtree is walked once.
 */
export function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}
