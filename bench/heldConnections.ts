import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { type Socket, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Soak: the embedded host's RSS while 1,000 connections that send no identity each push a 1 MiB body
 * (ROUTELOCK_AUTH=appservice, so none of them is a caller). The host runs from a build (`dist/`, or the
 * checkout given as the first argument) in its own process; this process is the load. Bounded: every
 * socket is closed after the hold, and the host is stopped.
 *   node -r ./scripts/ts-register.js bench/heldConnections.ts [checkout]
 */

const CONNECTIONS = 1000;
const BODY = 1024 * 1024;
const HOLD_MS = 15_000;

const rssMiB = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const checkout = process.argv[2] ?? join(__dirname, '..');
  const dir = mkdtempSync(join(tmpdir(), 'routelock-soak-'));
  const host = spawn(process.execPath, [join(checkout, 'dist/local/main.js')], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      ROUTELOCK_AUTH: 'appservice',
      ROUTELOCK_SQLITE_PATH: join(dir, 'r.db'),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    host.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on http:\/\/([^/\s]+)\/api/.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    host.once('exit', () => reject(new Error(out)));
  });
  const [hostname, port] = url.split(':') as [string, string];
  await sleep(1000);
  const before = rssMiB(host.pid!);
  const sockets: Socket[] = [];
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  let refused = 0;
  for (let i = 0; i < CONNECTIONS; i += 1) {
    const s = connect({ host: hostname, port: Number(port) });
    s.on('error', () => undefined);
    s.on('close', () => (refused += 1));
    s.write(
      `POST /api/routes/soak-${i}/prelock HTTP/1.1\r\nHost: ${url}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
    );
    for (let sent = 0; sent < BODY; sent += chunk.length) {
      s.write(`${chunk.length.toString(16)}\r\n`);
      s.write(chunk);
      s.write('\r\n');
    }
    sockets.push(s);
  }
  let during = 0;
  for (let t = 0; t < HOLD_MS; t += 250) {
    await sleep(250);
    during = Math.max(during, rssMiB(host.pid!));
  }
  const closedByHost = refused;
  for (const s of sockets) s.destroy();
  await sleep(3000);
  const after = rssMiB(host.pid!);
  host.kill('SIGTERM');
  await new Promise((r) => host.once('exit', r));
  rmSync(dir, { recursive: true, force: true });
  process.stdout.write(
    `${CONNECTIONS} connections, no identity, 1 MiB chunked body each: host RSS before ${before.toFixed(0)} MiB, peak during ${during.toFixed(0)} MiB, after close ${after.toFixed(0)} MiB; ${closedByHost} closed by the host during the hold\n`,
  );
}

void main();
