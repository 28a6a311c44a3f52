import autocannon from 'autocannon';

/**
 * The HTTP benchmark's load generator, run in a process of its own (bench/http.ts forks it): inside the
 * benchmark's process autocannon shared one event loop with everything else and capped bare node:http
 * at 20.7 k req/s. It takes one job by IPC, runs autocannon, and answers with the counts and its own CPU
 * time (process.cpuUsage), so the benchmark can show the generator was not the bottleneck.
 */

export interface LoadJob {
  url: string;
  connections: number;
  seconds: number;
}

export interface LoadResult {
  requests: number;
  requestsPerSecond: number;
  p99ms: number;
  errors: number;
  /** Wall-clock length of the run, ms. */
  wallMs: number;
  /** This process's user + system CPU during the run, ms: wallMs ≈ one core fully used. */
  cpuMs: number;
}

async function run(job: LoadJob): Promise<LoadResult> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  const result = await autocannon({
    url: job.url,
    connections: job.connections,
    duration: job.seconds,
    pipelining: 1,
  });
  const used = process.cpuUsage(cpu);
  return {
    requests: result.requests.total,
    requestsPerSecond: result.requests.average,
    p99ms: result.latency.p99,
    errors: result.errors + result.non2xx,
    wallMs: performance.now() - started,
    cpuMs: (used.user + used.system) / 1000,
  };
}

process.once('message', (job: LoadJob) => {
  run(job).then(
    (result) => process.send?.({ result }, () => process.disconnect()),
    (error: unknown) => process.send?.({ error: String(error) }, () => process.disconnect()),
  );
});
