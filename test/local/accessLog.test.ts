import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { pinoLog } from '../../local/log';
import type { LogLine } from '../../local/server';
import { spawnHost } from '../support/spawnHost';

/** The embedded host's log (local/log.ts): pino, asynchronous, the same JSON fields, flushed on shutdown. */

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
  log('information', 'm', { token: secret, headers: { authorization: `Bearer ${secret}` }, status: 200 });
  await new Promise((r) => setImmediate(r));
  const text = JSON.stringify(lines());
  expect(text).not.toContain(secret);
  expect(lines()[0]).toMatchObject({ token: '[redacted]', headers: { authorization: '[redacted]' } });
  // Negative control: the same fields through a logger without the redaction keep the secret.
  let plain = '';
  pino({ base: undefined }, { write: (s: string) => (plain += s) }).info({ token: secret }, 'm');
  expect(plain).toContain(secret);
});

test('the asynchronous destination holds lines until flushed: flush() writes them out', () => {
  const path = join(dir, 'buffered.log');
  // minLength keeps every line in memory until a flush, as a busy event loop would.
  const destination = pino.destination({ dest: path, sync: false, minLength: 16_000 });
  const { log, flush } = pinoLog(destination, () => destination.flushSync());
  for (let i = 0; i < 100; i += 1) log('information', `line ${i}`, {});
  return new Promise<void>((resolve) => destination.once('ready', resolve)).then(() => {
    expect(readFileSync(path, 'utf8')).toBe(''); // the negative control: nothing written yet
    flush();
    expect(readFileSync(path, 'utf8').split('\n').filter(Boolean)).toHaveLength(100);
    destination.end();
  });
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
