import { TARGET, campaignHarness, operator } from './harness';

/**
 * The ETA as an operator watching a campaign sees it (GET /campaigns/{id} after each timer of virtual
 * time): 20 lock-only migrations of about 12 s, 5 at a time, on the embedded host's real parts.
 */

test('watched to the end: never negative, and it falls (never rises) while the last members run', async () => {
  const h = campaignHarness({ env: { ROUTELOCK_CACHE_TIERS: 'local=10' } });
  try {
    const ids = Array.from({ length: 20 }, (_, i) => `r-${i}`);
    await h.routes(ids);
    const { campaignId } = await h.campaigns.create(
      { target: TARGET, resources: ids, maxConcurrent: 5 },
      operator,
    );
    const seen: { at: number; pending: number; eta: number | null }[] = [];
    await h.runUntil(async () => {
      const s = await h.campaigns.status(campaignId);
      seen.push({ at: h.clock.now(), pending: s.counts.pending, eta: s.etaSeconds });
      return s.status === 'Completed';
    });
    const etas = seen.map((s) => s.eta).filter((e): e is number => e !== null);
    expect(etas.length).toBeGreaterThan(10);
    expect(etas.every((e) => e >= 0)).toBe(true);
    // the last wave: nothing pending, the ETA only goes down as time goes on
    const last = seen.filter((s) => s.pending === 0 && s.eta !== null).map((s) => s.eta as number);
    expect(last.length).toBeGreaterThan(3);
    for (let i = 1; i < last.length; i += 1) expect(last[i]).toBeLessThanOrEqual(last[i - 1] as number);
    expect(last.at(-1)).toBe(0);
  } finally {
    h.cleanup();
  }
});
