import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import type { EndpointDeclaration } from '../../functions/http/endpoint';
import { type LocalHost, allEndpoints } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { allRoles, asPrincipal } from '../support/principals';

/**
 * Every status the embedded host answers is one openapi.yaml documents for that operation. The statuses
 * are not listed here: each declared endpoint is sent the requests every caller can make without a
 * prepared state (no identity, the wrong role, no body, an unknown field, a body that is not JSON, one
 * over 64 KiB, a path parameter that is not an id, a foreign Host header, a browser's cross-site
 * request), and whatever the front door, the role check and the handler answer is looked up in the
 * document. None of them is bad input the server may answer with a 5xx. Statuses that need a prepared
 * state (409, 412, 423, a store outage) are the handlers' own tests' and the contract's.
 */

interface Operation {
  responses: Record<string, unknown>;
}
interface OpenApi {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: { Problem: { properties: { code: { enum: string[] } } } } };
}

interface Shape {
  label: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Path parameters replaced by this (already encoded) text. */
  param?: string;
  query?: string;
  /** Only for methods that carry a body. */
  bodyMethodsOnly?: boolean;
  /** The host may refuse it by closing the connection before it has read it all: no status to check. */
  mayReset?: boolean;
}

interface Answer {
  /** `METHOD /route` as openapi.yaml's paths name it. */
  operation: string;
  shape: string;
  status: number;
  code: string | undefined;
}

const everyRole = asPrincipal(allRoles);
const jsonType = { 'content-type': 'application/json' };
const overLimit = Buffer.from(JSON.stringify({ pad: 'x'.repeat(64 * 1024) }));

const shapes: Shape[] = [
  { label: 'no identity' },
  { label: 'no role', headers: asPrincipal({ oid: 'oid-no-role', roles: [] }) },
  { label: 'every role, no body', headers: everyRole },
  {
    label: 'an unknown field',
    headers: { ...everyRole, ...jsonType },
    body: '{"unknown":1}',
    bodyMethodsOnly: true,
  },
  {
    label: 'a text/plain body',
    headers: { ...everyRole, 'content-type': 'text/plain' },
    body: 'hello',
    bodyMethodsOnly: true,
  },
  {
    label: 'a body over 64 KiB',
    headers: { ...everyRole, ...jsonType },
    body: overLimit,
    bodyMethodsOnly: true,
    mayReset: true,
  },
  { label: 'a parameter that is not an id', headers: everyRole, param: 'not%20an%20id!' },
  { label: 'a parameter that is not percent-encoding', headers: everyRole, param: '%ZZ' },
  { label: 'an unknown query parameter', headers: everyRole, query: '?bogus=1' },
  { label: 'a foreign Host', headers: { ...everyRole, host: 'rebound.example:7071' } },
  {
    label: 'a cross-site browser request',
    headers: { ...everyRole, origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
  },
];

const bodyMethods = new Set(['POST', 'PUT', 'PATCH']);
const ids: Record<string, string> = {
  id: 'conv-doc',
  migrationId: 'm-doc',
  campaignId: 'c-doc',
  requestId: 'fr-doc',
};

function send(
  base: URL,
  method: string,
  path: string,
  shape: Shape,
): Promise<{ status: number; code: string | undefined }> {
  return new Promise((resolve, reject) => {
    const body = shape.body ?? '';
    const req = httpRequest(
      {
        host: base.hostname,
        port: base.port,
        method,
        path,
        headers: {
          ...(body.length > 0 ? { 'content-length': String(body.length) } : {}),
          ...shape.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          let code: string | undefined;
          if (/problem\+json/.test(res.headers['content-type'] ?? '')) {
            code = (JSON.parse(text) as { code?: string }).code;
          }
          resolve({ status: res.statusCode ?? 0, code });
        });
      },
    );
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (shape.mayReset && (error.code === 'ECONNRESET' || error.code === 'EPIPE'))
        resolve({ status: 0, code: undefined });
      else reject(error);
    });
    req.end(body);
  });
}

/** Send every shape to every method of every endpoint; one answer each. */
async function walk(base: string, endpoints: readonly EndpointDeclaration[]): Promise<Answer[]> {
  const url = new URL(base);
  const answers: Answer[] = [];
  for (const endpoint of endpoints) {
    for (const method of endpoint.methods) {
      for (const shape of shapes) {
        if (shape.bodyMethodsOnly && !bodyMethods.has(method)) continue;
        const hasParam = /\{\w+\}/.test(endpoint.route);
        if (shape.param !== undefined && !hasParam) continue;
        const path = `/api/${endpoint.route.replace(/\{(\w+)\}/g, (_, p: string) => shape.param ?? ids[p] ?? 'x')}${shape.query ?? ''}`;
        const { status, code } = await send(url, method, path, shape);
        answers.push({ operation: `${method} /${endpoint.route}`, shape: shape.label, status, code });
      }
    }
  }
  return answers;
}

/** Answers openapi.yaml does not document for their operation, or a 5xx to any of these requests. */
function undocumented(answers: readonly Answer[], api: OpenApi): string[] {
  const codes = new Set(api.components.schemas.Problem.properties.code.enum);
  const problems: string[] = [];
  for (const a of answers) {
    if (a.status === 0) continue; // refused by closing the connection, before any status
    const [method, path] = a.operation.split(' ') as [string, string];
    const documented = Object.keys(api.paths[path]?.[method.toLowerCase()]?.responses ?? {});
    const range = `${String(a.status)[0]}XX`;
    const where = `${a.operation} (${a.shape}) → ${a.status}${a.code ? ` ${a.code}` : ''}`;
    if (!documented.includes(String(a.status)) && !documented.includes(range))
      problems.push(`${where}: not documented`);
    if (a.status >= 500) problems.push(`${where}: a 5xx for bad input`);
    if (a.code !== undefined && !codes.has(a.code)) problems.push(`${where}: code not in Problem.code`);
  }
  return problems;
}

const spec = parse(readFileSync(join(__dirname, '../../openapi.yaml'), 'utf8')) as OpenApi;
let scratch: string;
let host: LocalHost;
let answers: Answer[];

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'routelock-statuses-'));
  host = await startLocalHost({
    // appservice: callers are headers, so a caller without an identity or a role can be sent
    env: { PORT: '0', ROUTELOCK_AUTH: 'appservice', ROUTELOCK_SQLITE_PATH: join(scratch, 'routelock.db') },
    store: new SqliteStore(':memory:'),
    log: () => undefined,
  });
  answers = await walk(host.url, allEndpoints);
}, 120_000);
afterAll(async () => {
  await host?.close();
  rmSync(scratch, { recursive: true, force: true });
});

test('the walk reaches every declared operation with every shape that applies to it', () => {
  const operations = new Set(answers.map((a) => a.operation));
  expect(operations.size).toBe(allEndpoints.reduce((n, e) => n + e.methods.length, 0));
  // each answer status seen at least once, so the walk is not all one refusal
  const seen = new Set(answers.map((a) => a.status));
  for (const status of [200, 400, 401, 403, 404, 421]) expect(seen).toContain(status);
});

test('every status the host answered is documented for its operation, and none is a 5xx', () => {
  expect(undocumented(answers, spec)).toEqual([]);
});

test('negative control: a status missing from an operation, or a code missing from Problem, is caught', () => {
  const without421 = structuredClone(spec);
  delete without421.paths['/routes/{id}']!.get!.responses['421'];
  expect(undocumented(answers, without421)).toEqual([
    'GET /routes/{id} (a foreign Host) → 421 MisdirectedRequest: not documented',
  ]);
  const withoutCode = structuredClone(spec);
  const enumCodes = withoutCode.components.schemas.Problem.properties.code;
  enumCodes.enum = enumCodes.enum.filter((c) => c !== 'MisdirectedRequest');
  expect(undocumented(answers, withoutCode)).toHaveLength(
    answers.filter((a) => a.code === 'MisdirectedRequest').length,
  );
});

test('negative control: an answer outside the document is caught (a 500, a status no operation lists)', () => {
  expect(
    undocumented(
      [
        { operation: 'GET /health', shape: 'x', status: 500, code: 'InternalError' },
        { operation: 'POST /ops/probe', shape: 'x', status: 418, code: undefined },
      ],
      spec,
    ),
  ).toEqual([
    'GET /health (x) → 500 InternalError: a 5xx for bad input',
    'POST /ops/probe (x) → 418: not documented',
  ]);
});
