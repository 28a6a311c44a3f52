import type { HttpResponseInit } from '@azure/functions';
import { type ErrorCode, RouteLockError } from '../../shared/errors';

/**
 * RFC 9457 problem details, and the one place where an error `code` becomes an HTTP status.
 * Codes beyond the library's are HTTP-only conditions the library never sees.
 */
export type HttpOnlyCode =
  | 'PayloadTooLarge'
  | 'UnsupportedMediaType'
  | 'MethodNotAllowed'
  | 'MisdirectedRequest'
  | 'MigrationInProgress'
  | 'InternalError'
  | 'AuthUnavailable';
export type ProblemCode = ErrorCode | HttpOnlyCode;

export const statusByCode: Record<ProblemCode, number> = {
  BadRequest: 400,
  RegionNotAllowed: 400,
  Unauthenticated: 401,
  Forbidden: 403,
  NotFound: 404,
  MethodNotAllowed: 405,
  AlreadyExists: 409,
  AlreadyAtTarget: 409,
  ConvergencePending: 409,
  InvalidTransition: 409,
  MaxLeaseReached: 409,
  FreezeBudgetExceeded: 409,
  MigrationInProgress: 409,
  NotLocked: 409,
  DuplicateApproval: 409,
  LockExpired: 410,
  RequestExpired: 410,
  PreconditionFailed: 412,
  PayloadTooLarge: 413,
  UnsupportedMediaType: 415,
  MisdirectedRequest: 421,
  Locked: 423,
  InternalError: 500,
  StoreRejected: 500,
  StoreUnavailable: 503,
  UnsafeConfiguration: 503,
  AuthUnavailable: 503,
};

const titles: Record<ProblemCode, string> = {
  BadRequest: 'The request is not valid',
  RegionNotAllowed: 'The region is not one of the declared regions',
  Unauthenticated: 'An authenticated identity is required',
  Forbidden: 'Not allowed for this identity',
  NotLocked: 'The resource holds no live lock',
  DuplicateApproval: 'This approver has already approved',
  RequestExpired: 'The request has expired',
  UnsafeConfiguration: 'The store is configured unsafely for locks',
  NotFound: 'Not found',
  MethodNotAllowed: 'Method not allowed',
  AlreadyExists: 'The route already exists',
  AlreadyAtTarget: 'The resource already lives at the target',
  ConvergencePending: 'Caches have not converged yet',
  InvalidTransition: 'Invalid lock transition',
  MaxLeaseReached: 'The lock cannot be extended further',
  FreezeBudgetExceeded: 'The write lock has used its budget',
  MigrationInProgress: 'Another migration is in progress',
  LockExpired: 'The lock has expired',
  PreconditionFailed: 'The route changed (ETag mismatch)',
  PayloadTooLarge: 'The request body is too large',
  UnsupportedMediaType: 'The request body must be JSON',
  Locked: 'The resource is locked',
  InternalError: 'Internal error',
  StoreRejected: 'The routing store refused the request',
  MisdirectedRequest: 'This server does not answer for the requested host',
  StoreUnavailable: 'The routing store is unavailable',
  AuthUnavailable: "The identity provider's signing keys are unavailable",
};

/** Statuses whose response carries Retry-After when the error knows it. */
const retryable = new Set<ProblemCode>([
  'Locked',
  'ConvergencePending',
  'StoreUnavailable',
  'AuthUnavailable',
]);

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ProblemCode;
  instance?: string;
  retryAfterSeconds?: number;
  errors?: string[];
}

export class HttpProblem extends Error {
  constructor(
    readonly code: ProblemCode,
    message: string,
    readonly extra: { errors?: string[]; retryAfterSeconds?: number; headers?: Record<string, string> } = {},
  ) {
    super(message);
  }
}

export function problemResponse(
  code: ProblemCode,
  detail: string,
  options: {
    instance?: string;
    retryAfterSeconds?: number | undefined;
    errors?: string[];
    headers?: Record<string, string>;
  } = {},
): HttpResponseInit {
  const status = statusByCode[code];
  const problem: Problem = {
    type: `urn:routelock:problem:${code}`,
    title: titles[code],
    status,
    detail,
    code,
    ...(options.instance ? { instance: options.instance } : {}),
    ...(options.retryAfterSeconds !== undefined ? { retryAfterSeconds: options.retryAfterSeconds } : {}),
    ...(options.errors ? { errors: options.errors } : {}),
  };
  const headers: Record<string, string> = {
    'Content-Type': 'application/problem+json',
    'Cache-Control': 'no-store',
    ...options.headers,
  };
  if (options.retryAfterSeconds !== undefined && retryable.has(code)) {
    headers['Retry-After'] = String(options.retryAfterSeconds);
  }
  return { status, headers, body: JSON.stringify(problem) };
}

/** Map anything thrown by a handler to a problem. Unknown errors are 500 and say nothing inside. */
export function problemFromError(error: unknown, instance?: string): HttpResponseInit {
  if (error instanceof RouteLockError) {
    const retryAfterSeconds =
      error.retryAfterSeconds ??
      (error.code === 'StoreUnavailable' || error.code === 'Locked' ? 1 : undefined);
    return problemResponse(error.code, error.message, {
      retryAfterSeconds,
      ...(instance ? { instance } : {}),
    });
  }
  if (error instanceof HttpProblem) {
    return problemResponse(error.code, error.message, {
      ...error.extra,
      ...(instance ? { instance } : {}),
    });
  }
  return problemResponse(
    'InternalError',
    'The server failed to handle the request.',
    instance ? { instance } : {},
  );
}
