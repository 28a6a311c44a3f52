import { RouteLockError } from '../errors';

/**
 * Continuation tokens, for both adapters: the adapter's own position (an id, the SDK's token) as
 * base64url, so it survives a query string. A token that does not decode and re-encode to itself is not
 * one a store handed out: the caller's 400.
 */
export function encodeContinuation(position: string): string {
  return Buffer.from(position, 'utf8').toString('base64url');
}

export function decodeContinuation(continuation: string): string {
  const position = Buffer.from(continuation, 'base64url').toString('utf8');
  if (position === '' || encodeContinuation(position) !== continuation) throw badContinuation();
  return position;
}

export function badContinuation(cause?: unknown): RouteLockError {
  return new RouteLockError(
    'BadRequest',
    'The continuation token is not valid: pass back the continuation of the previous page unchanged.',
    cause === undefined ? {} : { cause },
  );
}
