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
      '-r',
      join(root, 'scripts/ts-register.js'),
      join(root, 'bench/servers.ts'),
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
  const started = Date.now();
  let rssAfterWarmupMiB = 0;
  let rssAtEndMiB = 0;
  // RSS sampled every 500 ms; each end of the comparison is the median of 5 s of samples, so one GC
  // cycle landing on a single reading cannot decide the result.
  const samples: { at: number; mib: number }[] = [];
  const sampler = setInterval(
    () => samples.push({ at: Date.now() - started, mib: rssMiB(child.pid as number) }),
    500,
  );
  const median = (from: number, to: number) => {
    const window = samples.filter((x) => x.at >= from && x.at < to).map((x) => x.mib);
    window.sort((a, b) => a - b);
    return window[Math.floor(window.length / 2)] ?? 0;
  };
  try {
    const running = Array.from({ length: options.workers }, (_, w) => worker(w));
    await new Promise((r) => setTimeout(r, options.seconds * 1000));
    stop = true;
    await Promise.all(running);
    const warm = options.warmupSeconds * 1000;
    rssAfterWarmupMiB = median(warm, warm + 5000);
    rssAtEndMiB = median(options.seconds * 1000 - 5000, Infinity);
  } finally {
    // never leave the host running, even when a worker throws
    stop = true;
    clearInterval(sampler);
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
    ...(errors || grew
      ? { counterexample: `${errors} error(s); RSS ${rssAfterWarmupMiB} → ${rssAtEndMiB} MiB` }
      : {}),
  };
}
