import { HttpRequest, InvocationContext } from '@azure/functions';
import type { IncomingHttpHeaders } from 'node:http';
import { BodilessHttpRequest, LocalInvocationContext, headersOf } from '../../local/request';

/**
 * The embedded host's bodiless request and its context (local/request.ts) against @azure/functions' own:
 * everything a handler can read is the same.
 */

interface Case {
  method: string;
  target: string;
  headers: IncomingHttpHeaders;
  params: Record<string, string>;
}

const cases: Case[] = [
  {
    method: 'GET',
    target: '/api/routes/conv-1',
    headers: { host: '127.0.0.1:7071' },
    params: { id: 'conv-1' },
  },
  {
    method: 'GET',
    target: '/api/routes?locked=true&limit=5&x=a%20b&x=c',
    headers: { host: 'localhost', accept: 'application/json', 'x-forwarded-for': '10.0.0.1, 10.0.0.2' },
    params: {},
  },
  {
    method: 'DELETE',
    target: '/api/routes/a%2Fb',
    headers: { host: '[::1]:80', 'if-match': '"e1"', cookie: 'a=1; b=2' },
    params: { id: 'a/b' },
  },
  {
    method: 'GET',
    target: '/api/routes/conv-2',
    headers: {
      host: '127.0.0.1',
      'x-ms-client-principal': Buffer.from(
        JSON.stringify({ auth_typ: 'aad', claims: [{ typ: 'oid', val: 'o-1' }] }),
      ).toString('base64'),
      'x-ms-client-principal-id': 'o-1',
      'x-ms-client-principal-name': 'someone',
      'x-ms-client-principal-idp': 'aad',
    },
    params: { id: 'conv-2' },
  },
];

type Readable = Pick<HttpRequest, 'method' | 'url' | 'headers' | 'query' | 'params' | 'user' | 'text'> &
  Pick<HttpRequest, 'arrayBuffer' | 'clone' | 'bodyUsed' | 'body' | 'json'>;

/** What a handler can observe of a request, as plain data. */
async function observe(request: Readable) {
  const json = await request.json().then(
    (v) => ({ value: v }),
    (e: unknown) => ({ error: (e as Error).name }),
  );
  return {
    method: request.method,
    url: request.url,
    headers: [...request.headers.entries()],
    host: request.headers.get('host'),
    query: [...request.query.entries()],
    params: request.params,
    user: request.user,
    body: request.body,
    text: await request.clone().text(),
    bytes: (await request.clone().arrayBuffer()).byteLength,
    json,
    bodyUsed: request.bodyUsed,
  };
}

function both(c: Case) {
  const url = new URL(c.target, `http://${c.headers.host}`);
  const real = new HttpRequest({
    method: c.method,
    url: url.href,
    headers: headersOf(c.headers),
    params: c.params,
  });
  const local = new BodilessHttpRequest({
    method: c.method,
    url: url.href,
    search: url.search,
    headers: c.headers,
    params: c.params,
  });
  return { real, local, url };
}

test.each(cases)('$method $target reads the same as a real HttpRequest', async (c) => {
  const { real, local } = both(c);
  expect(await observe(local)).toEqual(await observe(real));
});

test('the negative control: a request that drops the query is told apart by the same comparison', async () => {
  const c = cases[1]!;
  const { real, url } = both(c);
  const wrong = new BodilessHttpRequest({
    method: c.method,
    url: url.href,
    search: '',
    headers: c.headers,
    params: c.params,
  });
  expect(await observe(wrong)).not.toEqual(await observe(real));
});

test('headersOf joins a repeated header as Headers does', () => {
  expect(headersOf({ a: ['1', '2'], b: '3', c: undefined })).toEqual({ a: '1, 2', b: '3' });
});

test('the context: ids, log levels to the handler, and real bindings and options', () => {
  const seen: unknown[][] = [];
  const init = {
    invocationId: 'inv-1',
    functionName: 'getRoute',
    logHandler: (level: string, ...args: unknown[]) => seen.push([level, ...args]),
  };
  const local = new LocalInvocationContext(init);
  const real = new InvocationContext(init);
  for (const context of [local, real]) {
    context.log('a', 1);
    context.trace('b');
    context.debug('c');
    context.info('d');
    context.warn('e');
    context.error('f');
  }
  expect(seen.slice(0, 6)).toEqual(seen.slice(6));
  expect(seen.slice(0, 6).map((s) => s[0])).toEqual([
    'information',
    'trace',
    'debug',
    'information',
    'warning',
    'error',
  ]);
  expect({ ...pick(local) }).toEqual({ ...pick(real) });
  local.extraOutputs.set('out', 42);
  expect(local.extraOutputs.get('out')).toBe(42);
  expect(local.extraInputs.get('missing')).toBeUndefined();
});

function pick(context: InvocationContext) {
  return {
    invocationId: context.invocationId,
    functionName: context.functionName,
    options: context.options,
    retryContext: context.retryContext,
    traceContext: context.traceContext,
    triggerMetadata: context.triggerMetadata,
  };
}
