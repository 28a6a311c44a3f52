import { COALESCE_GRACE_SHARE } from './inflight';

/**
 * The timing a RoutingClient needs from its server, learnt at `ready()` instead of copied by hand:
 * `GET /api/health` says it in TIMING_HEADER. Pure: `parseTiming` reads the header, `adoptTiming`
 * decides what the client then uses, so a table test covers every bound.
 *
 * What the server says is checked, and can only make the client stricter than the production profile
 * it starts with, never looser: a broken or hostile server cannot make it accept an older write, serve a
 * view longer or join a read for longer than the production defaults allow.
 * - `inFlightGraceSeconds`: the lower of the server's and the client's (a smaller grace refuses more);
 * - `clockSkewSeconds`: the higher, at most MAX_SKEW_SECONDS (a larger margin only re-fetches more);
 * - `cacheTtlSeconds`: lowers `maxCacheSeconds` (a shorter cache costs only requests);
 * - `coalesceJoinMs` (the server's join): taken as `serverCoalesceJoinMs`, lowered to the server's own
 *   rule (a tenth of the grace); the client's own join is lowered to what the two leave.
 * An option the team set explicitly is left as it is (the client's join excepted: it is lowered, and
 * named, when the grace leaves it no room). Anything unreadable is ignored and named.
 */

export const TIMING_HEADER = 'Routelock-Timing';
export const MAX_SKEW_SECONDS = 300;

export interface ServerTiming {
  inFlightGraceSeconds: number;
  coalesceJoinMs: number;
  clockSkewSeconds: number;
  cacheTtlSeconds: number;
}

const FIELDS: readonly (keyof ServerTiming)[] = [
  'inFlightGraceSeconds',
  'coalesceJoinMs',
  'clockSkewSeconds',
  'cacheTtlSeconds',
];

/** The header's value for `timing`: `name=value` pairs, comma-separated. */
export function timingHeader(timing: ServerTiming): string {
  return FIELDS.map((field) => `${field}=${timing[field]}`).join(', ');
}

/** What a header says: each known field with a finite number ≥ 0; anything else is named in `ignored`. */
export function parseTiming(value: string | null): { said: Partial<ServerTiming>; ignored: string[] } {
  const said: Partial<ServerTiming> = {};
  const ignored: string[] = [];
  for (const pair of (value ?? '').split(',')) {
    if (pair.trim() === '') continue;
    const [name = '', raw = ''] = pair.split('=').map((part) => part.trim());
    const known = (FIELDS as readonly string[]).includes(name);
    if (known && /^\d{1,9}(\.\d{1,3})?$/.test(raw)) said[name as keyof ServerTiming] = Number(raw);
    else ignored.push(pair.trim().slice(0, 60));
  }
  return { said, ignored };
}

/** The timing a client uses. */
export interface ClientTiming {
  inFlightGraceSeconds: number;
  clockSkewSeconds: number;
  maxCacheSeconds: number;
  serverCoalesceJoinMs: number;
  coalesceJoinMs: number;
}

/** Which of the learnable options the team set explicitly (those are kept). */
export type ExplicitTiming = Partial<Record<keyof ClientTiming, boolean>>;

/**
 * The timing to use after the server said `said`: see the module's comment. `changed` names each value
 * that moved, `clamped` each the server's word was bounded for (the value it said and the one used).
 */
export function adoptTiming(
  current: ClientTiming,
  said: Partial<ServerTiming>,
  explicit: ExplicitTiming,
): { timing: ClientTiming; clamped: string[] } {
  const clamped: string[] = [];
  const learn = (name: keyof ClientTiming, value: number | undefined, bounded: number): number => {
    if (explicit[name] || value === undefined) return current[name];
    if (bounded !== value) clamped.push(`${name}: said ${value}, used ${bounded}`);
    return bounded;
  };
  const g = said.inFlightGraceSeconds;
  const grace = learn('inFlightGraceSeconds', g, Math.min(g ?? 0, current.inFlightGraceSeconds));
  const s = said.clockSkewSeconds;
  const skewBound = Math.min(MAX_SKEW_SECONDS, Math.max(s ?? 0, current.clockSkewSeconds));
  const skew = learn('clockSkewSeconds', s, skewBound);
  const ttl = said.cacheTtlSeconds;
  const maxCache = learn('maxCacheSeconds', ttl, Math.min(ttl ?? 0, current.maxCacheSeconds));
  const budgetMs = (grace * 1000) / COALESCE_GRACE_SHARE;
  const j = said.coalesceJoinMs;
  const serverJoin = explicit.serverCoalesceJoinMs
    ? current.serverCoalesceJoinMs
    : learn(
        'serverCoalesceJoinMs',
        j ?? current.serverCoalesceJoinMs,
        Math.min(j ?? current.serverCoalesceJoinMs, budgetMs),
      );
  const join = Math.min(current.coalesceJoinMs, Math.max(0, budgetMs - serverJoin));
  if (join !== current.coalesceJoinMs)
    clamped.push(`coalesceJoinMs: ${current.coalesceJoinMs}, used ${join} (what the grace leaves)`);
  return {
    timing: {
      inFlightGraceSeconds: grace,
      clockSkewSeconds: skew,
      maxCacheSeconds: maxCache,
      serverCoalesceJoinMs: serverJoin,
      coalesceJoinMs: join,
    },
    clamped,
  };
}
