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

/** Azurite's blob, queue and table services: what the Durable extension's task hub needs. */
export interface AzuriteStorage {
  connectionString: string;
  close(): Promise<void>;
}

/**
 * All three of Azurite's services on free loopback ports, in memory, telemetry off: a storage that
 * outlives the hosts a test starts and stops on it (`ROUTELOCK_FUNCTIONS_STORAGE`), as Azure Storage
 * outlives a deploy. In memory is enough for that: the data lives as long as this process, which the
 * test owns.
 */
export async function startAzurite(): Promise<AzuriteStorage> {
  const workspace = mkdtempSync(join(tmpdir(), 'routelock-azurite-'));
  const bin = join(__dirname, '../../node_modules/azurite/dist/src/azurite.js');
  const services = ['blob', 'queue', 'table'];
  const child: ChildProcess = spawn(
    process.execPath,
    [
      bin,
      ...services.flatMap((s) => [`--${s}Host`, '127.0.0.1', `--${s}Port`, '0']),
      '--inMemoryPersistence',
      '--disableTelemetry',
      '--skipApiVersionCheck',
      '--silent',
    ],
    { cwd: workspace, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const ports = await new Promise<string[]>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`azurite did not start:\n${output}`)), 30_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      const found = services.map(
        (s) =>
          new RegExp(`${s} service is successfully listening at http://127\\.0\\.0\\.1:(\\d+)`, 'i').exec(
            output,
          )?.[1],
      );
      if (found.every((p) => p !== undefined)) {
        clearTimeout(timer);
        resolve(found as string[]);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', () => reject(new Error(`azurite exited:\n${output}`)));
  });
  const endpoints = services
    .map((s, i) => `${s[0]?.toUpperCase()}${s.slice(1)}Endpoint=http://127.0.0.1:${ports[i]}/${ACCOUNT};`)
    .join('');
  return {
    connectionString: `DefaultEndpointsProtocol=http;AccountName=${ACCOUNT};AccountKey=${KEY};${endpoints}`,
    async close() {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      rmSync(workspace, { recursive: true, force: true });
    },
  };
}
