/**
 * Typed errors with a stable `code`. The library throws (or returns) these; the HTTP layer maps
 * `code` to a status in exactly one place. Callers branch on `code`, never on `message`.
 */
export const errorCodes = [
  'NotFound',
  'AlreadyExists',
  'AlreadyAtTarget',
  'Locked',
  'LockExpired',
  'ConvergencePending',
  'InvalidTransition',
  'MaxLeaseReached',
  'FreezeBudgetExceeded',
  'PreconditionFailed',
  'StoreUnavailable',
  /** The store refused the request (401/403, another 4xx): not transient, never retried. */
  'StoreRejected',
  'BadRequest',
  'MigrationInProgress',
  'NotLocked',
  'UnsafeConfiguration',
  'Forbidden',
  'DuplicateApproval',
  'RequestExpired',
  /** No identity on a request that needs one (HTTP 401). */
  'Unauthenticated',
  /** A target region outside ROUTELOCK_REGIONS (HTTP 400). */
  'RegionNotAllowed',
] as const;

export type ErrorCode = (typeof errorCodes)[number];

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
}

export function isRouteLockError(value: unknown, code?: ErrorCode): value is RouteLockError {
  return value instanceof RouteLockError && (code === undefined || value.code === code);
}

/** Whole seconds, at least 1: a Retry-After of 0 invites a hot loop. */
export function retryAfterFromMs(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
