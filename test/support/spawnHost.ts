import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

const root = join(__dirname, '../..');

export interface SpawnedHost {
  child: ChildProcess;
  url: string;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Start the embedded host as `npm start` does (from source, so never a stale build) and wait for its URL. */
export function spawnHost(env: Record<string, string>): Promise<SpawnedHost> {
  const child = spawn(
    process.execPath,
    ['-r', join(root, 'scripts/ts-register.js'), join(root, 'local/main.ts')],
    {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', PORT: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`host did not start:\n${output}`)), 20_000);
    const check = () => {
      const match = /listening on (http:\/\/\S+)\/api/.exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve({ child, url: match[1], output: () => output, exited });
      }
    };
    child.stdout?.on('data', check);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`host exited before listening:\n${output}`));
    });
  });
}

/** Run the host expecting it to exit (bad configuration); resolves with its exit code and output. */
export function runHostToExit(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const child = spawn(
    process.execPath,
    ['-r', join(root, 'scripts/ts-register.js'), join(root, 'local/main.ts')],
    {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', PORT: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    }),
  );
}
