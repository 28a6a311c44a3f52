import { type IncomingHttpHeaders, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  PREFER_WAIT_HEADROOM_SECONDS,
  parsePreferWait,
  preferWaitSeconds,
} from '../../shared/migration/participantContract';
import { requestParticipant } from '../../shared/migration/participantHttp';
import type { ParticipantCall } from '../../shared/migration/types';

/**
 * `Prefer: wait=N` on participant requests (docs/design.md §6.5): N whole seconds, inside
 * the request's timeout; a participant reads it with parsePreferWait. The bound's negative control: a
 * wait as long as the timeout makes a participant that honours it fully answer after the request gave
 * up (status 0, a transient retry), which is why N stays half a second inside it.
 */

describe('preferWaitSeconds: the wait a request with this timeout asks for', () => {
  test.each<[number, number | undefined]>([
    [1, undefined], // RFC 7240 waits are whole seconds: none fits inside 1 s with headroom
    [1.4, undefined],
    [1.5, 1],
    [2, 1],
    [2.9, 2],
    [3, 2],
    [5, 4],
    [6, 5],
    [30, 5], // the default timeout: at most PREFER_WAIT_MAX_SECONDS
    [240, 5],
    [0, undefined],
  ])('timeout %p s → wait %p', (timeout, wait) => {
    expect(preferWaitSeconds(timeout)).toBe(wait);
  });

  test('every wait ends at least the headroom before its timeout', () => {
    for (let tenths = 0; tenths <= 2400; tenths += 1) {
      const timeout = tenths / 10;
      const wait = preferWaitSeconds(timeout);
      if (wait === undefined) continue;
      expect(Number.isInteger(wait)).toBe(true);
      expect(wait + PREFER_WAIT_HEADROOM_SECONDS).toBeLessThanOrEqual(timeout);
    }
  });
});

describe('parsePreferWait: the wait a participant reads from Prefer', () => {
  test.each<[string | string[] | undefined, number | undefined]>([
    ['wait=5', 5],
    ['respond-async, wait=10', 10],
    ['WAIT = 3', 3],
    ['wait="4"', 4],
    ['wait=2; foo=bar', 2],
    [['respond-async', 'wait=2'], 2],
    ['wait=1, wait=9', 1], // the first counts
    ['wait=abc', undefined],
    ['wait=-1', undefined],
    ['wait', undefined],
    ['waiting=3', undefined],
    ['handling=strict', undefined],
    ['', undefined],
    [undefined, undefined],
  ])('%p → %p', (header, wait) => {
    expect(parsePreferWait(header)).toBe(wait);
  });
});

/**
 * A participant that honours the wait fully: it holds a POST N seconds, then answers 202 (its job never
 * ends); a poll it answers 200 at once.
 */
async function holdingParticipant() {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer((req, res) => {
    seen.push(req.headers);
    req.resume();
    if (req.method === 'GET') return res.writeHead(200).end('{"done":true}');
    const wait = parsePreferWait(req.headers.prefer) ?? 0;
    setTimeout(() => {
      if (res.destroyed) return;
      res
        .writeHead(202, { location: `http://127.0.0.1:${port}/jobs/1`, 'retry-after': '1' })
        .end('{"done":false}');
    }, wait * 1000);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/migrate`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const post = (url: string, timeoutSeconds: number): ParticipantCall => ({
  participant: 'p',
  participantUrl: url,
  timeoutSeconds,
  method: 'POST',
  body: {
    migrationId: 'm-1',
    resourceId: 'r-1',
    from: { region: 'westeurope' },
    to: { region: 'eastus' },
    step: 'deltaCopy',
    migrationAttempt: 1,
    stepAttempt: 1,
    attempt: 1,
    sequence: 2,
    lockAcquiredAt: '2026-12-01T10:00:00.000Z',
  },
});

describe('requestParticipant sends Prefer: wait inside its timeout', () => {
  test('timeout 1 s: no header; 2 s: wait=1; 30 s: wait=5 (the POST and the poll alike)', async () => {
    const p = await holdingParticipant();
    try {
      // answered at once without a header, after the wait with one: 202 either way, never status 0
      expect((await requestParticipant(post(p.url, 1))).status).toBe(202);
      expect((await requestParticipant(post(p.url, 2))).status).toBe(202);
      const poll: ParticipantCall = {
        participant: 'p',
        participantUrl: p.url,
        timeoutSeconds: 30,
        method: 'GET',
        url: p.url.replace('/migrate', '/jobs/1'),
      };
      expect((await requestParticipant(poll)).status).toBe(200);
      expect(p.seen.map((h) => h.prefer)).toEqual([undefined, 'wait=1', 'wait=5']);
    } finally {
      await p.close();
    }
  }, 15_000);

  test('negative control: a wait as long as the timeout outlasts it — the answer comes after the request gave up', async () => {
    const p = await holdingParticipant();
    try {
      const waitAsLongAsTheTimeout: typeof fetch = (url, init) =>
        fetch(url, { ...init, headers: { ...(init?.headers as Record<string, string>), prefer: 'wait=2' } });
      const answer = await requestParticipant(post(p.url, 2), { fetch: waitAsLongAsTheTimeout });
      expect(answer).toEqual({ status: 0, body: 'no answer within 2 s' });
      // the same participant, the wait the request chose: answered in time
      expect((await requestParticipant(post(p.url, 2))).status).toBe(202);
    } finally {
      await p.close();
    }
  }, 15_000);
});
