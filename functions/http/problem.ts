import type { HttpResponseInit } from '@azure/functions';
import { type ProblemCode, RouteLockError, errorKind, problemCodes } from '../../shared/core/errors';

/**
 * RFC 9457 problem details. An error `code` becomes an HTTP status, a title and a Retry-After through
 * the one table of codes (shared/core/errors.ts); the codes only this layer raises are in it too.
 */
export type { HttpOnlyCode, ProblemCode } from '../../shared/core/errors';

/** Every code the API can send, with its status. */
export const statusByCode = Object.fromEntries(
  problemCodes.map((code) => [code, errorKind(code).status]),
) as Record<ProblemCode, number>;

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
  const kind = errorKind(code);
  const status = kind.status;
  const problem: Problem = {
    type: `urn:routelock:problem:${code}`,
    title: kind.title,
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
  if (options.retryAfterSeconds !== undefined && kind.retryAfter !== undefined) {
    headers['Retry-After'] = String(options.retryAfterSeconds);
  }
  return { status, headers, body: JSON.stringify(problem) };
}

/** Map anything thrown by a handler to a problem. Unknown errors are 500 and say nothing inside. */
export function problemFromError(error: unknown, instance?: string): HttpResponseInit {
  if (error instanceof RouteLockError) {
    const fallback = errorKind(error.code).retryAfter;
    const retryAfterSeconds =
      error.retryAfterSeconds ?? (typeof fallback === 'number' ? fallback : undefined);
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
