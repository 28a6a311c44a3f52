import {
  type IncomingHttpHeaders,
  createServer as createPlainServer,
  request as httpRequest,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { createLocalServer } from '../../local/server';
import {
  isLoopbackHostHeader as isLoopbackHost,
  isLoopbackHostname as isLoopbackAddress,
} from '../../shared/core/loopback';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { call, handlerServices } from '../support/handlers';
import { fastHostEnv } from '../support/timing';

/**
 * The embedded host against a browser on the same machine (it checks no keys): a body that is not JSON
 * is 415 and changes nothing (cross-site requests themselves: test/security/crossSite.test.ts); a Host
 * header that is not loopback (DNS rebinding) is 421 while bound to loopback.
 * And the optional-body reader behind approve never turns a body it cannot parse into a 500.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

interface Raw {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  json: Record<string, unknown> | null;
}

/** node:http, so the test controls every header (Host, Content-Type, framing) as a browser would send. */
function raw(
  base: string,
  options: {
    method: string;
    path: string;
    headers?: Record<string, string>;
    body?: string;
    /** Send the body chunked, with no Content-Length. */
    chunked?: boolean;
  },
): Promise<Raw> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...options.headers };
    if (options.body !== undefined && !options.chunked)
      headers['content-length'] = String(Buffer.byteLength(options.body));
    const req = httpRequest(
      { host: url.hostname, port: url.port, method: options.method, path: options.path, headers },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => {
          let json: Record<string, unknown> | null = null;
          try {
            json = text ? (JSON.parse(text) as Record<string, unknown>) : null;
          } catch {
            // not JSON
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
      },
    );
    req.on('error', reject);
    if (options.body !== undefined) {
      if (options.chunked) {
        // two writes before end(): node:http frames them as chunks, without a Content-Length
        const half = Math.floor(options.body.length / 2);
        req.write(options.body.slice(0, half));
        req.write(options.body.slice(half));
      } else req.write(options.body);
    }
    req.end();
  });
}

let host: LocalHost;
let store: SqliteStore;
const JSON_TYPE = { 'content-type': 'application/json' };

beforeEach(async () => {
  store = new SqliteStore(':memory:');
  host = await startLocalHost({
    env: fastHostEnv,
    store,
    log: () => undefined,
  });
});
afterEach(async () => {
  await host.close();
});

const snapshot = async () =>
  JSON.stringify([
    (await store.list({ lockedOnly: false, limit: 1000 })).items,
    store.counters.replaces,
    store.counters.creates,
    store.counters.deletes,
  ]);

const putRoute = async (id: string) => {
  const res = await raw(host.url, {
    method: 'PUT',
    path: `/api/routes/${id}`,
    headers: JSON_TYPE,
    body: JSON.stringify({ location: SOURCE }),
  });
  expect(res.status).toBe(201);
};

const prelockBody = JSON.stringify({ migrationId: 'm-x', owner: 'evil', target: TARGET });

describe('request bodies must be JSON; a POST or PUT may have none', () => {
  test.each([
    ['text/plain', 'text/plain;charset=UTF-8', prelockBody],
    ['form', 'application/x-www-form-urlencoded', `${prelockBody}=`],
    ['multipart', 'multipart/form-data; boundary=x', `--x\r\n\r\n${prelockBody}\r\n--x--`],
  ])('a %s body to prelock is 415 and changes nothing', async (_kind, contentType, body) => {
    await putRoute('conv-1');
    const before = await snapshot();
    const res = await raw(host.url, {
      method: 'POST',
      path: '/api/routes/conv-1/prelock',
      headers: { 'content-type': contentType },
      body,
    });
    expect(res.status).toBe(415);
    expect(res.headers['content-type']).toBe('application/problem+json');
    expect(res.json).toMatchObject({ code: 'UnsupportedMediaType', status: 415 });
    expect(await snapshot()).toBe(before);
    const view = await raw(host.url, { method: 'GET', path: '/api/routes/conv-1' });
    expect(view.json).toMatchObject({ lock: null, location: SOURCE });
  });

  test('a POST or PUT without a body or content type reaches its handler (which asks for a body where it needs one)', async () => {
    await putRoute('conv-2');
    for (const [method, path, status] of [
      ['POST', '/api/ops/probe', 200],
      ['POST', '/api/routes/conv-2/prelock', 400],
      ['POST', '/api/ops/force-release/fr-1/approve', 404],
      ['PUT', '/api/routes/conv-3', 400],
    ] as const) {
      const res = await raw(host.url, { method, path });
      expect({ method, path, status: res.status }).toEqual({ method, path, status });
      expect(res.json).not.toMatchObject({ code: 'UnsupportedMediaType' });
    }
  }, 20_000);

  test('a DELETE with a text/plain body is refused; a DELETE without a body still works', async () => {
    await putRoute('conv-4');
    const refused = await raw(host.url, {
      method: 'DELETE',
      path: '/api/routes/conv-4',
      headers: { 'content-type': 'text/plain' },
      body: 'x',
    });
    expect(refused.status).toBe(415);
    expect((await raw(host.url, { method: 'GET', path: '/api/routes/conv-4' })).status).toBe(200);
    expect((await raw(host.url, { method: 'DELETE', path: '/api/routes/conv-4' })).status).toBe(204);
    expect((await raw(host.url, { method: 'GET', path: '/api/routes/conv-4' })).status).toBe(404);
  });

  test('positive control: JSON, with a charset parameter, goes through', async () => {
    await putRoute('conv-5');
    const res = await raw(host.url, {
      method: 'POST',
      path: '/api/routes/conv-5/prelock',
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: prelockBody,
    });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ token: expect.any(String) });
    // and the empty-body probe, with the JSON type a client may still send
    const probe = await raw(host.url, { method: 'POST', path: '/api/ops/probe', headers: JSON_TYPE });
    expect(probe.status).toBe(200);
  }, 20_000);
});

describe('DNS rebinding: bound to loopback, only loopback Host names are served', () => {
  test.each(['evil.example', 'evil.example:7071', '127.0.0.1.evil.example', 'localhost.evil.example'])(
    'Host: %s is refused (421) for reads, writes and the status page, and nothing changes',
    async (hostHeader) => {
      await putRoute('conv-r');
      const before = await snapshot();
      const write = await raw(host.url, {
        method: 'POST',
        path: '/api/routes/conv-r/prelock',
        headers: { ...JSON_TYPE, host: hostHeader },
        body: prelockBody,
      });
      expect(write.status).toBe(421);
      expect(write.json).toMatchObject({ code: 'MisdirectedRequest', status: 421 });
      const read = await raw(host.url, {
        method: 'GET',
        path: '/api/routes/conv-r',
        headers: { host: hostHeader },
      });
      expect(read.status).toBe(421);
      expect(read.text).not.toContain('westeurope');
      const page = await raw(host.url, { method: 'GET', path: '/', headers: { host: hostHeader } });
      expect(page.status).toBe(421);
      expect(await snapshot()).toBe(before);
    },
  );

  test('positive control: localhost, 127.0.0.1 and [::1], with or without a port, are served', async () => {
    await putRoute('conv-l');
    const port = new URL(host.url).port;
    for (const name of ['localhost', `localhost:${port}`, `127.0.0.1:${port}`, '[::1]', `[::1]:${port}`]) {
      const res = await raw(host.url, { method: 'GET', path: '/api/routes/conv-l', headers: { host: name } });
      expect({ name, status: res.status }).toEqual({ name, status: 200 });
    }
  });

  test('the Host rule applies only while bound to loopback (a host bound to all interfaces serves any name)', async () => {
    const server = createLocalServer({
      endpoints: [
        {
          name: 'ping',
          methods: ['GET'],
          route: 'ping',
          authLevel: 'anonymous',
          role: 'anonymous',
          handler: async () => ({ status: 200, body: 'pong' }),
        },
      ],
      log: () => undefined,
    });
    await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const res = await raw(`http://127.0.0.1:${port}`, {
        method: 'GET',
        path: '/api/ping',
        headers: { host: 'routelock.lan' },
      });
      expect(res.status).toBe(200);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  test('the name and address checks', () => {
    for (const ok of ['localhost', 'LOCALHOST:80', '127.0.0.1', '127.1.2.3:7071', '[::1]', '[::1]:7071'])
      expect({ ok, loopback: isLoopbackHost(ok) }).toEqual({ ok, loopback: true });
    for (const bad of [
      'evil.example',
      'localhost.evil.example',
      '127.0.0.1.nip.io',
      '0.0.0.0',
      '[::2]',
      '10.0.0.1',
      'localhost:abc',
      '',
    ])
      expect({ bad, loopback: isLoopbackHost(bad) }).toEqual({ bad, loopback: false });
    expect(['127.0.0.1', '::1', '::ffff:127.0.0.1'].every(isLoopbackAddress)).toBe(true);
    expect(['0.0.0.0', '::', '192.168.1.5'].some(isLoopbackAddress)).toBe(false);
  });
});

describe('approve reads its optional body through the guarded parse', () => {
  /** A locked route and an open force-release request by alice; returns the request id. */
  async function openRequest(): Promise<string> {
    await putRoute('conv-f');
    const grant = await raw(host.url, {
      method: 'POST',
      path: '/api/routes/conv-f/prelock',
      headers: JSON_TYPE,
      body: prelockBody,
    });
    expect(grant.status).toBe(200);
    const opened = await raw(host.url, {
      method: 'POST',
      path: '/api/ops/routes/conv-f/force-release',
      headers: JSON_TYPE,
      body: JSON.stringify({ reason: 'stuck', actor: 'alice' }),
    });
    expect(opened.status).toBe(201);
    return (opened.json as { id: string }).id;
  }

  test('a chunked body (no Content-Length) on the embedded host: bad JSON is 400, good JSON approves', async () => {
    const id = await openRequest();
    const path = `/api/ops/force-release/${id}/approve`;
    for (const body of ['{"actor":', 'not json', '[1]', '"bob"']) {
      const res = await raw(host.url, { method: 'POST', path, headers: JSON_TYPE, body, chunked: true });
      expect({ body, status: res.status }).toEqual({ body, status: 400 });
      expect(res.json).toMatchObject({ code: 'BadRequest' });
    }
    const huge = await raw(host.url, {
      method: 'POST',
      path,
      headers: JSON_TYPE,
      body: JSON.stringify({ actor: 'bob', pad: 'x'.repeat(70 * 1024) }),
      chunked: true,
    });
    expect(huge.status).toBe(413);
    const ok = await raw(host.url, {
      method: 'POST',
      path,
      headers: JSON_TYPE,
      body: JSON.stringify({ actor: 'bob' }),
      chunked: true,
    });
    expect(ok.status).toBe(200);
    expect(ok.json).toMatchObject({ released: false });
  });
});

test('approve, called as the Functions worker calls it with a body but no Content-Length or Transfer-Encoding (HTTP/2): 400 or 413, never 500', async () => {
  await handlerServices({ ROUTELOCK_AUTH: 'none' });
  const params = { requestId: 'fr-1' };
  const notJson = await call('approveForceRelease', { params, rawBody: 'not json', headers: JSON_TYPE });
  expect(notJson.status).toBe(400);
  expect(notJson.body).toMatchObject({ code: 'BadRequest' });
  const badUtf8 = await call('approveForceRelease', {
    params,
    rawBody: Buffer.from([0x7b, 0xff, 0x7d]),
    headers: JSON_TYPE,
  });
  expect(badUtf8.status).toBe(400);
  const huge = await call('approveForceRelease', {
    params,
    rawBody: JSON.stringify({ pad: 'x'.repeat(70 * 1024) }),
    headers: JSON_TYPE,
  });
  expect(huge.status).toBe(413);
  const textPlain = await call('approveForceRelease', {
    params,
    rawBody: '{}',
    headers: { 'content-type': 'text/plain' },
  });
  expect(textPlain.status).toBe(415);
  // An empty body is still `{}`: the request goes on to the identity check, not a parse error.
  const empty = await call('approveForceRelease', { params, rawBody: '' });
  expect(empty.status).toBeLessThan(500);
  expect(empty.body).not.toMatchObject({ code: 'BadRequest' });
});

test('a plain server is not the embedded host: the harness really sends a foreign Host (control)', async () => {
  const seen: (string | undefined)[] = [];
  const server = createPlainServer((req, res) => {
    seen.push(req.headers.host);
    res.end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    await raw(`http://127.0.0.1:${port}`, { method: 'GET', path: '/', headers: { host: 'evil.example' } });
    expect(seen).toEqual(['evil.example']);
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});
