import { HttpRequest, HttpResponse, type HttpResponseInit, type LogLevel } from '@azure/functions';
import { randomUUID } from 'node:crypto';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { EndpointRole } from '../functions/http/auth';
import type { HttpEndpoint } from '../functions/http/endpoint';
import { problemResponse } from '../functions/http/problem';
import { MAX_BODY_BYTES, isJsonMediaType } from '../functions/http/validation';
import { isLoopbackHostHeader, isLoopbackHostname } from '../shared/core/loopback';
import { type ServerLimits, defaultServerLimits } from './config';
import { crossSiteRefusal } from './crossSite';
import { BodilessHttpRequest, LocalInvocationContext, headersOf } from './request';

/**
 * The embedded host: serves the very handlers Azure runs, on a plain node:http server under `/api`.
 * Each request becomes an `HttpRequest` and an `InvocationContext`, as the Functions worker builds them
 * (a request without a body, and every context, one whose rarely read parts are built on first read:
 * local/request.ts).
 * Auth levels are not enforced here (as under `func start`); the host binds loopback by default.
 *
 * With no function keys, two browser attacks would otherwise reach it from any web page the developer
 * opens: a cross-site request (a form post or a `no-cors` fetch, which a browser sends without asking)
 * and DNS rebinding (a hostile name re-pointed at 127.0.0.1, which makes the page same-origin with the
 * host). So a request a browser marks as sent from another site (`Sec-Fetch-Site`, `Origin`) is 403
 * `CrossSiteRequest` (local/crossSite.ts), and while bound to a loopback address the host answers only
 * requests whose `Host` names loopback (421 otherwise).
 *
 * A caller proves nothing until its identity is checked, so before that the host holds as little of it
 * as it can: bounded header and request times and a connection cap (ServerLimits), and no body read
 * until the caller's identity and role pass. A declared body over the handlers' 64 KiB is refused
 * unread, and a body that grows past it closes the connection.
 */

const noBody = Buffer.alloc(0);
/** Bytes of an unread body discarded after a refusal, so the answer reaches the client before the close. */
const DISCARD_LIMIT = 64 * 1024;

export type { LogLevel };
export type LogLine = (level: LogLevel, message: string, fields: Record<string, unknown>) => void;

export interface ExtraRoute {
  /** Exact path outside `/api` (e.g. `/` for the status page). */
  path: string;
  /** The app role a caller needs, checked as for the API endpoints (functions/http/auth.ts). */
  role: EndpointRole;
  handle: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;
}

/** The 401/403 problem for a caller without `role`, or null when it may proceed. */
export type Refusal = (role: EndpointRole, request: HttpRequest) => Promise<HttpResponseInit | null>;

export interface LocalServerOptions {
  /** Bound to the host's services (`bindEndpoint`): each handler enforces its own role. */
  endpoints: readonly HttpEndpoint[];
  log: LogLine;
  /** Pages outside `/api`, each checked with `refusal` before it is served. */
  pages?: { routes: readonly ExtraRoute[]; refusal: Refusal };
  /**
   * The same check as the handlers', made before a request's body is read (the handler checks again:
   * one home for the rule). Without it a body is read before its handler refuses the caller.
   */
  refusal?: Refusal;
  /** Timeouts and the connection cap; the defaults of local/config.ts unless given. */
  limits?: ServerLimits;
}

interface CompiledEndpoint {
  endpoint: HttpEndpoint;
  pattern: RegExp;
  params: string[];
}

export function compileRoute(route: string): { pattern: RegExp; params: string[] } {
  const params: string[] = [];
  const source = route
    .split('/')
    .map((segment) => {
      const param = /^\{(\w+)\}$/.exec(segment);
      if (param?.[1]) {
        params.push(param[1]);
        return '([^/]+)';
      }
      return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    })
    .join('/');
  return { pattern: new RegExp(`^${source}$`), params };
}

function carriesBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length.trim() !== '0');
}

/** One value of a header node:http may have joined or repeated. */
function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

export function createLocalServer(options: LocalServerOptions): Server {
  const compiled: CompiledEndpoint[] = options.endpoints.map((endpoint) => ({
    endpoint,
    ...compileRoute(endpoint.route),
  }));
  // The endpoints each method may reach, in declaration order (the last match wins, as before).
  const byMethod = new Map<string, CompiledEndpoint[]>();
  for (const entry of compiled)
    for (const m of entry.endpoint.methods) byMethod.set(m, [...(byMethod.get(m) ?? []), entry]);
  const extras = new Map((options.pages?.routes ?? []).map((r) => [r.path, r]));
  // Decided once per listen: bound to loopback, the host serves loopback names only.
  let loopbackOnly = false;
  const serving: Serving = { options, compiled, byMethod, extras, loopbackOnly: () => loopbackOnly };

  const limits = options.limits ?? defaultServerLimits;
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      // How often node:http looks for connections past those timeouts (30 s by default, which would
      // let a stalled connection outlive a shorter timeout by that much).
      connectionsCheckingInterval: Math.min(1000, limits.headersTimeoutMs),
    },
    (req, res) => {
      serve(serving, req, res).catch((error: unknown) => {
        options.log('error', 'request failed inside the host', { error: (error as Error).message });
        if (!res.headersSent)
          send(res, problemResponse('InternalError', 'The host failed to handle the request.'));
        else res.destroy();
      });
    },
  );
  // A socket that connects and sends nothing is timed by headersTimeout too (408, then closed).
  server.maxConnections = limits.maxConnections;
  server.on('listening', () => {
    const address = server.address();
    loopbackOnly =
      typeof address === 'object' && address !== null && isLoopbackHostname((address as AddressInfo).address);
  });
  return server;
}

/** What serving a request reads: the options, the endpoints compiled, the pages, the bound address. */
interface Serving {
  options: LocalServerOptions;
  compiled: readonly CompiledEndpoint[];
  byMethod: ReadonlyMap<string, readonly CompiledEndpoint[]>;
  extras: ReadonlyMap<string, ExtraRoute>;
  /** Bound to a loopback address (decided once per listen): only loopback Host names are served. */
  loopbackOnly: () => boolean;
}

/**
 * One way out: the request is decided first (`decide`), then refused unread, handed to its page, or
 * answered by its handler; a body not read is drained here, so node:http can finish the request.
 */
async function serve(s: Serving, req: IncomingMessage, res: ServerResponse): Promise<unknown> {
  const started = process.hrtime.bigint();
  const method = (req.method ?? 'GET').toUpperCase();
  const decided = await decide(s, req, method);
  if (decided.kind === 'refuse') return refuseUnread(req, res, decided.response);
  if (decided.kind === 'page' || !decided.bodyRead) drain(req);
  if (decided.kind === 'page') return decided.page.handle(req, res);
  const { endpoint, request, pathname } = decided;
  const invocationId = randomUUID();
  const context = new LocalInvocationContext({
    invocationId,
    functionName: endpoint.name,
    logHandler: (level, ...args) =>
      s.options.log(level, args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' '), {
        function: endpoint.name,
        invocationId,
      }),
  });
  const result = await endpoint.handler(request, context);
  const status = await send(res, result ?? { status: 204 });
  s.options.log('information', `${method} ${pathname} ${status}`, {
    function: endpoint.name,
    invocationId,
    status,
    ms: Number(process.hrtime.bigint() - started) / 1e6,
  });
}

/**
 * What to do with a request, in the order that holds least of an unchecked caller: the Host and
 * cross-site checks and the URL, then a page or the API endpoint, then the caller's identity before
 * its body is read.
 */
async function decide(s: Serving, req: IncomingMessage, method: string): Promise<Decision> {
  const admitted = admit(s, req, method);
  if (admitted.kind === 'refuse') return admitted;
  const { url } = admitted;
  const page = s.extras.get(url.pathname);
  if (page && s.options.pages) return pageDecision(req, method, url, page, s.options.pages.refusal);
  const matched = matchEndpoint(s, url, method);
  if (matched.kind === 'refuse') return matched;
  const refused = await bodyRefusal(s, req, method, url, matched);
  if (refused !== null) return refuse(refused);
  const body = carriesBody(req) ? await readBody(req) : noBody;
  if (body === 'tooLarge') return refuse(bodyTooLarge());
  return invocation(req, method, url, matched, body);
}

/** The checks made before anything of the request is parsed: its Host, cross-site, its URL. */
function admit(s: Serving, req: IncomingMessage, method: string): Refused | { kind: 'url'; url: URL } {
  const host = req.headers.host;
  if (s.loopbackOnly() && host !== undefined && !isLoopbackHostHeader(host)) {
    return refuse(
      problemResponse(
        'MisdirectedRequest',
        'This host is bound to loopback and answers only for localhost, 127.0.0.1 or [::1].',
      ),
    );
  }
  const crossSite = crossSiteRefusal({
    method,
    host,
    origin: single(req.headers.origin),
    secFetchSite: single(req.headers['sec-fetch-site']),
    secFetchMode: single(req.headers['sec-fetch-mode']),
    secFetchDest: single(req.headers['sec-fetch-dest']),
  });
  if (crossSite !== null) return refuse(problemResponse('CrossSiteRequest', crossSite));
  try {
    return { kind: 'url', url: new URL(req.url ?? '/', `http://${host ?? '127.0.0.1'}`) };
  } catch {
    return refuse(problemResponse('BadRequest', 'The Host header or the request target is not valid.'));
  }
}

/** A page outside `/api`, served once its caller passes the pages' check. */
async function pageDecision(
  req: IncomingMessage,
  method: string,
  url: URL,
  page: ExtraRoute,
  refusal: Refusal,
): Promise<Decision> {
  let pageRequest: HttpRequest;
  try {
    pageRequest = new HttpRequest({ method, url: url.href, headers: headersOf(req.headers) });
  } catch {
    // e.g. a URL with credentials in it: the caller's 400, not a 500 whose logged error names the URL
    return refuse(problemResponse('BadRequest', 'The request target is not valid.'));
  }
  const refused = await refusal(page.role, pageRequest);
  return refused ? refuse(refused) : { kind: 'page', page };
}

/** The API endpoint the URL names for `method`, with its path parameters decoded. */
function matchEndpoint(s: Serving, url: URL, method: string): Refused | Matched {
  // A target with user:password in it (absolute form) is refused before anything parses or logs it:
  // the Request constructor's own error would echo the URL, credentials and all.
  if (url.username !== '' || url.password !== '')
    return refuse(problemResponse('BadRequest', 'The request target must not carry credentials.'));
  if (!url.pathname.startsWith('/api/'))
    return refuse(problemResponse('NotFound', `No endpoint at ${url.pathname}; the API lives under /api/.`));
  const path = url.pathname.slice('/api/'.length);
  let matched: { entry: CompiledEndpoint; values: string[] } | undefined;
  for (const entry of s.byMethod.get(method) ?? []) {
    const match = entry.pattern.exec(path);
    if (match) matched = { entry, values: match.slice(1) };
  }
  if (!matched) return refuse(notMatched(s, path, url.pathname, method));
  const { entry, values } = matched;
  try {
    const params = Object.fromEntries(
      entry.params.map((name, i) => [name, decodeURIComponent(values[i] ?? '')]),
    );
    return { kind: 'endpoint', entry, params };
  } catch {
    return refuse(problemResponse('BadRequest', 'The path is not valid percent-encoding.'));
  }
}

/** No endpoint for the method: 404, or 405 naming the methods the path does allow. */
function notMatched(s: Serving, path: string, pathname: string, method: string): HttpResponseInit {
  const allowed = new Set(
    s.compiled.filter((entry) => entry.pattern.test(path)).flatMap((entry) => entry.endpoint.methods),
  );
  if (allowed.size === 0) return problemResponse('NotFound', `No endpoint at ${pathname}.`);
  return problemResponse('MethodNotAllowed', `${method} is not allowed on ${pathname}.`, {
    headers: { Allow: [...allowed].join(', ') },
  });
}

/**
 * Why the request's body may not be read, or null. Without Content-Length or Transfer-Encoding a
 * request has no body (RFC 9112 §6.3): nothing to read, and its handler checks the caller as it runs.
 * A body is read only for a caller who may send it, as JSON, declared within the handlers' limit.
 */
async function bodyRefusal(
  s: Serving,
  req: IncomingMessage,
  method: string,
  url: URL,
  { entry, params }: Matched,
): Promise<HttpResponseInit | null> {
  if (!carriesBody(req)) return null;
  if (s.options.refusal) {
    const request = new BodilessHttpRequest({
      method,
      url: url.href,
      search: url.search,
      headers: req.headers,
      params,
    });
    const refused = await s.options.refusal(entry.endpoint.role, request);
    if (refused) return refused;
  }
  const contentType = req.headers['content-type'];
  if (contentType === undefined || !isJsonMediaType(contentType))
    return problemResponse(
      'UnsupportedMediaType',
      `A request body must be Content-Type: application/json${contentType === undefined ? '' : `, not ${contentType}`}.`,
    );
  const declared = req.headers['content-length'];
  return declared !== undefined && Number(declared) > MAX_BODY_BYTES ? bodyTooLarge() : null;
}

/** The handler's request, its body read; one the HttpRequest cannot take is the caller's 400. */
function invocation(
  req: IncomingMessage,
  method: string,
  url: URL,
  { entry, params }: Matched,
  body: Buffer,
): Decision {
  const { endpoint } = entry;
  const invoke = (request: HttpRequest): Decision => ({
    kind: 'invoke',
    endpoint,
    request,
    pathname: url.pathname,
    bodyRead: body !== noBody,
  });
  // GET and HEAD carry no body (the Request constructor would drop it, with a warning).
  if (body.length === 0 || method === 'GET' || method === 'HEAD') {
    // What the real one checks on construction the URL parse above has checked (and a URL with
    // credentials was refused above).
    return invoke(
      new BodilessHttpRequest({ method, url: url.href, search: url.search, headers: req.headers, params }),
    );
  }
  try {
    return invoke(
      new HttpRequest({
        method,
        url: url.href,
        headers: headersOf(req.headers),
        params,
        body: { bytes: body },
      }),
    );
  } catch (error) {
    return refuse(problemResponse('BadRequest', `The request cannot be parsed: ${(error as Error).message}`));
  }
}

/** A request answered without reading (the rest of) its body: `refuseUnread`. */
type Refused = { kind: 'refuse'; response: HttpResponseInit };

const refuse = (response: HttpResponseInit): Refused => ({ kind: 'refuse', response });

/** The API endpoint a request names, with its path parameters. */
interface Matched {
  kind: 'endpoint';
  entry: CompiledEndpoint;
  params: Record<string, string>;
}

/** What the host does with a request (`serve` acts on it in one place). */
type Decision =
  | Refused
  /** A page outside `/api`, its caller checked: it reads what it needs itself. */
  | { kind: 'page'; page: ExtraRoute }
  /** An endpoint's handler, with its request built (`bodyRead`: the body was read to its end). */
  | { kind: 'invoke'; endpoint: HttpEndpoint; request: HttpRequest; pathname: string; bodyRead: boolean };

function bodyTooLarge(): HttpResponseInit {
  return problemResponse('PayloadTooLarge', `The body exceeds ${MAX_BODY_BYTES} bytes.`);
}

/** The body, or 'tooLarge' the moment it grows past MAX_BODY_BYTES (reading stops there). */
function readBody(req: IncomingMessage): Promise<Buffer | 'tooLarge'> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) return void chunks.push(chunk);
      req.off('data', onData);
      req.pause();
      resolve('tooLarge');
    };
    req.on('data', onData);
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** A request with no body left to read (or one the host will not read): let node:http finish it. */
function drain(req: IncomingMessage): void {
  req.resume();
}

/**
 * Answer without reading the rest of the body, and close the connection: the client may still be
 * sending it. A little of it is discarded first, so a client that sends while it waits sees the answer
 * rather than a reset; past that (or at the request timeout, for a body that stalls) the socket goes.
 */
async function refuseUnread(
  req: IncomingMessage,
  res: ServerResponse,
  result: HttpResponseInit,
): Promise<number> {
  if (!carriesBody(req)) drain(req);
  else if (!req.complete) {
    res.shouldKeepAlive = false;
    let discarded = 0;
    req.removeAllListeners('data');
    req.on('data', (chunk: Buffer) => {
      discarded += chunk.length;
      if (discarded > DISCARD_LIMIT) req.socket.destroy();
    });
    req.resume();
  }
  return send(res, result);
}

async function send(res: ServerResponse, result: HttpResponseInit | HttpResponse): Promise<number> {
  if (
    !(result instanceof HttpResponse) &&
    (typeof result.body === 'string' || result.body == null) &&
    result.jsonBody === undefined &&
    (result.headers === undefined || isPlainRecord(result.headers))
  ) {
    // The handlers' own shape: a string body and plain headers, written in one writeHead (node:http
    // still validates every name and value).
    const status = result.status ?? 200;
    const payload = result.body ?? '';
    const flat: string[] = [];
    for (const [name, value] of Object.entries(result.headers ?? {}))
      if (name.toLowerCase() !== 'content-length') flat.push(name, value);
    const empty = status === 204 || status === 304;
    if (!empty) flat.push('Content-Length', String(Buffer.byteLength(payload)));
    res.writeHead(status, flat);
    if (empty) res.end();
    else res.end(payload);
    return status;
  }
  const response = result instanceof HttpResponse ? result : new HttpResponse(result);
  const status = response.status;
  const payload = Buffer.from(await response.arrayBuffer());
  res.statusCode = status;
  for (const [name, value] of response.headers.entries()) res.setHeader(name, value);
  if (status === 204 || status === 304) {
    res.end();
  } else {
    res.setHeader('Content-Length', payload.length);
    res.end(payload);
  }
  return status;
}

/** Headers given as a plain object of strings (not a `Headers` or a list of pairs). */
function isPlainRecord(headers: HttpResponseInit['headers']): headers is Record<string, string> {
  return (
    typeof headers === 'object' &&
    !Array.isArray(headers) &&
    !(headers instanceof Headers) &&
    Object.values(headers).every((v) => typeof v === 'string')
  );
}
