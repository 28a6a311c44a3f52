import { type ChildProcess, fork, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { median, table } from './lib';
import type { LoadJob, LoadResult } from './loadgen';

/**
 * HTTP resolve: GET /api/routes/{id} on the embedded host (the real handler, router and SQLite store,
 * logging its access log to a file as `npm start` does), the same host with the synchronous JSON log it
 * had before pino, the same host adapter with an empty handler (the framework floor), and bare node:http
 * answering the same JSON (the ceiling). Every server and every load generator (bench/loadgen.ts,
 * autocannon) is a process of its own; each round runs every server in turn with the same connections
 * and duration, so the ratios to bare are taken side by side, per round.
 *
 * The generator is shown not to be the bottleneck two ways: its own CPU (process.cpuUsage in the child;
 * 1 = one core), beside the server's (from /proc), and bare measured again with two generators sharing
 * the connections: if one generator were the limit, two would serve more.
 *
 * On a shared machine neither may reach its ceiling (one core: node:http serves on one thread), so the
 * table also gives each server's CPU per request and bare's ÷ it: the share of bare's throughput the
 * server reaches when both are held to a core, whatever the other work on the machine left them.
 */

const root = join(__dirname, '..');
const tsRegister = join(root, 'scripts/ts-register.js');

type Mode = 'host' | 'hostSyncLog' | 'empty' | 'bare';
const modes: readonly Mode[] = ['host', 'hostSyncLog', 'empty', 'bare'];

interface Server {
  child: ChildProcess;
  url: string;
  body: string;
}

function startServer(mode: Mode, logFile: string, body?: string): Promise<Server> {
  const log = openSync(logFile, 'w');
  const serverMode = mode === 'hostSyncLog' ? 'host' : mode;
  const child = spawn(
    process.execPath,
    ['-r', tsRegister, join(root, 'testkit/servers.ts'), serverMode, ...(body ? [body] : [])],
    {
      cwd: root,
      env: { ...process.env, ROUTELOCK_BENCH_LOG: mode === 'hostSyncLog' ? 'sync' : 'host' },
      // stdout is the host's log, as `npm start > file` writes it; READY comes over IPC.
      stdio: ['ignore', log, 'inherit', 'ipc'],
    },
  );
  closeSync(log);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${mode} server did not start`)), 60_000);
    child.once('message', (message: string) => {
      const match = /^READY (\S+) (.*)$/s.exec(message);
      clearTimeout(timer);
      if (match?.[1] && match[2]) resolve({ child, url: match[1], body: match[2] });
      else reject(new Error(`${mode} server said ${message}`));
    });
    child.once('exit', () => reject(new Error(`${mode} server exited`)));
  });
}

async function stop(child: ChildProcess): Promise<void> {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

/** One load generator process running one job. */
function generate(job: LoadJob): Promise<LoadResult> {
  const child = fork(join(__dirname, 'loadgen.ts'), [], { execArgv: ['-r', tsRegister], stdio: 'inherit' });
  return new Promise((resolve, reject) => {
    child.once('message', (message: { result?: LoadResult; error?: string }) =>
      message.result ? resolve(message.result) : reject(new Error(message.error)),
    );
    child.once('exit', (code) => reject(new Error(`load generator exited (${code})`)));
    child.send(job);
  });
}

/** A process's user + system CPU so far, ms (Linux /proc; NaN elsewhere). */
function cpuMsOf(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 (11 and 12 after the command); clock ticks, 100 per second.
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return Number.NaN;
  }
}

interface Measurement {
  requestsPerSecond: number;
  p99ms: number;
  errors: number;
  /** Cores the server used during the measured run (1 = one core all the time). */
  serverCores: number;
  /** Server CPU per request, µs. */
  serverCpuUsPerRequest: number;
  /** Cores the load generator(s) used, summed. */
  generatorCores: number;
  /** The machine's 1-minute load average at the end (others' work shares the cores). */
  loadAverage: number;
}

async function measure(server: Server, connections: number, seconds: number, generators = 1) {
  const before = cpuMsOf(server.child.pid);
  const started = performance.now();
  const share = Math.floor(connections / generators);
  const results = await Promise.all(
    Array.from({ length: generators }, (_, i) =>
      generate({
        url: `${server.url}/api/routes/bench-1`,
        connections: i === 0 ? connections - share * (generators - 1) : share,
        seconds,
      }),
    ),
  );
  const wallMs = performance.now() - started;
  const serverCpuMs = cpuMsOf(server.child.pid) - before;
  const requests = results.reduce((a, r) => a + r.requests, 0);
  return {
    requestsPerSecond: results.reduce((a, r) => a + r.requestsPerSecond, 0),
    p99ms: Math.max(...results.map((r) => r.p99ms)),
    errors: results.reduce((a, r) => a + r.errors, 0),
    serverCores: serverCpuMs / wallMs,
    serverCpuUsPerRequest: (serverCpuMs * 1000) / Math.max(1, requests),
    generatorCores: results.reduce((a, r) => a + r.cpuMs / r.wallMs, 0),
    loadAverage: loadavg()[0] ?? Number.NaN,
  } satisfies Measurement;
}

const countLines = (path: string) => readFileSync(path, 'utf8').split('\n').length - 1;

export async function runHttp(options: {
  seconds: number;
  warmupSeconds: number;
  rounds: number;
  connections: number;
}) {
  const dir = mkdtempSync(join(tmpdir(), 'routelock-bench-http-'));
  const runs: Record<Mode | 'bare2', Measurement[]> = {
    host: [],
    hostSyncLog: [],
    empty: [],
    bare: [],
    bare2: [],
  };
  const ratios: Record<Mode | 'bare2', number[]> = {
    host: [],
    hostSyncLog: [],
    empty: [],
    bare: [],
    bare2: [],
  };
  // Bare's CPU per request ÷ this server's, per round: the share of bare's throughput it would reach
  // with both at their ceiling (one core each), whatever CPU the shared machine left them.
  const cpuRatios: Record<Mode | 'bare2', number[]> = {
    host: [],
    hostSyncLog: [],
    empty: [],
    bare: [],
    bare2: [],
  };
  const logLines: { requests: number; lines: number }[] = [];
  let body: string | undefined;
  try {
    for (let round = 0; round < options.rounds; round += 1) {
      const perRound: Partial<Record<Mode | 'bare2', Measurement>> = {};
      for (const mode of modes) {
        const logFile = join(dir, `${mode}-${round}.log`);
        const server = await startServer(
          mode,
          logFile,
          mode === 'host' || mode === 'hostSyncLog' ? undefined : body,
        );
        body ??= server.body;
        if (options.warmupSeconds > 0) await measure(server, options.connections, options.warmupSeconds);
        const linesBefore = countLines(logFile);
        perRound[mode] = await measure(server, options.connections, options.seconds);
        if (mode === 'bare') perRound.bare2 = await measure(server, options.connections, options.seconds, 2);
        await stop(server.child);
        // Stopped by SIGTERM: every request of the measured run is in the log (flushed on shutdown).
        if (mode === 'host')
          logLines.push({
            requests: Math.round(perRound.host!.requestsPerSecond * options.seconds),
            lines: countLines(logFile) - linesBefore,
          });
      }
      const bare = perRound.bare!;
      for (const [mode, m] of Object.entries(perRound) as [Mode | 'bare2', Measurement][]) {
        runs[mode].push(m);
        ratios[mode].push(m.requestsPerSecond / bare.requestsPerSecond);
        cpuRatios[mode].push(bare.serverCpuUsPerRequest / m.serverCpuUsPerRequest);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  const range = (values: number[], digits = 0) => {
    const f = (v: number) => (digits === 0 ? Math.round(v).toLocaleString('en-US') : v.toFixed(digits));
    return values.length > 1
      ? `${f(Math.min(...values))}–${f(Math.max(...values))}`
      : f(values[0] ?? Number.NaN);
  };
  const summarize = (list: Measurement[], ratioList: number[], cpuRatioList: number[]) => ({
    requestsPerSecond: median(list.map((r) => r.requestsPerSecond)),
    p99ms: median(list.map((r) => r.p99ms)),
    errors: list.reduce((a, r) => a + r.errors, 0),
    serverCores: median(list.map((r) => r.serverCores)),
    serverCpuUsPerRequest: median(list.map((r) => r.serverCpuUsPerRequest)),
    generatorCores: median(list.map((r) => r.generatorCores)),
    vsBare: median(ratioList),
    vsBareByCpu: median(cpuRatioList),
  });
  const summary = Object.fromEntries(
    (Object.keys(runs) as (Mode | 'bare2')[]).map((mode) => [
      mode,
      summarize(runs[mode], ratios[mode], cpuRatios[mode]),
    ]),
  ) as Record<Mode | 'bare2', ReturnType<typeof summarize>>;
  const labels: Record<Mode | 'bare2', string> = {
    host: 'embedded host (real handler, router, SQLite; pino log)',
    hostSyncLog: 'same host, the synchronous JSON log (before)',
    empty: 'same host adapter, empty handler',
    bare: 'bare node:http, same JSON (the ceiling)',
    bare2: 'bare node:http, 2 load generators',
  };
  const text = table(
    [
      'server (GET /api/routes/{id})',
      'requests/s (median)',
      'range',
      '÷ bare (median, range)',
      'p99 ms',
      'server cores',
      'server µs CPU/req',
      "bare's CPU/req ÷ this (range)",
      'generator cores',
      'errors',
    ],
    (Object.keys(labels) as (Mode | 'bare2')[]).map((mode) => {
      const s = summary[mode];
      return [
        labels[mode],
        Math.round(s.requestsPerSecond),
        range(runs[mode].map((r) => r.requestsPerSecond)),
        `${s.vsBare.toFixed(3)} (${range(ratios[mode], 3)})`,
        s.p99ms,
        s.serverCores,
        s.serverCpuUsPerRequest,
        `${s.vsBareByCpu.toFixed(3)} (${range(cpuRatios[mode], 3)})`,
        s.generatorCores,
        s.errors,
      ];
    }),
  );
  const loads = Object.values(runs).flatMap((list) => list.map((m) => m.loadAverage));
  const note = `\n\n${options.rounds} round(s) × ${options.seconds} s, ${options.connections} connections, one autocannon process per load generator; machine load average ${range(loads, 1)} on ${cpus().length} cores. Access log lines written by the host ÷ its requests: ${range(
    logLines.map((l) => l.lines / Math.max(1, l.requests)),
    3,
  )}.`;
  return {
    table: text + note,
    data: {
      ...options,
      runs,
      ratios,
      cpuRatios,
      summary,
      logLines,
      hostVsBare: summary.host.vsBare,
      hostVsBareByCpu: summary.host.vsBareByCpu,
    },
  };
}
