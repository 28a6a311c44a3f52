import {
  type EffectiveFunctionOptions,
  HttpRequest,
  type HttpRequestParams,
  type HttpRequestUser,
  InvocationContext,
  type InvocationContextExtraInputs,
  type InvocationContextExtraOutputs,
  type LogHandler,
} from '@azure/functions';
import type { Blob } from 'node:buffer';
import type { IncomingHttpHeaders } from 'node:http';
import type { ReadableStream } from 'node:stream/web';

/**
 * The embedded host's request and context for a request without a body (every GET, which is the read
 * path every service takes): the same interfaces as @azure/functions' `HttpRequest` and
 * `InvocationContext`, with the parts a handler rarely reads built on first use. Building the real ones
 * for every request cost more than the rest of the host's work together (a WHATWG `Request` with its
 * AbortSignal, its headers and two more URL parses: about 40 µs of a 120 µs request).
 *
 * Whatever they do not hold themselves (the body methods, `user`, `clone`, the context's bindings and
 * options) they hand to a real one built from the same inputs, so a handler sees exactly what it would
 * have seen. Requests with a body still get a real `HttpRequest` (local/server.ts).
 */

export interface BodilessRequestInit {
  method: string;
  /** The absolute URL, already parsed and checked by the host. */
  url: string;
  /** `url`'s query string, with its `?` (or ''). */
  search: string;
  /** node:http's parsed headers (turned into `Headers` only when a handler reads them). */
  headers: IncomingHttpHeaders;
  params: HttpRequestParams;
}

/** node:http's headers as one string each (a repeated header's values joined, as `Headers` holds them). */
export function headersOf(incoming: IncomingHttpHeaders): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return headers;
}

export class BodilessHttpRequest implements HttpRequest {
  readonly method: string;
  readonly url: string;
  readonly params: HttpRequestParams;
  readonly #init: BodilessRequestInit;
  #headers: Headers | undefined;
  #query: URLSearchParams | undefined;
  #real: HttpRequest | undefined;

  constructor(init: BodilessRequestInit) {
    this.#init = init;
    this.method = init.method;
    this.url = init.url;
    this.params = init.params;
  }

  get headers(): Headers {
    return (this.#headers ??= new Headers(headersOf(this.#init.headers)));
  }

  get query(): URLSearchParams {
    return (this.#query ??= new URLSearchParams(this.#init.search));
  }

  /** The real request, for what only it knows (the body's methods, `user`). */
  #native(): HttpRequest {
    const { method, url, headers, params } = this.#init;
    return (this.#real ??= new HttpRequest({ method, url, headers: headersOf(headers), params }));
  }

  get user(): HttpRequestUser | null {
    return this.#native().user;
  }

  get body(): ReadableStream | null {
    return this.#native().body;
  }

  get bodyUsed(): boolean {
    return this.#real?.bodyUsed ?? false;
  }

  arrayBuffer(): Promise<ArrayBuffer> {
    return this.#native().arrayBuffer();
  }

  blob(): Promise<Blob> {
    return this.#native().blob();
  }

  formData(): Promise<FormData> {
    return this.#native().formData();
  }

  json(): Promise<unknown> {
    return this.#native().json();
  }

  text(): Promise<string> {
    return this.#native().text();
  }

  clone(): HttpRequest {
    return this.#native().clone();
  }
}

/** An InvocationContext whose bindings and options are built when first read (no HTTP handler does). */
export class LocalInvocationContext implements InvocationContext {
  invocationId: string;
  functionName: string;
  readonly #logHandler: LogHandler;
  #real: InvocationContext | undefined;

  constructor(init: { invocationId: string; functionName: string; logHandler: LogHandler }) {
    this.invocationId = init.invocationId;
    this.functionName = init.functionName;
    this.#logHandler = init.logHandler;
  }

  #native(): InvocationContext {
    return (this.#real ??= new InvocationContext({
      invocationId: this.invocationId,
      functionName: this.functionName,
      logHandler: this.#logHandler,
    }));
  }

  get extraInputs(): InvocationContextExtraInputs {
    return this.#native().extraInputs;
  }

  get extraOutputs(): InvocationContextExtraOutputs {
    return this.#native().extraOutputs;
  }

  get options(): EffectiveFunctionOptions {
    return this.#native().options;
  }

  get retryContext(): InvocationContext['retryContext'] {
    return undefined;
  }

  get traceContext(): InvocationContext['traceContext'] {
    return undefined;
  }

  get triggerMetadata(): InvocationContext['triggerMetadata'] {
    return undefined;
  }

  log(...args: unknown[]): void {
    this.#logHandler('information', ...args);
  }

  trace(...args: unknown[]): void {
    this.#logHandler('trace', ...args);
  }

  debug(...args: unknown[]): void {
    this.#logHandler('debug', ...args);
  }

  info(...args: unknown[]): void {
    this.#logHandler('information', ...args);
  }

  warn(...args: unknown[]): void {
    this.#logHandler('warning', ...args);
  }

  error(...args: unknown[]): void {
    this.#logHandler('error', ...args);
  }
}
