/**
 * Typed errors with a stable `code`, and the one table of what each code means: its HTTP status and
 * title, whether it is retriable, and whether its answer says when to come back. The library throws (or
 * returns) these; the HTTP layer maps them through this table; callers branch on `code`, never on
 * `message`.
 */

export interface ErrorKind {
  /**
   * Who raises it: the library (a RouteLockError, sent by the API as it is), the HTTP layer alone, or
   * RoutingClient in the calling service's process, or a participant built on `@routelock/participant`
   * (neither is ever sent by the API).
   */
  raisedBy: 'library' | 'http' | 'client' | 'participant';
  /** The status of its problem response (for a client-side code: what a service answering with it should use). */
  status: number;
  /** The problem's `title`. */
  title: string;
  /**
   * A transient fault: the same call, made again as it is, may succeed. Retry policies retry these and
   * only these; the migration's activities throw them to theirs, and answer every other code as a value.
   */
  retriable: boolean;
  /**
   * The answer carries `Retry-After` when the error knows when to come back: the same request may succeed
   * after that wait. A number: the seconds sent when a library error does not say.
   */
  retryAfter?: 'whenKnown' | number;
}

const errorKinds = {
  BadRequest: { raisedBy: 'library', status: 400, retriable: false, title: 'The request is not valid' },
  /** A target region outside ROUTELOCK_REGIONS. */
  RegionNotAllowed: {
    raisedBy: 'library',
    status: 400,
    retriable: false,
    title: 'The region is not one of the declared regions',
  },
  /** No identity on a request that needs one. */
  Unauthenticated: {
    raisedBy: 'library',
    status: 401,
    retriable: false,
    title: 'An authenticated identity is required',
  },
  Forbidden: { raisedBy: 'library', status: 403, retriable: false, title: 'Not allowed for this identity' },
  NotFound: { raisedBy: 'library', status: 404, retriable: false, title: 'Not found' },
  AlreadyExists: { raisedBy: 'library', status: 409, retriable: false, title: 'The route already exists' },
  AlreadyAtTarget: {
    raisedBy: 'library',
    status: 409,
    retriable: false,
    title: 'The resource already lives at the target',
  },
  ConvergencePending: {
    raisedBy: 'library',
    status: 409,
    retriable: false,
    retryAfter: 'whenKnown',
    title: 'Caches have not converged yet',
  },
  InvalidTransition: { raisedBy: 'library', status: 409, retriable: false, title: 'Invalid lock transition' },
  MaxLeaseReached: {
    raisedBy: 'library',
    status: 409,
    retriable: false,
    title: 'The lock cannot be extended further',
  },
  FreezeBudgetExceeded: {
    raisedBy: 'library',
    status: 409,
    retriable: false,
    title: 'The write lock has used its budget',
  },
  MigrationInProgress: {
    raisedBy: 'library',
    status: 409,
    retriable: false,
    title: 'Another migration is in progress',
  },
  /** A cancel after the swap: the resource already lives at the target; too late to stop. */
  AlreadySwapped: {
    raisedBy: 'library',
    status: 409,
    retriable: false,
    title: 'The migration has already swapped',
  },
  /** A retry of a migration that is not an ended, failed one (running, Completed, NoOp, Conflict, Cancelled). */
  MigrationNotRetriable: {
    raisedBy: 'library',
    status: 409,
    retriable: false,
    title: 'Only an ended, failed migration can be retried',
  },
  /** POST /campaigns with a campaignId that exists for another target. */
  CampaignExists: {
    raisedBy: 'library',
    status: 409,
    retriable: false,
    title: 'A campaign with this id exists',
  },
  /** A command a campaign's state refuses: resources added to, or a pause or resume of, an ended campaign. */
  CampaignEnded: {
    raisedBy: 'library',
    status: 409,
    retriable: false,
    title: 'The campaign has ended',
  },
  /** Resources beyond a campaign's 100,000. */
  CampaignFull: {
    raisedBy: 'library',
    status: 409,
    retriable: false,
    title: 'The campaign holds as many resources as it can',
  },
  NotLocked: { raisedBy: 'library', status: 409, retriable: false, title: 'The resource holds no live lock' },
  /**
   * A mutation of a document whose `schemaVersion` is newer than this library knows: writing it would
   * drop fields it does not understand. Reads of it still route and enforce (design §2.8).
   */
  UnsupportedSchemaVersion: {
    raisedBy: 'library',
    status: 409,
    retriable: false,
    title: 'The document has a newer schema version than this library writes',
  },
  /**
   * A mutation through a router made read-only (the library's default: a service linking the library
   * resolves and enforces; only routelock itself, or a caller that opts in, writes).
   */
  ReadOnlyRouter: {
    raisedBy: 'library',
    status: 403,
    retriable: false,
    title: 'This router is read-only',
  },
  /** A cancel of a migration started before workflow version 3, which never listens for one. */
  MigrationNotCancellable: {
    raisedBy: 'library',
    status: 409,
    retriable: false,
    title: 'This migration cannot be cancelled',
  },
  DuplicateApproval: {
    raisedBy: 'library',
    status: 409,
    retriable: false,
    title: 'This approver has already approved',
  },
  LockExpired: { raisedBy: 'library', status: 410, retriable: false, title: 'The lock has expired' },
  RequestExpired: { raisedBy: 'library', status: 410, retriable: false, title: 'The request has expired' },
  /**
   * Retriable as contention: the router's own re-decide lost again ("retry it"). A 412 on the caller's own
   * If-Match is the caller's answer; the activities drop their If-Match and decide again before it could
   * reach a retry.
   */
  PreconditionFailed: {
    raisedBy: 'library',
    status: 412,
    retriable: true,
    title: 'The route changed (ETag mismatch)',
  },
  Locked: {
    raisedBy: 'library',
    status: 423,
    retriable: false,
    retryAfter: 1,
    title: 'The resource is locked',
  },
  /** The store refused the request (401/403, another 4xx): not transient, never retried. */
  StoreRejected: {
    raisedBy: 'library',
    status: 500,
    retriable: false,
    title: 'The routing store refused the request',
  },
  /** The routing store is throttling, timing out or down. */
  StoreUnavailable: {
    raisedBy: 'library',
    status: 503,
    retriable: true,
    retryAfter: 1,
    title: 'The routing store is unavailable',
  },
  /** The Durable Functions task hub did not answer a migration's status (or start) query. */
  OrchestrationStatusUnavailable: {
    raisedBy: 'library',
    status: 503,
    retriable: true,
    retryAfter: 1,
    title: 'The migration orchestration status is unavailable',
  },
  UnsafeConfiguration: {
    raisedBy: 'library',
    status: 503,
    retriable: false,
    title: 'The store is configured unsafely for locks',
  },

  PayloadTooLarge: {
    raisedBy: 'http',
    status: 413,
    retriable: false,
    title: 'The request body is too large',
  },
  UnsupportedMediaType: {
    raisedBy: 'http',
    status: 415,
    retriable: false,
    title: 'The request body must be JSON',
  },
  /**
   * The embedded host: a browser sent the request from another site (Sec-Fetch-Site or Origin), a
   * request no page may make of a host that checks no keys (design §9.6).
   */
  CrossSiteRequest: {
    raisedBy: 'http',
    status: 403,
    retriable: false,
    title: 'Cross-site requests are refused',
  },
  MethodNotAllowed: { raisedBy: 'http', status: 405, retriable: false, title: 'Method not allowed' },
  MisdirectedRequest: {
    raisedBy: 'http',
    status: 421,
    retriable: false,
    title: 'This server does not answer for the requested host',
  },
  InternalError: { raisedBy: 'http', status: 500, retriable: false, title: 'Internal error' },
  /** Under ROUTELOCK_AUTH=entra: the tenant's signing keys could not be fetched. */
  AuthUnavailable: {
    raisedBy: 'http',
    status: 503,
    retriable: true,
    retryAfter: 'whenKnown',
    title: "The identity provider's signing keys are unavailable",
  },

  /**
   * RoutingClient got no HTTP answer at all (connection refused, DNS, reset, its request timeout): its
   * RoutingServiceError has status 0. A service that passes it on answers 503: its own dependency is down, not a bad gateway reply.
   */
  Unreachable: {
    raisedBy: 'client',
    status: 503,
    retriable: true,
    retryAfter: 1,
    title: 'The routing service is unreachable',
  },
  /**
   * RoutingClient: the routing service answered 429. Retriable after the `Retry-After` it sent; a service
   * that passes it on answers 503 with that wait, since its own dependency is what is busy.
   */
  Throttled: {
    raisedBy: 'client',
    status: 503,
    retriable: true,
    retryAfter: 'whenKnown',
    title: 'The routing service is throttling',
  },
  /**
   * RoutingClient: what answered is not routelock's API: a 404 that is no route's problem (an HTML page,
   * a 404 with no problem body, the host's "no endpoint"), or a health check that is not routelock's. The
   * base URL is wrong (it ends in `/api` on routelock's hosts): a configuration error, never a missing route.
   */
  NotRoutelock: {
    raisedBy: 'client',
    status: 500,
    retriable: false,
    title: 'The base URL does not reach a routelock API',
  },
  /**
   * RoutingClient: its circuit breaker is open after consecutive timeouts or connection failures, so the
   * request was refused without being sent (status 0, an outage like `Unreachable`); `Retry-After` is the
   * time left of the backoff. A service that passes it on answers 503.
   */
  BreakerOpen: {
    raisedBy: 'client',
    status: 503,
    retriable: true,
    retryAfter: 'whenKnown',
    title: 'The routing service is unreachable: the client stopped calling it for a while',
  },
  /**
   * RoutingClient: the caller's `signal` aborted the call (its own deadline, or its own caller gone). Not
   * an outage: no outage policy applies, and `decideFor` throws it.
   */
  Aborted: {
    raisedBy: 'client',
    status: 503,
    retriable: true,
    title: 'The call to the routing service was aborted by its caller',
  },
  /** RoutingClient `ready()`: the server reports an API version this client does not support, or none. */
  IncompatibleServer: {
    raisedBy: 'client',
    status: 500,
    retriable: false,
    title: 'The routing service speaks an API version this client does not support',
  },
  /** RoutingClient: a success answer whose body is not the JSON shape the call returns. */
  InvalidResponse: {
    raisedBy: 'client',
    status: 502,
    retriable: false,
    title: 'The routing service answered with a body of the wrong shape',
  },
  /** RoutingClient's constructor: an option that is unknown, of the wrong type, or out of range. */
  InvalidClientOption: {
    raisedBy: 'client',
    status: 500,
    retriable: false,
    title: 'A RoutingClient option is not valid',
  },
  /**
   * `@routelock/client/middleware`: the service's mapping named no resource or operation the guard can
   * route (it threw, or gave an id routelock refuses, or no operation): the request is the caller's to fix.
   */
  UnroutableRequest: {
    raisedBy: 'client',
    status: 400,
    retriable: false,
    title: 'The request names no resource the service can route',
  },
  /**
   * `@routelock/client/middleware`: a write's route was resolved longer ago than the in-flight grace when
   * it was about to commit (design §5.6), so it was not committed: the same request, made again,
   * is decided afresh.
   */
  GraceExpired: {
    raisedBy: 'client',
    status: 503,
    retriable: true,
    retryAfter: 1,
    title: 'The route was resolved too long ago for the write to commit; nothing was written',
  },
  /** `@routelock/client/testing`: a route state the test double cannot build. */
  InvalidRouteState: {
    raisedBy: 'client',
    status: 500,
    retriable: false,
    title: 'The test double was given a route state it cannot serve',
  },
  /** `createParticipantHandler`: an option that is missing, unknown, of the wrong type or out of range. */
  InvalidParticipantOption: {
    raisedBy: 'participant',
    status: 500,
    retriable: false,
    title: 'A participant handler option is not valid',
  },
  /** A participant's caller sent no bearer token, or one that does not validate (the participant answers 401). */
  CallerUnauthenticated: {
    raisedBy: 'participant',
    status: 401,
    retriable: false,
    title: "The caller's bearer token is missing or not valid",
  },
  /** A valid token of a caller the participant does not accept (403). */
  CallerForbidden: {
    raisedBy: 'participant',
    status: 403,
    retriable: false,
    title: 'The caller is not allowed to drive this participant',
  },
  /** The keys to validate a token with cannot be had right now (503: routelock retries). */
  CallerCheckUnavailable: {
    raisedBy: 'participant',
    status: 503,
    retriable: true,
    retryAfter: 5,
    title: "The caller's token cannot be checked right now",
  },
  /** A team's function refuses a job's request as malformed for it (a region it does not hold): 400. */
  JobRefused: {
    raisedBy: 'participant',
    status: 400,
    retriable: false,
    title: 'The participant refuses the request',
  },
} as const satisfies Record<string, ErrorKind>;

type Kinds = typeof errorKinds;
type CodesRaisedBy<R extends ErrorKind['raisedBy']> = {
  [K in keyof Kinds]: Kinds[K]['raisedBy'] extends R ? K : never;
}[keyof Kinds];

/** The codes a RouteLockError carries. */
export type ErrorCode = CodesRaisedBy<'library'>;
/** Codes only the HTTP layer raises (conditions the library never sees). */
export type HttpOnlyCode = CodesRaisedBy<'http'>;
/** The codes a problem response from the API can carry. */
export type ProblemCode = ErrorCode | HttpOnlyCode;
/** Codes only RoutingClient raises, in the calling service. */
export type ClientErrorCode = CodesRaisedBy<'client'>;
/** Codes only a participant built on `@routelock/participant` raises, in the participant's process. */
export type ParticipantErrorCode = CodesRaisedBy<'participant'>;
export type AnyErrorCode = keyof Kinds;

const allCodes = Object.keys(errorKinds) as AnyErrorCode[];
export const errorCodes = allCodes.filter(
  (c) => errorKinds[c].raisedBy === 'library',
) as readonly ErrorCode[];
export const problemCodes = allCodes.filter(
  (c) => errorKinds[c].raisedBy === 'library' || errorKinds[c].raisedBy === 'http',
) as readonly ProblemCode[];

export function errorKind(code: AnyErrorCode): ErrorKind {
  return errorKinds[code];
}

export interface RouteLockErrorOptions {
  /** Seconds after which the same request may succeed (423, 409 ConvergencePending, 503). */
  retryAfterSeconds?: number;
  /** The resource the error is about, when there is one. */
  resourceId?: string;
  cause?: unknown;
}

export class RouteLockError extends Error {
  override readonly name = 'RouteLockError';
  readonly code: ErrorCode;
  readonly retryAfterSeconds: number | undefined;
  readonly resourceId: string | undefined;

  constructor(code: ErrorCode, message: string, options: RouteLockErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.resourceId = options.resourceId;
  }

  /**
   * The HTTP status of its problem answer, from the error table (`ReadOnlyRouter` 403, `NotFound` 404): what
   * routelock's API answers with it, and what a service linking the library answers its own caller.
   */
  get status(): number {
    return errorKinds[this.code].status;
  }

  /** Whether a retry policy may retry it (see ErrorKind.retriable). */
  get retriable(): boolean {
    return errorKinds[this.code].retriable;
  }
}

export function isRouteLockError(value: unknown, code?: ErrorCode): value is RouteLockError {
  return value instanceof RouteLockError && (code === undefined || value.code === code);
}

/** Whole seconds, at least 1: a Retry-After of 0 invites a hot loop. */
export function retryAfterFromMs(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
