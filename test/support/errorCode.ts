import { RouteLockError } from '../../shared/core/errors';

/** What a call ends in: 'ok', or the code of the RouteLockError it threw (any other error is rethrown). */
export async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'ok';
  } catch (error) {
    if (error instanceof RouteLockError) return error.code;
    throw error;
  }
}
