import type { LocationStore } from '../../shared/core/store/ports/locations';
import { TARGET, operator } from './harness';
import { removeTickDirs, sqliteTick, tickUntilDone } from './sqliteTick';

/**
 * A `from` campaign's selection through many pages of the route list: it is not full at 100 pages, and
 * every member, selected or appended, has a sequence number of its own.
 */

afterAll(removeTickDirs);

test('from: a region of 1 route a page selects past 100 pages, every seq its own', async () => {
  const s = sqliteTick();
  const PAGES = 150;
  s.deps.store = {
    list: async (q: { continuation?: string }) => {
      const pageNo = q.continuation === undefined ? 0 : Number(q.continuation);
      const items = Array.from({ length: 1000 }, (_, i) => ({
        doc: {
          id: `r-${pageNo}-${i}`,
          location: { region: i === 0 ? 'westeurope' : 'northeurope', account: 'x' },
        },
      }));
      return { items, continuation: pageNo < PAGES - 1 ? String(pageNo + 1) : null };
    },
  } as unknown as LocationStore;
  await s.service.create({ campaignId: 'c2', target: TARGET, from: { region: 'westeurope' } }, operator);
  const appended = await s.service.addResources('c2', ['extra-1', 'extra-2'], operator);
  expect(appended.added).toBe(2);
  await tickUntilDone(s, 'c2', 400);
  const status = await s.service.status('c2');
  // selection does not take the campaign for full at 100 selected
  expect(status).toMatchObject({
    status: 'Completed',
    source: { done: true, selected: PAGES },
    counts: { total: PAGES + 2 },
  });
  expect(status.lastTickError).toBeUndefined();
  const members = await s.records.members('c2', { state: 'completed', limit: 1000 });
  expect(new Set(members.map((m) => m.seq)).size).toBe(PAGES + 2);
});
