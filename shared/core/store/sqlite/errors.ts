import { RouteLockError } from '../../errors';
import { type StoreSubject, alreadyExists } from '../errors';

/** SQLite failures as the ports' typed errors: a duplicate key is AlreadyExists, anything else transient. */
export function sqliteError(error: unknown, subject: StoreSubject): RouteLockError {
  if (error instanceof RouteLockError) return error;
  if (isSqliteError(error, 'SQLITE_CONSTRAINT_PRIMARYKEY')) return alreadyExists(subject);
  return new RouteLockError('StoreUnavailable', `SQLite store failed: ${(error as Error).message}`, {
    retryAfterSeconds: 1,
    cause: error,
  });
}

/** Run a statement; its failure becomes the port's typed error. */
export function guarded<T>(subject: StoreSubject, action: () => T): T {
  try {
    return action();
  } catch (error) {
    throw sqliteError(error, subject);
  }
}

function isSqliteError(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code;
}
