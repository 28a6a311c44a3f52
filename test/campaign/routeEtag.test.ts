import { Router } from '../../shared/core/router';
import { newLocationDocument } from '../../shared/core/lock/document';
import { resetCounters } from '../../shared/core/store/ports/locations';
import { SOURCE, TARGET, campaignHarness, operator } from './harness';

/**
 * A `from` campaign lists its routes, and each member's start passes its listed copy on
 * (CampaignMember.listed, then the migration's input): no existence read, the pre-lock decided on the
 * listed copy. A lock-only member then reads its route once (the swap's replica confirmation); an
 * `ids` campaign's member twice (the start's existence read as well). The routes are written by another
 * process (a second router on the same store), so nothing but the list gives this process their versions.
 */

const ids = (n: number) => Array.from({ length: n }, (_, i) => `r-${i}`);

async function routeReadsPerMember(source: 'from' | 'ids', staleAfterList = false) {
  const h = campaignHarness({ env: { ROUTELOCK_CACHE_TIERS: 'local=8' } });
  try {
    const elsewhere = new Router({ store: h.store, timing: h.parts.config.timing, clock: h.clock.now });
    for (const id of ids(20)) await elsewhere.createRoute(id, SOURCE);
    resetCounters(h.store.counters);
    const { campaignId } = await h.campaigns.create(
      source === 'from'
        ? { target: TARGET, from: { region: SOURCE.region }, maxConcurrent: 5 }
        : { target: TARGET, resources: ids(20), maxConcurrent: 5 },
      operator,
    );
    if (staleAfterList) {
      // once the members are listed, another instance changes every route: each listed ETag is stale
      await h.runUntil(async () => (await h.campaigns.status(campaignId)).counts.total === 20);
      for (const id of ids(20)) {
        const current = await h.store.read(id, { from: 'writeRegion' });
        const changed = newLocationDocument(id, { ...SOURCE, account: 'moved-within' });
        await h.store.replace({ ...current.doc, location: changed.location }, current.etag);
      }
      resetCounters(h.store.counters); // the test's own reads above not counted
    }
    await h.settle();
    const status = await h.campaigns.status(campaignId);
    const c = h.store.counters;
    return {
      completed: status.counts.completed,
      reads: (c.nearestReads + c.writeRegionReads) / 20,
    };
  } finally {
    h.cleanup();
  }
}

test('a from campaign: 1 route read per lock-only member; an ids campaign: 2', async () => {
  expect(await routeReadsPerMember('from')).toEqual({ completed: 20, reads: 1 });
  expect(await routeReadsPerMember('ids')).toEqual({ completed: 20, reads: 2 });
});

test('negative control: the routes changed after the list (every ETag stale): each pre-lock gets a 412 and reads again; all Completed', async () => {
  const r = await routeReadsPerMember('from', true);
  expect(r.completed).toBe(20);
  // the pre-lock's conditional write refused, the write region's read it decides again on, the confirmation
  expect(r.reads).toBe(2);
});
