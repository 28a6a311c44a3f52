/** The location store port's first path, kept so existing imports stay valid: see ./ports/locations. */
export * from './ports/locations';
