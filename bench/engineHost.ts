import { type ChildProcess, spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../testkit/freePort';

/**
 * The processes the real-engine benchmark (bench/durableEngine.ts) measures: `npm run start:functions`
 * (Azurite, the Node worker stand-in, the WebJobs host) on free ports with a task hub of its own, and the
 * embedded host (bench/campaignHost.ts) beside it; plus what is read from them: each process's CPU time
 * (/proc/<pid>/stat) and the task hub's History and Instances tables in Azurite (the engine's own record
 * of every episode, activity and timer), read over Azurite's Table REST API with Shared Key Lite.
 */

const root = join(__dirname, '..');
const KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';
const ACCOUNT = 'devstoreaccount1';

export interface EngineHost {
  api: string;
  taskHub: string;
  tablePort: number;
  /** The three processes' ids, for their CPU time. */
  pids: { azurite: number; worker: number; host: number };
  output: () => string;
  stop: () => Promise<void>;
}

/**
 * The machine's environment without the app's settings (the .NET SDK and NuGet read theirs from it; the
 * app's come from the caller alone, so a developer's shell cannot change what is measured).
 */
function machineEnv(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(process.env).filter(
      (entry): entry is [string, string] =>
        entry[1] !== undefined && !/^(ROUTELOCK_|COSMOS_|PORT$|AzureWebJobs)/.test(entry[0]),
    ),
  );
}

function waitFor(child: ChildProcess, text: () => string, pattern: RegExp, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setInterval(() => {
      if (pattern.test(text())) done(undefined);
      else if (child.exitCode !== null) done(new Error(`exited before it was ready:\n${text()}`));
    }, 100);
    const deadline = setTimeout(() => done(new Error(`not ready in ${timeoutMs} ms:\n${text()}`)), timeoutMs);
    const done = (error: Error | undefined) => {
      clearInterval(timer);
      clearTimeout(deadline);
      if (error) reject(error);
      else resolve();
    };
  });
}

const pidOf = (output: string, name: string): number =>
  Number(new RegExp(`${name} started \\(pid (\\d+)\\)`).exec(output)?.[1] ?? 0);

/** `npm run start:functions` on a free port, dev timing, its own task hub and SQLite file. */
export async function startEngine(env: Record<string, string> = {}): Promise<EngineHost> {
  const dir = mkdtempSync(join(tmpdir(), 'routelock-engine-'));
  const taskHub = `bench${Date.now().toString(36)}`;
  const child = spawn(process.execPath, [join(root, 'scripts/start-functions.js')], {
    cwd: dir,
    env: {
      ...machineEnv(),
      PORT: String(await freePort()),
      ROUTELOCK_SQLITE_PATH: join(dir, 'routelock.db'),
      ROUTELOCK_TASK_HUB: taskHub,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout?.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (text += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await waitFor(child, () => text, /API base (\S+)/, 600_000);
  return {
    api: /API base (\S+)/.exec(text)?.[1] ?? '',
    taskHub,
    tablePort: Number(/table (\d+)/.exec(text)?.[1]),
    pids: {
      azurite: pidOf(text, 'azurite'),
      worker: pidOf(text, 'worker'),
      host: pidOf(text, 'webjobs host'),
    },
    output: () => text,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface EmbeddedHost {
  api: string;
  pid: number;
  stop: () => Promise<void>;
}

/** The embedded host (`npm start`'s), dev timing, in a process of its own (bench/campaignHost.ts). */
export async function startEmbedded(): Promise<EmbeddedHost> {
  const dir = mkdtempSync(join(tmpdir(), 'routelock-embedded-'));
  const child = spawn(
    process.execPath,
    [
      '-r',
      join(root, 'scripts/ts-register.js'),
      join(root, 'bench/campaignHost.ts'),
      join(dir, 'routelock.db'),
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'inherit', 'ipc'] },
  );
  let text = '';
  child.stdout?.on('data', (d: Buffer) => (text += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await waitFor(child, () => text, /^READY (\S+)$/m, 60_000);
  return {
    api: `${/^READY (\S+)$/m.exec(text)?.[1] ?? ''}/api`,
    pid: child.pid ?? 0,
    stop: async () => {
      if (child.exitCode === null) child.send({ close: true });
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A process's user + system CPU time so far, ms (Linux /proc; 0 where there is no /proc). */
export function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime, fields 14 and 15 of stat(5), in clock ticks of 10 ms
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}

/** A process's thread count (Linux /proc; 0 where there is none). */
export function threads(pid: number): number {
  try {
    return Number(/^Threads:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/**
 * Time a process's threads spent runnable but waiting for a CPU so far, ms (the second field of each
 * thread's schedstat): what tells a process starved by the machine from one waiting on something else.
 */
export function runqueueWaitMs(pid: number): number {
  try {
    const tasks = readdirSync(`/proc/${pid}/task`);
    const ns = tasks.reduce((sum, task) => {
      try {
        return sum + Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[1]);
      } catch {
        return sum; // the thread ended between the listing and the read
      }
    }, 0);
    return ns / 1e6;
  } catch {
    return 0;
  }
}

export type TableRow = Record<string, unknown> & { PartitionKey: string; RowKey: string };

/**
 * Every row of one table of the task hub's storage (or those `filter` selects, an OData $filter),
 * following the continuation headers.
 */
export async function readTable(host: EngineHost, table: string, filter?: string): Promise<TableRow[]> {
  const rows: TableRow[] = [];
  const query = filter === undefined ? '' : `$filter=${encodeURIComponent(filter)}`;
  let next = query === '' ? '' : `?${query}`;
  for (;;) {
    const path = `/${ACCOUNT}/${table}()`;
    const date = new Date().toUTCString();
    const signature = createHmac('sha256', Buffer.from(KEY, 'base64'))
      .update(`${date}\n/${ACCOUNT}${path}`)
      .digest('base64');
    const response = await fetch(`http://127.0.0.1:${host.tablePort}${path}${next}`, {
      headers: {
        'x-ms-date': date,
        'x-ms-version': '2019-02-02',
        accept: 'application/json;odata=nometadata',
        authorization: `SharedKeyLite ${ACCOUNT}:${signature}`,
      },
    });
    if (response.status === 404) return rows;
    if (!response.ok) throw new Error(`table ${table}: ${response.status} ${await response.text()}`);
    rows.push(...((await response.json()) as { value: TableRow[] }).value);
    const partition = response.headers.get('x-ms-continuation-nextpartitionkey');
    const row = response.headers.get('x-ms-continuation-nextrowkey');
    if (!partition) return rows;
    next = `?NextPartitionKey=${encodeURIComponent(partition)}&NextRowKey=${encodeURIComponent(row ?? '')}${query === '' ? '' : `&${query}`}`;
  }
}
