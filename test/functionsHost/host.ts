import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { poll } from '../support/poll';
import { scratchDir } from '../support/scratch';
import { freePort } from '../../testkit/freePort';

export { freePort };

/**
 * `npm run start:functions` on free ports in a temporary directory, for the suites of test/functionsHost:
 * the app on the real Durable Task extension, Storage Queues and timer extensions (hosts/webjobs), Azurite
 * and the Node worker stand-in. A start costs seconds (the first run also restores and builds the .NET
 * host), so each suite starts one host in its `beforeAll`.
 */

const root = join(__dirname, '../..');

export interface Launched {
  child: ChildProcess;
  output: () => string;
  /** Each output line with the time (epoch ms) it arrived: what a test measures spacing on. */
  lines: () => { at: number; text: string }[];
  exited: Promise<number | null>;
}

/**
 * The machine's environment without the app's settings: the .NET SDK and NuGet read theirs from it
 * (without NUGET_CERT_REVOCATION_MODE a restore on a closed network waits on each package's revocation
 * check: 262 s instead of 16 s), and the app's come from the test alone.
 */
function machineEnv(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(process.env).filter(
      (entry): entry is [string, string] =>
        entry[1] !== undefined && !/^(ROUTELOCK_|COSMOS_|PORT$|AzureWebJobs)/.test(entry[0]),
    ),
  );
}

export function launch(env: Record<string, string>): Launched {
  const dir = scratchDir('functions-');
  const child = spawn(process.execPath, [join(root, 'scripts/start-functions.js')], {
    cwd: dir,
    env: {
      ...machineEnv(),
      ROUTELOCK_SQLITE_PATH: join(dir, 'routelock.db'),
      ROUTELOCK_TASK_HUB: `fnhost${Date.now().toString(36)}`,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  let partial = '';
  const lines: { at: number; text: string }[] = [];
  const take = (d: Buffer) => {
    const chunk = d.toString();
    text += chunk;
    const parts = (partial + chunk).split('\n');
    partial = parts.pop() ?? '';
    const at = Date.now();
    for (const line of parts) lines.push({ at, text: line });
  };
  child.stdout?.on('data', take);
  child.stderr?.on('data', take);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => text, lines: () => lines, exited };
}

export interface FunctionsHost extends Launched {
  /** `http://127.0.0.1:<port>/api` */
  api: string;
  /** `http://127.0.0.1:<port>`: the front door, which also serves the Durable HTTP API */
  origin: string;
  /** Azurite's connection string (the ports the launcher printed) */
  storage: string;
  dataPath: string;
  startedMs: number;
  stop: () => Promise<void>;
}

const KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

function azuriteConnection(output: string): string {
  const [, blob, queue, table] =
    /Azurite \(in memory\) on 127\.0\.0\.1: blob (\d+), queue (\d+), table (\d+)/.exec(output) ?? [];
  const endpoint = (kind: string, port: string | undefined) =>
    `${kind}Endpoint=http://127.0.0.1:${port}/devstoreaccount1;`;
  return `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${KEY};${endpoint('Blob', blob)}${endpoint('Queue', queue)}${endpoint('Table', table)}`;
}

/** Start one host and wait until it listens (the first run's restore and build included). */
export async function startHost(env: Record<string, string> = {}): Promise<FunctionsHost> {
  const port = await freePort();
  const dataPath = join(scratchDir('data-'), 'routelock.db');
  const began = Date.now();
  const host = launch({ PORT: String(port), ROUTELOCK_SQLITE_PATH: dataPath, ...env });
  const api = await poll(
    () => /API base (\S+)/.exec(host.output())?.[1] ?? (host.child.exitCode === null ? '' : 'exited'),
    (value) => value !== '',
    600_000,
  );
  if (api === 'exited') throw new Error(`start:functions exited:\n${host.output()}`);
  const stop = async () => {
    if (host.child.exitCode === null) {
      host.child.kill('SIGTERM');
      await host.exited;
    }
  };
  return {
    ...host,
    api,
    origin: new URL(api).origin,
    storage: azuriteConnection(host.output()),
    dataPath,
    startedMs: Date.now() - began,
    stop,
  };
}

export async function json(
  url: string,
  init?: RequestInit,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url, { ...init, headers: { 'content-type': 'application/json' } });
  const text = await response.text();
  return { status: response.status, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}

/**
 * The launcher's per-run secret, never printed: read from the worker's environment as any process of the
 * same user could (Linux /proc), what the Durable HTTP API and the worker ask for.
 */
export function hostSecret(host: Launched): string {
  const pid = /worker started \(pid (\d+)\)/.exec(host.output())?.[1];
  const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  const entry = environ.find((e) => e.startsWith('ROUTELOCK_HOST_SECRET='));
  if (entry === undefined) throw new Error('the worker has no ROUTELOCK_HOST_SECRET');
  return entry.slice('ROUTELOCK_HOST_SECRET='.length);
}

/** The orchestration's history from the Durable HTTP API on the front door, as the extension tells it. */
export async function history(host: FunctionsHost, instanceId: string): Promise<string> {
  try {
    const code = encodeURIComponent(hostSecret(host));
    const url = `${host.origin}/runtime/webhooks/durabletask/instances/${encodeURIComponent(instanceId)}?showHistory=true&showHistoryOutput=true&showInput=true&code=${code}`;
    const response = await fetch(url);
    return `${response.status} ${await response.text()}`;
  } catch (error) {
    return `(history not read: ${error instanceof Error ? error.message : String(error)})`;
  }
}

/**
 * Run a scenario's checks; when one fails, the failure carries the orchestrations' histories, so a CI
 * failure can be read without running it again.
 */
export async function explained(
  host: FunctionsHost,
  instanceIds: () => string[],
  run: () => Promise<void>,
): Promise<void> {
  try {
    await run();
  } catch (error) {
    const histories = await Promise.all(
      instanceIds().map(async (id) => `--- history of ${id}:\n${await history(host, id)}`),
    );
    const text = histories.join('\n');
    process.stderr.write(`${text}\n`);
    if (error instanceof Error) error.message += `\n${text}`;
    throw error;
  }
}

export const ENDED = ['Completed', 'Failed', 'Cancelled', 'Conflict', 'NoOp'];

/** Poll a migration's status until it ends (or `until` holds), keeping every phase it was seen in. */
export async function watchMigration(
  host: FunctionsHost,
  migrationId: string,
  until: (body: Record<string, unknown>) => boolean = (body) => ENDED.includes(String(body.status)),
  timeoutMs = 90_000,
): Promise<{ body: Record<string, unknown>; phases: string[] }> {
  const phases: string[] = [];
  const body = await poll(
    async () => {
      const read = (await json(`${host.api}/migrations/${encodeURIComponent(migrationId)}`)).body;
      const phase = String(read.phase);
      if (phases[phases.length - 1] !== phase) phases.push(phase);
      return read;
    },
    until,
    timeoutMs,
  );
  return { body, phases };
}
