import { problemFromError } from '../functions/http/problem';
import { RoutingClient, RoutingServiceError } from '../shared/core/client';
import type { Clock } from '../shared/core/clock';
import { type ErrorCode, RouteLockError, errorCodes } from '../shared/core/errors';
import type { RouteView } from '../shared/core/lock/view';
import type { Router } from '../shared/core/router';

/**
 * A service's own `RoutingClient` in series with one of the routing service's cache tiers
 * (docs/design.md §5.3): the client resolves over "HTTP" whose every `GET /api/routes/{id}` is answered by
 * that tier's `Router.view()` — the view JSON with its `Cache-Control` and `Age`, as `functions/routes.ts`
 * sends them, and a problem response (`problemFromError`) for an error. No network, no timers: an answer
 * takes no virtual time, so a client request is as instantaneous as the router call behind it.
 */
export class ClientTier {
  readonly client: RoutingClient;
  /** Requests that reached the tier behind (the client's cache missed, or held a started lock). */
  get requests(): number {
    return this.client.requests;
  }
  /** The largest `Age` the tier behind sent: proof it served copies it had held. */
  maxAgeSeconds = 0;

  /**
   * `maxCacheSeconds`: the TTL of the tier behind, the most max-age it sends (configured as a service
   * configures it for its routelock; the client's default is the production `local` tier's 60 s).
   */
  constructor(upstream: Router, clock: Clock, clockSkewSeconds: number, maxCacheSeconds: number) {
    this.client = new RoutingClient({
      baseUrl: 'http://routing.fleet.invalid/api',
      clock,
      clockSkewSeconds,
      maxCacheSeconds,
      fetch: (input) => this.serve(upstream, String(input)),
    });
  }

  /** An error other than the library's inside the tier behind: a 500 to the client, rethrown here. */
  private unexpected: unknown;

  /** What the service is told: the client's view, errors as the library's own (what the fleet handles). */
  async view(id: string): Promise<{ view: RouteView }> {
    try {
      return { view: await this.client.resolve(id) };
    } catch (error) {
      if (this.unexpected !== undefined) {
        const cause = this.unexpected;
        this.unexpected = undefined;
        throw cause;
      }
      if (error instanceof RoutingServiceError && (errorCodes as readonly string[]).includes(error.code))
        throw new RouteLockError(
          error.code as ErrorCode,
          error.message,
          error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds },
        );
      throw error;
    }
  }

  /** `GET /api/routes/{id}` answered by the router, as the HTTP layer answers it. */
  private async serve(router: Router, url: string): Promise<Response> {
    try {
      const match = ROUTE_PATH.exec(new URL(url).pathname);
      if (!match) throw new Error(`harness: the client tier asked for ${url}`);
      const { view, cacheControl, ageSeconds } = await router.view(decodeURIComponent(match[1] as string));
      this.maxAgeSeconds = Math.max(this.maxAgeSeconds, ageSeconds);
      return new Response(JSON.stringify(view), {
        status: 200,
        headers: {
          'content-type': 'application/json',
          etag: `"${view.etag}"`,
          'cache-control': cacheControl,
          age: String(ageSeconds),
        },
      });
    } catch (error) {
      if (!(error instanceof RouteLockError)) this.unexpected = error;
      // With the request's path as `instance`, as the API's handlers answer: the client tells a route's
      // 404 from a wrong base URL's by it.
      const problem = problemFromError(error, new URL(url).pathname);
      return new Response(problem.body as string, {
        status: problem.status ?? 500,
        headers: problem.headers as Record<string, string>,
      });
    }
  }
}

const ROUTE_PATH = /^\/api\/routes\/([^/]+)$/;
