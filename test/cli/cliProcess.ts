import { spawn } from 'node:child_process';
import { join } from 'node:path';

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
