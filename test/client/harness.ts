import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { ManualClock } from '../../testkit/clock';

/**
 * Real HTTP for RoutingClient's tests: the embedded host on a manual clock, and a node:http front of
 * our own that forwards to it, hangs, or is gone (a killed host: the connection is refused).
 */

export const SOURCE = { region: 'westeurope', account: 'chatweu01' };
export const TARGET = { region: 'eastus', account: 'chatuse01' };
export const T = Date.UTC(2026, 5, 1);

export interface HostOnClock {
  host: LocalHost;
  clock: ManualClock;
  store: SqliteStore;
  api: string;
}

export async function hostOnManualClock(profile: 'dev' | 'production' = 'dev'): Promise<HostOnClock> {
  const clock = new ManualClock(T);
  const store = new SqliteStore(':memory:');
  const host = await startLocalHost({
    env: { PORT: '0', ROUTELOCK_PROFILE: profile },
    clock: clock.now,
    store,
    log: () => undefined,
  });
  return { host, clock, store, api: `${host.url}/api` };
}

export type FrontMode = 'forward' | 'hang' | 'hangBody' | 'gateway503';

/** A server in front of `upstream` (or of nothing): what the client's requests meet, switchable. */
export class Front {
  mode: FrontMode = 'forward';
  /** Response headers (lower case) the front drops when it forwards: an older server, or a proxy. */
  dropHeaders: string[] = [];
  /** Requests that reached the front, whatever it did with them. */
  requests = 0;
  private readonly hung = new Set<ServerResponse>();
  private constructor(
    private readonly server: Server,
    readonly api: string,
  ) {}

  static async start(upstream?: string): Promise<Front> {
    const handler: { front?: Front } = {};
    const server = createServer((req, res) => void handler.front!.handle(upstream, req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    handler.front = new Front(server, `http://127.0.0.1:${port}/api`);
    return handler.front;
  }

  private async handle(upstream: string | undefined, req: IncomingMessage, res: ServerResponse) {
    this.requests += 1;
    if (this.mode === 'hang') {
      this.hung.add(res);
      return;
    }
    if (this.mode === 'hangBody') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"resourceId":');
      this.hung.add(res);
      return;
    }
    if (this.mode === 'gateway503' || upstream === undefined) {
      res.writeHead(503, { 'content-type': 'text/html' }).end('<html>Service Unavailable</html>');
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const answer = await fetch(`${upstream}${(req.url ?? '').replace(/^\/api/, '')}`, {
      method: req.method ?? 'GET',
      headers: Object.fromEntries(
        Object.entries(req.headers).filter(
          (e): e is [string, string] => typeof e[1] === 'string' && e[0] !== 'host',
        ),
      ),
      ...(body.length > 0 ? { body } : {}),
    });
    const headers: Record<string, string> = {};
    answer.headers.forEach((value, name) => {
      if (
        name !== 'content-length' &&
        name !== 'transfer-encoding' &&
        name !== 'connection' &&
        !this.dropHeaders.includes(name)
      )
        headers[name] = value;
    });
    res.writeHead(answer.status, headers).end(Buffer.from(await answer.arrayBuffer()));
  }

  /** The host is killed: the listening socket closes, so every new connection is refused. */
  async kill(): Promise<void> {
    for (const res of this.hung) res.destroy();
    this.hung.clear();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}

/**
 * A node:http server that answers every request with `answer()` (and counts what it was asked): `body`
 * as JSON, or `raw` as it is (an HTML page, broken JSON), once `delay(req)` settles (one that never
 * does is a hung host).
 */
export async function scriptedServer(
  answer: (req: IncomingMessage) => {
    status: number;
    headers?: Record<string, string>;
    body?: unknown;
    raw?: string;
  },
  delay: (req: IncomingMessage) => Promise<void> = () => Promise.resolve(),
): Promise<{ api: string; requests: () => number; close: () => Promise<void> }> {
  let requests = 0;
  const server = createServer((req, res) => {
    requests += 1;
    void delay(req).then(() => {
      const { status, headers = {}, body, raw } = answer(req);
      res
        .writeHead(status, { 'content-type': 'application/json', ...headers })
        .end(raw ?? (body === undefined ? '' : JSON.stringify(body)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    api: `http://127.0.0.1:${port}/api`,
    requests: () => requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
