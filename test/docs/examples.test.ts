import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BlockResult, describeFailures, extractBlocks, runPass } from '../support/docExamples';

/**
 * Every `sh` block of README.md and the guides in docs/, in order, as written, twice in a row against
 * one fresh embedded host per document (the conventions: test/support/docExamples.ts). Needs a build
 * (`dist/`), as `npm test` makes before jest.
 */

const repo = join(__dirname, '../..');
const documents = [
  'README.md',
  ...readdirSync(join(repo, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

interface Host {
  port: number;
  child: ChildProcess;
  output: () => string;
}

/** `node dist/local/main.js` in `dir`, its data there too; resolves once /api/health answers. */
async function startHost(dir: string): Promise<Host> {
  const main = join(repo, 'dist/local/main.js');
  if (!existsSync(main)) throw new Error(`${main} is missing: build first (npx tsc -p tsconfig.build.json)`);
  const port = await freePort();
  const child = spawn(process.execPath, [main], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: dir,
      PORT: String(port),
      ROUTELOCK_SQLITE_PATH: join(dir, 'routelock.db'),
      ROUTELOCK_TOKEN_KEY_FILE: join(dir, 'token-keys.json'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout?.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (text += d.toString()));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the host exited:\n${text}`);
    try {
      if ((await fetch(`http://127.0.0.1:${port}/api/health`)).ok) break;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) throw new Error(`the host did not answer:\n${text}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { port, child, output: () => text };
}

async function stopHost(host: Host): Promise<void> {
  if (host.child.exitCode !== null) return;
  const exited = new Promise((resolve) => host.child.once('exit', resolve));
  host.child.kill('SIGTERM');
  await exited;
}

function summary(file: string, pass: string, results: BlockResult[]): string {
  const lines = results.map((r) => {
    const where = `${file}:${r.block.line}`;
    if (r.state === 'skipped') return `  skipped ${where} doc:${r.block.marker}: ${r.block.reason}`;
    return `  ${r.state} ${where}${r.problem ? ` — ${r.problem}` : ''}`;
  });
  return `${file}, ${pass}: ${results.filter((r) => r.state === 'passed').length} blocks ran\n${lines.join('\n')}`;
}

describe.each(documents)('%s', (file) => {
  const blocks = extractBlocks(readFileSync(join(repo, file), 'utf8'), file);
  const runnable = blocks.filter((b) => !b.marker);

  test('its sh blocks run as written, twice in a row, against one fresh host', async () => {
    if (blocks.length === 0) return;
    const work = mkdtempSync(join(tmpdir(), 'routelock-docs-'));
    const host = runnable.length ? await startHost(join(work)) : undefined;
    try {
      for (const pass of ['first pass', 'second pass']) {
        const results = await runPass(blocks, { repo, work, port: host?.port ?? 0 }, pass.replace(' ', '-'));
        console.log(summary(file, pass, results));
        const failures = describeFailures(results);
        expect({
          file,
          pass,
          failures: failures ? `${failures}\n--- host ---\n${host?.output().slice(-3000)}` : '',
        }).toEqual({
          file,
          pass,
          failures: '',
        });
      }
    } finally {
      if (host) await stopHost(host);
      rmSync(work, { recursive: true, force: true });
    }
  }, 900_000);
});
