import {
  type FunctionInput,
  type HttpHandler,
  type HttpMethod,
  type HttpRequest,
  type HttpResponseInit,
  type InvocationContext,
  app,
} from '@azure/functions';
import { type Services, services } from '../services';
import { problemFromError, statusByCode } from './problem';

/**
 * One declaration per HTTP route (name, methods, route, auth level, handler). The same list is
 * registered with the Functions host (`app.http`) and served by the embedded host in `local/`.
 */
export interface HttpEndpoint {
  name: string;
  methods: HttpMethod[];
  /** Route template under the `api/` prefix, e.g. `routes/{id}/prelock`. */
  route: string;
  authLevel: 'anonymous' | 'function' | 'admin';
  handler: HttpHandler;
  /** Extra input bindings in Azure (the Durable client for the migration endpoints). */
  extraInputs?: FunctionInput[];
}

export type ServiceHandler = (
  request: HttpRequest,
  context: InvocationContext,
  services: Services,
) => Promise<HttpResponseInit>;

/**
 * Wrap a handler: resolve the services, map every thrown error to a problem response in one place,
 * and log one line per failure (code and message only: no bodies, so never a token).
 */
export function handle(fn: ServiceHandler): HttpHandler {
  return async (request, context) => {
    const path = new URL(request.url, 'http://localhost').pathname;
    try {
      return await fn(request, context, await services());
    } catch (error) {
      const response = problemFromError(error, path);
      const status = response.status ?? 500;
      const code = (error as { code?: unknown }).code;
      if (status >= 500) {
        context.error(`${request.method} ${path} → ${status}`, describe(error));
      } else {
        context.log(`${request.method} ${path} → ${status} ${typeof code === 'string' ? code : ''}`.trim());
      }
      return response;
    }
  };
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return `${error.name}${typeof code === 'string' && code in statusByCode ? ` ${code}` : ''}: ${error.message}`;
  }
  return String(error);
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}): HttpResponseInit {
  return {
    status,
    headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...headers },
    body: JSON.stringify(body),
  };
}

/**
 * True inside the Azure Functions worker. The worker serves `@azure/functions-core` by patching
 * `require` (there is no such package on disk), so only a real `require` call can tell.
 */
export function inFunctionsHost(): boolean {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require('@azure/functions-core');
    return true;
  } catch {
    return false;
  }
}

export function registerHttp(endpoints: HttpEndpoint[], register: typeof app.http = app.http): number {
  if (register === app.http && !inFunctionsHost()) return 0; // imported by the embedded host or tests
  for (const endpoint of endpoints) {
    register(endpoint.name, {
      methods: endpoint.methods,
      route: endpoint.route,
      authLevel: endpoint.authLevel,
      handler: endpoint.handler,
      ...(endpoint.extraInputs ? { extraInputs: endpoint.extraInputs } : {}),
    });
  }
  return endpoints.length;
}
