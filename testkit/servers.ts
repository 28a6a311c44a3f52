import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startLocalHost } from '../local/host';
import { type LogLine, createLocalServer } from '../local/server';

/**
 * The three HTTP servers the resolve benchmark compares, one per process (`node … servers.ts MODE`):
 *  host  — the embedded host: GET /api/routes/{id} through the real handler, router and SQLite store;
 *  empty — the same host adapter (HttpRequest/InvocationContext per request) with an empty handler that
 *          answers the same JSON: the framework floor;
 *  bare  — node:http answering the same JSON from memory.
 * Says `READY <url> <json>` once listening: by IPC when started with a channel (bench/http.ts, whose host
 * logs to stdout), else on stdout. ROUTELOCK_BENCH_LOG picks the host's log: `quiet` (the default: no
 * log), `host` (the host's own access log, as `npm start` writes it), or `sync` (the synchronous JSON line
 * per request the host wrote before pino, kept to measure the difference).
 */

const mode = process.argv[2];
const quiet = () => undefined;
const syncJsonLine: LogLine = (level, message, fields) => {
  process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), level, message, ...fields })}\n`);
};
const hostLogs: Record<string, LogLine | undefined> = { quiet, host: undefined, sync: syncJsonLine };
function logOption(name: string): { log?: LogLine } {
  if (!(name in hostLogs)) throw new Error(`unknown ROUTELOCK_BENCH_LOG ${name}`);
  const log = hostLogs[name];
  return log ? { log } : {};
}
const ready = (url: string, body: string) => {
  if (process.send) process.send(`READY ${url} ${body}`);
  else process.stdout.write(`READY ${url} ${body}\n`);
};

async function main(): Promise<void> {
  if (mode === 'host') {
    const host = await startLocalHost({
      // argv[3]: an SQLite file (the soak uses one, so stored data does not count as resident memory)
      env: {
        PORT: '0',
        ROUTELOCK_SQLITE_PATH: process.argv[3] ?? ':memory:',
        ROUTELOCK_PROFILE: 'production',
      },
      ...logOption(process.env.ROUTELOCK_BENCH_LOG ?? 'quiet'),
    });
    await host.services.router.createRoute('bench-1', { region: 'westeurope', account: 'acct01' });
    const body = await (await fetch(`${host.url}/api/routes/bench-1`)).text();
    ready(host.url, body);
    return;
  }
  const body = process.argv[3] ?? '{}';
  const headers = {
    'Content-Type': 'application/json',
    'Cache-Control': 'private, max-age=60',
    ETag: '"bench"',
  };
  if (mode === 'empty') {
    const server = createLocalServer({
      endpoints: [
        {
          name: 'getRoute',
          methods: ['GET'],
          route: 'routes/{id}',
          authLevel: 'function',
          role: 'Routes.Read',
          handler: async () => ({ status: 200, headers, body }),
        },
      ],
      log: quiet,
    });
    server.listen(0, '127.0.0.1', () => {
      ready(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, body);
    });
    return;
  }
  if (mode === 'bare') {
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { ...headers, 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
    });
    server.listen(0, '127.0.0.1', () => {
      ready(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, body);
    });
    return;
  }
  throw new Error(`unknown mode ${mode}`);
}

void main();
