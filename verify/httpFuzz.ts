import fc from 'fast-check';
import { request as httpRequest } from 'node:http';
import { startLocalHost } from '../local/host';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import type { ScenarioResult } from './scenarios';

/**
 * Bad input over HTTP: random methods, paths, ids (slashes, backslashes, `?`, `#`, unicode, 300-character
 * ids), bodies (wrong types, missing and extra fields, huge, not JSON, `__proto__`), tokens and headers,
 * against the embedded host. Zero 5xx; every 4xx is problem+json; and a store snapshot taken around each
 * rejected request shows it changed nothing.
 */

interface FuzzRequest {
  method: string;
  path: string;
  body?: string;
  headers: Record<string, string>;
}

const weirdIds = fc.oneof(
  fc.constantFrom(
    'conv-1',
    'locked-1',
    'ghost',
    '',
    '-x',
    'a/b',
    'a\\b',
    'a?b',
    'a#b',
    '..',
    '%',
    '%2F',
    '%E0%A4%A',
    'ü-ñ',
    '💥',
    ' ',
    'a b',
  ),
  fc.string({ minLength: 1, maxLength: 20 }),
  fc.constant('x'.repeat(300)),
  fc.string({ unit: 'grapheme', maxLength: 8 }),
);

function encodeSegment(id: string, raw: boolean): string {
  // Mostly percent-encoded (what clients send); sometimes raw, where Node's client allows it.
  if (!raw) return encodeURIComponent(id);
  return /^[\x21-\x7e]*$/.test(id) ? id : encodeURIComponent(id);
}

const token = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.constant('x'.repeat(600)),
  fc.integer(),
  fc.constant(null),
);
const location = fc.oneof(
  fc.record({
    region: fc.constantFrom('eastus', 'westeurope', 'BAD', '', 'e'),
    account: fc.option(fc.string({ maxLength: 70 }), { nil: undefined }),
  }),
  fc.string(),
  fc.constant(null),
  fc.integer(),
);
const bodyObject = fc.oneof(
  fc.record({ location }, { requiredKeys: [] }),
  fc.record(
    {
      migrationId: fc.oneof(fc.string(), fc.integer()),
      owner: fc.oneof(fc.string({ maxLength: 300 }), fc.constant(null)),
      target: location,
    },
    { requiredKeys: [] },
  ),
  fc.record(
    { token, phase: fc.constantFrom('prelock', 'hardDelete', 'write', 'read', '', 7) },
    { requiredKeys: [] },
  ),
  fc.record(
    { resourceId: weirdIds, target: location, migrationId: fc.option(weirdIds, { nil: undefined }) },
    { requiredKeys: [] },
  ),
  fc.record(
    {
      reason: fc.oneof(fc.string({ maxLength: 1200 }), fc.integer()),
      actor: fc.oneof(fc.string({ maxLength: 300 }), fc.constant('')),
    },
    { requiredKeys: [] },
  ),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 })),
);
const body = fc.oneof(
  bodyObject.map((o) => JSON.stringify(o)),
  bodyObject.map((o) => JSON.stringify({ ...(o as object), extra: true })),
  fc.constantFrom(
    '{"__proto__":{"admin":true},"location":{"region":"eastus"}}',
    '{"constructor":{"prototype":{"x":1}}}',
    'not json',
    '{"location":',
    '[]',
    'null',
    '"str"',
    '12',
  ),
  fc.constant(JSON.stringify({ location: { region: 'eastus' }, pad: 'x'.repeat(70 * 1024) })),
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
);

const requestArbitrary: fc.Arbitrary<FuzzRequest> = fc
  .record({
    method: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'),
    shape: fc.constantFrom(
      'routes/{id}',
      'routes/{id}/prelock',
      'routes/{id}/escalate',
      'routes/{id}/renew',
      'routes/{id}/swap',
      'routes/{id}/release',
      'routes/{id}/audit',
      'routes',
      'migrations',
      'migrations/{id}',
      'ops/routes/{id}/force-release',
      'ops/force-release/{id}/approve',
      'ops/force-release/{id}',
      'health',
      'metrics',
      'nowhere/{id}',
    ),
    id: weirdIds,
    raw: fc.boolean(),
    query: fc.constantFrom(
      '',
      '?locked=true',
      '?limit=0',
      '?limit=abc',
      '?limit=2&limit=3',
      '?continuation=%ZZ',
      '?x=1',
    ),
    body: fc.option(body, { nil: undefined }),
    contentType: fc.constantFrom(
      'application/json',
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/merge-patch+json',
      '',
    ),
    idempotencyKey: fc.option(
      fc.string({ maxLength: 300 }).filter((s) => /^[\x20-\x7e]*$/.test(s)),
      { nil: undefined },
    ),
    ifMatch: fc.option(fc.constantFrom('"x"', '*', 'W/"y"', '"a","b"', ''), { nil: undefined }),
    principal: fc.option(fc.constantFrom('alice', 'bob@contoso', ''), { nil: undefined }),
  })
  .map((r) => {
    const headers: Record<string, string> = {};
    if (r.body !== undefined && r.contentType) headers['content-type'] = r.contentType;
    if (r.idempotencyKey !== undefined) headers['idempotency-key'] = r.idempotencyKey;
    if (r.ifMatch !== undefined) headers['if-match'] = r.ifMatch;
    if (r.principal !== undefined) headers['x-ms-client-principal-name'] = r.principal;
    return {
      method: r.method,
      path: `/api/${r.shape.replace('{id}', encodeSegment(r.id, r.raw))}${r.query}`,
      ...(r.body !== undefined ? { body: r.body } : {}),
      headers,
    };
  });

function send(base: URL, req: FuzzRequest): Promise<{ status: number; contentType: string; text: string }> {
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest(
      {
        host: base.hostname,
        port: base.port,
        method: req.method,
        path: req.path,
        headers: {
          ...req.headers,
          ...(req.body !== undefined ? { 'content-length': String(Buffer.byteLength(req.body)) } : {}),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            contentType: String(res.headers['content-type'] ?? ''),
            text,
          }),
        );
      },
    );
    outgoing.on('error', reject);
    if (req.body !== undefined) outgoing.write(req.body);
    outgoing.end();
  });
}

/** The negative control's planted bug: a store whose writes crash with a plain (untyped) error. */
class CrashingStore extends SqliteStore {
  override async replace(): Promise<never> {
    throw new TypeError('planted bug: replace crashed');
  }
  override async list(): Promise<never> {
    throw new TypeError('planted bug: list crashed');
  }
}

export async function httpFuzz(
  runs: number,
  seed: number,
  bug: 'none' | 'crashingStore' = 'none',
): Promise<ScenarioResult> {
  const store = bug === 'crashingStore' ? new CrashingStore(':memory:') : new SqliteStore(':memory:');
  const host = await startLocalHost({ env: { PORT: '0' }, store, log: () => undefined });
  const base = new URL(host.url);
  await host.services.router.createRoute('conv-1', { region: 'westeurope' });
  await host.services.router.createRoute('locked-1', { region: 'westeurope' });
  if (bug === 'none') {
    await host.services.router.prelock('locked-1', {
      migrationId: 'm-fuzz',
      owner: 'fuzz',
      target: { region: 'eastus' },
    });
  }
  const snapshot = async () =>
    JSON.stringify([
      (await store.list({ lockedOnly: false, limit: 1000 })).items,
      host.state.recent(1000).length,
      store.counters.replaces,
      store.counters.creates - 0,
    ]);
  let last: string | undefined;
  try {
    const details = await fc.check(
      fc.asyncProperty(requestArbitrary, async (req) => {
        const before = await snapshot();
        const res = await send(base, req);
        const after = await snapshot();
        const problems: string[] = [];
        if (res.status >= 500) problems.push(`${res.status} ${res.text.slice(0, 200)}`);
        if (res.status >= 400 && !res.contentType.startsWith('application/problem+json'))
          problems.push(`${res.status} is ${res.contentType || 'no content type'}`);
        if (res.status >= 400 && after !== before)
          problems.push(`a rejected request (${res.status}) changed the store`);
        if (problems.length > 0)
          last = `${problems.join('; ')} — ${req.method} ${req.path} ${JSON.stringify(req.headers)} ${(req.body ?? '').slice(0, 200)}`;
        return problems.length === 0;
      }),
      { numRuns: runs, seed },
    );
    return {
      scenario: bug === 'none' ? 'bad input over HTTP (fuzz)' : `control: ${bug} (fuzz)`,
      runs: details.numRuns,
      violations: details.failed ? 1 : 0,
      seed,
      ...(bug === 'none' ? {} : { caught: details.failed }),
      ...(details.failed && last ? { counterexample: last } : {}),
    };
  } finally {
    await host.close();
  }
}
