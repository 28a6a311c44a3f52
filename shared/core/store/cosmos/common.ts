import { type Container, ErrorResponse, type SqlParameter } from '@azure/cosmos';
import { RouteLockError, retryAfterFromMs } from '../../errors';
import { badContinuation } from '../continuation';
import { type StoreSubject, alreadyExists, changedSinceRead, notFound, routeSubject } from '../errors';

/**
 * What every Cosmos DB adapter shares: items without the service's system fields, and SDK failures as
 * the ports' typed errors, worded by what the item is. ETags are opaque: an adapter hands back the
 * value Cosmos DB sent (quoted, on the real service) and passes a caller's value back unchanged; none
 * parses, quotes or unquotes one.
 */

/** Fields Cosmos DB adds to every item (`_lsn` on change-feed items). */
const systemFields = ['_rid', '_self', '_etag', '_attachments', '_ts', '_lsn'] as const;

/** A copy of `item` without Cosmos DB's system fields. */
export function withoutSystemFields<T extends object>(item: T): T {
  const copy = { ...item } as Record<string, unknown>;
  for (const key of systemFields) delete copy[key];
  return copy as T;
}

/**
 * Statuses Cosmos DB answers for a transient condition: throttling (429), request timeout (408), a
 * partition moved (410) and "retry with" (449). Any 5xx is transient too.
 */
const transientStatuses = new Set([408, 410, 429, 449]);

/**
 * Map SDK and transport failures to the port's typed errors. The SDK's own text never reaches a
 * message (messages travel to callers in problem details); it stays on `cause`, for the server log.
 *
 * - 404, 409, 412: the port's NotFound, AlreadyExists, PreconditionFailed, naming the subject (a bare
 *   string is a route's resource id, or an operation in parentheses: "(list)", "(account)").
 * - A 400 on a query given a caller's continuation token (or the SDK failing to parse that token):
 *   BadRequest — the caller's input, not the store's fault.
 * - 429, 408, 410, 449, 5xx and transport failures (no status): StoreUnavailable, with Retry-After: the
 *   service's own `x-ms-retry-after-ms` when it sent one (the SDK's `retryAfterInMs`, else the header),
 *   in whole seconds, at least 1 and at most {@link maxStoreRetryAfterSeconds}; 1 s when it did not.
 * - Any other 4xx (401/403: the identity or key is refused; 400 on our own request; 413): StoreRejected,
 *   not retriable — retrying cannot help, and a 503 would invite every caller to hammer the store.
 */
export function storeError(
  error: unknown,
  about: StoreSubject | string,
  context: { continuation?: string | undefined } = {},
): RouteLockError {
  if (error instanceof RouteLockError) return error;
  const subject = typeof about === 'string' ? operationOrRoute(about) : about;
  const { id, resourceId } = subject;
  const e = (error ?? {}) as { code?: unknown; statusCode?: unknown };
  const status =
    typeof e.statusCode === 'number' ? e.statusCode : typeof e.code === 'number' ? e.code : undefined;
  switch (status) {
    case 404:
      return notFound(subject);
    case 409:
      return alreadyExists(subject);
    case 412:
      return changedSinceRead(subject);
  }
  if (context.continuation !== undefined && (status === 400 || continuationParseFailure(error, status))) {
    return badContinuation(error);
  }
  if (status !== undefined && status >= 400 && status < 500 && !transientStatuses.has(status)) {
    return new RouteLockError('StoreRejected', 'The routing store refused the request.', {
      resourceId,
      cause: error,
    });
  }
  const retryAfterSeconds = Math.min(
    retryAfterFromMs(serviceRetryAfterMs(error) ?? 1000),
    maxStoreRetryAfterSeconds,
  );
  if (status === 429) {
    for (const observe of throttleObservers) {
      try {
        observe({ kind: subject.kind });
      } catch {
        // counting a throttle never changes the error a caller gets
      }
    }
  }
  const reason =
    status ?? (typeof e.code === 'string' && /^[A-Za-z][A-Za-z0-9_]{1,40}$/.test(e.code) ? e.code : 'error');
  const what = subject.kind === 'route' ? id : `${subject.kind} ${id}`;
  return new RouteLockError('StoreUnavailable', `Cosmos DB did not serve ${what} (${reason}).`, {
    resourceId,
    retryAfterSeconds,
    cause: error,
  });
}

/**
 * Who is told of a 429 that reached an adapter (the SDK has retried it already: this is throttling a
 * caller saw as StoreUnavailable). Process-wide, because every adapter maps its errors here; the app
 * registers one observer that counts them (storeThrottled, shared/migration/telemetry/decisions.ts).
 */
const throttleObservers = new Set<(about: { kind: StoreSubject['kind'] }) => void>();

/** Be told of each Cosmos DB 429 an adapter maps; returns the function that stops it. */
export function observeStoreThrottling(
  observer: (about: { kind: StoreSubject['kind'] }) => void,
): () => void {
  throttleObservers.add(observer);
  return () => {
    throttleObservers.delete(observer);
  };
}

/**
 * The longest Retry-After a store error passes on. The router sits on the request path: a caller told to
 * wait minutes would rather fail over, and Cosmos DB's throttling hints are seconds at most.
 */
export const maxStoreRetryAfterSeconds = 30;

/**
 * The wait Cosmos DB asked for, in ms: the SDK copies `x-ms-retry-after-ms` to `retryAfterInMs` on its
 * ErrorResponse (request/RequestHandler.js); the header itself is read when only it is there.
 */
function serviceRetryAfterMs(error: unknown): number | undefined {
  const e = (error ?? {}) as { retryAfterInMs?: unknown; headers?: Record<string, unknown> };
  const raw = e.retryAfterInMs ?? e.headers?.['x-ms-retry-after-ms'];
  const ms = typeof raw === 'string' ? Number(raw) : raw;
  return typeof ms === 'number' && Number.isFinite(ms) && ms >= 0 ? ms : undefined;
}

/**
 * The SDK parses a query's continuation token itself (ORDER BY and cross-partition queries) and throws
 * an ErrorResponse with neither status nor code when it cannot (or JSON.parse's SyntaxError). A
 * transport failure always carries a code (ECONNRESET, REQUEST_SEND_ERROR, TimeoutError …).
 */
function continuationParseFailure(error: unknown, status: number | undefined): boolean {
  if (status !== undefined || (error as { code?: unknown } | null)?.code !== undefined) return false;
  return error instanceof SyntaxError || error instanceof ErrorResponse;
}

/** A route's resource id, or an operation such as "(list)" that names no resource. */
function operationOrRoute(id: string): StoreSubject {
  return id.startsWith('(') ? { kind: 'route', id } : routeSubject(id);
}

/**
 * One page of a newest-first keyset query, `createdAt` then an id descending (the migration and the
 * campaign lists): the caller's filters, the cursor's position, and `TOP limit + 1`, so a page never reads
 * more than one item beyond itself and `more` says whether one follows. The position is ours (the last
 * item's sort key), not the SDK's cross-partition token. SDK errors are the caller's to map.
 */
export async function newestFirstPage(
  container: Container,
  query: {
    where: readonly string[];
    parameters: readonly SqlParameter[];
    /** The id property the order breaks ties on (a name from our code, never a caller's). */
    idField: 'migrationId' | 'campaignId';
    after?: { createdAt: string; id: string } | undefined;
    limit: number;
  },
): Promise<{ items: Record<string, unknown>[]; more: boolean }> {
  const where = [...query.where];
  const parameters = [...query.parameters];
  if (query.after !== undefined) {
    where.push(
      `(c.createdAt < @afterCreatedAt OR (c.createdAt = @afterCreatedAt AND c.${query.idField} < @afterId))`,
    );
    parameters.push(
      { name: '@afterCreatedAt', value: query.after.createdAt },
      { name: '@afterId', value: query.after.id },
    );
  }
  parameters.push({ name: '@top', value: query.limit + 1 });
  const text =
    `SELECT TOP @top * FROM c WHERE ${where.join(' AND ')} ` +
    `ORDER BY c.createdAt DESC, c.${query.idField} DESC`;
  const { resources } = await container.items
    .query<Record<string, unknown>>({ query: text, parameters })
    .fetchAll();
  return { items: resources.slice(0, query.limit), more: resources.length > query.limit };
}
