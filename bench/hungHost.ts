import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * The client against a hung routing service: the embedded host (from source) is stopped with SIGSTOP,
 * and ten concurrent workers call `decideFor` on ids never cached (10 ms apart) for 10 s with the client's
 * defaults.
 * Reports the calls answered, their p99 and the client's sockets to the host (peak and at the end, any
 * TCP state, from /proc/net/tcp). The client is the given checkout's (default this one), so a run
 * against another checkout is the "before".
 *   node -r ./scripts/ts-register.js bench/hungHost.ts [checkout]
 */

const WORKERS = 10;
const RUN_MS = 10_000;
/** Each worker's pause between calls: a service's own pace, and no busy loop once calls answer at once. */
const PAUSE_MS = 10;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** This machine's TCP sockets whose remote port is `port` (the client's side), by state. */
function socketsTo(port: number): { all: number; established: number } {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  let all = 0;
  let established = 0;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 4 || !fields[2]!.endsWith(`:${hex}`)) continue;
      all += 1;
      if (fields[3] === '01') established += 1;
    }
  }
  return { all, established };
}

async function main(): Promise<void> {
  const checkout = process.argv[2] ?? join(__dirname, '..');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { RoutingClient } = require(
    join(checkout, 'shared/core/client'),
  ) as typeof import('../shared/core/client');
  const dir = mkdtempSync(join(tmpdir(), 'routelock-hung-'));
  const root = join(__dirname, '..');
  const host = spawn(
    process.execPath,
    ['-r', join(root, 'scripts/ts-register.js'), join(root, 'local/main.ts')],
    {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', PORT: '0', ROUTELOCK_SQLITE_PATH: join(dir, 'r.db') },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    host.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)\/api/.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    host.once('exit', () => reject(new Error(out)));
  });
  const port = Number(new URL(url).port);
  const t0 = Date.now();
  const sentAt: number[] = [];
  const client = new RoutingClient({
    baseUrl: `${url}/api`,
    fetch: (input, init) => (sentAt.push(Date.now() - t0), fetch(input, init)),
  });
  await client.ready();
  host.kill('SIGSTOP');
  const latencies: number[] = [];
  let peak = 0;
  const end = Date.now() + RUN_MS;
  const sampler = setInterval(() => (peak = Math.max(peak, socketsTo(port).all)), 100);
  try {
    await Promise.all(
      Array.from({ length: WORKERS }, async (_, w) => {
        for (let i = 0; Date.now() < end; i += 1) {
          const started = performance.now();
          await client.decideFor(`hung-${w}-${i}`, 'read', { region: 'westeurope' }).catch(() => undefined);
          latencies.push(performance.now() - started);
          await sleep(PAUSE_MS);
        }
      }),
    );
  } finally {
    clearInterval(sampler);
    const atEnd = socketsTo(port);
    host.kill('SIGCONT');
    host.kill('SIGTERM');
    await new Promise((r) => host.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
    latencies.sort((a, b) => a - b);
    const p = (q: number) =>
      (latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0).toFixed(1);
    process.stdout.write(
      `requests sent at (ms): ${sentAt.join(' ')}\n${checkout}: host SIGSTOPped, ${WORKERS} workers for ${RUN_MS / 1000} s: ${latencies.length} calls answered (${client.requests} requests sent), p50 ${p(0.5)} ms, p99 ${p(0.99)} ms; client sockets to the host: peak ${peak}, at the end ${atEnd.all} (${atEnd.established} established)\n`,
    );
  }
  await sleep(0);
}

void main();
