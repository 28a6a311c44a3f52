import type { AccessToken, TokenCredential } from '@azure/identity';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConfigError, parseConfig } from '../../shared/config';
import { audienceScope, callParticipant } from '../../shared/migration/participantHttp';
import type { Scheduler } from '../../shared/migration/scheduler';
import type { HttpCall } from '../../shared/migration/types';
import { type ParticipantServer, startParticipant } from '../support/participantServer';

/**
 * Participants: their URLs carry no secrets and no plain http off loopback (they are copied into every
 * migration's stored input), and one with an `audience` is called with a managed-identity bearer
 * token through @azure/identity.
 */

function problemsOf(participants: unknown): string[] {
  try {
    parseConfig({ ROUTELOCK_PARTICIPANTS: JSON.stringify(participants) });
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('ROUTELOCK_PARTICIPANTS', () => {
  test.each([
    [
      'plain http off loopback',
      'http://messages.example/migrate',
      /must use https:\/\/.*not http:\/\/messages\.example/,
    ],
    [
      'userinfo',
      'https://svc:hunter2@messages.example/migrate',
      /must not carry credentials \(user:password@\)/,
    ],
    ['a user name alone', 'https://svc@messages.example/migrate', /must not carry credentials/],
    ['a query string', 'https://messages.example/migrate?code=abc123', /must not carry a query string/],
    ['an empty query', 'https://messages.example/migrate?', /must not carry a query string/],
    ['a fragment', 'https://messages.example/migrate#k=1', /must not carry a query string or fragment/],
  ])('refuses %s, naming the variable', (_what, url, message) => {
    const problems = problemsOf([{ name: 'messages', url }]);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^ROUTELOCK_PARTICIPANTS: /);
    expect(problems[0]).toMatch(message);
  });

  test.each([
    'https://messages.example/migrate',
    'http://127.0.0.1:8080/migrate',
    'http://127.3.4.5/migrate',
    'http://localhost:9000/migrate',
    'http://[::1]:9000/migrate',
  ])('accepts %s', (url) => {
    expect(problemsOf([{ name: 'messages', url }])).toEqual([]);
  });

  test('an optional audience is kept per participant; a malformed one is refused', () => {
    const { migration } = parseConfig({
      ROUTELOCK_PARTICIPANTS: JSON.stringify([
        { name: 'messages', url: 'https://m.example/migrate', audience: 'api://routelock-messages' },
        { name: 'media', url: 'https://media.example/migrate' },
      ]),
    });
    expect(migration.participants).toEqual([
      { name: 'messages', url: 'https://m.example/migrate', audience: 'api://routelock-messages' },
      { name: 'media', url: 'https://media.example/migrate' },
    ]);
    for (const audience of ['', 'api://has space', 7]) {
      const problems = problemsOf([{ name: 'm', url: 'https://m.example/migrate', audience }]);
      expect(problems).toEqual([expect.stringMatching(/^ROUTELOCK_PARTICIPANTS: .*audience/)]);
    }
  });

  test('negative control: a participant carrying a `token` is refused on the unknown field', () => {
    expect(problemsOf([{ name: 'm', url: 'https://m.example/migrate', token: 'x' }])).toEqual([
      expect.stringMatching(/^ROUTELOCK_PARTICIPANTS: .*token/),
    ]);
  });
});

test('the scope of an audience', () => {
  expect(audienceScope('api://routelock-messages')).toBe('api://routelock-messages/.default');
  expect(audienceScope('https://graph.microsoft.com/.default')).toBe('https://graph.microsoft.com/.default');
  expect(audienceScope('00000000-0000-0000-0000-0000000000aa')).toBe(
    '00000000-0000-0000-0000-0000000000aa/.default',
  );
});

/** A TokenCredential seam (what @azure/identity's credentials implement): records the scopes asked. */
class FakeCredential implements TokenCredential {
  readonly scopes: string[] = [];
  constructor(
    private readonly token: string,
    private readonly lifetimeMs = 3_600_000,
    private readonly fail = false,
  ) {}

  async getToken(scopes: string | string[]): Promise<AccessToken | null> {
    this.scopes.push(...[scopes].flat());
    if (this.fail) throw new Error('ManagedIdentityCredential: no managed identity endpoint found');
    return { token: `${this.token}-${this.scopes.length}`, expiresOnTimestamp: Date.now() + this.lifetimeMs };
  }
}

/** Polls at once: the participant's Retry-After is not what these tests are about. */
const immediate: Scheduler = {
  now: () => Date.now(),
  timer: () => ({ promise: Promise.resolve(), cancel: () => undefined }),
};

const request = (url: string, audience?: string, attempt = 1): HttpCall => ({
  method: 'POST',
  url,
  body: {
    migrationId: 'm-1',
    resourceId: 'conv-1',
    from: { region: 'westeurope' },
    to: { region: 'eastus' },
    step: 'bulkCopy',
    attempt,
  },
  ...(audience === undefined ? {} : { audience }),
});

describe('the in-process participant call', () => {
  let participant: ParticipantServer;
  afterEach(async () => {
    await participant.close();
  });

  test('with an audience: a bearer token for <audience>/.default on the POST and every poll, cached', async () => {
    participant = await startParticipant({ requireBearer: 'tok-1' });
    participant.behave('bulkCopy', { kind: 'poll', polls: 2 });
    const credential = new FakeCredential('tok');
    const first = await callParticipant(request(participant.url, 'api://routelock-messages'), immediate, {
      credential,
    });
    expect(first).toEqual({ status: 200, body: { done: true } });
    expect(participant.requests.map((r) => `${r.method} ${r.authorization}`)).toEqual([
      'POST Bearer tok-1',
      'GET Bearer tok-1',
      'GET Bearer tok-1',
      'GET Bearer tok-1',
    ]);
    // a second call (the delta) reuses the cached token: the credential was asked once
    const second = await callParticipant(request(participant.url, 'api://routelock-messages', 2), immediate, {
      credential,
    });
    expect(second.status).toBe(200);
    expect(credential.scopes).toEqual(['api://routelock-messages/.default']);
  });

  test('a token close to expiry is fetched again', async () => {
    participant = await startParticipant();
    const credential = new FakeCredential('tok', 60_000); // inside the refresh margin
    await callParticipant(request(participant.url, 'api://a'), immediate, { credential });
    await callParticipant(request(participant.url, 'api://a'), immediate, { credential });
    expect(participant.requests.map((r) => r.authorization)).toEqual(['Bearer tok-1', 'Bearer tok-2']);
  });

  test('without an audience: no Authorization header (and a participant that requires one refuses)', async () => {
    participant = await startParticipant({ requireBearer: 'tok-1' });
    const credential = new FakeCredential('tok');
    const result = await callParticipant(request(participant.url), immediate, { credential });
    expect(result.status).toBe(401);
    expect(participant.requests).toHaveLength(1);
    expect(participant.requests[0]).not.toHaveProperty('authorization');
    expect(credential.scopes).toEqual([]);
  });

  test('no token to be had is a transport-like failure (status 0), and nothing is sent', async () => {
    participant = await startParticipant();
    const result = await callParticipant(request(participant.url, 'api://a'), immediate, {
      credential: new FakeCredential('tok', 3_600_000, true),
    });
    expect(result.status).toBe(0);
    expect(String(result.body)).toMatch(/no token for audience api:\/\/a/);
    expect(participant.requests).toEqual([]);
  });

  test('a 202 Location on another origin is polled without the token', async () => {
    participant = await startParticipant();
    const seen: (string | undefined)[] = [];
    const elsewhere: Server = createServer((req, res) => {
      seen.push(req.headers.authorization);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"done":true}');
    });
    await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
    const front: Server = createServer((req, res) => {
      seen.push(req.headers.authorization);
      req.resume();
      const { port } = elsewhere.address() as AddressInfo;
      res.writeHead(202, { Location: `http://localhost:${port}/status/1` }).end();
    });
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = front.address() as AddressInfo;
      const result = await callParticipant(
        request(`http://127.0.0.1:${port}/migrate`, 'api://a'),
        immediate,
        {
          credential: new FakeCredential('tok'),
        },
      );
      expect(result.status).toBe(200);
      expect(seen).toEqual(['Bearer tok-1', undefined]);
    } finally {
      await new Promise<void>((resolve) => front.close(() => resolve()));
      await new Promise<void>((resolve) => elsewhere.close(() => resolve()));
    }
  });
});

test('redirects are not followed, and a poll Location over plain http elsewhere is refused', async () => {
  const hits: string[] = [];
  const elsewhere: Server = createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    req.resume();
    res.writeHead(200).end('{}');
  });
  await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
  const { port: away } = elsewhere.address() as AddressInfo;
  const front: Server = createServer((req, res) => {
    req.resume();
    if (req.url === '/redirect') res.writeHead(307, { Location: `http://localhost:${away}/taken` }).end();
    else res.writeHead(202, { Location: 'http://participant.example/status/1' }).end();
  });
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  const { port } = front.address() as AddressInfo;
  try {
    const redirected = await callParticipant(request(`http://127.0.0.1:${port}/redirect`), immediate);
    expect(redirected.status).toBe(307);
    const plain = await callParticipant(request(`http://127.0.0.1:${port}/poll`), immediate);
    expect(plain).toEqual({ status: 0, body: 'the poll Location http://participant.example is not https' });
    expect(hits).toEqual([]);
    // the control: a fetch that follows redirects (the default) would have sent the body elsewhere
    await fetch(`http://127.0.0.1:${port}/redirect`, { method: 'POST', body: '{}' });
    expect(hits).toEqual(['POST /taken']);
  } finally {
    await new Promise<void>((resolve) => front.close(() => resolve()));
    await new Promise<void>((resolve) => elsewhere.close(() => resolve()));
  }
});
