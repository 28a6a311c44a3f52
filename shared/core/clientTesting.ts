import { API_VERSION, API_VERSION_HEADER } from './apiVersion';
import {
  type CallOptions,
  type DecidedRoute,
  type Decision,
  type DecisionContext,
  type ResolvedRoute,
  type ResolvedView,
  type RouteResolver,
  RoutingClient,
  type RoutingClientOptions,
  type ServerInfo,
} from './client';
import type { LocationDocument, Location, StoredDocument } from './lock/document';
import { SCHEMA_VERSION, normalizeLocation } from './lock/document';
import { type Operation, type RouteView, type ViewTiming, cacheControl, routeView } from './lock/view';
import { DEFAULT_CLOCK_SKEW_SECONDS } from './lock/state';
import { profiles } from './profiles';

/**
 * `@routelock/client/testing`: a routing client for a service's unit tests that puts a resource into any
 * route state without a server (routelock's service guide, "Unit-testing your service").
 *
 * It is not a second copy of the rules. Each state is a location document as routelock's own lock rules
 * leave it (core/lock/rules), made into a view by the server's `routeView` and `cacheControl`,
 * and answered to a real `RoutingClient` through an in-process `fetch`: the cache, the outage policy
 * (`whenUnreachable`, `staleForMs`) and `decide` are the client's own code. The documents are built at
 * each request's instant on the double's clock, so a lock set stays in force however long a test runs.
 */

/** An outage as the real client meets it: no answer at all (0), throttling (429), or a server failure. */
export type OutageStatus = 0 | 429 | 500 | 502 | 503 | 504;

/** A state the double serves a view for. */
export type ViewState =
  | { kind: 'unlocked'; at: Location }
  /** A pre-lock whose convergence wait is over: nothing restricted yet, the target named. */
  | { kind: 'preLock'; from: Location; to: Location }
  /** The hard-delete lock: deletes at `from` are tombstoned. */
  | { kind: 'hardDelete'; from: Location; to: Location }
  /** The write lock, ending `forSeconds` after each request: writes and deletes at `from` refused. */
  | { kind: 'writeLock'; from: Location; to: Location; forSeconds: number }
  /** A pre-lock just taken (its convergence wait running): `to` is a pending target, sent to `from`. */
  | { kind: 'pendingTarget'; from: Location; to: Location }
  /** Just after the swap: the data lives at `to`, `from` is the retired source. */
  | { kind: 'retiredSource'; from: Location; to: Location };

export type RouteState =
  | ViewState
  /** No route: routelock answers 404 `NotFound`. An id never set is in this state. */
  | { kind: 'notFound' }
  /**
   * routelock cannot be reached. `lastSeen`: the view the client held before the outage (its freshness
   * over), which `whenUnreachable: 'serveStaleReads'` serves reads from.
   */
  | { kind: 'unreachable'; status: OutageStatus; retryAfterSeconds?: number; lastSeen?: ViewState };

type Where = string | Location;
/** A location as a service names it: a string is a region with no account (as `decide` reads it). */
const at = (where: Where): Location =>
  normalizeLocation(typeof where === 'string' ? { region: where } : where);

/** The states, as `double.set(id, states.writeLock({ from, to }))` takes them. */
export const states = {
  unlocked: ({ at: here }: { at: Where }): RouteState => ({ kind: 'unlocked', at: at(here) }),
  preLock: ({ from, to }: { from: Where; to: Where }): RouteState => ({
    kind: 'preLock',
    from: at(from),
    to: at(to),
  }),
  hardDelete: ({ from, to }: { from: Where; to: Where }): RouteState => ({
    kind: 'hardDelete',
    from: at(from),
    to: at(to),
  }),
  /** `forSeconds` (default 30): how long the write lock has left; Retry-After is capped by the server's. */
  writeLock: ({
    from,
    to,
    forSeconds = 30,
  }: {
    from: Where;
    to: Where;
    forSeconds?: number;
  }): RouteState => ({
    kind: 'writeLock',
    from: at(from),
    to: at(to),
    forSeconds,
  }),
  pendingTarget: ({ from, to }: { from: Where; to: Where }): RouteState => ({
    kind: 'pendingTarget',
    from: at(from),
    to: at(to),
  }),
  retiredSource: ({ from, to }: { from: Where; to: Where }): RouteState => ({
    kind: 'retiredSource',
    from: at(from),
    to: at(to),
  }),
  notFound: (): RouteState => ({ kind: 'notFound' }),
  unreachable: (
    options: { status?: OutageStatus; retryAfterSeconds?: number; lastSeen?: RouteState } = {},
  ): RouteState => {
    const { lastSeen, status = 0, retryAfterSeconds } = options;
    if (lastSeen !== undefined && (lastSeen.kind === 'notFound' || lastSeen.kind === 'unreachable'))
      throw new TestRoutingClientError(
        `unreachable: lastSeen must be a state with a view, not ${lastSeen.kind}`,
      );
    return {
      kind: 'unreachable',
      status,
      ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
      ...(lastSeen === undefined ? {} : { lastSeen }),
    };
  },
} as const;

/** A state the double cannot build (a `lastSeen` with no view). A RangeError, as a bad argument is. */
export class TestRoutingClientError extends RangeError {
  override readonly name = 'TestRoutingClientError';
  readonly code = 'InvalidRouteState' as const;
}

/**
 * The client's own options (its timing and outage policy, to test the service as configured), and the
 * server's timing the views are built with: `retryAfterMaxSeconds` (ROUTELOCK_RETRY_AFTER_MAX_SECONDS)
 * and `cacheTtlSeconds` (the `local` tier of ROUTELOCK_CACHE_TIERS); the production profile's by default.
 */
export type TestRoutingClientOptions = Omit<
  RoutingClientOptions,
  'baseUrl' | 'fetch' | 'functionKey' | 'accessToken' | 'timeoutMs'
> & { retryAfterMaxSeconds?: number; cacheTtlSeconds?: number };

const BASE_URL = 'http://routelock.test/api';
const SECOND = 1000;
/** How far from the request's instant the documents' times sit: far beyond any skew margin. */
const AGO = 60 * SECOND;
const LEASE = 3600 * SECOND;

const productionLocalTtl = Number(/(?:^|,)local=(\d+)/.exec(profiles.production.ROUTELOCK_CACHE_TIERS)?.[1]);

export class TestRoutingClient implements RouteResolver {
  private readonly client: RoutingClient;
  private readonly timing: ViewTiming;
  private readonly clock: () => number;
  private readonly routes = new Map<string, { state: RouteState; version: number }>();
  /** Ids whose `lastSeen` view is being loaded into the client before their outage. */
  private readonly priming = new Set<string>();
  private readonly primes = new Map<string, Promise<void>>();
  private versions = 0;

  constructor(options: TestRoutingClientOptions = {}) {
    const { retryAfterMaxSeconds, cacheTtlSeconds, ...client } = options;
    this.clock = options.clock ?? Date.now;
    this.client = new RoutingClient({
      // A test puts states one after another: a breaker left open by an `unreachable` state would refuse
      // the next state's calls. And the cache honours the double's own TTL, which a test may raise.
      breakerFailures: 0,
      maxCacheSeconds: cacheTtlSeconds ?? productionLocalTtl,
      ...client,
      baseUrl: BASE_URL,
      fetch: (url, init) => this.answer(url, init),
    });
    this.timing = {
      clockSkewSeconds: options.clockSkewSeconds ?? DEFAULT_CLOCK_SKEW_SECONDS,
      retryAfterMaxSeconds:
        retryAfterMaxSeconds ?? Number(profiles.production.ROUTELOCK_RETRY_AFTER_MAX_SECONDS),
      localCacheTtlSeconds: cacheTtlSeconds ?? productionLocalTtl,
    };
  }

  /** Put `id` into `state`, seen by the next call at once (the client's cached view is forgotten). */
  set(id: string, state: RouteState): this {
    this.versions += 1;
    this.routes.set(id, { state, version: this.versions });
    this.primes.delete(id);
    this.client.forget(id);
    if (state.kind === 'unreachable' && state.lastSeen !== undefined) this.primes.set(id, this.prime(id));
    return this;
  }

  /** The state `id` is in (`notFound` if never set). */
  stateOf(id: string): RouteState {
    return this.routes.get(id)?.state ?? states.notFound();
  }

  get inFlightGraceSeconds(): number {
    return this.client.inFlightGraceSeconds;
  }

  ready(): Promise<ServerInfo> {
    return this.client.ready();
  }

  async resolve(id: string, options: CallOptions = {}): Promise<ResolvedView> {
    await this.primes.get(id);
    return this.client.resolve(id, options);
  }

  async resolveForWrite(id: string, options: CallOptions = {}): Promise<ResolvedRoute> {
    await this.primes.get(id);
    return this.client.resolveForWrite(id, options);
  }

  async decideFor(
    id: string,
    operation: Operation,
    serving: string | Location,
    options: CallOptions = {},
  ): Promise<DecidedRoute> {
    await this.primes.get(id);
    return this.client.decideFor(id, operation, serving, options);
  }

  forget(id: string): void {
    this.client.forget(id);
  }

  /** Counts into the hooks given (`metrics`, `meter`), as the client does. */
  recordDecision(decision: Decision, context: DecisionContext): void {
    this.client.recordDecision(decision, context);
  }

  /** Creates the route as routelock would: the id is then `unlocked` at `location`. */
  putRoute(id: string, location: Location): Promise<RouteView> {
    return this.client.putRoute(id, location);
  }

  /**
   * The location document `state` stands for at `now`, as the lock rules leave it: what the view is
   * built from. Protected so that a test can alter one state and see the faithfulness table catch it.
   */
  protected documentFor(id: string, state: ViewState, now: number): LocationDocument {
    return stateDocument(id, state, now, this.timing);
  }

  /** Loads the outage's `lastSeen` view into the client, its freshness over, as the outage began. */
  private async prime(id: string): Promise<void> {
    this.priming.add(id);
    try {
      await this.client.resolve(id);
    } catch {
      // nothing held: the outage is then met with no view, as a client that never saw one meets it
    } finally {
      this.priming.delete(id);
    }
  }

  /** The in-process routelock: what the API would answer for the states set. */
  private async answer(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const path = url.pathname.slice(new URL(BASE_URL).pathname.length);
    if (path === '/health')
      return json(200, { status: 'ok', store: 'double' }, { [API_VERSION_HEADER]: String(API_VERSION) });
    const match = /^\/routes\/([^/]+)$/.exec(path);
    if (!match)
      return problem(501, 'NotImplemented', path, 'the test double answers route reads and PUT only');
    const id = decodeURIComponent(match[1] as string);
    const route = this.routes.get(id);
    const state = route?.state ?? states.notFound();
    if (state.kind === 'unreachable' && !this.priming.has(id)) return outage(state);
    if (init?.method === 'PUT') {
      const { location } = JSON.parse(String(init.body)) as { location: Location };
      const created = { kind: 'unlocked', at: at(location) } as const;
      this.set(id, created);
      return this.view(id, created, this.versions, false);
    }
    if (state.kind === 'unreachable') return this.view(id, state.lastSeen as ViewState, route!.version, true);
    if (state.kind === 'notFound') return problem(404, 'NotFound', path, `No route for ${id}`);
    return this.view(id, state, route!.version, false);
  }

  private view(id: string, state: ViewState, version: number, noStore: boolean): Response {
    const now = this.clock();
    const stored: StoredDocument = { doc: this.documentFor(id, state, now), etag: `"${version}"` };
    const headers = { 'cache-control': noStore ? 'no-store' : cacheControl(stored.doc, now, this.timing) };
    return json(200, routeView(stored, now, this.timing), headers);
  }
}

/**
 * A document in `state` at `now`, with the fields the lock rules write in that phase (PrelockLock,
 * HardDeleteLock, WriteLock): its times sit a minute or an hour from `now`, so every lease still runs
 * and every start is past (or, for a pending target, ahead) beyond any skew margin.
 */
export function stateDocument(
  id: string,
  state: ViewState,
  now: number,
  timing: ViewTiming,
): LocationDocument {
  const iso = (ms: number) => new Date(ms).toISOString();
  const doc: LocationDocument = {
    id,
    schemaVersion: SCHEMA_VERSION,
    location: state.kind === 'unlocked' ? state.at : state.from,
    lock: null,
    secondary: null,
    lastMigration: null,
  };
  if (state.kind === 'unlocked') return doc;
  if (state.kind === 'retiredSource')
    return {
      ...doc,
      location: state.to,
      secondary: { location: state.from, role: 'retiredSource', writesBlockedUntil: iso(now + AGO) },
    };
  const skew = timing.clockSkewSeconds * SECOND;
  const startsAt = state.kind === 'pendingTarget' ? now + skew + AGO : now - skew - AGO;
  const base = {
    tokenHash: 'test-double',
    migrationId: `test-double-${id}`,
    owner: 'test-double',
    target: state.to,
    acquiredAt: iso(startsAt - AGO),
    startsAt: iso(startsAt),
    expiresAt: iso(now + LEASE),
    maxExpiresAt: iso(now + 2 * LEASE),
    convergenceDelaySeconds: AGO / SECOND,
  };
  const secondary = {
    location: state.to,
    role: 'pendingTarget' as const,
    writesBlockedUntil: base.maxExpiresAt,
  };
  const hardDelete = { hardDeleteAt: iso(now - skew - 2 * SECOND), hardDeleteExpiresAt: iso(now + LEASE) };
  if (state.kind === 'preLock' || state.kind === 'pendingTarget')
    return { ...doc, secondary, lock: { ...base, phase: 'prelock' } };
  if (state.kind === 'hardDelete')
    return { ...doc, secondary, lock: { ...base, phase: 'hardDelete', ...hardDelete } };
  const writeExpiresAt = now + state.forSeconds * SECOND;
  return {
    ...doc,
    secondary,
    lock: {
      ...base,
      phase: 'write',
      ...hardDelete,
      hardDeleteExpiresAt: iso(Math.max(now + LEASE, writeExpiresAt)),
      writeAt: iso(now - skew - SECOND),
      writeExpiresAt: iso(writeExpiresAt),
    },
  };
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

function problem(status: number, code: string, instance: string, detail: string): Response {
  const body = { type: 'about:blank', status, code, detail, instance: `/api${instance}` };
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/problem+json' },
  });
}

/** An outage as the client meets it: a refused connection, or the status a failing server sends. */
function outage(state: Extract<RouteState, { kind: 'unreachable' }>): Promise<Response> {
  if (state.status === 0)
    return Promise.reject(new TypeError('fetch failed: connect ECONNREFUSED (test double)'));
  const headers: Record<string, string> = {};
  if (state.retryAfterSeconds !== undefined) headers['retry-after'] = String(state.retryAfterSeconds);
  const code = state.status === 429 ? 'Throttled' : 'StoreUnavailable';
  const body = {
    type: 'about:blank',
    status: state.status,
    code,
    detail: `HTTP ${state.status} (test double)`,
  };
  return Promise.resolve(
    new Response(JSON.stringify(body), {
      status: state.status,
      headers: { 'content-type': 'application/problem+json', ...headers },
    }),
  );
}
