/**
 * Refresh ahead: which state a cached view is in when a request finds it. Pure (the client passes the
 * view's age and lifetime), so a table test covers every boundary.
 *
 * Why: without it, the one request that finds a view expired waits for the fetch while every other
 * request is served from the cache; that request is the client's p99. A request that finds a view in
 * the last `share` of its lifetime is still served from the cache at once, and starts one background
 * fetch of the id (coalesced with any fetch of it already out), so the view is replaced before it
 * expires and no request waits while the host answers. Only requests trigger it: an id nobody asks for
 * is not refreshed forever. The read-through rule is untouched: this decides only among views the cache
 * may serve (fresh, no started lock); a started lock is fetched again by every request, as always.
 */

export type CachedFreshness = 'fresh' | 'refreshAhead' | 'expired';

export interface RefreshAheadSettings {
  /**
   * The last share of a view's lifetime (0–1) in which a hit starts a background refresh; 0: never
   * (the view is fetched only once expired, by the request that finds it so).
   */
  share: number;
}

/**
 * The state of a cached view `ageMs` after its request left, of a lifetime of `lifetimeMs` (its
 * freshness: max-age less Age, capped): `expired` at or past its lifetime, `refreshAhead` within its
 * last `share`, else `fresh`. A view with no lifetime is expired; an age below 0 (a clock stepped back)
 * counts as 0.
 */
export function cachedFreshness(
  ageMs: number,
  lifetimeMs: number,
  settings: RefreshAheadSettings,
): CachedFreshness {
  const age = Math.max(0, ageMs);
  if (age >= lifetimeMs) return 'expired';
  if (settings.share > 0 && age >= lifetimeMs * (1 - settings.share)) return 'refreshAhead';
  return 'fresh';
}
