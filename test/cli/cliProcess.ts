import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';

export const root = join(__dirname, '../..');
const bin = join(root, 'bin/routelock.js');

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Run the command line as an operator does: a child process with real argv, its own environment (no
 * ROUTELOCK_* of the test's), its exit code. Asynchronous, so an in-process host keeps serving it.
 */
export function runCli(
  args: readonly string[],
  env: Record<string, string> = {},
  options: { command?: string; commandArgs?: readonly string[]; stdin?: string } = {},
): Promise<CliRun> {
  const child = spawn(options.command ?? process.execPath, [...(options.commandArgs ?? [bin]), ...args], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdin.end(options.stdin ?? '');
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export interface CliHost {
  host: LocalHost;
  /** A scratch directory (the host's SQLite file, the tests' id files). */
  dir: string;
  /** The command line's environment: where the host is. */
  env: Record<string, string>;
  close(): Promise<void>;
}

/** The embedded host the command line talks to (dev timing, SQLite in a scratch directory), these routes at westeurope. */
export async function startCliHost(prefix: string, routes: readonly string[]): Promise<CliHost> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const host = await startLocalHost({
    env: { PORT: '0', ROUTELOCK_SQLITE_PATH: join(dir, 'state.db') },
    log: () => undefined,
  });
  for (const id of routes) {
    const put = await fetch(`${host.url}/api/routes/${id}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ location: { region: 'westeurope' } }),
    });
    if (put.status !== 201) throw new Error(`PUT /api/routes/${id}: ${put.status}`);
  }
  return {
    host,
    dir,
    env: { ROUTELOCK_URL: host.url },
    async close() {
      await host.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
