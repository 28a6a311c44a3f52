/**
 * The version of the HTTP API's contract (the route view, the lock grant, the problem shape, the read
 * path's headers), as `GET /api/health` reports it in API_VERSION_HEADER. A RoutingClient refuses at
 * `ready()` a server whose version it was not written against, rather than misreading its answers one
 * request at a time. Raised only when a change would break a client built for the previous version;
 * a field added to an answer keeps it.
 */
export const API_VERSION = 1;

/** The response header of `GET /api/health` that carries API_VERSION. */
export const API_VERSION_HEADER = 'Routelock-Api-Version';

/** The API versions this build's RoutingClient understands. */
export const SUPPORTED_API_VERSIONS: readonly number[] = [API_VERSION];
