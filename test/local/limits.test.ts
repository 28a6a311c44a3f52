import { type Socket, connect } from 'node:net';
import { parseHostConfig } from '../../local/config';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { ConfigError } from '../../shared/config';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { asPrincipal } from '../support/principals';
import { fastHostEnv } from '../support/timing';

/**
 * What a caller that has proved nothing can hold of the embedded host: no body is read before its
 * identity and role pass, a body over 64 KiB is refused (unread when declared, the connection closed
 * when it grows past), and stalled or surplus connections are closed by the configured limits.
 */

interface Conn {
  socket: Socket;
  text: () => string;
  /** Resolves when the host has closed (or reset) the connection. */
  closed: Promise<void>;
  /** Resolves once the received text matches. */
  received: (pattern: RegExp) => Promise<string>;
}

function open(url: string): Promise<Conn> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let text = '';
    const waiters: (() => void)[] = [];
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      for (const w of waiters.splice(0)) w();
    });
    socket.on('error', () => undefined); // a reset is a close here
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    const received = (pattern: RegExp) =>
      new Promise<string>((r, j) => {
        const check = () => {
          if (pattern.test(text)) r(text);
          else if (socket.destroyed) j(new Error(`closed without ${String(pattern)}:\n${text}`));
          else waiters.push(check);
        };
        void closed.then(check);
        check();
      });
    socket.once('connect', () => resolve({ socket, text: () => text, closed, received }));
    socket.once('error', reject);
  });
}

const head = (lines: string[]) => `${lines.join('\r\n')}\r\n\r\n`;

let host: LocalHost | undefined;
afterEach(async () => {
  await host?.close();
  host = undefined;
});

async function start(env: Record<string, string> = {}): Promise<LocalHost> {
  host = await startLocalHost({
    env: { ...fastHostEnv, ...env },
    store: new SqliteStore(':memory:'),
    log: () => undefined,
  });
  return host;
}

describe('identity and role before the body', () => {
  test.each([
    ['no identity', {}, 401, 'Unauthenticated'],
    [
      'an identity without the role',
      asPrincipal({ oid: '00000000-0000-4000-8000-000000000009', roles: ['Routes.Read'] }),
      403,
      'Forbidden',
    ],
  ])(
    '%s: the answer comes while the body is still unsent, and the connection closes',
    async (_who, identity, status, code) => {
      const { url } = await start({ ROUTELOCK_AUTH: 'appservice' });
      const conn = await open(url);
      const headers = Object.entries(identity).map(([k, v]) => `${k}: ${v}`);
      conn.socket.write(
        head([
          'POST /api/routes/conv-1/prelock HTTP/1.1',
          `Host: ${new URL(url).host}`,
          'Content-Type: application/json',
          'Content-Length: 60000',
          ...headers,
        ]) + '{"migrationId":',
      );
      const answer = await conn.received(new RegExp(`"code":"${code}"`));
      expect(answer).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
      expect(answer).toMatch(/connection: close/i);
      await conn.closed;
    },
  );
});

describe('bodies over 64 KiB', () => {
  test('a declared Content-Length over the limit is 413 at once, before any of the body is sent', async () => {
    const { url } = await start();
    const conn = await open(url);
    conn.socket.write(
      head([
        'POST /api/routes/conv-1/prelock HTTP/1.1',
        `Host: ${new URL(url).host}`,
        'Content-Type: application/json',
        `Content-Length: ${64 * 1024 + 1}`,
      ]),
    );
    const answer = await conn.received(/"code":"PayloadTooLarge"/);
    expect(answer).toMatch(/^HTTP\/1.1 413 /);
    await conn.closed;
  });

  test('a chunked body that grows past the limit is 413 and the connection is closed', async () => {
    const { url } = await start();
    const conn = await open(url);
    conn.socket.write(
      head([
        'POST /api/routes/conv-1/prelock HTTP/1.1',
        `Host: ${new URL(url).host}`,
        'Content-Type: application/json',
        'Transfer-Encoding: chunked',
      ]),
    );
    const chunk = 'x'.repeat(16 * 1024);
    // 80 KiB over five chunks, and the body never ends: only the limit can end this request
    for (let i = 0; i < 5; i += 1) conn.socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
    const answer = await conn.received(/"code":"PayloadTooLarge"/);
    expect(answer).toMatch(/^HTTP\/1.1 413 /);
    await conn.closed;
  });

  test('positive control: a chunked body within the limit is read and answered', async () => {
    const { url } = await start();
    const conn = await open(url);
    const body = JSON.stringify({ location: { region: 'westeurope' } });
    conn.socket.write(
      head([
        'PUT /api/routes/conv-1 HTTP/1.1',
        `Host: ${new URL(url).host}`,
        'Content-Type: application/json',
        'Transfer-Encoding: chunked',
      ]) + `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    );
    expect(await conn.received(/^HTTP\/1.1 \d{3} /)).toMatch(/^HTTP\/1.1 201 /);
    conn.socket.destroy();
  });
});

describe('timeouts and the connection cap (the limits from their variables)', () => {
  // Each wait below is bounded under the default it overrides (10 s headers, 5 s keep-alive), so only
  // the configured value can end it in time.
  const short = {
    ROUTELOCK_HEADERS_TIMEOUT_SECONDS: '1',
    ROUTELOCK_REQUEST_TIMEOUT_SECONDS: '2',
    ROUTELOCK_KEEP_ALIVE_SECONDS: '1',
  };

  test('headers that never end: the connection is closed (ROUTELOCK_HEADERS_TIMEOUT_SECONDS)', async () => {
    const { url } = await start(short);
    const conn = await open(url);
    conn.socket.write(`GET /api/health HTTP/1.1\r\nHost: ${new URL(url).host}\r\nX-Slow: `);
    await conn.closed;
  }, 8_000);

  test('a body that stalls: the connection is closed (ROUTELOCK_REQUEST_TIMEOUT_SECONDS)', async () => {
    const { url } = await start(short);
    const conn = await open(url);
    conn.socket.write(
      head([
        'PUT /api/routes/conv-1 HTTP/1.1',
        `Host: ${new URL(url).host}`,
        'Content-Type: application/json',
        'Content-Length: 100',
      ]) + '{"location":',
    );
    await conn.closed;
    expect(conn.text()).not.toMatch(/HTTP\/1.1 201/);
  }, 8_000);

  test('a connection that sends nothing is closed', async () => {
    const { url } = await start(short);
    const conn = await open(url);
    await conn.closed;
    expect(conn.text()).toMatch(/^(HTTP\/1.1 408 |$)/);
  }, 8_000);

  test('an idle kept-alive connection is closed (ROUTELOCK_KEEP_ALIVE_SECONDS)', async () => {
    const { url } = await start(short);
    const conn = await open(url);
    conn.socket.write(head(['GET /api/health HTTP/1.1', `Host: ${new URL(url).host}`]));
    expect(await conn.received(/^HTTP\/1.1 200 /)).toMatch(/keep-alive/i);
    await conn.closed;
  }, 4_000);

  test('past ROUTELOCK_MAX_CONNECTIONS a new connection is closed as it arrives; a freed slot serves again', async () => {
    const { url } = await start({ ROUTELOCK_MAX_CONNECTIONS: '2' });
    const held = [await open(url), await open(url)];
    // the host counts a connection once it has accepted it: one request each makes sure it has
    for (const conn of held) {
      conn.socket.write(head(['GET /api/health HTTP/1.1', `Host: ${new URL(url).host}`]));
      await conn.received(/^HTTP\/1.1 200 /);
    }
    const third = await open(url);
    third.socket.write(head(['GET /api/health HTTP/1.1', `Host: ${new URL(url).host}`]));
    await third.closed;
    expect(third.text()).toBe('');
    held[0]!.socket.destroy();
    await held[0]!.closed;
    await new Promise((r) => setTimeout(r, 100));
    expect((await fetch(`${url}/api/health`)).status).toBe(200);
    held[1]!.socket.destroy();
  }, 15_000);

  test('the limits are parsed once, with defaults, and a bad value names its variable', () => {
    expect(parseHostConfig({}).limits).toEqual({
      maxConnections: 256,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 5_000,
    });
    const problems = (env: Record<string, string>) => {
      try {
        parseHostConfig(env);
        return [];
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as ConfigError).problems;
      }
    };
    expect(problems({ ROUTELOCK_MAX_CONNECTIONS: 'lots' })[0]).toMatch(/^ROUTELOCK_MAX_CONNECTIONS: /);
    expect(problems({ ROUTELOCK_MAX_CONNECTIONS: '0' })[0]).toMatch(/^ROUTELOCK_MAX_CONNECTIONS: /);
    expect(problems({ ROUTELOCK_HEADERS_TIMEOUT_SECONDS: '1.5' })[0]).toMatch(
      /^ROUTELOCK_HEADERS_TIMEOUT_SECONDS: /,
    );
    expect(problems({ ROUTELOCK_KEEP_ALIVE_SECONDS: '-1' })[0]).toMatch(/^ROUTELOCK_KEEP_ALIVE_SECONDS: /);
    expect(
      problems({ ROUTELOCK_HEADERS_TIMEOUT_SECONDS: '20', ROUTELOCK_REQUEST_TIMEOUT_SECONDS: '10' })[0],
    ).toMatch(/^ROUTELOCK_REQUEST_TIMEOUT_SECONDS: must be at least ROUTELOCK_HEADERS_TIMEOUT_SECONDS/);
  });
});
