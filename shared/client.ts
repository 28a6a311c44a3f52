import { type Clock, systemClock } from './clock';
import type { ClientErrorCode, ErrorCode } from './errors';
import { type Location, entityTag, sameLocation } from './lock/document';
import { DEFAULT_CLOCK_SKEW_SECONDS, hasStarted } from './lock/state';
import type { Operation, LockGrant, RouteView } from './lock/view';

/**
 * RoutingClient: what a resource-owning service links to resolve routes over HTTP and obey them.
 *
 * `resolve(id)` keeps an in-process cache that follows the read path of docs/design.md §5: it honours the
 * server's Cache-Control (`no-store`, `max-age`) and `Age` (a view stays fresh for max-age − Age from
 * the request, RFC 9111 §4.2.3: this cache is in series with the server's), and a cached view whose
 * lock has started (or is about to, within the skew margin) is always fetched again.
 * `decide(view, op, servingRegion)` turns a view into what the service must do with one operation.
 */

export type Decision =
  | { kind: 'allow' }
  | { kind: 'tombstone' }
  | { kind: 'deny'; retryAfterSeconds: number }
  | { kind: 'notHere'; location: Location };

export interface RoutingClientOptions {
  /** Base URL of the API, e.g. `http://127.0.0.1:7071/api`. */
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
  /** Most views held in the cache. */
  cacheMax?: number;
  fetch?: typeof fetch;
}

interface CachedView {
  view: RouteView;
  expiresAt: number;
}

/** A problem response from the routing service, with its stable code. */
export class RoutingServiceError extends Error {
  override readonly name = 'RoutingServiceError';
  constructor(
    readonly status: number,
    /** The problem's code; `Unreachable` (status 0) when no HTTP answer came at all. */
    readonly code: ErrorCode | ClientErrorCode | string,
    message: string,
    readonly retryAfterSeconds: number | undefined,
  ) {
    super(message);
  }
}

export class RoutingClient {
  private readonly cache = new Map<string, CachedView>();
  private readonly clock: Clock;
  private readonly skewSeconds: number;
  private readonly cacheMax: number;
  private readonly fetchImpl: typeof fetch;
  /** Requests made to the routing service, for tests and benchmarks. */
  requests = 0;

  constructor(private readonly options: RoutingClientOptions) {
    this.clock = options.clock ?? systemClock;
    this.skewSeconds = options.clockSkewSeconds ?? DEFAULT_CLOCK_SKEW_SECONDS;
    this.cacheMax = options.cacheMax ?? 10_000;
    this.fetchImpl = options.fetch ?? fetch;
  }

  async resolve(id: string): Promise<RouteView> {
    const now = this.clock();
    const cached = this.cache.get(id);
    if (cached && now < cached.expiresAt && !this.lockMayBeInForce(cached.view, now)) return cached.view;
    const { body, headers } = await this.call('GET', `/routes/${encodeURIComponent(id)}`);
    const view = body as RouteView;
    const fresh = freshnessSeconds(headers.get('cache-control'), headers.get('age'));
    if (fresh > 0) {
      if (this.cache.size >= this.cacheMax) this.cache.delete(this.cache.keys().next().value as string);
      // Counted from when the request left: the time the answer took is age too (RFC 9111 §4.2.3).
      this.cache.set(id, { view, expiresAt: now + fresh * 1000 });
    } else {
      this.cache.delete(id);
    }
    return view;
  }

  /** Forget a cached view (after this service wrote through a lock error, for instance). */
  forget(id: string): void {
    this.cache.delete(id);
  }

  async putRoute(id: string, location: Location): Promise<RouteView> {
    return (await this.call('PUT', `/routes/${encodeURIComponent(id)}`, { location })).body as RouteView;
  }

  async prelock(
    id: string,
    request: { migrationId: string; owner: string; target: Location },
    options: { idempotencyKey?: string; ifMatch?: string } = {},
  ): Promise<LockGrant> {
    return (await this.call('POST', `/routes/${encodeURIComponent(id)}/prelock`, request, options))
      .body as LockGrant;
  }

  async escalate(
    id: string,
    token: string,
    phase: 'hardDelete' | 'write',
    options: { ifMatch?: string } = {},
  ) {
    return (await this.call('POST', `/routes/${encodeURIComponent(id)}/escalate`, { token, phase }, options))
      .body as LockGrant;
  }

  async renew(
    id: string,
    token: string,
    phase?: 'prelock' | 'hardDelete' | 'write',
    options: { ifMatch?: string } = {},
  ) {
    const body = phase === undefined ? { token } : { token, phase };
    return (await this.call('POST', `/routes/${encodeURIComponent(id)}/renew`, body, options))
      .body as LockGrant;
  }

  /** `writeAt`: the write-lock grant's, naming the attempt this swap belongs to. */
  async swap(
    id: string,
    token: string,
    writeAt: string,
    options: { ifMatch?: string } = {},
  ): Promise<RouteView> {
    return (await this.call('POST', `/routes/${encodeURIComponent(id)}/swap`, { token, writeAt }, options))
      .body as RouteView;
  }

  /** Release everything, or with `downgrade` only the write lock of the attempt its `writeAt` names. */
  async release(
    id: string,
    token: string,
    downgrade?: { writeAt: string },
    options: { ifMatch?: string } = {},
  ): Promise<RouteView> {
    const body = downgrade === undefined ? { token } : { token, phase: 'write', writeAt: downgrade.writeAt };
    return (await this.call('POST', `/routes/${encodeURIComponent(id)}/release`, body, options))
      .body as RouteView;
  }

  /** A started lock (within the skew margin) may change at any moment: never serve it from cache. */
  private lockMayBeInForce(view: RouteView, now: number): boolean {
    return view.lock !== null && hasStarted(view.lock, now, this.skewSeconds);
  }

  private async call(
    method: string,
    path: string,
    body?: unknown,
    options: { idempotencyKey?: string; ifMatch?: string } = {},
  ): Promise<{ body: unknown; headers: Headers }> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.options.functionKey) headers['x-functions-key'] = this.options.functionKey;
    if (this.options.accessToken) headers.authorization = `Bearer ${await this.options.accessToken()}`;
    if (options.idempotencyKey) headers['idempotency-key'] = options.idempotencyKey;
    if (options.ifMatch) headers['if-match'] = entityTag(options.ifMatch);
    this.requests += 1;
    let response: Response;
    try {
      response = await this.fetchImpl(`${this.options.baseUrl.replace(/\/$/, '')}${path}`, {
        method,
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (error) {
      throw new RoutingServiceError(
        0,
        'Unreachable',
        `Routing service unreachable: ${(error as Error).message}`,
        1,
      );
    }
    const text = await response.text();
    const parsed: unknown = text ? JSON.parse(text) : null;
    if (!response.ok) {
      const problem = (parsed ?? {}) as { code?: string; detail?: string };
      const retryAfter = response.headers.get('retry-after');
      throw new RoutingServiceError(
        response.status,
        problem.code ?? `HTTP${response.status}`,
        problem.detail ?? `HTTP ${response.status}`,
        retryAfter === null ? undefined : Number(retryAfter),
      );
    }
    return { body: parsed, headers: response.headers };
  }
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
 * What a service serving from `servingRegion` (or a full location) must do with one operation:
 * - at the route's location: the view's enforcement (reads always allowed; writes denied with a
 *   Retry-After during the write lock; deletes tombstoned during the hard-delete lock);
 * - anywhere else, including a `pendingTarget` (before the swap) or a `retiredSource` (after it):
 *   `notHere`, with the location to send the caller to. Nothing is written through such a location.
 */
export function decide(view: RouteView, operation: Operation, serving: string | Location): Decision {
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
