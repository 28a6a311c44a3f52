import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { MessageStore } from '../examples/message-store/service';
import { countWorkItems } from './durableWorkItems';
import {
  type EngineCount,
  type EngineLatency,
  byInstance,
  countEvents,
  latencies,
  meanCount,
} from './engineHistory';
import {
  type EngineHost,
  cpuMs,
  readTable,
  runqueueWaitMs,
  startEmbedded,
  startEngine,
  threads,
} from './engineHost';
import type { LoadAnswer, LoadJob } from './engineLoad';
import { machine, median, percentileOf, table, writeResult } from './lib';

/**
 * `npm run bench:engine`: the migration workflow on the real Durable engine (`npm run start:functions`:
 * the Durable Task extension on Azurite, the WebJobs host, the Node worker stand-in), dev timing.
 *  1. Work items and history events per migration, lock-only and with two participants (example message
 *     stores answering 202 + Location, polled), counted from the task hub's History table, beside the
 *     replay harness's figures for the same case (bench/durableWorkItems.ts, the sizing table's source).
 *  2. Start-to-Completed of a lock-only migration, the real engine and the embedded host (`npm start`'s)
 *     alternating in one run: POST /api/migrations sent → the status poll (every 50 ms) that sees
 *     Completed.
 *  3. Bursts of lock-only migrations started at once (a load generator in its own process,
 *     bench/engineLoad.ts) on each host: migrations/s from the first POST to the last completion, each
 *     process's CPU over the burst, and from the engine's history where the time went (an activity's
 *     queue-to-result time, the control queue's pickup of a result, an episode's length).
 * Options: --tiny (the smoke test), --quick, --counts (the counts alone), --out <dir>.
 */

const FROM = { region: 'westeurope' };
const TO = { region: 'eastus' };
const ENDED = ['Completed', 'Failed', 'Cancelled', 'Conflict', 'NoOp'];
const headers = { 'content-type': 'application/json' };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface EngineBenchOptions {
  /** Migrations counted per case (work items). */
  countRuns: number;
  /** Lock-only migrations timed on each host, alternating. */
  timingRuns: number;
  /** Burst sizes (migrations started at once), each on both hosts. */
  bursts: number[];
  /**
   * The largest burst again on an engine host whose .NET thread pool starts with this many worker
   * threads (DOTNET_ThreadPool_ForceMinWorkerThreads): the control for thread-pool starvation.
   */
  controlMinThreads?: number;
  /** Count the two cases at once (on their two hosts), before anything is timed. */
  overlapCounts?: boolean;
}

let serial = 0;
const resourceId = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${(serial++).toString(36)}`;

async function startOne(api: string, id: string): Promise<{ migrationId: string; instanceId: string }> {
  const put = await fetch(`${api}/routes/${id}`, {
    method: 'PUT',
    headers,
    body: JSON.stringify({ location: FROM }),
  });
  if (put.status !== 201) throw new Error(`PUT /routes/${id}: ${put.status} ${await put.text()}`);
  const post = await fetch(`${api}/migrations`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ resourceId: id, target: TO }),
  });
  const body = (await post.json()) as { migrationId: string; instanceId: string };
  if (post.status !== 202) throw new Error(`POST /migrations: ${post.status} ${JSON.stringify(body)}`);
  return body;
}

async function awaitEnded(
  api: string,
  migrationId: string,
  everyMs = 50,
  timeoutMs = 120_000,
): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const read = await fetch(`${api}/migrations/${encodeURIComponent(migrationId)}`);
    const status = String(((await read.json()) as { status?: string }).status);
    if (ENDED.includes(status)) return status;
    if (Date.now() > deadline)
      throw new Error(`migration ${migrationId} still ${status} after ${timeoutMs} ms`);
    await sleep(everyMs);
  }
}

/**
 * Wait until the engine has ended the orchestrations themselves: a migration's status reads Completed
 * once its outcome activity has recorded it, an episode before the orchestration completes, so a
 * history read at once could miss that last episode.
 */
async function awaitOrchestrations(
  host: EngineHost,
  instanceIds: string[],
  timeoutMs = 120_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const wanted = new Set(instanceIds);
  for (;;) {
    const rows = await readTable(host, `${host.taskHub}Instances`);
    const ended = rows.filter(
      (r) =>
        wanted.has(r.PartitionKey) && ['Completed', 'Failed', 'Terminated'].includes(String(r.RuntimeStatus)),
    );
    if (ended.length === wanted.size) return;
    if (Date.now() > deadline) throw new Error(`${ended.length} of ${wanted.size} orchestrations ended`);
    await sleep(200);
  }
}

/** One migration after another on the host, each counted from the engine's own history. */
async function countCase(host: EngineHost, runs: number, prefix: string) {
  const instanceIds: string[] = [];
  const statuses: string[] = [];
  for (let i = 0; i < runs; i++) {
    const started = await startOne(host.api, resourceId(prefix));
    statuses.push(await awaitEnded(host.api, started.migrationId, 100));
    instanceIds.push(started.instanceId);
  }
  await awaitOrchestrations(host, instanceIds);
  const history = byInstance(await readTable(host, `${host.taskHub}History`));
  const counts = instanceIds.map((id) => countEvents(history.get(id) ?? [], id));
  const others = [...history.keys()].filter((id) => !instanceIds.includes(id));
  const latency = mergeLatency(instanceIds.map((id) => latencies(history.get(id) ?? [])));
  return { statuses, counts, mean: meanCount(counts), otherInstances: others.length, latency };
}

async function participants(dirs: string[]): Promise<MessageStore[]> {
  const stores: MessageStore[] = [];
  for (const name of ['a', 'b']) {
    const dir = mkdtempSync(join(tmpdir(), `routelock-participant-${name}-`));
    dirs.push(dir);
    const store = new MessageStore({
      regions: { westeurope: join(dir, 'we.db'), eastus: join(dir, 'eus.db') },
      honoursPreferWait: false,
      copyDelayMs: 200,
    });
    await store.listen();
    stores.push(store);
  }
  return stores;
}

/** Two participants are the host's settings: a host of their own, started, counted and stopped. */
async function countTwoParticipants(runs: number) {
  const dirs: string[] = [];
  const stores = await participants(dirs);
  const host = await startEngine({
    ROUTELOCK_PARTICIPANTS: JSON.stringify(
      stores.map((s, i) => ({ name: `messages${i + 1}`, url: `${s.url}/migrate` })),
    ),
  });
  try {
    for (const store of stores) store.useRouting(host.api);
    return await countCase(host, runs, 'two');
  } finally {
    await host.stop();
    await Promise.all(stores.map((s) => s.close()));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}

/** Lock-only migrations on both hosts, one at a time, alternating which goes first. */
async function timeBoth(engineApi: string, embeddedApi: string, runs: number) {
  const once = async (api: string) => {
    const id = resourceId('time');
    const began = Date.now();
    const { migrationId } = await startOne(api, id);
    const status = await awaitEnded(api, migrationId);
    return { ms: Date.now() - began, status };
  };
  const engine: number[] = [];
  const embedded: number[] = [];
  const statuses: string[] = [];
  for (let i = 0; i < runs; i++) {
    const order = i % 2 === 0 ? ['engine', 'embedded'] : ['embedded', 'engine'];
    for (const which of order) {
      const run = await once(which === 'engine' ? engineApi : embeddedApi);
      (which === 'engine' ? engine : embedded).push(run.ms);
      statuses.push(run.status);
    }
  }
  return { engine, embedded, statuses, ratioOfMedians: median(engine) / median(embedded) };
}

function load(job: LoadJob): Promise<LoadAnswer> {
  const child = fork(join(__dirname, 'engineLoad.ts'), [], {
    execArgv: ['-r', join(__dirname, '../scripts/ts-register.js')],
  });
  return new Promise((resolve, reject) => {
    child.once('message', (message: { answer?: LoadAnswer; error?: string }) =>
      message.answer ? resolve(message.answer) : reject(new Error(message.error)),
    );
    child.once('exit', (code) => code !== 0 && reject(new Error(`load generator exited ${code}`)));
    child.send(job);
  });
}

/** Poll the host's migration list (every 250 ms, one request) until every id of the burst has ended. */
async function awaitBurst(
  api: string,
  ids: Set<string>,
  timeoutMs: number,
): Promise<{ endedAt: number; statuses: string[] }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const read = await fetch(`${api}/migrations?limit=1000`);
    const body = (await read.json()) as { items?: { migrationId: string; status: string }[] };
    const mine = (body.items ?? []).filter((m) => ids.has(m.migrationId));
    const ended = mine.filter((m) => ENDED.includes(m.status));
    if (ended.length === ids.size) return { endedAt: Date.now(), statuses: ended.map((m) => m.status) };
    if (Date.now() > deadline)
      throw new Error(`burst: ${ended.length} of ${ids.size} ended after ${timeoutMs} ms`);
    await sleep(250);
  }
}

export interface BurstResult {
  host: 'engine' | 'embedded' | 'engine, min threads raised';
  migrations: number;
  seconds: number;
  perSecond: number;
  /** POST answered, ms after the first was sent: p50 / max. */
  postMs: { p50: number; max: number };
  /**
   * Per process over the burst: CPU ms, as a share of one core over the burst's wall time, ms its threads
   * waited for a CPU, and its thread count at the start and at most (sampled every 250 ms).
   */
  cpu: Record<string, { ms: number; cores: number; waitMs: number; threads: [number, number] }>;
  statuses: Record<string, number>;
  latency?: EngineLatency;
  /**
   * After the burst, one instance's history read as the extension reads it before an episode (a query
   * on its PartitionKey), ms (median of 10), and the History table's rows then.
   */
  historyQuery?: { ms: number; rows: number };
}

const tally = (values: string[]) =>
  values.reduce<Record<string, number>>((acc, v) => ({ ...acc, [v]: (acc[v] ?? 0) + 1 }), {});

const quantiles = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return [percentileOf(sorted, 50), percentileOf(sorted, 90), percentileOf(sorted, 99)];
};

async function burst(
  which: BurstResult['host'],
  api: string,
  pids: Record<string, number>,
  size: number,
): Promise<BurstResult & { migrationIds: string[] }> {
  const resourceIds = Array.from({ length: size }, () => resourceId(`burst${size}`));
  const entries = Object.entries(pids);
  const before = Object.fromEntries(entries.map(([name, pid]) => [name, [cpuMs(pid), runqueueWaitMs(pid)]]));
  const threadCounts = Object.fromEntries(entries.map(([name, pid]) => [name, [threads(pid)]]));
  const sampler = setInterval(
    () => entries.forEach(([name, pid]) => threadCounts[name]?.push(threads(pid))),
    250,
  );
  const { answer, endedAt, statuses } = await (async () => {
    try {
      const started = await load({ api, resourceIds, target: TO, from: FROM });
      return {
        answer: started,
        ...(await awaitBurst(api, new Set(started.migrationIds), 120_000 + size * 2_000)),
      };
    } finally {
      clearInterval(sampler);
    }
  })();
  const wall = endedAt - answer.startedAt;
  const posts = answer.answeredAt.map((t) => t - answer.startedAt).sort((a, b) => a - b);
  const cpu = Object.fromEntries(
    entries.map(([name, pid]) => {
      const [cpu0, wait0] = before[name] ?? [0, 0];
      const ms = cpuMs(pid) - (cpu0 ?? 0);
      const counts = threadCounts[name] ?? [0];
      const waitMs = Math.round(runqueueWaitMs(pid) - (wait0 ?? 0));
      return [
        name,
        { ms, cores: ms / wall, waitMs, threads: [counts[0] ?? 0, Math.max(...counts)] as [number, number] },
      ];
    }),
  );
  return {
    host: which,
    migrations: size,
    seconds: wall / 1000,
    perSecond: size / (wall / 1000),
    postMs: { p50: percentileOf(posts, 50), max: posts[posts.length - 1] ?? 0 },
    cpu,
    statuses: tally(statuses),
    migrationIds: answer.migrationIds,
  };
}

function mergeLatency(list: EngineLatency[]): EngineLatency {
  return {
    activityMs: list.flatMap((l) => l.activityMs),
    pickupMs: list.flatMap((l) => l.pickupMs),
    episodeMs: list.flatMap((l) => l.episodeMs),
    timerLateMs: list.flatMap((l) => l.timerLateMs),
  };
}

/** What one episode's history load costs Azurite with the table as it is now (see BurstResult). */
async function historyQuery(host: EngineHost, instanceId: string): Promise<{ ms: number; rows: number }> {
  const table = `${host.taskHub}History`;
  const times: number[] = [];
  for (let i = 0; i < 10; i++) {
    const began = performance.now();
    await readTable(host, table, `PartitionKey eq '${instanceId}'`);
    times.push(performance.now() - began);
  }
  return { ms: median(times), rows: (await readTable(host, table)).length };
}

/** The engine's history of a burst's instances (instance id = `migrate-<resourceId>`), where the time went. */
async function burstLatency(host: EngineHost, resourceIds: string[]): Promise<EngineLatency> {
  await awaitOrchestrations(
    host,
    resourceIds.map((id) => `migrate-${id}`),
  );
  const history = byInstance(await readTable(host, `${host.taskHub}History`));
  return mergeLatency(resourceIds.map((id) => latencies(history.get(`migrate-${id}`) ?? [])));
}

async function resourcesOf(api: string, migrationIds: string[]): Promise<string[]> {
  return Promise.all(
    migrationIds.map(async (id) => {
      const read = await fetch(`${api}/migrations/${encodeURIComponent(id)}`);
      return String(((await read.json()) as { resourceId?: string }).resourceId);
    }),
  );
}

/** The control: the same burst on a host whose thread pool starts with `minThreads` worker threads. */
async function controlBurst(minThreads: number, size: number): Promise<BurstResult> {
  const host = await startEngine({ DOTNET_ThreadPool_ForceMinWorkerThreads: minThreads.toString(16) });
  try {
    const { migrationIds, ...row } = await burst('engine, min threads raised', host.api, host.pids, size);
    const ids = await resourcesOf(host.api, migrationIds);
    const query = await historyQuery(host, `migrate-${ids[0]}`);
    return { ...row, latency: await burstLatency(host, ids), historyQuery: query };
  } finally {
    await host.stop();
  }
}

export async function runDurableEngine(options: EngineBenchOptions) {
  const load0 = loadavg()[0] ?? 0;
  const replay = { lockOnly: await countWorkItems({ profile: 'dev', participants: 0 }) };
  const twoReplay = await countWorkItems({ profile: 'dev', participants: 2 });
  const twoReplayAsStore = await countWorkItems({ profile: 'dev', participants: 2, verifyAtOnce: true });
  // Counting measures no time: the smoke test runs both cases at once, to stay short.
  const twoCounted = options.overlapCounts ? countTwoParticipants(options.countRuns) : undefined;
  const two = twoCounted ? undefined : await countTwoParticipants(options.countRuns);
  const [engine, embedded] = await Promise.all([startEngine(), startEmbedded()]);
  try {
    const [lockOnly, twoParticipants] = await Promise.all([
      countCase(engine, options.countRuns, 'lock'),
      twoCounted ?? Promise.resolve(two!),
    ]);
    const timing = await timeBoth(engine.api, embedded.api, options.timingRuns);
    const bursts: BurstResult[] = [];
    for (const size of options.bursts) {
      const onEngine = await burst('engine', engine.api, engine.pids, size);
      const ids = await resourcesOf(engine.api, onEngine.migrationIds);
      const { migrationIds: _engineIds, ...engineRow } = onEngine;
      const query = await historyQuery(engine, `migrate-${ids[0]}`);
      bursts.push({ ...engineRow, latency: await burstLatency(engine, ids), historyQuery: query });
      const { migrationIds: _embeddedIds, ...embeddedRow } = await burst(
        'embedded',
        embedded.api,
        { embedded: embedded.pid },
        size,
      );
      bursts.push(embeddedRow);
    }
    if (options.controlMinThreads !== undefined)
      bursts.push(await controlBurst(options.controlMinThreads, Math.max(...options.bursts)));
    const data = {
      loadAverage: { before: load0, after: loadavg()[0] ?? 0 },
      counts: {
        lockOnly: { engine: lockOnly, replay: replay.lockOnly },
        twoParticipants: { engine: twoParticipants, replay: twoReplay, replayAsStore: twoReplayAsStore },
      },
      timing,
      bursts,
    };
    return { table: render(data), data };
  } finally {
    await engine.stop();
    await embedded.stop();
  }
}

type Counted = { mean: EngineCount; counts: EngineCount[]; statuses: string[]; latency: EngineLatency };

type Replayed = Awaited<ReturnType<typeof countWorkItems>>;

const replayRow = (name: string, replay: Replayed) => [
  name,
  replay.activities,
  replay.timers,
  replay.httpCalls,
  replay.episodes,
  replay.activities + replay.httpCalls,
  replay.workItems,
  replay.schedulerActions,
  '',
  '',
  0,
];

function countRows(name: string, engine: Counted, replay: Replayed, replayAsStore?: Replayed) {
  const spread = (k: keyof EngineCount) => {
    const values = engine.counts.map((c) => c[k]);
    const [lo, hi] = [Math.min(...values), Math.max(...values)];
    return lo === hi ? String(lo) : `${lo}–${hi}`;
  };
  return [
    [
      `${name}, real engine (n=${engine.counts.length}, ${Object.entries(tally(engine.statuses))
        .map(([s, n]) => `${n} ${s}`)
        .join(', ')})`,
      spread('activities'),
      spread('timers'),
      spread('httpCalls'),
      spread('episodes'),
      spread('activityExecutions'),
      spread('workItems'),
      spread('schedulerActions'),
      spread('historyEvents'),
      spread('timersFired'),
      spread('rearmedTimers'),
    ],
    replayRow(`${name}, replay harness (the sizing table)`, replay),
    ...(replayAsStore ? [replayRow(`${name}, replay harness, verify answered at once`, replayAsStore)] : []),
  ];
}

function render(data: {
  counts: Record<string, { engine: Counted; replay: Replayed; replayAsStore?: Replayed }>;
  timing: Awaited<ReturnType<typeof timeBoth>>;
  bursts: BurstResult[];
}): string {
  const counts = table(
    [
      'dev timing',
      'activities',
      'timers',
      'HTTP calls',
      'episodes',
      'activity executions',
      'work items',
      'DTS actions',
      'history events',
      'timers fired',
      'timers re-armed',
    ],
    [
      ...countRows('lock-only', data.counts.lockOnly!.engine, data.counts.lockOnly!.replay),
      ...countRows(
        'two participants',
        data.counts.twoParticipants!.engine,
        data.counts.twoParticipants!.replay,
        data.counts.twoParticipants!.replayAsStore,
      ),
    ],
  );
  const t = data.timing;
  const timing = table(
    ['lock-only, start → Completed, ms', 'n', 'p50', 'min', 'max'],
    [
      [
        'real engine (start:functions)',
        t.engine.length,
        median(t.engine),
        Math.min(...t.engine),
        Math.max(...t.engine),
      ],
      [
        'embedded host (npm start)',
        t.embedded.length,
        median(t.embedded),
        Math.min(...t.embedded),
        Math.max(...t.embedded),
      ],
      ['ratio of medians', '', t.ratioOfMedians, '', ''],
    ],
  );
  const bursts = table(
    [
      'burst',
      'host',
      'seconds',
      'migrations/s',
      'POST answered p50 / max ms',
      'process: cores (CPU wait, threads start→max)',
      'ended',
      'one history query after, ms (History rows)',
    ],
    data.bursts.map((b) => [
      b.migrations,
      b.host,
      b.seconds,
      b.perSecond,
      `${b.postMs.p50} / ${b.postMs.max}`,
      Object.entries(b.cpu)
        .map(
          ([name, c]) =>
            `${name} ${c.cores.toFixed(2)} (${(c.waitMs / 1000).toFixed(1)} s, ${c.threads[0]}→${c.threads[1]})`,
        )
        .join(', '),
      Object.entries(b.statuses)
        .map(([s, n]) => `${n} ${s}`)
        .join(', '),
      b.historyQuery ? `${b.historyQuery.ms.toFixed(1)} (${b.historyQuery.rows})` : '',
    ]),
  );
  const latencyRow = (name: string, l: EngineLatency) => [
    name,
    quantiles(l.activityMs).join(' / '),
    quantiles(l.pickupMs).join(' / '),
    quantiles(l.episodeMs).join(' / '),
    `${quantiles(l.timerLateMs).join(' / ')} (min ${Math.min(...l.timerLateMs)})`,
  ];
  const latency = table(
    [
      'real engine, ms p50 / p90 / p99',
      'activity: scheduled → result',
      'result → episode start',
      'episode',
      'timer: FireAt → episode start',
    ],
    [
      latencyRow('lock-only, one at a time', data.counts.lockOnly!.engine.latency),
      latencyRow('two participants, one at a time', data.counts.twoParticipants!.engine.latency),
      ...data.bursts.flatMap((b) =>
        b.latency ? [latencyRow(`burst of ${b.migrations}, ${b.host}`, b.latency)] : [],
      ),
    ],
  );
  return [counts, timing, bursts, latency].join('\n\n');
}

function parseArgs(args: string[]): { options: EngineBenchOptions; out: string } {
  const tiny = args.includes('--tiny');
  const quick = args.includes('--quick');
  const out = args.includes('--out')
    ? (args[args.indexOf('--out') + 1] as string)
    : join(__dirname, 'results');
  // --counts: the work-item counts alone (more migrations per case, nothing timed)
  if (args.includes('--counts')) return { options: { countRuns: 5, timingRuns: 0, bursts: [] }, out };
  const options = tiny
    ? { countRuns: 1, timingRuns: 1, bursts: [3], overlapCounts: true }
    : quick
      ? { countRuns: 2, timingRuns: 5, bursts: [20] }
      : { countRuns: 3, timingRuns: 12, bursts: [50, 100, 200], controlMinThreads: 200 };
  return { options, out };
}

/**
 * The result file keeps each latency list as its summary (n, min, p50, p90, p99, max): a burst of 200
 * records thousands of samples, and the table is what is read.
 */
export function compactLatencies(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(compactLatencies);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, v]) => {
      if (!Array.isArray(v) || !key.endsWith('Ms') || !v.every((x) => typeof x === 'number'))
        return [key, compactLatencies(v)];
      const sorted = [...(v as number[])].sort((a, b) => a - b);
      const [p50, p90, p99] = quantiles(sorted);
      return [key, { n: sorted.length, min: sorted[0], p50, p90, p99, max: sorted[sorted.length - 1] }];
    }),
  );
}

if (require.main === module) {
  const { options, out } = parseArgs(process.argv.slice(2));
  runDurableEngine(options).then(
    ({ table: text, data }) => {
      writeResult(out, {
        name: 'durable-engine',
        machine: machine(),
        quick: options.bursts.length < 3,
        table: text,
        data: compactLatencies(data),
      });
      process.stdout.write(`${text}\n`);
      process.exit(0);
    },
    (error: unknown) => {
      process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
      process.exit(1);
    },
  );
}
