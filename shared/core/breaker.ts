/**
 * RoutingClient's circuit breaker, as plain data and pure functions: the client holds the state, asks
 * `breakerVerdict` before each request and feeds every outcome to `nextBreaker`; no clock, timer or random
 * number is read here (the client passes `now` and the jitter), so a table test covers every transition.
 *
 * Why a breaker: against a hung routing service (a stopped process still accepts connections in the
 * kernel's backlog) every request costs the whole `timeoutMs` and a socket. After `failures` consecutive
 * timeouts or connection failures the breaker opens: requests are refused at once, without a network
 * call, and the service answers them under its outage policy. After the backoff one request, the probe,
 * goes through (half-open): its success closes the breaker, its failure reopens it for a longer backoff.
 * Only failures to get an answer count: any HTTP answer (a 500 or a 429 included) shows the host is
 * there and answering promptly, so it closes the breaker like a success.
 */

export interface BreakerSettings {
  /** Consecutive timeouts or connection failures that open the breaker; 0: it never opens. */
  failures: number;
  /** The first backoff, doubled at each reopening without a success in between. */
  backoffMs: number;
  /** The most a backoff grows to (before jitter). */
  maxBackoffMs: number;
  /** The share of a backoff taken off at random (0–1), so a fleet of clients does not probe in step. */
  jitter: number;
}

export type BreakerState =
  /** Requests go through; `failures` in a row so far. */
  | { readonly kind: 'closed'; readonly failures: number }
  /** Requests are refused until `until` (ms, the client's clock); `opens`: openings in a row. */
  | { readonly kind: 'open'; readonly opens: number; readonly until: number }
  /** The one probe is out (sent at `since`); every other request is refused until it ends. */
  | { readonly kind: 'halfOpen'; readonly opens: number; readonly since: number };

export type BreakerEvent =
  /** A request is about to be sent (the client asked `breakerVerdict` first). */
  | { readonly kind: 'request' }
  /** A request got an HTTP answer, whatever its status. */
  | { readonly kind: 'success' }
  /**
   * A request timed out or its connection failed. `probe`: it was the half-open probe (only the probe's
   * failure reopens: a request sent before the breaker opened may fail late). `jitter`: a number in
   * [0, 1) the client drew, scaling the backoff's random share.
   */
  | { readonly kind: 'failure'; readonly probe: boolean; readonly jitter: number }
  /** The probe ended with no outcome (its caller aborted it): the next request probes instead. */
  | { readonly kind: 'abandoned'; readonly probe: boolean };

export const CLOSED_BREAKER: BreakerState = Object.freeze({ kind: 'closed', failures: 0 });

/** What the client may do at `now`: send, send as the half-open probe, or refuse without a request. */
export function breakerVerdict(state: BreakerState, now: number): 'send' | 'probe' | 'refuse' {
  if (state.kind === 'closed') return 'send';
  if (state.kind === 'halfOpen') return 'refuse';
  return now >= state.until ? 'probe' : 'refuse';
}

/** The backoff after the `opens`-th opening in a row: exponential, capped, less its random share. */
export function backoffMs(opens: number, jitter: number, settings: BreakerSettings): number {
  const full = Math.min(settings.maxBackoffMs, settings.backoffMs * 2 ** Math.max(0, opens - 1));
  return Math.round(full * (1 - settings.jitter * jitter));
}

function opened(opens: number, jitter: number, now: number, settings: BreakerSettings): BreakerState {
  return { kind: 'open', opens, until: now + backoffMs(opens, jitter, settings) };
}

/** The state after `event` at `now`. Never mutates `state`. */
export function nextBreaker(
  state: BreakerState,
  event: BreakerEvent,
  now: number,
  settings: BreakerSettings,
): BreakerState {
  // Any answer shows the host is there again, whoever's request it was.
  if (event.kind === 'success') return CLOSED_BREAKER;
  switch (state.kind) {
    case 'closed': {
      if (event.kind !== 'failure') return state;
      const failures = state.failures + 1;
      if (settings.failures > 0 && failures >= settings.failures)
        return opened(1, event.jitter, now, settings);
      return { kind: 'closed', failures };
    }
    case 'open':
      // A failure now is a request sent before the breaker opened: the same outage, no longer backoff.
      if (event.kind === 'request' && now >= state.until)
        return { kind: 'halfOpen', opens: state.opens, since: now };
      return state;
    case 'halfOpen':
      if (event.kind === 'failure' && event.probe)
        return opened(state.opens + 1, event.jitter, now, settings);
      if (event.kind === 'abandoned' && event.probe) return { kind: 'open', opens: state.opens, until: now };
      return state;
  }
}
