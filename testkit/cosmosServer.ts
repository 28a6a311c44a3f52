import cosmosServer from '@vercel/cosmosdb-server';
import type { IncomingHttpHeaders, IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CosmosStore } from '../shared/core/store/cosmos/locations';

/**
 * A Cosmos DB wire-protocol server (@vercel/cosmosdb-server) on a free loopback port, HTTPS with its
 * self-signed certificate. 404/409/412 behave as the real service does, and it compares `If-Match`
 * exactly; its ETags are bare UUIDs, though, where Cosmos DB's carry quotes (`"00000000-…"`).
 *
 * `quotedEtags: true` makes it hand them out as Cosmos DB does: every `_etag` in a body and every `ETag`
 * header leaves in quotes, and an `If-Match` must come back in exactly that form — a bare (or re-quoted)
 * one matches nothing, so a layer that strips or adds quotes gets the 412 it would get on Azure. This is
 * done on the wire, in front of the stock request handler, so the real adapters (CosmosStore and the
 * records, audit and force-release stores) and the real SDK run unchanged against it.
 *
 * `intercept` is the seam for faults the stand-in cannot produce itself: an interceptor sees each request
 * first and may change its headers, do something else in the meantime (a concurrent writer), or answer
 * in its place (a 429 with `x-ms-retry-after-ms`).
 */
export interface CosmosTestServer {
  endpoint: string;
  key: string;
  /** Whether this server issues ETags in quotes, as Cosmos DB does. */
  quotedEtags: boolean;
  connect(container?: string): Promise<CosmosStore>;
  /** Every request goes through `interceptor` first (ETags already as the stock server knows them). */
  intercept(interceptor: CosmosInterceptor | undefined): void;
  close(): Promise<void>;
}

export interface CosmosRequest {
  method: string;
  /** The resource path, e.g. `/dbs/routelock/colls/locations1/docs/r-1`. */
  path: string;
  /** Mutable: deleting `if-match` sends the request on unconditional. */
  headers: IncomingHttpHeaders;
}

/** An answer in the stand-in's place. */
export interface CosmosAnswer {
  status: number;
  headers?: Record<string, string>;
  body?: Record<string, unknown>;
}

export type CosmosInterceptor = (
  request: CosmosRequest,
) => CosmosAnswer | undefined | void | Promise<CosmosAnswer | undefined | void>;

export interface CosmosServerOptions {
  /** Issue ETags in quotes and accept only that form back, as Cosmos DB does. */
  quotedEtags?: boolean;
}

/** A 429 as Cosmos DB sends it when a partition is over its throughput. */
export function throttled(retryAfterMs: number): CosmosAnswer {
  return {
    status: 429,
    headers: { 'x-ms-retry-after-ms': String(retryAfterMs), 'x-ms-substatus': '3200' },
    body: { code: 'TooManyRequests', message: 'Request rate is large.' },
  };
}

let containers = 0;

export async function startCosmosServer(options: CosmosServerOptions = {}): Promise<CosmosTestServer> {
  const quotedEtags = options.quotedEtags ?? false;
  const server = cosmosServer();
  const [stock] = server.listeners('request') as RequestListener[];
  if (!stock) throw new Error('@vercel/cosmosdb-server registered no request handler');
  let interceptor: CosmosInterceptor | undefined;
  server.removeAllListeners('request');
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      if (quotedEtags) fromCosmosForm(req, res);
      const answer = await interceptor?.({
        method: req.method ?? 'GET',
        path: new URL(req.url ?? '/', 'https://stand-in').pathname,
        headers: req.headers,
      });
      if (answer) {
        req.resume();
        res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
        res.end(JSON.stringify(answer.body ?? {}));
        return;
      }
      stock.call(server, req, res);
    })().catch((error: unknown) => {
      res.statusCode = 500;
      res.end(JSON.stringify({ message: String(error) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const endpoint = `https://127.0.0.1:${port}`;
  const key = Buffer.from('routelock-test-key').toString('base64');
  const stores: CosmosStore[] = [];
  return {
    endpoint,
    key,
    quotedEtags,
    async connect(container = `locations${++containers}`) {
      const store = await CosmosStore.connect({
        endpoint,
        key,
        disableTlsVerify: true,
        database: 'routelock',
        container,
      });
      stores.push(store);
      return store;
    },
    intercept(next) {
      interceptor = next;
    },
    async close() {
      await Promise.all(stores.map((s) => s.close()));
      await new Promise<void>((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      });
    },
  };
}

const isQuoted = (etag: string) => etag.length >= 2 && etag.startsWith('"') && etag.endsWith('"');

/**
 * The stock server keeps bare ETags; the caller sees them quoted. An `If-Match` in the quoted form is
 * translated to the bare one; any other form is made into a value no item has, so it matches nothing
 * (as a bare ETag would not on Cosmos DB). Responses get their `_etag` fields and `ETag` header quoted.
 */
function fromCosmosForm(req: IncomingMessage, res: ServerResponse): void {
  const ifMatch = req.headers['if-match'];
  if (typeof ifMatch === 'string' && ifMatch !== '') {
    req.headers['if-match'] = isQuoted(ifMatch) ? ifMatch.slice(1, -1) : `${ifMatch} (not a Cosmos DB ETag)`;
  }
  const setHeader = res.setHeader.bind(res);
  res.setHeader = (name, value) =>
    setHeader(
      name,
      name.toLowerCase() === 'etag' && typeof value === 'string' && !isQuoted(value) ? `"${value}"` : value,
    );
  const end = res.end.bind(res) as (chunk?: unknown) => ServerResponse;
  res.end = ((chunk?: unknown) => {
    if (typeof chunk !== 'string' || chunk === '') return end(chunk);
    try {
      return end(JSON.stringify(JSON.parse(chunk), quoteEtagFields));
    } catch {
      return end(chunk);
    }
  }) as ServerResponse['end'];
}

/** JSON.stringify replacer: every `_etag` (items, query pages) and batch `eTag`, quoted. */
function quoteEtagFields(this: unknown, key: string, value: unknown): unknown {
  return (key === '_etag' || key === 'eTag') && typeof value === 'string' && !isQuoted(value)
    ? `"${value}"`
    : value;
}
