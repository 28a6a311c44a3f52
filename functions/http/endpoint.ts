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
import { type Caller, type EndpointRole, authorize } from './auth';
import { problemFromError, statusByCode } from './problem';
import { signInAnswer } from './signIn';

/**
 * One declaration per HTTP route (name, methods, route, auth level, app role, handler), written beside its
 * handler in `functions/*.ts`; `functions/endpoints.ts` collects them into the one list. The Functions host
 * registers it (`registerHttp`, bound to the lazily-created services) and the embedded host in `local/`
 * serves it (bound to its own services): `bindEndpoint` wraps each handler so the declared role is
 * enforced before it runs.
 */
export interface EndpointDeclaration {
  name: string;
  methods: HttpMethod[];
  /** Route template under the `api/` prefix, e.g. `routes/{id}/prelock`. */
  route: string;
  /**
   * The function key the Functions host asks for, on top of the caller's identity and role. Never
   * `admin`: the host's master key is a superuser credential no operator should need.
   */
  authLevel: 'anonymous' | 'function';
  /** The app role a caller needs (functions/http/auth.ts); `anonymous` for GET /api/health only. */
  role: EndpointRole;
  handler: ServiceHandler;
  /** Extra input bindings in Azure (the Durable client for the migration endpoints). */
  extraInputs?: FunctionInput[];
  /**
   * A page a person opens (the status page): under ROUTELOCK_AUTH=appservice a request with no identity
   * at all is sent to sign in and back to `returnTo` (functions/http/signIn.ts) instead of a 401. Its
   * path is one of App Service authentication's excluded paths (infra/bicep/modules/functionapp.bicep).
   */
  browserSignIn?: { returnTo: string };
}

/** A declaration bound to its services: what `app.http` registers and the embedded host serves. */
export interface HttpEndpoint extends Omit<EndpointDeclaration, 'handler'> {
  handler: HttpHandler;
}

/** Where a bound handler gets its services: the lazily-created singleton in Azure, the host's own locally. */
export type ServicesSource = () => Promise<Services>;

/**
 * A handler. `services` holds what it declares it uses (a handler typed on `Pick<Services, ...>` is one);
 * `caller` is the authenticated caller (`anonymousCaller` on an anonymous endpoint).
 */
export type ServiceHandler<Deps = Services> = (
  request: HttpRequest,
  context: InvocationContext,
  services: Deps,
  caller: Caller,
) => Promise<HttpResponseInit>;

/**
 * Wrap a handler: resolve the services, enforce the endpoint's app role (401 without an identity, 403
 * without the role: the handler never runs), map every thrown error to a problem response in one
 * place, and log one line per failure (code and message only: no bodies, so never a token).
 */
export function handle(
  fn: ServiceHandler,
  role: EndpointRole,
  source: ServicesSource,
  browserSignIn?: EndpointDeclaration['browserSignIn'],
): HttpHandler {
  return async (request, context) => {
    let mode: Services['authenticator']['mode'] | undefined;
    try {
      const resolved = await source();
      mode = resolved.authenticator.mode;
      const caller = await authorize(role, request, resolved.authenticator);
      return await fn(request, context, resolved, caller);
    } catch (error) {
      // only App Service has a sign-in to send a browser to; entra and none answer as any endpoint
      const signIn =
        browserSignIn && mode === 'appservice' ? signInAnswer(error, request, browserSignIn.returnTo) : null;
      if (signIn) return signIn;
      // Parsed only for a problem's `instance` and the log line: a URL parse per request is not free.
      const path = new URL(request.url, 'http://localhost').pathname;
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

/** Resolve the services and check the caller against `role` (throws 401/403 problems). */
async function admit(
  role: EndpointRole,
  request: HttpRequest,
  source: ServicesSource,
): Promise<{ resolved: Services; caller: Caller }> {
  const resolved = await source();
  return { resolved, caller: await authorize(role, request, resolved.authenticator) };
}

/**
 * The same check for a page served outside `/api` (the embedded host's status page): null when the
 * caller may see it, else the 401/403 problem to answer with.
 */
export async function refusal(
  role: EndpointRole,
  request: HttpRequest,
  source: ServicesSource,
): Promise<HttpResponseInit | null> {
  try {
    await admit(role, request, source);
    return null;
  } catch (error) {
    return problemFromError(error, new URL(request.url, 'http://localhost').pathname);
  }
}

/** Bind a declaration to its services: its handler wrapped by `handle` with the role declared beside it. */
export function bindEndpoint(declaration: EndpointDeclaration, source: ServicesSource): HttpEndpoint {
  return {
    ...declaration,
    handler: handle(declaration.handler, declaration.role, source, declaration.browserSignIn),
  };
}

/**
 * One line for the server's own log. The cause (the store SDK's own error, which callers never see)
 * is included, one level deep, so an operator can tell a missing data-plane role from an outage.
 */
function describe(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    const cause = error.cause instanceof Error ? ` (cause: ${error.cause.name}: ${error.cause.message})` : '';
    return `${error.name}${typeof code === 'string' && code in statusByCode ? ` ${code}` : ''}: ${error.message}${cause}`;
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

/**
 * Register declarations with the Functions host, bound to the services its entry points create on first
 * use. Outside the host (the embedded host, tests) it registers nothing.
 */
export function registerHttp(
  declarations: readonly EndpointDeclaration[],
  register: typeof app.http = app.http,
): number {
  if (register === app.http && !inFunctionsHost()) return 0; // imported by the embedded host or tests
  for (const declaration of declarations) {
    const endpoint = bindEndpoint(declaration, services);
    register(endpoint.name, {
      methods: endpoint.methods,
      route: endpoint.route,
      authLevel: endpoint.authLevel,
      handler: endpoint.handler,
      ...(endpoint.extraInputs ? { extraInputs: endpoint.extraInputs } : {}),
    });
  }
  return declarations.length;
}
