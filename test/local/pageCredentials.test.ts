import { connect } from 'node:net';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';

/**
 * An absolute-form request target with credentials in it (`GET http://u:p@host/`) for the status page is a
 * 400, and nothing of it is logged: not a 500 whose error line carries `u:p`.
 */

let host: LocalHost | undefined;
afterEach(async () => {
  await host?.close();
  host = undefined;
});

function raw(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.end(request));
    let answer = '';
    socket.on('data', (chunk) => (answer += String(chunk)));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
  });
}

test('a status-page request whose target carries credentials is a 400 that logs no credential', async () => {
  const lines: string[] = [];
  host = await startLocalHost({
    env: { PORT: '0', ROUTELOCK_PROFILE: 'dev' },
    log: (level, message, fields) => lines.push(JSON.stringify({ level, message, fields })),
  });
  const port = Number(new URL(host.url).port);
  const answer = await raw(
    port,
    'GET http://user:s3cret@127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
  );
  expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 400 Bad Request');
  expect(lines.join('\n')).not.toContain('s3cret');
});

test('the same for the status page under /api and its reads: a 400 whose answer and log carry no credential', async () => {
  const lines: string[] = [];
  host = await startLocalHost({
    env: { PORT: '0', ROUTELOCK_PROFILE: 'dev' },
    log: (level, message, fields) => lines.push(JSON.stringify({ level, message, fields })),
  });
  const port = Number(new URL(host.url).port);
  for (const path of ['/api/status', '/api/ops/view/migrations', '/api/ops/view/assets/uplot-js']) {
    const answer = await raw(
      port,
      `GET http://user:s3cret@127.0.0.1${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
    );
    expect([path, answer.split('\r\n')[0]]).toEqual([path, 'HTTP/1.1 400 Bad Request']);
    expect(answer).not.toContain('s3cret');
  }
  expect(lines.join('\n')).not.toContain('s3cret');
});
