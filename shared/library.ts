import { type Config, parseConfig } from './config';
import { Router, type RouterOptions } from './core/router';
import { openStore } from './stores';

/**
 * The routing library's entry point (`@routelock/library`): what a service links to resolve and enforce
 * routes by reading the routing store itself, as the paper's services do (design §5), instead
 * of over HTTP (`@routelock/client`). No Azure Functions API, no Durable Functions, no telemetry SDK.
 *
 * Read-only by default: `createRouter` refuses every mutation with `ReadOnlyRouter` unless the caller
 * passes `allowMutations: true`, so linking the library cannot bypass the API's roles (in Azure, give
 * such a service only the Cosmos DB Built-in Data Reader role: infra's `routeReaderPrincipalIds`).
 *
 * The SQLite store is not imported here (better-sqlite3 is a native, optional peer): a Cosmos-only
 * service never loads it. `openRouter` imports it only for a sqlite configuration; the class itself is
 * `@routelock/library/sqlite` (librarySqlite).
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
export { operationPriority } from './core/router';
export type { Router, RouterOptions, RoutedView, MutationOptions, SwapOutcome } from './core/router';
export { decide, decisionStatus, withinGrace, freshnessSeconds, cacheLifetimeSeconds } from './core/client';
export type { Decision, DecisionStatus } from './core/client';
// A service's request-path counters (the workbook's refusals panel): count each decision it acts on.
export { recordDecision, decisionMetric } from './migration/telemetry/decisions';
export type { DecisionContext } from './migration/telemetry/decisions';
export { RouteLockError, isRouteLockError, errorKind, errorCodes, problemCodes } from './core/errors';
// What `@routelock/library/sqlite` throws when better-sqlite3 is not installed.
export { MissingDependencyError } from './core/optionalDependency';
export type { ErrorCode, ErrorKind, AnyErrorCode, ProblemCode } from './core/errors';
export { ConfigError, parseConfig } from './config';
export type { Config, StoreConfig, TimingConfig, CacheTier, RegionsConfig } from './config';
export { profiles } from './core/profiles';
export type { ServingProfile } from './core/profiles';
export { systemClock } from './core/clock';
export type { Clock } from './core/clock';
export {
  sameLocation,
  sameEtag,
  describeLocation,
  normalizeLocation,
  entityTag,
  bareEtag,
} from './core/lock/document';
export type {
  Location,
  LocationDocument,
  StoredDocument,
  Lock,
  Phase,
  Secondary,
  SecondaryRole,
  LastMigration,
} from './core/lock/document';
export { enforcement, lockView, routeView, cacheControl, cacheHeaders } from './core/lock/view';
export type { Operation, Enforcement, LockView, RouteView, LockGrant, CacheHeaders } from './core/lock/view';
export {
  DEFAULT_CLOCK_SKEW_SECONDS,
  hasStarted,
  isLive,
  liveLock,
  writeLockInForce,
  hardDeleteInForce,
  secondaryInForce,
} from './core/lock/state';
export type { AllowedRegions } from './core/regions';
export { openStore } from './stores';
export { CosmosStore } from './core/store/cosmos/locations';
export type { CosmosStoreOptions, CosmosAccountInfo } from './core/store/cosmos/locations';
export type {
  LocationStore,
  ReadFrom,
  ReadOptions,
  ListOptions,
  ListPage,
  RequestPriority,
  StoreCounters,
} from './core/store/ports/locations';
