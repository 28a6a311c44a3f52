import { cacheLifetimeSeconds, freshnessSeconds } from '../shared/core/client';
import { ManualClock } from '../testkit/clock';
import type { TimingConfig } from '../shared/config';
import { newLocationDocument } from '../shared/core/lock/document';
import { prelock } from '../shared/core/lock/rules';
import { type CacheHeaders, cacheHeaders } from '../shared/core/lock/view';
import { Router } from '../shared/core/router';
import { resetCounters } from '../shared/core/store/ports/locations';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import { seamedRouter } from '../testkit/router';
import { T0, productionTiming, seconds } from './support/timing';

/**
 * The server's cache is a tier in series with the client's (docs/design.md §5.3): a copy the router has
 * held for a while is served with max-age = what is left of the local TTL and `Age` = the time held, and
 * a client's freshness is max-age − Age. So the two tiers together never hold a copy past one TTL.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const timing = productionTiming; // local TTL 60 s, skew 5 s
const TTL_MS = seconds(timing.localCacheTtlSeconds);

const maxAgeOf = (headers: CacheHeaders): number => cacheLifetimeSeconds(headers.cacheControl);

/** The bound, for a builder: a copy held `heldMs` is never fresh downstream past the tier's TTL. */
function overstays(build: typeof cacheHeaders, cfg: TimingConfig = timing): string[] {
  const doc = newLocationDocument('r', SOURCE, T0);
  const problems: string[] = [];
  for (let heldMs = 0; heldMs < TTL_MS; heldMs += 250) {
    const headers = build(doc, T0 + heldMs, cfg, heldMs);
    // A cache that ignores Age, and one that honours it (RFC 9111 §4.2.3).
    const ignoring = seconds(maxAgeOf(headers));
    const honouring = seconds(freshnessSeconds(headers.cacheControl, String(headers.ageSeconds)));
    if (heldMs + ignoring > TTL_MS) problems.push(`held ${heldMs} ms, then ${ignoring} ms ignoring Age`);
    if (heldMs + honouring > TTL_MS) problems.push(`held ${heldMs} ms, then ${honouring} ms honouring Age`);
  }
  return problems;
}

/** The negative control: every copy served as if just read (full max-age, Age 0 — the same as none). */
const fullMaxAge: typeof cacheHeaders = (doc, now, cfg) => cacheHeaders(doc, now, cfg, 0);

describe('cacheHeaders (the one home of max-age and Age)', () => {
  const unlocked = newLocationDocument('r', SOURCE, T0);

  test('a copy just read: the full TTL and Age 0', () => {
    expect(cacheHeaders(unlocked, T0, timing)).toEqual({
      cacheControl: 'private, max-age=60',
      ageSeconds: 0,
    });
    expect(cacheHeaders(unlocked, T0, timing, 0)).toEqual(cacheHeaders(unlocked, T0, timing));
  });

  test('a copy held a while: max-age is what is left of the TTL (rounded down), Age the time held (rounded down)', () => {
    const at = (heldMs: number) => cacheHeaders(unlocked, T0 + heldMs, timing, heldMs);
    expect(at(999)).toEqual({ cacheControl: 'private, max-age=59', ageSeconds: 0 });
    expect(at(1000)).toEqual({ cacheControl: 'private, max-age=59', ageSeconds: 1 });
    expect(at(25_400)).toEqual({ cacheControl: 'private, max-age=34', ageSeconds: 25 });
    expect(at(59_999)).toEqual({ cacheControl: 'private, max-age=0', ageSeconds: 59 });
    expect(at(60_000)).toEqual({ cacheControl: 'private, max-age=0', ageSeconds: 60 });
    // a held time past the TTL (a clock that jumped) never goes negative
    expect(at(75_000)).toEqual({ cacheControl: 'private, max-age=0', ageSeconds: 75 });
  });

  test('a pending lock: the smaller of what is left of the TTL and the time before it starts (less skew)', () => {
    const { doc } = prelock(
      unlocked,
      { migrationId: 'm', owner: 'o', target: TARGET, newToken: 'tok' },
      T0,
      timing,
    );
    const startsAt = Date.parse(doc.lock!.startsAt);
    // 40 s before startsAt (35 s before it, less skew): held 10 s leaves 50 s of TTL, so 35
    expect(cacheHeaders(doc, startsAt - seconds(40), timing, seconds(10)).cacheControl).toBe(
      'private, max-age=35',
    );
    // held 45 s leaves 15 s of TTL, less than the 35 s before the lock starts
    expect(cacheHeaders(doc, startsAt - seconds(40), timing, seconds(45))).toEqual({
      cacheControl: 'private, max-age=15',
      ageSeconds: 45,
    });
  });

  test('a started lock stays no-store, however long the copy was held', () => {
    const { doc } = prelock(
      unlocked,
      { migrationId: 'm', owner: 'o', target: TARGET, newToken: 'tok' },
      T0,
      timing,
    );
    const startsAt = Date.parse(doc.lock!.startsAt);
    for (const heldMs of [0, 1000, 30_000]) {
      expect(cacheHeaders(doc, startsAt, timing, heldMs).cacheControl).toBe('no-store');
      expect(cacheHeaders(doc, startsAt - seconds(5), timing, heldMs).cacheControl).toBe('no-store');
    }
  });

  test('held for any time, a downstream cache never holds the copy past the TTL, honouring Age or not', () => {
    expect(overstays(cacheHeaders)).toEqual([]);
  });

  test('negative control: headers with the full max-age and no Age overstay the TTL', () => {
    const problems = overstays(fullMaxAge);
    expect(problems.length).toBeGreaterThan(100);
    expect(problems).toContain('held 30000 ms, then 60000 ms ignoring Age');
  });
});

describe('freshnessSeconds (the client tier: max-age − Age)', () => {
  test.each([
    ['private, max-age=60', null, 60],
    ['private, max-age=60', '0', 60],
    ['private, max-age=60', '25', 35],
    ['private, max-age=60', '60', 0],
    ['private, max-age=35', '40', 0],
    ['private, max-age=60', '3, 7', 57], // a list-valued Age: its first member (RFC 9111 §5.1)
    ['private, max-age=60', 'abc', 0], // an Age it cannot read: not cached
    ['private, max-age=60', '-1', 0],
    ['private, max-age=60', '1.5', 0],
    ['no-store', '0', 0],
    [null, '0', 0],
  ])('Cache-Control %p, Age %p: fresh for %p s', (cacheControl, age, expected) => {
    expect(freshnessSeconds(cacheControl, age)).toBe(expected);
  });
});

describe('Router.view: Age and max-age from the time its cache has held the copy', () => {
  function setup(options: { cacheHeaders?: typeof cacheHeaders } = {}) {
    const clock = new ManualClock(T0);
    const store = new SqliteStore(':memory:');
    const router = seamedRouter({ store, timing, clock: clock.now, newToken: () => 'tok', ...options });
    return { clock, store, router };
  }

  test('a miss is Age 0 with the full TTL; a hit counts the time held; a write through the router starts again', async () => {
    const { clock, store, router } = setup();
    const writer = new Router({ store, timing, clock: clock.now });
    await writer.createRoute('r', SOURCE);
    resetCounters(store.counters);

    const miss = await router.view('r');
    expect(miss).toMatchObject({ cacheControl: 'private, max-age=60', ageSeconds: 0 });
    expect(store.counters.nearestReads).toBe(1);

    clock.advance(25_400);
    const hit = await router.view('r');
    expect(hit).toMatchObject({ cacheControl: 'private, max-age=34', ageSeconds: 25 });
    expect(store.counters.nearestReads).toBe(1); // served from the cache: no store read

    clock.advance(34_600); // exactly the TTL: still this copy, with nothing left to give
    expect(await router.view('r')).toMatchObject({ cacheControl: 'private, max-age=0', ageSeconds: 60 });
    clock.advance(1);
    expect(await router.view('r')).toMatchObject({ cacheControl: 'private, max-age=60', ageSeconds: 0 });
    expect(store.counters.nearestReads).toBe(2);

    clock.advance(10_000);
    await router.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
    expect(await router.view('r')).toMatchObject({ cacheControl: 'private, max-age=60', ageSeconds: 0 });
  });

  test('a started lock is read through every time: no-store, Age 0', async () => {
    const { clock, router } = setup();
    await router.createRoute('r', SOURCE);
    const grant = await router.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
    clock.set(Date.parse(grant.startsAt) + 1);
    await router.view('r');
    clock.advance(20_000);
    expect(await router.view('r')).toMatchObject({ cacheControl: 'no-store', ageSeconds: 0 });
  });

  test('the planted builder (a verification seam) is what view() uses: full max-age and no Age for a held copy', async () => {
    const { clock, router } = setup({ cacheHeaders: fullMaxAge });
    await router.createRoute('r', SOURCE);
    clock.advance(25_400);
    expect(await router.view('r')).toMatchObject({ cacheControl: 'private, max-age=60', ageSeconds: 0 });
  });
});

describe('a second router in the process tells the serving router of its writes (onWrite)', () => {
  async function scenario(tell: boolean) {
    const clock = new ManualClock(T0);
    const store = new SqliteStore(':memory:');
    const serving = new Router({ store, timing, clock: clock.now });
    const other = new Router({
      store,
      timing,
      clock: clock.now,
      ...(tell ? { onWrite: (id: string) => serving.forget(id) } : {}),
    });
    await other.createRoute('r', SOURCE);
    expect((await serving.view('r')).view.lock).toBeNull(); // cached by the serving router
    await other.prelock('r', { migrationId: 'm', owner: 'o', target: TARGET });
    return (await serving.view('r')).view.lock?.migrationId ?? null;
  }

  test('the pre-lock is on the serving read path at once', async () => {
    expect(await scenario(true)).toBe('m');
  });

  test('negative control: untold, the serving router serves its older copy', async () => {
    expect(await scenario(false)).toBeNull();
  });
});
