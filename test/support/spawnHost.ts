import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { scratchDir } from './scratch';

const root = join(__dirname, '../..');

type Exit = { code: number | null; signal: NodeJS.Signals | null };

export interface SpawnedHost {
  child: ReturnType<typeof launch>['child'];
  url: string;
  output: () => string;
  exited: Promise<Exit>;
}

/**
 * Run `local/main.ts` as `npm start` does, from source (so never a stale build), capturing its output.
 * Its working directory is a fresh temporary one: a host given no path keeps its default `.routelock/`
 * there, not in the checkout.
 */
function launch(env: Record<string, string>) {
  const child = spawn(
    process.execPath,
    ['-r', join(root, 'scripts/ts-register.js'), join(root, 'local/main.ts')],
    {
      cwd: scratchDir('host-'),
      env: { PATH: process.env.PATH ?? '', PORT: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const captured = { text: '' };
  child.stdout.on('data', (d: Buffer) => (captured.text += d.toString()));
  child.stderr.on('data', (d: Buffer) => (captured.text += d.toString()));
  const exited = new Promise<Exit>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, captured, exited };
}

/** Start the host and wait for the URL its banner prints. */
export function spawnHost(env: Record<string, string>): Promise<SpawnedHost> {
  const { child, captured, exited } = launch(env);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`host did not start:\n${captured.text}`)), 20_000);
    child.stdout.on('data', () => {
      const match = /listening on (http:\/\/\S+)\/api/.exec(captured.text);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve({ child, url: match[1], output: () => captured.text, exited });
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`host exited before listening:\n${captured.text}`));
    });
  });
}

/** Run the host expecting it to exit (bad configuration); resolves with its exit code and output. */
export async function runHostToExit(
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  const { child, captured, exited } = launch(env);
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const { code } = await exited;
  clearTimeout(timer);
  return { code, output: captured.text };
}
