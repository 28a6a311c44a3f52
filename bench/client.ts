import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ClientMetrics, RoutingClient } from '../shared/core/client';
import { median, percentileOf, settleGc, table } from './lib';

/**
 * The client's read path, side by side in one run:
 * - cached resolve: `await client.resolve(id)` of a cached unlocked view against `await map.get(id)` of
 *   the same views in a Map, in the same process (the least a service's own in-memory lookup costs),
 *   alternating chunks so both see the same machine state; ns per operation, medians of the chunks;
 * - refresh ahead: two clients (refresh ahead on, the default share, and off) resolve the same unlocked
 *   ids in turn against the embedded host (dev profile: views live 2 s), which runs in its own process;
 *   each resolve's latency, and how many resolves waited on a fetch (the cache could not answer them).
 *   The goal: with refresh ahead, after each id's first fetch no resolve waits.
 */

export interface ClientBenchOptions {
  /** Operations per contender in the cached-resolve comparison (in chunks of `chunk`). */
  ops: number;
  chunk: number;
  /** How long the two clients resolve for, and how many unlocked ids, one resolve per client per `paceMs`. */
  seconds: number;
  ids: number;
  paceMs: number;
}

const SOURCE = { region: 'westeurope' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function viewOf(id: string) {
  return {
    id,
    resourceId: id,
    location: SOURCE,
    secondary: null,
    lock: null,
    enforcement: { read: 'allow', write: 'allow', delete: 'allow' },
    etag: '"1"',
  };
}

/** ns per operation of each contender, chunks alternating, medians. */
async function cachedResolve(options: ClientBenchOptions) {
  const ids = Array.from({ length: 1000 }, (_, i) => `bench-${i}`);
  const client = new RoutingClient({
    baseUrl: 'http://routelock.bench/api',
    refreshAheadShare: 0, // the comparison is the hit itself
    fetch: async (url) => {
      const id = decodeURIComponent(String(url).split('/').pop() ?? '');
      return new Response(JSON.stringify(viewOf(id)), {
        headers: { 'content-type': 'application/json', 'cache-control': 'private, max-age=3600' },
      });
    },
  });
  const map = new Map<string, ReturnType<typeof viewOf>>();
  for (const id of ids) {
    await client.resolve(id);
    map.set(id, viewOf(id));
  }
  const contenders: [string, (id: string) => Promise<unknown>][] = [
    ['await client.resolve(id), cached', (id) => client.resolve(id)],
    ['await map.get(id)', async (id) => map.get(id)],
  ];
  const samples = new Map<string, number[]>(contenders.map(([name]) => [name, []]));
  await settleGc();
  for (let done = 0; done < options.ops; done += options.chunk) {
    for (const [name, op] of contenders) {
      const started = process.hrtime.bigint();
      for (let i = 0; i < options.chunk; i += 1) await op(ids[i % ids.length] as string);
      samples.get(name)!.push(Number(process.hrtime.bigint() - started) / options.chunk);
    }
  }
  return contenders.map(([name]) => ({ name, nsPerOp: median(samples.get(name)!) }));
}

async function spawnDevHost(): Promise<{ url: string; host: ChildProcess; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'routelock-client-bench-'));
  const root = join(__dirname, '..');
  const host = spawn(
    process.execPath,
    ['-r', join(root, 'scripts/ts-register.js'), join(root, 'local/main.ts')],
    {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? '',
        PORT: '0',
        ROUTELOCK_PROFILE: 'dev',
        ROUTELOCK_SQLITE_PATH: join(dir, 'r.db'),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    host.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)\/api/.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    host.once('exit', () => reject(new Error(out)));
  });
  return { url, host, dir };
}

interface Run {
  name: string;
  latencies: number[];
  misses: number;
  requests: number;
  ahead: number;
}

function counted(name: string): { run: Run; metrics: ClientMetrics } {
  const run: Run = { name, latencies: [], misses: 0, requests: 0, ahead: 0 };
  return {
    run,
    metrics: {
      cacheMiss: () => (run.misses += 1),
      request: () => (run.requests += 1),
      refreshAhead: () => (run.ahead += 1),
    },
  };
}

/** The two clients resolving the same ids in turn against a host in its own process. */
async function refreshAhead(options: ClientBenchOptions): Promise<Run[]> {
  const { url, host, dir } = await spawnDevHost();
  try {
    const on = counted('refresh ahead (share 0.2, the default)');
    const off = counted('without (refreshAheadShare 0)');
    const clients = [
      { ...on, client: new RoutingClient({ baseUrl: `${url}/api`, metrics: on.metrics }) },
      {
        ...off,
        client: new RoutingClient({ baseUrl: `${url}/api`, metrics: off.metrics, refreshAheadShare: 0 }),
      },
    ];
    const ids = Array.from({ length: options.ids }, (_, i) => `bench-${i}`);
    const writer = new RoutingClient({ baseUrl: `${url}/api` });
    for (const id of ids) await writer.putRoute(id, SOURCE);
    const end = Date.now() + options.seconds * 1000;
    for (let i = 0; Date.now() < end; i += 1) {
      const id = ids[i % ids.length] as string;
      for (const { client, run } of i % 2 === 0 ? clients : [...clients].reverse()) {
        const started = performance.now();
        await client.resolve(id);
        run.latencies.push(performance.now() - started);
      }
      await sleep(options.paceMs);
    }
    for (const c of clients) c.run.latencies.sort((a, b) => a - b);
    // the first fetch of each id is a miss for either client: not a wait for a refresh
    return clients.map((c) => ({ ...c.run, misses: c.run.misses - options.ids }));
  } finally {
    host.kill('SIGTERM');
    await new Promise((r) => host.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function runClient(options: ClientBenchOptions) {
  const cached = await cachedResolve(options);
  const runs = await refreshAhead(options);
  const ms = (v: number) => v.toFixed(3);
  const first = table(
    ['cached, unlocked, one at a time', 'ns/op (median of chunks)', '÷ await map.get'],
    cached.map((c) => [c.name, Math.round(c.nsPerOp), (c.nsPerOp / cached[1]!.nsPerOp).toFixed(2)]),
  );
  const second = table(
    [
      `${options.ids} unlocked ids, ${options.seconds} s, views live 2 s`,
      'resolves',
      'waited on a fetch (after the first)',
      'refreshes ahead',
      'requests',
      'p50 / p99 / p99.9 / max ms',
    ],
    runs.map((r) => [
      r.name,
      r.latencies.length,
      r.misses,
      r.ahead,
      r.requests,
      [50, 99, 99.9, 100].map((p) => ms(percentileOf(r.latencies, p))).join(' / '),
    ]),
  );
  return {
    table: `${first}\n\n${second}`,
    data: {
      cached,
      runs: runs.map((r) => ({
        name: r.name,
        resolves: r.latencies.length,
        waited: r.misses,
        refreshesAhead: r.ahead,
        requests: r.requests,
        p50: percentileOf(r.latencies, 50),
        p99: percentileOf(r.latencies, 99),
        p999: percentileOf(r.latencies, 99.9),
        max: percentileOf(r.latencies, 100),
      })),
    },
  };
}
