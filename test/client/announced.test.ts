import { type ClientMetrics, RoutingClient } from '../../shared/core/client';
import type { RouteView } from '../../shared/core/lock/view';
import { ManualClock } from '../../testkit/clock';

/**
 * RoutingClient and announced locks (docs/design.md §5.4): a view whose lock says `announced: true` is served
 * from the cache while fresh, unless a boundary (its start or its write window's, less the skew) has come
 * since it was fetched less the skew; a legacy lock's view, once started, is fetched by every resolve as
 * before. Refresh ahead happens only for views the cache serves, never in the window. The server is a stub
 * (answers written out: a view, its Cache-Control and Age), so each boundary is exact; skew 5 s.
 */

const T = Date.UTC(2026, 5, 1);
const S = 5_000;
const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const iso = (at: number) => new Date(at).toISOString();

const STARTS = T + 600_000;
const W = STARTS + 3_600_000;

function view(lock: Record<string, unknown> | null, enforcement: RouteView['enforcement']): RouteView {
  return {
    resourceId: 'r',
    location: SOURCE,
    secondary: null,
    lock: lock as RouteView['lock'],
    enforcement,
    etag: 'e1',
  };
}
const lockFields = {
  migrationId: 'm-1',
  phase: 'hardDelete',
  target: TARGET,
  startsAt: iso(STARTS),
  expiresAt: iso(STARTS + 86_400_000),
  hardDeleteExpiresAt: iso(STARTS + 21_600_000),
};
const ALLOW = { read: 'allow', write: 'allow', delete: 'allow' } as const;
const TOMBSTONE = { read: 'allow', write: 'allow', delete: 'tombstone' } as const;

interface Answer {
  view: RouteView;
  cacheControl: string;
  age?: number;
}

/** A client on a manual clock against a stub server answering `answer(now)`, counting GETs and metrics. */
function clientAgainst(answer: (now: number) => Answer) {
  const clock = new ManualClock(T);
  const counts = { gets: 0, revalidations: 0, hits: 0, ahead: 0 };
  const metrics: ClientMetrics = {
    cacheHit: () => (counts.hits += 1),
    refreshAhead: () => (counts.ahead += 1),
  };
  const client = new RoutingClient({
    baseUrl: 'http://routing.test/api',
    clock: clock.now,
    clockSkewSeconds: S / 1000,
    metrics,
    fetch: (_url, init) => {
      counts.gets += 1;
      if (new Headers(init?.headers).get('cache-control') === 'no-cache') counts.revalidations += 1;
      const a = answer(clock.now());
      const headers: Record<string, string> = {
        'cache-control': a.cacheControl,
        'content-type': 'application/json',
      };
      if (a.age !== undefined) headers.age = String(a.age);
      return Promise.resolve(new Response(JSON.stringify(a.view), { status: 200, headers }));
    },
  });
  return { client, clock, counts };
}

/** `n` resolves `stepMs` apart from the clock's current time. */
async function resolves(h: ReturnType<typeof clientAgainst>, n: number, stepMs: number) {
  for (let i = 0; i < n; i += 1) {
    await h.client.resolve('r');
    h.clock.advance(stepMs);
  }
}

const settle = () => new Promise((r) => setTimeout(r, 20));

describe('a hard-delete lock in force', () => {
  const inForce = (announced: boolean) =>
    view({ ...lockFields, ...(announced ? { announced: true } : {}) }, TOMBSTONE);

  test('announced: served from the cache while fresh (one GET for 40 s of resolves)', async () => {
    const h = clientAgainst(() => ({ view: inForce(true), cacheControl: 'private, max-age=60' }));
    h.clock.set(STARTS + 60_000);
    await resolves(h, 400, 100);
    expect(h.counts.gets).toBe(1);
    expect(h.counts.hits).toBe(399);
  });

  test('legacy: fetched by every resolve once started, as before', async () => {
    const h = clientAgainst(() => ({ view: inForce(false), cacheControl: 'no-store' }));
    h.clock.set(STARTS + 60_000);
    await resolves(h, 40, 1_000);
    expect(h.counts.gets).toBe(40);
  });

  test('legacy: a started lock is fetched again even if a proxy sent a max-age (the rule, not the header)', async () => {
    const h = clientAgainst(() => ({ view: inForce(false), cacheControl: 'private, max-age=60' }));
    h.clock.set(STARTS + 60_000);
    await resolves(h, 10, 1_000);
    expect(h.counts.gets).toBe(10);
  });

  test('announced: refreshed ahead in the last fifth of its life, in the background', async () => {
    const h = clientAgainst(() => ({ view: inForce(true), cacheControl: 'private, max-age=60' }));
    h.clock.set(STARTS + 60_000);
    await h.client.resolve('r');
    h.clock.advance(50_000);
    await h.client.resolve('r');
    await settle();
    expect(h.counts).toMatchObject({ gets: 2, revalidations: 1, ahead: 1 });
  });
});

describe('the boundaries of an announced view: its start and its window, less the skew', () => {
  /** A view fetched at `fetchedAt` with a full minute of max-age (a server whose clock lags, or a proxy). */
  const pending = (extra: Record<string, unknown> = {}) =>
    clientAgainst(() => ({
      view: view({ ...lockFields, announced: true, ...extra }, ALLOW),
      cacheControl: 'private, max-age=60',
    }));

  test.each([
    ['−1 ms: served', STARTS - S - 1, 1],
    ['0: fetched again', STARTS - S, 2],
    ['+1 ms: fetched again', STARTS - S + 1, 2],
  ])('the start less S, fetched 10 s before it, resolved at %s', async (_name, at, gets) => {
    const h = pending();
    h.clock.set(STARTS - S - 10_000);
    await h.client.resolve('r');
    h.clock.set(at);
    // The control: freshness alone (max-age 60) would serve every row; the boundary is what fetches.
    expect(at).toBeLessThan(STARTS - S - 10_000 + 60_000);
    await h.client.resolve('r');
    expect(h.counts.gets).toBe(gets);
  });

  // The server's clock may be S behind: a view fetched at or before the start (= the boundary + S) may
  // predate the boundary on it, so it is fetched again there; one fetched later shows the start.
  test.each([
    ['1 ms before the start: fetched again past the boundary', STARTS - 1, 2],
    ['at the start: fetched again past the boundary', STARTS, 2],
    ['1 ms after the start: its snapshot shows the start, served', STARTS + 1, 1],
  ])('the start less S, a view fetched %s', async (_name, fetchedAt, gets) => {
    const h = pending();
    h.clock.set(fetchedAt);
    await h.client.resolve('r');
    h.clock.advance(1_000);
    await h.client.resolve('r');
    expect(h.counts.gets).toBe(gets);
  });

  test.each([
    ['−1 ms: served', W - S - 1, 1],
    ['0: fetched again', W - S, 2],
  ])('the window less S, fetched 30 s before it, resolved at %s', async (_name, at, gets) => {
    const h = pending({ writeWindowAt: iso(W) });
    h.clock.set(W - S - 30_000);
    await h.client.resolve('r');
    h.clock.set(at);
    await h.client.resolve('r');
    expect(h.counts.gets).toBe(gets);
  });

  test('resolveForWrite: valid until the next boundary', async () => {
    const h = pending({ writeWindowAt: iso(W) });
    h.clock.set(W - S - 30_000);
    const fetched = await h.client.resolveForWrite('r');
    expect(fetched.validUntil).toBe(W - S);
    h.clock.advance(1_000);
    const hit = await h.client.resolveForWrite('r');
    expect(hit.validUntil).toBe(W - S);
  });
});

describe('in the window', () => {
  test('no-store: every resolve fetched, never refreshed ahead', async () => {
    const windowView = view({ ...lockFields, announced: true, writeWindowAt: iso(W) }, TOMBSTONE);
    const h = clientAgainst(() => ({ view: windowView, cacheControl: 'no-store' }));
    h.clock.set(W);
    await resolves(h, 30, 1_000);
    await settle();
    expect(h.counts).toMatchObject({ gets: 30, ahead: 0, hits: 0 });
  });

  test('a write lock the server sends with a max-age (its write region showed it dead) is cached', async () => {
    const dead = view(
      {
        ...lockFields,
        phase: 'write',
        announced: true,
        writeWindowAt: iso(W),
        writeExpiresAt: iso(W + 300_000),
      },
      TOMBSTONE,
    );
    const h = clientAgainst(() => ({ view: dead, cacheControl: 'private, max-age=60' }));
    h.clock.set(W + 400_000);
    await resolves(h, 30, 1_000);
    expect(h.counts.gets).toBe(1);
  });
});
