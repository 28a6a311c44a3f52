import { LRUCache } from 'lru-cache';
import { API_VERSION_HEADER, SUPPORTED_API_VERSIONS } from './apiVersion';
import {
  type BreakerEvent,
  type BreakerSettings,
  type BreakerState,
  CLOSED_BREAKER,
  breakerVerdict,
  nextBreaker,
} from './breaker';
import { type Clock, systemClock } from './clock';
import type { ClientMetrics, MeterLike } from './clientMetrics';
import { type ClientSettings, type OutagePolicy, clientSettings } from './clientOptions';
import {
  type Problem,
  isHealth,
  isLockGrant,
  isRouteNotFound,
  isRouteView,
  problemOf,
} from './clientResponses';
import { type Decision, type DecisionContext, decisionRecord } from './decisions';
import { type AnyErrorCode, type ClientErrorCode, type ErrorCode, errorKind } from './errors';
import { READ_LEAD_HEADER, SharedReads } from './inflight';
import { parseRetryAfter } from './retryAfter';
import { type Location, entityTag, sameLocation } from './lock/document';
import { enforcedFrom, hasStarted } from './lock/state';
import { type RefreshAheadSettings, cachedFreshness } from './refreshAhead';
import {
  type ClientTiming,
  type ExplicitTiming,
  TIMING_HEADER,
  adoptTiming,
  parseTiming,
} from './serverTiming';
import type { Enforcement, LockGrant, LockView, Operation, RouteView } from './lock/view';

// The package's public types: everything its functions take or return, importable by a consumer.
export type { Clock } from './clock';
export type { BreakerSettings, BreakerState } from './breaker';
export type { AnyErrorCode, ClientErrorCode, ErrorCode } from './errors';
export type { Location, Phase, Secondary, SecondaryRole } from './lock/document';
export type { Enforcement, LockGrant, LockView, Operation, RouteView } from './lock/view';
export type { ClientSettings, OutagePolicy } from './clientOptions';
export type { ClientMetrics, MeterLike, RequestMetric } from './clientMetrics';
export type { CachedFreshness, RefreshAheadSettings } from './refreshAhead';
export type {
  Decision,
  DecisionContext,
  DecisionMetric,
  DecisionMetricName,
  DecisionSink,
} from './decisions';
export { BREAKER_GAUGE, otelMetrics } from './clientMetrics';
export { cachedFreshness } from './refreshAhead';
export type { ClientTiming, ServerTiming } from './serverTiming';
export { MAX_SKEW_SECONDS, TIMING_HEADER, adoptTiming, parseTiming } from './serverTiming';
export { DECISION_METRIC_NAMES, decisionMetric, recordDecision } from './decisions';
export {
  DEFAULT_BREAKER_BACKOFF_MS,
  DEFAULT_BREAKER_FAILURES,
  DEFAULT_BREAKER_JITTER,
  DEFAULT_BREAKER_MAX_BACKOFF_MS,
  DEFAULT_CACHE_MAX,
  DEFAULT_MAX_CACHE_SECONDS,
  DEFAULT_COALESCE_JOIN_MS,
  DEFAULT_INFLIGHT_GRACE_SECONDS,
  DEFAULT_NOT_FOUND_TTL_MS,
  DEFAULT_REFRESH_AHEAD_SHARE,
  DEFAULT_SERVER_COALESCE_JOIN_MS,
  DEFAULT_STALE_FOR_MS,
  DEFAULT_TIMEOUT_MS,
  OUTAGE_POLICIES,
  RoutingClientOptionError,
} from './clientOptions';
export { API_VERSION, API_VERSION_HEADER, SUPPORTED_API_VERSIONS } from './apiVersion';

/**
 * RoutingClient: what a resource-owning service links to resolve routes over HTTP and obey them
 * (design §5.4–§5.6).
 *
 * `resolve(id)` keeps an in-process cache (lru-cache) that follows the read path of design §5: it
 * honours the server's Cache-Control (`no-store`, `max-age`) and `Age` (a view stays fresh for
 * max-age − Age from the request, RFC 9111 §4.2.3: this cache is in series with the server's). A cached
 * view whose legacy lock has started (or is about to, within the skew margin) is always fetched again; an
 * announced lock's view is served while fresh, and fetched again once its start or its write window (less
 * the skew) comes (design §5.4).
 * Concurrent resolves of one id share one request (core/inflight), a 404 is remembered briefly, a
 * request gives up after `timeoutMs`, and `whenUnreachable` says what happens when no answer comes. After
 * `breakerFailures` timeouts or connection failures in a row a circuit breaker (core/breaker)
 * answers at once under that policy instead of sending, until a probe gets an answer. A call may carry
 * its caller's `signal`; no view is cached longer than `maxCacheSeconds`.
 * `decide(view, op, serving)` turns a view into what the service must do with one operation, and
 * `decisionStatus(decision)` into the HTTP answer the service gives its own caller.
 */

/**
 * Every option is checked when the client is built: an unknown one, a wrong type or a value out of range
 * throws RoutingClientOptionError (code `InvalidClientOption`, naming the option and the value).
 */
export interface RoutingClientOptions {
  /**
   * Base URL of the API, e.g. `http://127.0.0.1:7071/api`: on routelock's hosts it ends in `/api`.
   * `ready()` checks that it reaches routelock; a 404 that is not a route's answer is `NotRoutelock`.
   */
  baseUrl: string;
  /** Function key for Azure (`x-functions-key`); not needed on the embedded host. */
  functionKey?: string;
  /**
   * Under ROUTELOCK_AUTH=entra: an Entra ID access token for the routelock API, sent as
   * `Authorization: Bearer` (e.g. `(await credential.getToken('api://routelock/.default')).token`
   * with @azure/identity). The caller's app roles decide what it may do (Routes.Read to resolve).
   */
  accessToken?: () => Promise<string>;
  clock?: Clock;
  /**
   * Margin for clock skew between this service and the routing service: set it to the server's
   * ROUTELOCK_CLOCK_SKEW_SECONDS. Default: the production profile's (DEFAULT_CLOCK_SKEW_SECONDS, 5 s).
   */
  clockSkewSeconds?: number;
  /** Most entries (views and remembered 404s) held in the cache. Default 10,000. */
  cacheMax?: number;
  /**
   * How long one request to the routing service may take, answer body included, before it is abandoned
   * and raises `RoutingServiceError` status 0, code `Unreachable` ("timed out"). Default 2,000 ms: well
   * inside the production in-flight grace (5 s), which counts from when the request left, so a resolve
   * that is answered at the last moment still leaves the write most of its grace. A timed-out lock
   * mutation may still have committed: its outcome is unknown, as with a lost connection.
   */
  timeoutMs?: number;
  /**
   * The server's ROUTELOCK_INFLIGHT_GRACE_SECONDS: the most a request may take from resolving its route
   * to landing its write (design §6.3). Bounds the join bounds; `withinGrace` takes it too.
   * Default: the production profile's, DEFAULT_INFLIGHT_GRACE_SECONDS (5 s).
   */
  inFlightGraceSeconds?: number;
  /**
   * How long after a request for an id left a concurrent resolve of that id may still share it instead
   * of sending its own (core/inflight's join bound). A joined answer is as old as the request it
   * joined, so its `resolvedAt` is that request's and the bound is spent from the grace exactly like the
   * request's own time (design §5.4). This join and the server's (`serverCoalesceJoinMs`)
   * together may take at most a tenth of the grace (the server's own rule, timingInequalities' fifth): more
   * is refused. Default 50 ms (1 % of the production grace; a burst of concurrent requests arrives within
   * a few ms), lowered to what the grace leaves. A view whose lock has started is never served from the
   * cache: only joined.
   */
  coalesceJoinMs?: number;
  /**
   * The server's ROUTELOCK_COALESCE_JOIN_MS: its router may answer a request with a store read that
   * began up to this long before the request arrived. A server that says how long (the
   * `Routelock-Read-Lead-Ms` header, READ_LEAD_HEADER) is believed instead; this is the fallback for one
   * that does not (an older server), and what the join budget below is checked against. Default: the
   * production profile's, DEFAULT_SERVER_COALESCE_JOIN_MS (50 ms).
   */
  serverCoalesceJoinMs?: number;
  /**
   * How long a 404 (`NotFound`) for an id is remembered, so a storm of lookups of a missing id costs
   * one request per this long. Default 1,000 ms; 0 turns it off. Safe because a 404 allows nothing (its
   * decision is `notFound` for every operation); the cost is that a route created elsewhere is seen up
   * to this long late (this client's own `putRoute` forgets the 404 at once).
   */
  notFoundTtlMs?: number;
  /**
   * What `resolve` does when the routing service cannot be reached (no answer, a timeout, a 500, 502, 503
   * or 504) or throttles (429 `Throttled`, with its `Retry-After`):
   * - `'fail'` (default): raise the error; a service answers 503 (`decisionStatus`).
   * - `'serveStaleReads'`: serve the last view this cache held, up to `staleForMs` past its freshness,
   *   marked `stale` and with writes and deletes denied: `decide` answers reads from it and `unavailable`
   *   for writes and deletes. Writes are never served stale: a lock may have been taken meanwhile, and
   *   the pre-lock's convergence wait counts only this cache's TTL, not a stale window past it.
   */
  whenUnreachable?: OutagePolicy;
  /**
   * Under `whenUnreachable: 'serveStaleReads'`: how long past its freshness a view may still answer
   * reads. A read from it may miss writes made at a new location if the route moved meanwhile (the
   * stale read is bounded by this long). Default 60,000 ms.
   */
  staleForMs?: number;
  /**
   * The most seconds a view is cached, whatever max-age arrives (a proxy between this service and
   * routelock may rewrite it). Default DEFAULT_MAX_CACHE_SECONDS, 60: the production profile's `local`
   * tier TTL, the most a production routelock sends; the pre-lock's convergence wait counts that TTL, so
   * a view held longer could outlive a lock's start. Against a routelock whose serving tier has another
   * TTL, set it to that TTL (a lower cap costs only requests).
   */
  maxCacheSeconds?: number;
  /**
   * Timeouts or connection failures in a row (any HTTP answer resets the count) after which the circuit
   * breaker opens: calls are then refused at once with `RoutingServiceError` code `BreakerOpen` (status
   * 0, an outage: `whenUnreachable` applies, `decideFor` answers `unavailable`) instead of each waiting
   * `timeoutMs` on a socket of its own. After the backoff one call probes; its answer closes the
   * breaker, its failure reopens it for twice the backoff. Default 5; 0: never opens.
   */
  breakerFailures?: number;
  /** The breaker's first backoff. Default 1,000 ms. */
  breakerBackoffMs?: number;
  /** The longest backoff, however many reopenings in a row. Default 30,000 ms (at least breakerBackoffMs). */
  breakerMaxBackoffMs?: number;
  /**
   * The share of each backoff taken off at random (0–1), so many clients do not probe in step. Default
   * 0.5: a backoff lasts between half and all of its nominal length.
   */
  breakerJitter?: number;
  /**
   * Refresh ahead (core/refreshAhead): a resolve that finds a view in the last this share of
   * its lifetime is answered from the cache and starts one background fetch of the id (none if one is
   * out), so the view is replaced before it expires and no request waits for it. Only requests trigger
   * it (an id nobody asks for is not refreshed), once per cached view: a failed refresh leaves the view
   * until it expires, then the next resolve fetches as usual (and the outage policy applies). A view
   * whose lock has started is not cached, so this never applies to it. Default 0.2
   * (DEFAULT_REFRESH_AHEAD_SHARE); 0 turns it off; 0–1.
   */
  refreshAheadShare?: number;
  /**
   * Hooks called as things happen: cache hits and misses, refreshes ahead, each request's duration and
   * outcome, errors by code, the breaker's state, and the decisions `recordDecision` counts
   * (core/clientMetrics). Each is optional; an unknown hook is refused.
   */
  metrics?: ClientMetrics;
  /**
   * An OpenTelemetry `Meter` (@opentelemetry/api; typed structurally, the client depends on no
   * OpenTelemetry package): the same figures recorded as `routelock.client.*` instruments
   * (`otelMetrics`). With `metrics` too, both are called.
   */
  meter?: MeterLike;
  fetch?: typeof fetch;
}

/** Per-call options of `resolve`, `resolveForWrite` and `decideFor`. */
export interface CallOptions {
  /**
   * Aborting it rejects the call at once with `RoutingServiceError` code `Aborted` (status 0, not an
   * outage: no outage policy applies, `decideFor` throws it). The request is aborted too unless other
   * calls still wait for it (concurrent resolves of one id share one request). A deadline:
   * `AbortSignal.timeout(ms)`.
   */
  signal?: AbortSignal;
}

/** A view this client served past its freshness because the routing service could not be reached. */
export interface StaleMark {
  /** The code of the failure that made the client serve it. */
  code: 'Unreachable' | string;
  /** When (ms since the epoch, this client's clock) the view's freshness had ended. */
  freshUntil: number;
}

/**
 * A view as `resolve` returns it: the server's view, or (`whenUnreachable: 'serveStaleReads'` during an
 * outage) a stale one, whose enforcement denies writes and deletes and whose `stale` says why.
 */
export type ResolvedView = RouteView & { stale?: StaleMark };

/** What `resolveForWrite` returns: the view, and from when the in-flight grace counts for it. */
export interface ResolvedRoute {
  view: ResolvedView;
  /**
   * When the view was last known true (ms, this client's clock): when the request that fetched it left
   * (the request a coalesced resolve joined, if so) less the server's read lead (its
   * `Routelock-Read-Lead-Ms` header, else `serverCoalesceJoinMs`: the server's router may have answered it
   * with a read begun that much earlier), or, for a view served from the cache, the moment
   * it was served (a cached view without a started lock is true until its lock can start, by the
   * convergence wait). A write must land within the grace of this: `withinGrace`.
   */
  resolvedAt: number;
  /**
   * Until when (ms, this client's clock) the view is one this client's cache serves: fresh, with no lock
   * started within the skew margin (undefined: it is not, e.g. its lock has started). A write that lands
   * before it needs no grace, as a cache hit at that instant would have dated the view then: the
   * pre-lock's convergence wait counts this cache's TTL (design §5.4). `withinGrace` takes it.
   */
  validUntil?: number;
}

/**
 * A problem response from the routing service, with its stable code, or a client-side failure of a call
 * (`Unreachable`, `Throttled`, `NotRoutelock`, `IncompatibleServer`, `InvalidResponse`).
 */
export class RoutingServiceError extends Error {
  override readonly name = 'RoutingServiceError';
  constructor(
    readonly status: number,
    /**
     * The problem's code; `Unreachable` (status 0) when no HTTP answer came at all, or not in time;
     * `HTTP<status>` for an error answer with no problem of its own.
     */
    readonly code: ErrorCode | ClientErrorCode | string,
    message: string,
    readonly retryAfterSeconds: number | undefined,
  ) {
    super(message);
  }
}

type CacheEntry =
  | {
      kind: 'view';
      view: RouteView;
      /** When the request that fetched it left. */
      fetchedAt: number;
      freshUntil: number;
    }
  | { kind: 'notFound'; fetchedAt: number; freshUntil: number; error: RoutingServiceError };

/**
 * Until when a cached view of an announced lock, fetched at `fetchedAt`, may be served (before its
 * freshness runs out): the first boundary its snapshot may be stale at (the lock's start and the write
 * window's, each less the skew) that the server, whose clock may be `skewMs` behind this one, may not yet
 * have passed when it built the view: one at or after `fetchedAt − skew`. +∞ when there is none.
 */
function announcedServableUntil(lock: LockView, fetchedAt: number, skewMs: number): number {
  const boundaries = [enforcedFrom(lock, skewMs / 1000)];
  if (lock.writeWindowAt !== undefined) boundaries.push(Date.parse(lock.writeWindowAt) - skewMs);
  return Math.min(...boundaries.filter((b) => b >= fetchedAt - skewMs), Number.POSITIVE_INFINITY);
}

/** A stale view's enforcement: reads only (design §5.4, "when routelock is unreachable"). */
const STALE_ENFORCEMENT: Enforcement = Object.freeze({
  read: 'allow',
  write: 'deny',
  delete: 'deny',
  retryAfterSeconds: 1,
});

/** What `ready()` learnt of the server. */
export interface ServerInfo {
  /** The API version it reports (API_VERSION_HEADER), one this client supports. */
  apiVersion: number;
  /** The store it runs on, as its health check says (`sqlite`, `cosmos`). */
  store: string | undefined;
}

/**
 * What a service calls on its routing client: the read path, the decision, `forget`, creating a route,
 * and the start-up check. Type a service's code against this rather than the class, and a test hands it
 * `TestRoutingClient` (`@routelock/client/testing`), which answers each route state through this same
 * client code without a server. The lock calls a migration orchestrator makes (`prelock`, `escalate`,
 * `renew`, `swap`, `release`) are not here: a service does not make them.
 */
/**
 * `decideFor`'s answer: the decision, the view it was made on and when that view was known true, null
 * both when there is none (a missing route, an outage); `validUntil` as on `ResolvedRoute`, for the
 * grace check before a write commits.
 */
export interface DecidedRoute {
  decision: Decision;
  view: ResolvedView | null;
  resolvedAt: number | null;
  validUntil?: number;
}

export interface RouteResolver {
  /** The declared in-flight grace, in seconds: `withinGrace(resolvedAt, this, now)` before a write commits. */
  readonly inFlightGraceSeconds: number;
  ready(): Promise<ServerInfo>;
  resolve(id: string, options?: CallOptions): Promise<ResolvedView>;
  resolveForWrite(id: string, options?: CallOptions): Promise<ResolvedRoute>;
  decideFor(
    id: string,
    operation: Operation,
    serving: string | Location,
    options?: CallOptions,
  ): Promise<DecidedRoute>;
  forget(id: string): void;
  putRoute(id: string, location: Location): Promise<RouteView>;
  /**
   * Count a decision the service acted on (`decisionMetric`'s rule: refusals, tombstones, misdirected
   * and unserved operations) into the client's metrics hooks (`metrics`, `meter`).
   */
  recordDecision(decision: Decision, context: DecisionContext): void;
}

export class RoutingClient implements RouteResolver {
  private readonly cache: LRUCache<string, CacheEntry>;
  /** Times each id was forgotten (or written by this client): a request begun before one never caches. */
  private readonly forgets: LRUCache<string, number>;
  private readonly reads: SharedReads<string, ResolvedRoute>;
  private readonly baseUrl: string;
  private readonly clock: Clock;
  private readonly fetchImpl: typeof fetch;
  private readonly timeoutMs: number;
  private readonly notFoundTtlMs: number;
  private readonly staleForMs: number;
  /** The timing in force: the options, then what `ready()` learnt from the server (core/serverTiming). */
  private timing: ClientTiming;
  /** The learnable options the team set: `ready()` leaves them. */
  private readonly explicitTiming: ExplicitTiming;
  private readonly breakerSettings: BreakerSettings;
  private breaker: BreakerState = CLOSED_BREAKER;
  private readonly refreshAhead: RefreshAheadSettings;
  /** Cached views a refresh ahead was started for: one per view, so a failing one is not repeated per hit. */
  private readonly refreshed = new WeakSet<CacheEntry>();
  private readonly metrics: ClientMetrics | undefined;
  /** Each shared route request's own abort, and how many calls still wait for it. */
  private readonly fetches = new WeakMap<Promise<ResolvedRoute>, SharedFetch>();
  /** What `ready()` bounded of the server's timing, and why (empty: taken as said, or not learnt). */
  timingClamped: string[] = [];
  /** Requests made to the routing service, for tests and benchmarks. */
  requests = 0;

  constructor(private readonly options: RoutingClientOptions) {
    const settings: ClientSettings = clientSettings(options);
    this.baseUrl = settings.baseUrl;
    this.clock = options.clock ?? systemClock;
    this.fetchImpl = options.fetch ?? fetch;
    this.timeoutMs = settings.timeoutMs;
    this.timing = {
      inFlightGraceSeconds: settings.inFlightGraceSeconds,
      clockSkewSeconds: settings.clockSkewSeconds,
      maxCacheSeconds: settings.maxCacheSeconds,
      serverCoalesceJoinMs: settings.serverCoalesceJoinMs,
      coalesceJoinMs: settings.coalesceJoinMs,
    };
    const given = options as unknown as Record<string, unknown>;
    this.explicitTiming = Object.fromEntries(
      Object.keys(this.timing).map((name) => [name, given[name] !== undefined]),
    );
    this.notFoundTtlMs = settings.notFoundTtlMs;
    this.staleForMs = settings.staleForMs;
    this.breakerSettings = settings.breaker;
    this.refreshAhead = settings.refreshAhead;
    this.metrics = settings.metrics;
    // Least recently used entries go first. Freshness is this client's own check (freshUntil), so
    // lru-cache keeps no TTLs: a get reads no clock, and an expired entry stays for an outage to serve
    // (serveStaleReads) until it is replaced, forgotten or evicted.
    this.cache = new LRUCache<string, CacheEntry>({ max: settings.cacheMax });
    this.forgets = new LRUCache<string, number>({ max: settings.cacheMax });
    this.reads = new SharedReads({ joinBoundMs: this.timing.coalesceJoinMs, clock: this.clock });
  }

  /** The in-flight grace in force, in seconds: the option's, or the server's if lower (`ready()`). */
  get inFlightGraceSeconds(): number {
    return this.timing.inFlightGraceSeconds;
  }

  /** The join bound in force (`coalesceJoinMs`, lowered to what the grace leaves). */
  get coalesceJoinMs(): number {
    return this.timing.coalesceJoinMs;
  }

  /** The server's join bound, as declared (`serverCoalesceJoinMs`) or learnt (`ready()`). */
  get serverCoalesceJoinMs(): number {
    return this.timing.serverCoalesceJoinMs;
  }

  /** The timing in force (plain data): the options, then what `ready()` learnt from the server. */
  timingInForce(): ClientTiming {
    return { ...this.timing };
  }

  /** Take the timing the server says (TIMING_HEADER), within the bounds `adoptTiming` keeps. */
  private learnTiming(headers: Headers): void {
    const { said, ignored } = parseTiming(headers.get(TIMING_HEADER));
    const { timing, clamped } = adoptTiming(this.timing, said, this.explicitTiming);
    this.timing = timing;
    this.timingClamped = [...clamped, ...ignored.map((pair) => `ignored: ${pair}`)];
    this.reads.setJoinBoundMs(timing.coalesceJoinMs);
  }

  /**
   * Check at start-up that `baseUrl` reaches a routelock API this client can speak to: GET /health must
   * answer 200 with routelock's health body and an API version (API_VERSION_HEADER) in
   * SUPPORTED_API_VERSIONS. Rejects with RoutingServiceError `NotRoutelock` (a wrong base URL: anything
   * else answered), `IncompatibleServer` (no version, or one this client does not support), or what the
   * request met (`Unreachable`, a 5xx). Without it a wrong base URL shows only on the first resolve.
   */
  async ready(): Promise<ServerInfo> {
    const url = `${this.baseUrl}/health`;
    let answer: { body: unknown; headers: Headers };
    try {
      answer = await this.call('GET', '/health', undefined, {}, isHealth);
    } catch (error) {
      if (!(error instanceof RoutingServiceError) || ![404, 200].includes(error.status)) throw error;
      throw new RoutingServiceError(
        error.status,
        'NotRoutelock',
        `No routelock API at ${this.baseUrl}: GET ${url} answered ${error.status} (${error.message}); on routelock's hosts the base URL ends in /api`,
        undefined,
      );
    }
    const body = answer.body as { store?: string };
    const said = answer.headers.get(API_VERSION_HEADER);
    const apiVersion = said !== null && /^\s*\d{1,6}\s*$/.test(said) ? Number(said) : undefined;
    if (apiVersion === undefined || !SUPPORTED_API_VERSIONS.includes(apiVersion))
      throw new RoutingServiceError(
        200,
        'IncompatibleServer',
        `The routing service at ${this.baseUrl} reports API version ${said === null ? '(none)' : JSON.stringify(said)}; this client supports ${SUPPORTED_API_VERSIONS.join(', ')}`,
        undefined,
      );
    this.learnTiming(answer.headers);
    return { apiVersion, store: body.store };
  }

  /** Resolves that shared a request already in flight instead of sending their own. */
  get joined(): number {
    return this.reads.joined;
  }

  /** The circuit breaker's state (plain data, core/breaker), for metrics and diagnostics. */
  breakerState(): BreakerState {
    return this.breaker;
  }

  async resolve(id: string, options: CallOptions = {}): Promise<ResolvedView> {
    const hit = this.servable(id, this.clock());
    if (hit !== undefined) {
      this.metrics?.cacheHit?.();
      if (hit instanceof RoutingServiceError) throw hit;
      return hit; // the hot path: no allocation
    }
    this.metrics?.cacheMiss?.();
    return (await this.shared(id, options.signal)).view;
  }

  /**
   * `resolve`, with `resolvedAt`: what a service that writes needs to keep the in-flight grace
   * (`withinGrace(resolvedAt, client.inFlightGraceSeconds, now)` before it commits the write).
   */
  async resolveForWrite(id: string, options: CallOptions = {}): Promise<ResolvedRoute> {
    const now = this.clock();
    const hit = this.servable(id, now);
    if (hit !== undefined) {
      this.metrics?.cacheHit?.();
      if (hit instanceof RoutingServiceError) throw hit;
      const entry = this.cache.peek(id);
      const freshUntil = entry?.kind === 'view' && entry.view === hit ? entry.freshUntil : now;
      const fetchedAt = entry?.kind === 'view' && entry.view === hit ? entry.fetchedAt : now;
      return { view: hit, resolvedAt: now, validUntil: this.servableUntil(hit, freshUntil, fetchedAt) };
    }
    this.metrics?.cacheMiss?.();
    return this.shared(id, options.signal);
  }

  /**
   * The route request for `id` this call shares (or starts), seen through the caller's `signal`: an abort
   * rejects this call at once, and aborts the request only when no other call still waits for it (a
   * call without a signal waits to the end), so one caller's deadline never fails another's resolve.
   */
  private shared(id: string, signal: AbortSignal | undefined, background = false): Promise<ResolvedRoute> {
    if (signal?.aborted) return Promise.reject(abortedError(signal));
    const promise = this.reads.run(id, () => {
      const controller = new AbortController();
      const request = this.fetchRoute(id, controller.signal, background);
      this.fetches.set(request, { controller, waiters: 0 });
      return request;
    });
    const handle = this.fetches.get(promise) as SharedFetch;
    handle.waiters += 1;
    if (signal === undefined) return promise;
    return new Promise<ResolvedRoute>((resolve, reject) => {
      const onAbort = (): void => {
        handle.waiters -= 1;
        if (handle.waiters === 0) {
          this.reads.forgetRead(id, promise); // no later call joins a request being aborted
          handle.controller.abort();
        }
        reject(abortedError(signal));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      const done = () => signal.removeEventListener('abort', onAbort);
      promise.then(
        (route) => (done(), resolve(route)),
        (error: unknown) => (done(), reject(error)),
      );
    });
  }

  /**
   * What the cache may answer at `now` without a request: a fresh view the read rule lets it serve
   * (`viewServable`), or a 404. A view it answers in its last stretch is refreshed in the background
   * (refresh ahead): only a view the rule serves, so never one in an announced lock's window.
   */
  private servable(id: string, now: number): RouteView | RoutingServiceError | undefined {
    const hit = this.cache.get(id);
    if (hit === undefined || now >= hit.freshUntil) return undefined;
    if (hit.kind === 'notFound') return hit.error;
    if (!this.viewServable(hit.view, hit.fetchedAt, now)) return undefined;
    const state = cachedFreshness(now - hit.fetchedAt, hit.freshUntil - hit.fetchedAt, this.refreshAhead);
    if (state === 'refreshAhead') this.refreshInBackground(id, hit);
    return hit.view;
  }

  /**
   * One background fetch of `id`, unless one is out already (it will replace the view) or one was
   * started for this view before (a failed refresh is not repeated at every hit: the view serves until
   * it expires). No caller waits for it and none can abort it; its failure is counted by the breaker
   * and the metrics like any request's, and otherwise dropped: the view it was to replace still stands.
   */
  private refreshInBackground(id: string, entry: CacheEntry): void {
    if (this.refreshed.has(entry) || this.reads.startedAt(id) !== undefined) return;
    this.refreshed.add(entry);
    this.metrics?.refreshAhead?.();
    // Started after the request that found the view has been answered: it must not pay for the send.
    setImmediate(() => {
      if (this.reads.startedAt(id) === undefined) this.shared(id, undefined, true).catch(() => undefined);
    });
  }

  /**
   * Resolve and decide in one call, with the missing route and an outage (no answer, a timeout, a 500,
   * 502, 503 or 504, or throttling, 429) as decisions (`notFound`, `unavailable` with the Retry-After
   * the server sent, else 1 s) rather than errors; any other error (a 401, `NotRoutelock` for a wrong base
   * URL, `InvalidResponse`) is thrown. `resolvedAt` is null when there is no view.
   */
  async decideFor(
    id: string,
    operation: Operation,
    serving: string | Location,
    options: CallOptions = {},
  ): Promise<DecidedRoute> {
    try {
      const { view, resolvedAt, validUntil } = await this.resolveForWrite(id, options);
      const decision = decide(view, operation, serving);
      return validUntil === undefined
        ? { decision, view, resolvedAt }
        : { decision, view, resolvedAt, validUntil };
    } catch (error) {
      if (isNotFound(error)) return { decision: { kind: 'notFound' }, view: null, resolvedAt: null };
      if (isOutage(error))
        return {
          decision: { kind: 'unavailable', retryAfterSeconds: error.retryAfterSeconds ?? 1 },
          view: null,
          resolvedAt: null,
        };
      throw error;
    }
  }

  /**
   * Forget a cached view or 404 (after this service wrote through a lock error, for instance), and stop
   * later resolves joining a request already in flight for it (its answer may be older than the write).
   */
  forget(id: string): void {
    this.cache.delete(id);
    this.reads.forget(id);
    this.forgets.set(id, (this.forgets.get(id) ?? 0) + 1);
  }

  /** Count a decision the service acted on into the metrics hooks (`RouteResolver.recordDecision`). */
  recordDecision(decision: Decision, context: DecisionContext): void {
    const hook = this.metrics?.decision;
    if (hook === undefined) return;
    const metric = decisionRecord(decision, context);
    if (metric !== undefined) hook(metric, context);
  }

  async putRoute(id: string, location: Location): Promise<RouteView> {
    this.forget(id); // a remembered 404 must not hide the route this client just created
    try {
      const path = `/routes/${encodeURIComponent(id)}`;
      return (await this.call('PUT', path, { location }, {}, isRouteView)).body as RouteView;
    } finally {
      // a resolve in flight across the PUT may have answered (and cached) the 404 from before it
      this.forget(id);
    }
  }

  /**
   * `announced: true` asks for an announced lock (design §3.7): a host whose ROUTELOCK_ANNOUNCED_LOCKS is
   * off answers 400. Sent only when given, so a caller that does not ask takes the pre-lock it always did.
   */
  async prelock(
    id: string,
    request: { migrationId: string; owner: string; target: Location; announced?: true },
    options: { idempotencyKey?: string; ifMatch?: string } = {},
  ): Promise<LockGrant> {
    const path = `/routes/${encodeURIComponent(id)}/prelock`;
    return (await this.call('POST', path, request, options, isLockGrant)).body as LockGrant;
  }

  async escalate(
    id: string,
    token: string,
    phase: 'hardDelete' | 'write',
    options: { ifMatch?: string } = {},
  ) {
    const path = `/routes/${encodeURIComponent(id)}/escalate`;
    return (await this.call('POST', path, { token, phase }, options, isLockGrant)).body as LockGrant;
  }

  /**
   * Announce an announced lock's write window: the grant carries `writeWindowAt` (no sooner than the lead
   * from now, nor than `at`) and `writeWindowUntil`; `escalate(id, token, 'write')` is granted between them.
   */
  async announce(
    id: string,
    request: { token: string; phase: 'write'; at?: string },
    options: { ifMatch?: string } = {},
  ): Promise<LockGrant> {
    const { token, phase, at } = request;
    const body = at === undefined ? { token, phase } : { token, phase, at };
    const path = `/routes/${encodeURIComponent(id)}/announce`;
    return (await this.call('POST', path, body, options, isLockGrant)).body as LockGrant;
  }

  async renew(
    id: string,
    token: string,
    phase?: 'prelock' | 'hardDelete' | 'write',
    options: { ifMatch?: string } = {},
  ) {
    const body = phase === undefined ? { token } : { token, phase };
    const path = `/routes/${encodeURIComponent(id)}/renew`;
    return (await this.call('POST', path, body, options, isLockGrant)).body as LockGrant;
  }

  /** `writeAt`: the write-lock grant's, naming the attempt this swap belongs to. */
  async swap(
    id: string,
    token: string,
    writeAt: string,
    options: { ifMatch?: string } = {},
  ): Promise<RouteView> {
    const path = `/routes/${encodeURIComponent(id)}/swap`;
    return (await this.call('POST', path, { token, writeAt }, options, isRouteView)).body as RouteView;
  }

  /** Release everything, or with `downgrade` only the write lock of the attempt its `writeAt` names. */
  async release(
    id: string,
    token: string,
    downgrade?: { writeAt: string },
    options: { ifMatch?: string } = {},
  ): Promise<RouteView> {
    const body = downgrade === undefined ? { token } : { token, phase: 'write', writeAt: downgrade.writeAt };
    const path = `/routes/${encodeURIComponent(id)}/release`;
    return (await this.call('POST', path, body, options, isRouteView)).body as RouteView;
  }

  /**
   * Until when the cache would serve `view`, fetched at `fetchedAt` and fresh until `freshUntil`: that, or
   * a legacy lock's start less the skew, or an announced lock's next boundary (`announcedServableUntil`).
   */
  private servableUntil(view: RouteView, freshUntil: number, fetchedAt: number): number {
    const lock = view.lock;
    if (lock === null) return freshUntil;
    const skew = this.timing.clockSkewSeconds;
    if (lock.announced === true)
      return Math.min(freshUntil, announcedServableUntil(lock, fetchedAt, skew * 1000));
    return Math.min(freshUntil, enforcedFrom(lock, skew));
  }

  /**
   * Whether a fresh cached view may be served at `now` (design §5.4). A legacy lock that has started (within
   * the skew margin) may change at any moment: never served. An announced lock's view is served while fresh
   * (the server sends `no-store` in its window, and a max-age clamped to its next boundary) unless a
   * boundary has come since the view was fetched (less the skew: the server's clock may lag). A write
   * lock's view with a max-age is the server's word, from the write region, that the write lock is dead.
   */
  private viewServable(view: RouteView, fetchedAt: number, now: number): boolean {
    const lock = view.lock;
    if (lock === null) return true;
    const skew = this.timing.clockSkewSeconds;
    if (lock.announced === true) return now < announcedServableUntil(lock, fetchedAt, skew * 1000);
    return !hasStarted(lock, now, skew);
  }

  /** One GET of the route (shared by the resolves that join it), its answer cached as its headers allow. */
  private async fetchRoute(id: string, signal: AbortSignal, background: boolean): Promise<ResolvedRoute> {
    const startedAt = this.clock();
    const forgets = this.forgets.get(id) ?? 0;
    let answer: { body: unknown; headers: Headers };
    try {
      const path = `/routes/${encodeURIComponent(id)}`;
      // A refresh ahead asks past the server's cache: its copy would expire when the one held here does.
      const how = background ? { revalidate: true } : {};
      answer = await this.call('GET', path, undefined, how, isRouteView, signal, background);
    } catch (error) {
      if (isNotFound(error)) {
        if (this.forgottenSince(id, forgets)) throw error;
        this.cache.delete(id);
        if (this.notFoundTtlMs > 0)
          this.remember(id, {
            kind: 'notFound',
            fetchedAt: startedAt,
            freshUntil: startedAt + this.notFoundTtlMs,
            error,
          });
        throw error;
      }
      const stale = this.staleFor(id, error);
      if (stale !== undefined) return stale;
      throw error;
    }
    const view = answer.body as RouteView;
    // Forgotten (or written by this client) while the request was out: the answer may predate that.
    // The server may have answered with a store read begun before the request arrived: by as much as it
    // says (READ_LEAD_HEADER), or, from a server that does not say, by up to its join bound.
    const resolvedAt = startedAt - this.readLeadMs(answer.headers);
    if (this.forgottenSince(id, forgets)) return { view, resolvedAt };
    const fresh = Math.min(
      this.timing.maxCacheSeconds,
      freshnessSeconds(answer.headers.get('cache-control'), answer.headers.get('age')),
    );
    // Counted from when the request left: the time the answer took is age too (RFC 9111 §4.2.3).
    // A view not to be cached (no-store: its lock has started) is still the newest one an outage could
    // serve reads from: kept with no freshness, under serveStaleReads only.
    const freshUntil = startedAt + fresh * 1000;
    this.remember(id, { kind: 'view', view, fetchedAt: startedAt, freshUntil });
    const validUntil = this.servableUntil(view, freshUntil, startedAt);
    return validUntil > this.clock() ? { view, resolvedAt, validUntil } : { view, resolvedAt };
  }

  /** How long before the request arrived its answer was last known true (READ_LEAD_HEADER, ms). */
  private readLeadMs(headers: Headers): number {
    const said = headers.get(READ_LEAD_HEADER);
    return said !== null && /^\d{1,12}$/.test(said.trim())
      ? Number(said.trim())
      : this.timing.serverCoalesceJoinMs;
  }

  /** Whether `id` was forgotten since `forgets` was read (an evicted count reads 0: not cached either). */
  private forgottenSince(id: string, forgets: number): boolean {
    return (this.forgets.get(id) ?? 0) !== forgets;
  }

  /**
   * Cache an entry while it is fresh or (a view, under serveStaleReads) within its stale window; an
   * older answer never replaces a newer one.
   */
  private remember(id: string, entry: CacheEntry): void {
    const held = this.cache.peek(id);
    if (held !== undefined && held.fetchedAt > entry.fetchedAt) return;
    const keepUntil = entry.freshUntil + (entry.kind === 'view' ? this.staleForMs : 0);
    if (keepUntil <= this.clock()) this.cache.delete(id);
    else this.cache.set(id, entry);
  }

  /** Under `serveStaleReads`, during an outage: the last view held, for reads only, if not too old. */
  private staleFor(id: string, error: unknown): ResolvedRoute | undefined {
    if (this.staleForMs === 0 || !isOutage(error)) return undefined;
    const held = this.cache.peek(id);
    if (held?.kind !== 'view' || this.clock() >= held.freshUntil + this.staleForMs) return undefined;
    const view: ResolvedView = {
      ...held.view,
      enforcement: STALE_ENFORCEMENT,
      stale: { code: error.code, freshUntil: held.freshUntil },
    };
    return { view, resolvedAt: held.fetchedAt - this.timing.serverCoalesceJoinMs };
  }

  /**
   * One call: its answer's body, checked by `expected` (a 2xx of another shape is `InvalidResponse`), or
   * the error its status means (`failure`).
   */
  private async call(
    method: string,
    path: string,
    body: unknown,
    options: { idempotencyKey?: string; ifMatch?: string; revalidate?: boolean },
    expected: (body: unknown) => boolean,
    signal?: AbortSignal,
    background = false,
  ): Promise<{ body: unknown; headers: Headers }> {
    try {
      const probe = this.admit(method, path);
      return await this.exchange(method, path, body, options, expected, { probe, signal, background });
    } catch (error) {
      if (error instanceof RoutingServiceError) this.metrics?.error?.(error.code);
      throw error;
    }
  }

  /** `call`'s request, once the breaker let it through, timed for the `request` metric. */
  private async exchange(
    method: string,
    path: string,
    body: unknown,
    options: { idempotencyKey?: string; ifMatch?: string; revalidate?: boolean },
    expected: (body: unknown) => boolean,
    how: { probe: boolean; signal: AbortSignal | undefined; background: boolean },
  ): Promise<{ body: unknown; headers: Headers }> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.options.functionKey) headers['x-functions-key'] = this.options.functionKey;
    if (options.idempotencyKey) headers['idempotency-key'] = options.idempotencyKey;
    if (options.ifMatch) headers['if-match'] = entityTag(options.ifMatch);
    if (options.revalidate) headers['cache-control'] = 'no-cache';
    this.requests += 1;
    const init: RequestInit = {
      method,
      headers,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    };
    const sentAt = performance.now();
    let outcome = 'ok';
    try {
      const url = `${this.baseUrl}${path}`;
      const { response, text } = await this.send(method, path, url, init, how.probe, how.signal);
      return answered(method, path, response, text, expected);
    } catch (error) {
      outcome = error instanceof RoutingServiceError ? error.code : 'Unreachable';
      throw error;
    } finally {
      const durationMs = performance.now() - sentAt;
      this.metrics?.request?.({ method, durationMs, outcome, background: how.background });
    }
  }

  private async accessToken(): Promise<string> {
    try {
      return await (this.options.accessToken as () => Promise<string>)();
    } catch (error) {
      throw new RoutingServiceError(
        0,
        'Unreachable',
        `No access token for the routing service: ${(error as Error).message}`,
        1,
      );
    }
  }

  /**
   * The breaker's verdict on a call about to be sent: refused (`BreakerOpen`, no request), sent, or sent
   * as the half-open probe (true).
   */
  private admit(method: string, path: string): boolean {
    const now = this.clock();
    const verdict = breakerVerdict(this.breaker, now);
    if (verdict === 'refuse') {
      const state = this.breaker;
      const leftMs = state.kind === 'open' ? state.until - now : 0;
      throw new RoutingServiceError(
        0,
        'BreakerOpen',
        `Routing service unreachable: ${method} ${path} not sent, the client's breaker is open after ${this.breakerSettings.failures} timeouts or connection failures in a row${state.kind === 'halfOpen' ? ' (a probe is out)' : ` (for ${leftMs} ms more)`}`,
        Math.max(1, Math.ceil(leftMs / 1000)),
      );
    }
    this.moveBreaker(nextBreaker(this.breaker, { kind: 'request' }, now, this.breakerSettings));
    return verdict === 'probe';
  }

  private report(event: BreakerEvent): void {
    this.moveBreaker(nextBreaker(this.breaker, event, this.clock(), this.breakerSettings));
  }

  /** The breaker's next state; a change of kind goes to the `breaker` metric. */
  private moveBreaker(next: BreakerState): void {
    const moved = next.kind !== this.breaker.kind;
    this.breaker = next;
    if (moved) this.metrics?.breaker?.(next);
  }

  /**
   * One request, answer body included, within `timeoutMs`, and within the caller's `signal`. The timer
   * races the fetch as well as aborting it, so a `fetch` option that ignores its signal cannot hang the
   * caller either. Its outcome goes to the breaker: an answer is a success, a timeout or a failed
   * connection a failure; a caller's abort or a failed access token says nothing of the host.
   */
  private async send(
    method: string,
    path: string,
    url: string,
    init: RequestInit,
    probe: boolean,
    signal?: AbortSignal,
  ): Promise<{ response: Response; text: string }> {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const cut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        controller.abort();
        reject(
          new RoutingServiceError(
            0,
            'Unreachable',
            `Routing service unreachable: ${method} ${path} timed out after ${this.timeoutMs} ms`,
            1,
          ),
        );
      }, this.timeoutMs);
      onAbort = () => {
        controller.abort();
        reject(abortedError(signal as AbortSignal));
      };
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
    let sent = false;
    const exchange = (async () => {
      // The token inside the deadline too: a hung credential (a slow metadata endpoint) must not hang us.
      const headers = { ...(init.headers as Record<string, string>) };
      if (this.options.accessToken) headers.authorization = `Bearer ${await this.accessToken()}`;
      sent = true;
      const response = await this.fetchImpl(url, { ...init, headers, signal: controller.signal });
      return { response, text: await response.text() };
    })();
    try {
      const answer = await Promise.race([exchange, cut]);
      this.report({ kind: 'success' });
      return answer;
    } catch (error) {
      const aborted = error instanceof RoutingServiceError && error.code === 'Aborted';
      if (aborted || !sent) this.report({ kind: 'abandoned', probe });
      else this.report({ kind: 'failure', probe, jitter: Math.random() });
      if (error instanceof RoutingServiceError) throw error;
      throw new RoutingServiceError(
        0,
        'Unreachable',
        `Routing service unreachable: ${(error as Error).message}`,
        1,
      );
    } finally {
      clearTimeout(timer);
      if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort);
    }
  }
}

/** An answer's body, checked by `expected` (a 2xx of another shape is `InvalidResponse`), or its error. */
function answered(
  method: string,
  path: string,
  response: Response,
  text: string,
  expected: (body: unknown) => boolean,
): { body: unknown; headers: Headers } {
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined; // a proxy's HTML page, say: its status is all there is to go on
  }
  if (!response.ok) throw failure(method, path, response, problemOf(parsed));
  if (!expected(parsed))
    throw new RoutingServiceError(
      response.status,
      'InvalidResponse',
      `${method} ${path} answered ${response.status} with ${parsed === undefined ? 'a body that is not JSON' : 'JSON of the wrong shape'}`,
      undefined,
    );
  return { body: parsed, headers: response.headers };
}

/** A route request shared by concurrent resolves: its own abort, and the calls still waiting for it. */
interface SharedFetch {
  controller: AbortController;
  waiters: number;
}

/** The error of a call its caller's signal aborted (the signal's reason as its cause). */
function abortedError(signal: AbortSignal): RoutingServiceError {
  const error = new RoutingServiceError(
    0,
    'Aborted',
    `The call to the routing service was aborted by its caller${signal.reason instanceof Error ? `: ${signal.reason.message}` : ''}`,
    undefined,
  );
  return Object.assign(error, { cause: signal.reason as unknown });
}

/**
 * The error an answer's status means. A 404 is `NotFound` only when it is the route's own problem
 * (isRouteNotFound); any other 404 is `NotRoutelock`, a wrong base URL: were it `NotFound`, every
 * resolve would quietly decide `notFound` and the service would refuse everything without an error.
 * A 429 is `Throttled`, with its Retry-After. Otherwise the problem's code, or `HTTP<status>`.
 */
function failure(method: string, path: string, response: Response, problem: Problem | undefined) {
  const { status } = response;
  // delta-seconds; an HTTP-date (a gateway's) is ignored
  const retryAfter = parseRetryAfter(response.headers.get('retry-after'));
  if (status === 404 && !isRouteNotFound(problem, path))
    return new RoutingServiceError(
      404,
      'NotRoutelock',
      `${method} ${path} answered 404 without routelock's NotFound problem for it (${problem?.detail ?? 'no problem body'}): the base URL does not reach routelock's API (it ends in /api)`,
      undefined,
    );
  if (status === 429)
    return new RoutingServiceError(
      429,
      'Throttled',
      problem?.detail ?? `${method} ${path}: the routing service is throttling (429)`,
      retryAfter ?? 1,
    );
  // no code of its own: what the service sent is all there is
  const code = problem?.code ?? `HTTP${status}`;
  return new RoutingServiceError(status, code, problem?.detail ?? `HTTP ${status}`, retryAfter);
}

/** A 404 from the routing service that means what it says: no route for the id (not a wrong base URL). */
function isNotFound(error: unknown): error is RoutingServiceError {
  return error instanceof RoutingServiceError && error.status === 404 && error.code === 'NotFound';
}

/**
 * No answer (the breaker's refusal included), a server failure (500), a gateway's stand-in for one (502,
 * 503, 504), or throttling (429):
 * what `whenUnreachable` is about. None says anything of the route, so the service decides as when
 * routelock is down.
 */
function isOutage(error: unknown): error is RoutingServiceError {
  return (
    error instanceof RoutingServiceError &&
    [0, 429, 500, 502, 503, 504].includes(error.status) &&
    error.code !== 'Aborted' // the caller's own choice: it says nothing of routelock
  );
}

/**
 * Whether a write whose route was resolved at `resolvedAt` (`ResolvedRoute.resolvedAt`) may still be
 * committed at `now`: not if the route is older than the in-flight grace, for the copies of a lock that
 * committed just after the resolve start that long after the lock (design §6.3) and would miss
 * it. Both instants are this service's clock: only their difference counts, so clock skew does not.
 * With the route's `validUntil` (`ResolvedRoute`), a write landing before it is within grace whatever
 * the grace: the cache would have served that view at that instant (under a short grace, such as the
 * dev profile's 1 s, a write whose preparation outlasts the grace otherwise fails though its view holds).
 */
export function withinGrace(
  resolvedAt: number,
  graceSeconds: number,
  now: number,
  validUntil?: number,
): boolean {
  return now - resolvedAt <= graceSeconds * 1000 || (validUntil !== undefined && now < validUntil);
}
/**
 * Seconds a response stays fresh in a cache in series with the server's: max-age less `Age` (the time
 * the server's cache had already held it), never below 0. An `Age` that is not a non-negative whole
 * number leaves the response uncached: the client cannot tell how old it is.
 */
export function freshnessSeconds(cacheControl: string | null, age: string | null): number {
  const lifetime = cacheLifetimeSeconds(cacheControl);
  if (lifetime === 0 || age === null) return lifetime;
  // A list-valued Age (a proxy's doing): the first member counts (RFC 9111 §5.1).
  const first = (age.split(',')[0] ?? '').trim();
  if (!/^\d+$/.test(first)) return 0;
  return Math.max(0, lifetime - Number(first));
}

/** Seconds a response may be cached per its Cache-Control (0 for no-store, no-cache or none). */
export function cacheLifetimeSeconds(cacheControl: string | null): number {
  if (!cacheControl) return 0;
  const directives = cacheControl
    .toLowerCase()
    .split(',')
    .map((d) => d.trim());
  if (directives.some((d) => d === 'no-store' || d === 'no-cache')) return 0;
  const maxAge = directives.find((d) => d.startsWith('max-age='));
  const seconds = maxAge ? Number(maxAge.slice('max-age='.length)) : 0;
  return Number.isFinite(seconds) && seconds > 0 ? seconds : 0;
}

/**
 * The full location a service serves. The string form names a region with no account: it matches only a
 * route whose location has no account (a route at `{westeurope, account: x}` is never served by
 * "westeurope"). Accounts are compared as strictly as regions, because moves between two accounts of one
 * region are a designed case.
 */
function servingLocation(serving: string | Location): Location {
  return typeof serving === 'string' ? { region: serving } : serving;
}

/**
 * What a service serving from `serving` (a full location, or a region with no account) must do with one
 * operation on the resource `view` routes (`null`: the routing service answered 404, no route):
 * - no route: `notFound`, whatever the operation;
 * - a stale view (`whenUnreachable: 'serveStaleReads'`, during an outage): writes and deletes are
 *   `unavailable` wherever they come; reads are decided as below;
 * - at the route's location: the view's enforcement (reads always allowed; writes and deletes denied with
 *   a Retry-After during the write lock; deletes tombstoned during the hard-delete lock);
 * - anywhere else, including a `pendingTarget` (before the swap) or a `retiredSource` (after it):
 *   `notHere`, with the location to send the caller to. Nothing is written through such a location.
 * `decisionStatus` gives the HTTP answer for each.
 */
export function decide(
  view: ResolvedView | null,
  operation: Operation,
  serving: string | Location,
): Decision {
  if (view === null) return { kind: 'notFound' };
  if (view.stale !== undefined && operation !== 'read') return { kind: 'unavailable', retryAfterSeconds: 1 };
  const here = servingLocation(serving);
  // A pending target or a retired source is never where the data lives, whatever else matches.
  if (!sameLocation(view.location, here) || (view.secondary && sameLocation(view.secondary.location, here)))
    return { kind: 'notHere', location: view.location };
  const e = view.enforcement;
  const verdict = operation === 'read' ? e.read : operation === 'write' ? e.write : e.delete;
  if (verdict === 'allow') return { kind: 'allow' };
  if (verdict === 'tombstone') return { kind: 'tombstone' };
  return { kind: 'deny', retryAfterSeconds: e.retryAfterSeconds ?? 1 };
}

/** The HTTP answer a service gives its own caller for a decision (design §5.5's table). */
export interface DecisionStatus {
  /** Whether the service performs the operation: as asked (`allow`) or as a tombstone (`tombstone`). */
  proceed: boolean;
  /**
   * The status to answer. For `allow` the operation's own success status is the service's to choose
   * (200 is given); a tombstoned delete answers what a delete answers, 204.
   */
  status: number;
  /** Headers to send with it: `Retry-After` (423, 503), `Location` (307). */
  headers: Readonly<Record<string, string>>;
  /** For a refusal, the problem code (core/errors) to put in its RFC 9457 body. */
  code?: AnyErrorCode;
  /** For `notHere`: where the data lives (put it in the problem body; a 421 has no Location header). */
  location?: Location;
}

/**
 * The HTTP answer for `decision`, statuses from the one error table (core/errors):
 * - `allow` → proceed (200, or the operation's own success status);
 * - `tombstone` → proceed, recording a tombstone; 204, as any delete: the item is gone for every reader at
 *   once (the tombstone hides it, and the delta copy carries it to the target). 202 would tell the caller
 *   the delete has not happened yet and invite it to poll a status this service does not have;
 * - `deny` → 423 `Locked` with `Retry-After` (the write lock's end, capped by the server);
 * - `notHere` → 307 with `Location` when `urlFor` names the URL of the service at that location (a
 *   temporary redirect: the method and body are kept, and the route may move again), else 421
 *   `MisdirectedRequest` with the location in the problem body (a gateway in front picks the region);
 * - `notFound` → 404 `NotFound`: no route, so nothing may be read or written (a write would put data where
 *   no route points);
 * - `unavailable` → 503 `Unreachable` with `Retry-After`: this service's own dependency is down.
 */
export function decisionStatus(
  decision: Decision,
  options: { urlFor?: (location: Location) => string | undefined } = {},
): DecisionStatus {
  switch (decision.kind) {
    case 'allow':
      return { proceed: true, status: 200, headers: {} };
    case 'tombstone':
      return { proceed: true, status: 204, headers: {} };
    case 'deny':
      return refusal('Locked', { 'Retry-After': String(decision.retryAfterSeconds) });
    case 'notHere': {
      const url = options.urlFor?.(decision.location);
      if (url !== undefined)
        return { proceed: false, status: 307, headers: { Location: url }, location: decision.location };
      return { ...refusal('MisdirectedRequest', {}), location: decision.location };
    }
    case 'notFound':
      return refusal('NotFound', {});
    case 'unavailable':
      return refusal('Unreachable', { 'Retry-After': String(decision.retryAfterSeconds) });
  }
}

function refusal(code: AnyErrorCode, headers: Record<string, string>): DecisionStatus {
  return { proceed: false, status: errorKind(code).status, headers, code };
}
