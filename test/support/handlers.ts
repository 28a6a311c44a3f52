import { HttpRequest, HttpResponse, type HttpResponseInit, InvocationContext } from '@azure/functions';
import { bindEndpoint } from '../../functions/http/endpoint';
import { type ServiceOverrides, type Services, createServices } from '../../functions/services';
import { ManualClock } from '../../testkit/clock';
import { parseConfig } from '../../shared/config';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { allEndpoints } from '../../local/host';
import { type TestPrincipal, allRoles, clientPrincipal } from './principals';
import { scratchSqlitePath } from './scratch';

export interface Called {
  status: number;
  headers: Headers;
  body: unknown;
  text: string;
  logs: string[];
}

export interface CallInit {
  params?: Record<string, string>;
  body?: unknown;
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
  query?: string;
  /**
   * Who calls (`x-ms-client-principal`, as App Service authentication sends it): by default an operator
   * holding every app role; `null` sends no identity. An explicit header in `headers` wins.
   */
  principal?: TestPrincipal | null;
}

let current: Promise<Services> | undefined;

/** The services of the last `handlerServices` call: what `call` binds each endpoint to. */
function harnessServices(): Promise<Services> {
  if (!current) throw new Error('call handlerServices() first');
  return current;
}

/** Handler harness: real HttpRequest / InvocationContext objects, the registered (wrapped) handlers. */
export async function handlerServices(
  env: Record<string, string> = {},
  store: LocationStore = new SqliteStore(':memory:'),
  overrides: ServiceOverrides = {},
): Promise<{ services: Services; clock: ManualClock; logs: string[] }> {
  const clock = new ManualClock();
  // Its records, audit ledger and token keys in a directory of its own (a test names another to share one).
  const config = parseConfig({ ROUTELOCK_SQLITE_PATH: scratchSqlitePath(), ...env });
  const services = await createServices(config, { clock: clock.now, store, ...overrides });
  current = Promise.resolve(services);
  return { services, clock, logs: [] };
}

export async function call(name: string, init: CallInit = {}, logs: string[] = []): Promise<Called> {
  const declared = allEndpoints.find((e) => e.name === name);
  if (!declared) throw new Error(`no endpoint ${name}`);
  // Bound as the Functions host binds them: to the services `handlerServices` handed in.
  const endpoint = bindEndpoint(declared, harnessServices);
  const params = init.params ?? {};
  const path = endpoint.route.replace(/\{(\w+)\}/g, (_, p: string) => encodeURIComponent(params[p] ?? ''));
  const headers: Record<string, string> = { ...(init.headers ?? {}) };
  const principal = init.principal === undefined ? allRoles : init.principal;
  if (principal && headers['x-ms-client-principal'] === undefined) {
    headers['x-ms-client-principal'] = clientPrincipal(principal);
  }
  let bytes: Buffer | undefined;
  if (init.rawBody !== undefined) bytes = Buffer.from(init.rawBody);
  else if (init.body !== undefined) {
    bytes = Buffer.from(JSON.stringify(init.body));
    headers['content-type'] ??= 'application/json';
  }
  const request = new HttpRequest({
    method: endpoint.methods[0] ?? 'GET',
    url: `http://localhost/api/${path}${init.query ? `?${init.query}` : ''}`,
    headers,
    params,
    ...(bytes ? { body: { bytes } } : {}),
  });
  const context = new InvocationContext({
    functionName: name,
    logHandler: (level, ...args) =>
      logs.push(`${level} ${args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' ')}`),
  });
  const result = (await endpoint.handler(request, context)) as HttpResponseInit | HttpResponse;
  const response = result instanceof HttpResponse ? result : new HttpResponse(result);
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    text,
    // (a page's HTML is text only)
    body:
      text && /json/.test(response.headers.get('content-type') ?? '') ? (JSON.parse(text) as unknown) : null,
    logs,
  };
}
