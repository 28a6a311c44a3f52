import { type Config, parseConfig } from './config';
import { Router, type RouterOptions } from './router';
import { openStore } from './store/open';

/**
 * The routing library's entry point (`@routelock/library`): what a service links to resolve and enforce
 * routes by reading the routing store itself, as the paper's services do (docs/design.md §5), instead
 * of over HTTP (`@routelock/client`). No Azure Functions API, no Durable Functions, no telemetry SDK.
 *
 * Read-only by default: `createRouter` refuses every mutation with `ReadOnlyRouter` unless the caller
 * passes `allowMutations: true`, so linking the library cannot bypass the API's roles (in Azure, give
 * such a service only the Cosmos DB Built-in Data Reader role: infra's `routeReaderPrincipalIds`).
 *
 * The SQLite store is not imported here (better-sqlite3 is a native, optional peer): a Cosmos-only
 * service never loads it. `openRouter` imports it only for a sqlite configuration; the class itself is
 * `@routelock/library/sqlite` (shared/librarySqlite.ts).
 */

/** RouterOptions without the second router's `onWrite`, and with `allowMutations` for `readOnly`. */
export interface LibraryRouterOptions extends Omit<RouterOptions, 'readOnly' | 'onWrite'> {
  /**
   * Let this router write (create and delete routes, every lock mutation, reclaim, force-release).
   * Default false: each of them throws RouteLockError `ReadOnlyRouter` (403) before any store call.
   */
  allowMutations?: boolean;
}

/** A Router over `options.store`, read-only unless `allowMutations: true`. */
export function createRouter(options: LibraryRouterOptions): Router {
  const { allowMutations, ...routerOptions } = options;
  return new Router({ ...routerOptions, readOnly: allowMutations !== true });
}

export interface OpenRouterOptions extends Omit<LibraryRouterOptions, 'store' | 'timing' | 'allowedRegions'> {
  /**
   * The configuration to follow. Default: `parseConfig(env)`. Give the service the same ROUTELOCK_*
   * timing variables as routelock (profile, cache tiers, clock skew): the router's cache TTL is the
   * local tier the migration's convergence delay counts on.
   */
  config?: Pick<Config, 'store' | 'timing' | 'regions'>;
  /** The variables `parseConfig` reads when `config` is absent (default `process.env`). */
  env?: Record<string, string | undefined>;
}

/** Open the configured location store (Cosmos DB or SQLite) and a router over it, read-only by default. */
export async function openRouter(options: OpenRouterOptions = {}): Promise<Router> {
  const { config: given, env, ...rest } = options;
  const config = given ?? parseConfig(env ?? process.env);
  return createRouter({
    ...rest,
    store: await openStore(config.store),
    timing: config.timing,
    allowedRegions: config.regions.allowed,
  });
}

// The class as a type only: a library user gets a router through createRouter/openRouter, read-only unless
// it opts in: an exported constructor would make a writable router by default.
export { operationPriority } from './router';
export type { Router, RouterOptions, RoutedView, MutationOptions, SwapOutcome } from './router';
export { decide, decisionStatus, withinGrace, freshnessSeconds, cacheLifetimeSeconds } from './client';
export type { Decision, DecisionStatus } from './client';
// A service's request-path counters (the workbook's refusals panel): count each decision it acts on.
export { recordDecision, decisionMetric } from './telemetry/decisions';
export type { DecisionContext } from './telemetry/decisions';
export { RouteLockError, isRouteLockError, errorKind, errorCodes, problemCodes } from './errors';
export type { ErrorCode, ErrorKind, AnyErrorCode, ProblemCode } from './errors';
export { ConfigError, parseConfig } from './config';
export type { Config, StoreConfig, TimingConfig, CacheTier, RegionsConfig } from './config';
export { profiles } from './profiles';
export type { ServingProfile } from './profiles';
export { systemClock } from './clock';
export type { Clock } from './clock';
export {
  sameLocation,
  sameEtag,
  describeLocation,
  normalizeLocation,
  entityTag,
  bareEtag,
} from './lock/document';
export type {
  Location,
  LocationDocument,
  StoredDocument,
  Lock,
  Phase,
  Secondary,
  SecondaryRole,
  LastMigration,
} from './lock/document';
export { enforcement, lockView, routeView, cacheControl, cacheHeaders } from './lock/view';
export type { Operation, Enforcement, LockView, RouteView, LockGrant, CacheHeaders } from './lock/view';
export {
  DEFAULT_CLOCK_SKEW_SECONDS,
  hasStarted,
  isLive,
  liveLock,
  writeLockInForce,
  hardDeleteInForce,
  secondaryInForce,
} from './lock/state';
export type { AllowedRegions } from './regions';
export { openStore } from './store/open';
export { CosmosStore } from './store/cosmos/locations';
export type { CosmosStoreOptions, CosmosAccountInfo } from './store/cosmos/locations';
export type {
  LocationStore,
  ReadFrom,
  ReadOptions,
  ListOptions,
  ListPage,
  RequestPriority,
  StoreCounters,
} from './store/ports/locations';
