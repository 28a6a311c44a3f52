/**
 * A module a package declares as an optional peer (better-sqlite3 for `@routelock/library/sqlite`): a
 * service that needs it and has not installed it is told what to install and why, in one line, instead of
 * Node's resolver message and require stack.
 */
export class MissingDependencyError extends Error {
  override readonly name = 'MissingDependencyError';
  /**
   * Node's own code for a module it cannot find: code that loads an optional module and checks
   * `code === 'MODULE_NOT_FOUND'` (to fall back to another store, say) keeps working.
   */
  readonly code = 'MODULE_NOT_FOUND';

  constructor(
    /** The package to install. */
    readonly dependency: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * `load()` (a `require` of `dependency`); when `dependency` itself is not installed, a
 * MissingDependencyError with `message`. Anything else (a missing module of its own, a native binary
 * built for another Node) is thrown as it is: installing it again would not help.
 */
export function requireOptional<T>(dependency: string, message: string, load: () => T): T {
  try {
    return load();
  } catch (error) {
    const missing =
      error instanceof Error &&
      (error as { code?: unknown }).code === 'MODULE_NOT_FOUND' &&
      error.message.startsWith(`Cannot find module '${dependency}'`);
    if (missing) throw new MissingDependencyError(dependency, message);
    throw error;
  }
}
