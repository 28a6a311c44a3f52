import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ScenarioResult } from './scenarios';

/**
 * A bounded soak: mixed resolve and lock traffic at saturation against the embedded host (its own
 * process, on loopback) for a fixed time. Zero errors (no 5xx, no transport failure), and the host's
 * resident memory at the end within 10 % of its level after the warm-up.
 */

const root = join(__dirname, '..');

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? '0');
  return Math.round((kb / 1024) * 10) / 10;
}

export interface SoakResult extends ScenarioResult {
  requests: number;
  errors: number;
  rssAfterWarmupMiB: number;
  rssAtEndMiB: number;
}

export async function soak(options: {
  seconds: number;
  warmupSeconds: number;
  workers: number;
}): Promise<SoakResult> {
  const dataDir = mkdtempSync(join(tmpdir(), 'routelock-soak-'));
  const child = spawn(
    process.execPath,
    [
      '--expose-gc',
      '-r',
      join(root, 'verify/gcOnSignal.js'),
      '-r',
      join(root, 'scripts/ts-register.js'),
      join(root, 'testkit/servers.ts'),
      'host',
      join(dataDir, 'soak.db'),
    ],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const exited = new Promise((r) => child.once('exit', r));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const match = /^READY (\S+)/m.exec(out);
      if (match?.[1]) resolve(match[1]);
    });
    child.once('exit', () => {
      rmSync(dataDir, { recursive: true, force: true });
      reject(new Error('host exited before it was ready'));
    });
  });
  const api = `${url}/api`;
  const json = { 'content-type': 'application/json' };
  let requests = 0;
  let errors = 0;
  let stop = false;
  // While paused, workers finish the request in hand and wait: memory is read with nothing in flight.
  let resume: Promise<void> | null = null;
  const call = async (path: string, init: RequestInit = {}) => {
    try {
      const res = await fetch(`${api}${path}`, init);
      const text = await res.text();
      requests += 1;
      if (res.status >= 500) errors += 1;
      return { ok: res.ok, text };
    } catch {
      errors += 1;
      return undefined;
    }
  };
  const worker = async (w: number) => {
    const id = `soak-${w}`;
    await call(`/routes/${id}`, {
      method: 'PUT',
      headers: json,
      body: JSON.stringify({ location: { region: 'westeurope' } }),
    });
    for (let i = 0; !stop; i += 1) {
      if (resume) await resume;
      if (i % 10 === 9) {
        // a lock cycle: pre-lock, read it on the read path, release
        const res = await call(`/routes/${id}/prelock`, {
          method: 'POST',
          headers: json,
          body: JSON.stringify({ migrationId: `m-${w}-${i}`, owner: 'soak', target: { region: 'eastus' } }),
        });
        const grant = res?.ok ? (JSON.parse(res.text) as { token?: string }) : null;
        await call(`/routes/${id}`);
        if (grant?.token)
          await call(`/routes/${id}/release`, {
            method: 'POST',
            headers: json,
            body: JSON.stringify({ token: grant.token }),
          });
      } else {
        await call(i % 2 ? '/routes/bench-1' : `/routes/${id}`);
      }
    }
  };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  /**
   * Resident memory at a settled point: traffic paused, two full collections in the host (SIGUSR2, see
   * gcOnSignal.js), then the median of five readings. Under load RSS only says where V8's heap growth
   * happens to stand (single readings swung -17 % to +29 % between runs); settled, it shows what is kept.
   */
  const settledRssMiB = async (): Promise<number> => {
    let release = () => {};
    resume = new Promise<void>((r) => (release = r));
    await sleep(300);
    const readings: number[] = [];
    for (let i = 0; i < 2; i += 1) {
      child.kill('SIGUSR2');
      await sleep(200);
    }
    for (let i = 0; i < 5; i += 1) {
      readings.push(rssMiB(child.pid as number));
      await sleep(100);
    }
    resume = null;
    release();
    readings.sort((a, b) => a - b);
    return readings[2] as number;
  };
  let rssAfterWarmupMiB = 0;
  let rssAtEndMiB = 0;
  try {
    const running = Array.from({ length: options.workers }, (_, w) => worker(w));
    await sleep(options.warmupSeconds * 1000);
    rssAfterWarmupMiB = await settledRssMiB();
    await sleep((options.seconds - options.warmupSeconds) * 1000);
    rssAtEndMiB = await settledRssMiB();
    stop = true;
    await Promise.all(running);
  } finally {
    // never leave the host running, even when a worker throws
    stop = true;
    child.kill('SIGTERM');
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
  const grew = rssAtEndMiB > rssAfterWarmupMiB * 1.1;
  return {
    scenario: `soak: ${options.seconds} s mixed resolve + lock traffic`,
    runs: requests,
    violations: errors + (grew ? 1 : 0),
    seed: 0,
    requests,
    errors,
    rssAfterWarmupMiB,
    rssAtEndMiB,
    summary:
      `${requests.toLocaleString('en-US')} requests, ${errors} errors; settled RSS ${rssAfterWarmupMiB} MiB after the ` +
      `warm-up → ${rssAtEndMiB} MiB at the end (${rssAtEndMiB >= rssAfterWarmupMiB ? '+' : ''}${((100 * (rssAtEndMiB - rssAfterWarmupMiB)) / rssAfterWarmupMiB).toFixed(1)} %)`,
    ...(errors || grew
      ? { counterexample: `${errors} error(s); RSS ${rssAfterWarmupMiB} → ${rssAtEndMiB} MiB` }
      : {}),
  };
}
