import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startLocalHost } from '../local/host';
import { createLocalServer } from '../local/server';

/**
 * The three HTTP servers the resolve benchmark compares, one per process (`node … servers.ts MODE`):
 *  host  — the embedded host: GET /api/routes/{id} through the real handler, router and SQLite store;
 *  empty — the same host adapter (HttpRequest/InvocationContext per request) with an empty handler that
 *          answers the same JSON: the framework floor;
 *  bare  — node:http answering the same JSON from memory.
 * Prints `READY <url> <json>` once listening.
 */

const mode = process.argv[2];
const quiet = () => undefined;

async function main(): Promise<void> {
  if (mode === 'host') {
    const host = await startLocalHost({
      // argv[3]: an SQLite file (the soak uses one, so stored data does not count as resident memory)
      env: {
        PORT: '0',
        ROUTELOCK_SQLITE_PATH: process.argv[3] ?? ':memory:',
        ROUTELOCK_PROFILE: 'production',
      },
      log: quiet,
    });
    await host.services.router.createRoute('bench-1', { region: 'westeurope', account: 'acct01' });
    const body = await (await fetch(`${host.url}/api/routes/bench-1`)).text();
    process.stdout.write(`READY ${host.url} ${body}\n`);
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
      process.stdout.write(`READY http://127.0.0.1:${(server.address() as AddressInfo).port} ${body}\n`);
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
      process.stdout.write(`READY http://127.0.0.1:${(server.address() as AddressInfo).port} ${body}\n`);
    });
    return;
  }
  throw new Error(`unknown mode ${mode}`);
}

void main();
