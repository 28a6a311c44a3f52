import autocannon from 'autocannon';
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { median, table } from './lib';

/**
 * HTTP resolve: autocannon against GET /api/routes/{id} on the embedded host, the same host with an
 * empty handler (the framework floor), and bare node:http answering the same JSON. Each server runs in
 * its own process; the rounds alternate the three so all see the same machine.
 */

const root = join(__dirname, '..');

function startServer(
  mode: string,
  body?: string,
): Promise<{ child: ChildProcess; url: string; body: string }> {
  const child = spawn(
    process.execPath,
    [
      '-r',
      join(root, 'scripts/ts-register.js'),
      join(root, 'testkit/servers.ts'),
      mode,
      ...(body ? [body] : []),
    ],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${mode} server did not start`)), 30_000);
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const match = /^READY (\S+) (.*)$/m.exec(out);
      if (match?.[1] && match[2]) {
        clearTimeout(timer);
        resolve({ child, url: match[1], body: match[2] });
      }
    });
    child.once('exit', () => reject(new Error(`${mode} server exited`)));
  });
}

async function stop(child: ChildProcess): Promise<void> {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

async function load(url: string, connections: number, seconds: number) {
  const result = await autocannon({
    url: `${url}/api/routes/bench-1`,
    connections,
    duration: seconds,
    pipelining: 1,
  });
  return {
    requestsPerSecond: result.requests.average,
    p99ms: result.latency.p99,
    errors: result.errors + result.non2xx,
  };
}

export async function runHttp(options: {
  seconds: number;
  warmupSeconds: number;
  rounds: number;
  connections: number;
}) {
  const host = await startServer('host');
  const body = host.body;
  await stop(host.child);
  const modes = ['host', 'empty', 'bare'] as const;
  const runs: Record<string, { requestsPerSecond: number; p99ms: number; errors: number }[]> = {
    host: [],
    empty: [],
    bare: [],
  };
  for (let round = 0; round < options.rounds; round += 1) {
    for (const mode of modes) {
      const server = await startServer(mode, mode === 'host' ? undefined : body);
      await load(server.url, options.connections, options.warmupSeconds);
      (runs[mode] as unknown[]).push(await load(server.url, options.connections, options.seconds));
      await stop(server.child);
    }
  }
  const summary = Object.fromEntries(
    modes.map((mode) => {
      const list = runs[mode] as { requestsPerSecond: number; p99ms: number; errors: number }[];
      return [
        mode,
        {
          requestsPerSecond: median(list.map((r) => r.requestsPerSecond)),
          p99ms: median(list.map((r) => r.p99ms)),
          errors: list.reduce((a, r) => a + r.errors, 0),
        },
      ];
    }),
  ) as Record<(typeof modes)[number], { requestsPerSecond: number; p99ms: number; errors: number }>;
  const vsEmpty = summary.host.requestsPerSecond / summary.empty.requestsPerSecond;
  const vsBare = summary.host.requestsPerSecond / summary.bare.requestsPerSecond;
  const text = table(
    ['server (GET /api/routes/{id})', 'requests/s', 'p99 ms', 'errors', 'host ÷ this'],
    [
      [
        'embedded host (real handler, router, SQLite)',
        Math.round(summary.host.requestsPerSecond),
        summary.host.p99ms,
        summary.host.errors,
        1,
      ],
      [
        'same host, empty handler (framework floor)',
        Math.round(summary.empty.requestsPerSecond),
        summary.empty.p99ms,
        summary.empty.errors,
        vsEmpty,
      ],
      [
        'bare node:http, same JSON',
        Math.round(summary.bare.requestsPerSecond),
        summary.bare.p99ms,
        summary.bare.errors,
        vsBare,
      ],
    ],
  );
  return { table: text, data: { ...options, runs, summary, hostVsEmpty: vsEmpty, hostVsBare: vsBare } };
}
