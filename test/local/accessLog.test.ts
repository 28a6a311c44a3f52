import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { pinoLog } from '../../local/log';
import type { LogLine } from '../../local/server';
import { spawnHost } from '../support/spawnHost';

/** The embedded host's log (local/log.ts): pino, asynchronous, the same JSON fields, flushed on shutdown. */

const root = join(__dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'routelock-accesslog-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function captured(): { log: LogLine; lines: () => Record<string, unknown>[] } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  const { log } = pinoLog(stream);
  return {
    log,
    lines: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

test('a line is {level, time, message, ...fields} with the Functions level names', async () => {
  const { log, lines } = captured();
  log('information', 'GET /api/routes/a 200', { function: 'getRoute', status: 200, ms: 1.5 });
  log('warning', 'w', {});
  log('none', 'never written', {});
  await new Promise((r) => setImmediate(r));
  const [first, second, ...rest] = lines();
  expect(first).toEqual({
    level: 'information',
    time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    message: 'GET /api/routes/a 200',
    function: 'getRoute',
    status: 200,
    ms: 1.5,
  });
  expect(second).toMatchObject({ level: 'warning', message: 'w' });
  expect(rest).toEqual([]);
});

test('a credential-named field is redacted, at the top or one level down', async () => {
  const { log, lines } = captured();
  const secret = 'fencing-token-value-1234';
  log('information', 'm', {
    token: secret,
    'x-functions-key': secret,
    idempotencyKey: secret,
    headers: { authorization: `Bearer ${secret}`, 'x-functions-key': secret },
    status: 200,
  });
  await new Promise((r) => setImmediate(r));
  const text = JSON.stringify(lines());
  expect(text).not.toContain(secret);
  expect(lines()[0]).toMatchObject({
    token: '[redacted]',
    'x-functions-key': '[redacted]',
    headers: { authorization: '[redacted]', 'x-functions-key': '[redacted]' },
  });
  // Negative control: the same fields through a logger without the redaction keep the secret.
  let plain = '';
  pino({ base: undefined }, { write: (s: string) => (plain += s) }).info({ token: secret }, 'm');
  expect(plain).toContain(secret);
});

/** A process that logs `count` lines through the host's stdout log and then ends as `ending` says. */
function logThenEnd(count: number, ending: string): Promise<string> {
  const script = `const { stdoutHostLog } = require('./local/log.ts');
const { log } = stdoutHostLog();
for (let i = 0; i < ${count}; i += 1) log('information', 'line ' + i, { i });
${ending}`;
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      ['-r', join(root, 'scripts/ts-register.js'), '-e', script],
      { cwd: root, timeout: 30_000 },
      (error, stdout) =>
        error && !error.killed && error.signal !== 'SIGKILL' ? reject(error) : resolve(stdout),
    ),
  );
}

test('lines held within the turn are written at exit; the negative control: a kill loses them', async () => {
  const lines = (out: string) => out.split('\n').filter(Boolean);
  // Exiting in the same turn as the logging: only the exit hook can have written them.
  expect(lines(await logThenEnd(1000, 'process.exit(0);'))).toHaveLength(1000);
  // So they really were held: killed in that turn, none is on stdout.
  expect(lines(await logThenEnd(1000, "process.kill(process.pid, 'SIGKILL');"))).toHaveLength(0);
  // Left to run, the next turn writes them.
  expect(
    lines(await logThenEnd(1000, 'setTimeout(() => process.kill(process.pid, "SIGKILL"), 200);')),
  ).toHaveLength(1000);
});

test('the host as a process: every request has its access line on stdout, and after SIGTERM all are there', async () => {
  const host = await spawnHost({ ROUTELOCK_SQLITE_PATH: join(dir, 'host.db') });
  const api = `${host.url}/api`;
  const put = await fetch(`${api}/routes/log-1`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ location: { region: 'westeurope' } }),
  });
  expect(put.status).toBe(201);
  const gets = 50;
  for (let i = 0; i < gets; i += 1) expect((await fetch(`${api}/routes/log-1?i=${i}`)).status).toBe(200);
  host.child.kill('SIGTERM');
  expect(await host.exited).toEqual({ code: 0, signal: null });
  const access = host
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.function === 'getRoute' && l.status === 200);
  expect(access).toHaveLength(gets);
  expect(access[0]).toMatchObject({
    level: 'information',
    message: 'GET /api/routes/log-1 200', // the path: never the query string
    invocationId: expect.any(String),
    ms: expect.any(Number),
  });
});
