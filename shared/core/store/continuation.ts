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

/** Where a newest-first page ends: its last item's creation instant, then its id (the tie-break). */
export interface NewestFirstCursor {
  createdAt: string;
  id: string;
}

const isoInstant = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;

/**
 * The keyset continuation of a list sorted by (createdAt, id) descending (migrations, campaigns): the
 * last item's sort key, base64url-wrapped. It reveals nothing the page did not show; a crafted but
 * well-formed one is only another starting point in the same list, so the check is of its shape.
 */
export function encodeNewestFirstCursor(createdAt: string, id: string): string {
  return encodeContinuation(JSON.stringify([createdAt, id]));
}

export function decodeNewestFirstCursor(continuation: string): NewestFirstCursor {
  const position = decodeContinuation(continuation);
  let parsed: unknown;
  try {
    parsed = JSON.parse(position);
  } catch (error) {
    throw badContinuation(error);
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 2 ||
    typeof parsed[0] !== 'string' ||
    typeof parsed[1] !== 'string' ||
    !isoInstant.test(parsed[0]) ||
    parsed[1] === '' ||
    parsed[1].length > 255
  ) {
    throw badContinuation();
  }
  return { createdAt: parsed[0], id: parsed[1] };
}
