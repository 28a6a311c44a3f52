import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Azurite's queue service from the `azurite` npm package, on a free loopback port, in memory, with
 * telemetry off (it would phone home otherwise).
 */
export interface AzuriteQueue {
  connectionString: string;
  close(): Promise<void>;
}

const ACCOUNT = 'devstoreaccount1';
// Azurite's published development-storage key (not a secret; it only opens the local emulator).
const KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

export async function startAzuriteQueue(): Promise<AzuriteQueue> {
  const workspace = mkdtempSync(join(tmpdir(), 'routelock-azurite-'));
  const bin = join(__dirname, '../../node_modules/azurite/dist/src/queue/main.js');
  const child: ChildProcess = spawn(
    process.execPath,
    [
      bin,
      '--queuePort',
      '0',
      '--queueHost',
      '127.0.0.1',
      '--inMemoryPersistence',
      '--disableTelemetry',
      '--skipApiVersionCheck',
      '--silent',
    ],
    { cwd: workspace, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`azurite did not start:\n${output}`)), 30_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      const match = /listens on http:\/\/127\.0\.0\.1:(\d+)/.exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', () => reject(new Error(`azurite exited:\n${output}`)));
  });
  return {
    connectionString: `DefaultEndpointsProtocol=http;AccountName=${ACCOUNT};AccountKey=${KEY};QueueEndpoint=http://127.0.0.1:${port}/${ACCOUNT};`,
    async close() {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      rmSync(workspace, { recursive: true, force: true });
    },
  };
}

/** Azurite's blob, queue and table services: what the Durable extension keeps a task hub in. */
export interface AzuriteStorage {
  connectionString: string;
  pid: number;
  close(): Promise<void>;
}

/**
 * Azurite's three services on free loopback ports with telemetry off: a storage that outlives the hosts a
 * test starts and stops on it (`ROUTELOCK_FUNCTIONS_STORAGE`), as Azure Storage outlives a deploy or a
 * crash (start:functions' own Azurite dies with it). With a `location` (the caller's scratch directory) it
 * runs on disk there, and `close` leaves the files; without one, in memory, which lives as long as this
 * Azurite process, owned by the test.
 */
export async function startAzuriteStorage(location?: string): Promise<AzuriteStorage> {
  const workspace = location ?? mkdtempSync(join(tmpdir(), 'routelock-azurite-'));
  const bin = join(__dirname, '../../node_modules/azurite/dist/src/azurite.js');
  const hosts = ['--blobHost', '127.0.0.1', '--queueHost', '127.0.0.1', '--tableHost', '127.0.0.1'];
  const ports = ['--blobPort', '0', '--queuePort', '0', '--tablePort', '0'];
  const persistence = location === undefined ? ['--inMemoryPersistence'] : ['--location', location];
  const flags = [...persistence, '--disableTelemetry', '--skipApiVersionCheck', '--silent'];
  const child: ChildProcess = spawn(process.execPath, [bin, ...hosts, ...ports, ...flags], {
    cwd: workspace,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const ready =
    /Blob service is successfully listening at http:\/\/127\.0\.0\.1:(\d+)[\s\S]*Queue service is successfully listening at http:\/\/127\.0\.0\.1:(\d+)[\s\S]*Table service is successfully listening at http:\/\/127\.0\.0\.1:(\d+)/;
  const [blob, queue, table] = await new Promise<string[]>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`azurite did not start:\n${output}`)), 60_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      const match = ready.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match.slice(1));
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', () => reject(new Error(`azurite exited:\n${output}`)));
  });
  const endpoint = (kind: string, port: string | undefined) =>
    `${kind}Endpoint=http://127.0.0.1:${port}/${ACCOUNT};`;
  return {
    connectionString: `DefaultEndpointsProtocol=http;AccountName=${ACCOUNT};AccountKey=${KEY};${endpoint('Blob', blob)}${endpoint('Queue', queue)}${endpoint('Table', table)}`,
    pid: child.pid ?? 0,
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      if (location === undefined) rmSync(workspace, { recursive: true, force: true });
    },
  };
}
