import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * The client against a hung routing service: the embedded host (from source) is stopped with SIGSTOP,
 * and ten concurrent workers call `decideFor` on ids never cached (10 ms apart) for 10 s with the client's
 * defaults.
 * Reports the calls answered, their p99 and the client's sockets to the host (peak and at the end, any
 * TCP state, from /proc/net/tcp), and, once the breaker has opened (its `metrics.breaker` hook), the p99
 * of the calls begun while it was open (the goal: ≤ 5 ms) and the sockets held meanwhile. The client is the given checkout's (default this one), so a run
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
  // When the breaker first opened (a client without one never reports it).
  let openedAt: number | undefined;
  const client = new RoutingClient({
    baseUrl: `${url}/api`,
    fetch: (input, init) => (sentAt.push(Date.now() - t0), fetch(input, init)),
    ...(supportsMetrics(RoutingClient)
      ? {
          metrics: {
            breaker: (state: { kind: string }) => void (state.kind === 'open' && (openedAt ??= Date.now())),
          },
        }
      : {}),
  });
  await client.ready();
  host.kill('SIGSTOP');
  const latencies: number[] = [];
  /** Calls begun once the breaker had opened: what a service request costs while it stays open. */
  const whileOpen: number[] = [];
  let peak = 0;
  let peakOpen = 0;
  const end = Date.now() + RUN_MS;
  const sampler = setInterval(() => {
    const now = socketsTo(port).all;
    peak = Math.max(peak, now);
    if (openedAt !== undefined) peakOpen = Math.max(peakOpen, now);
  }, 100);
  try {
    await Promise.all(
      Array.from({ length: WORKERS }, async (_, w) => {
        for (let i = 0; Date.now() < end; i += 1) {
          const open = openedAt !== undefined;
          const started = performance.now();
          await client.decideFor(`hung-${w}-${i}`, 'read', { region: 'westeurope' }).catch(() => undefined);
          latencies.push(performance.now() - started);
          if (open) whileOpen.push(performance.now() - started);
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
    whileOpen.sort((a, b) => a - b);
    const at = (list: number[], q: number) =>
      (list[Math.min(list.length - 1, Math.floor(q * list.length))] ?? 0).toFixed(2);
    const p = (q: number) => at(latencies, q);
    const opened =
      openedAt === undefined
        ? 'the breaker never opened'
        : `breaker open after ${openedAt - t0} ms: ${whileOpen.length} calls begun while open, p50 ${at(whileOpen, 0.5)} ms, p99 ${at(whileOpen, 0.99)} ms, max ${at(whileOpen, 1)} ms; sockets to the host while open: peak ${peakOpen}`;
    process.stdout.write(
      `requests sent at (ms): ${sentAt.join(' ')}\n${checkout}: host SIGSTOPped, ${WORKERS} workers for ${RUN_MS / 1000} s: ${latencies.length} calls answered (${client.requests} requests sent), p50 ${p(0.5)} ms, p99 ${p(0.99)} ms; client sockets to the host: peak ${peak}, at the end ${atEnd.all} (${atEnd.established} established)\n${opened}\n`,
    );
  }
  await sleep(0);
}

/** Whether the checkout's client takes `metrics` (a checkout from before the hooks refuses the option). */
function supportsMetrics(client: new (options: never) => unknown): boolean {
  try {
    new (client as unknown as new (o: object) => unknown)({ baseUrl: 'http://127.0.0.1:9/api', metrics: {} });
    return true;
  } catch {
    return false;
  }
}

void main();
