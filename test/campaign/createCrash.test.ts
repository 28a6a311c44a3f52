import { campaignTick } from '../../shared/campaign/tick';
import { TARGET, campaignHarness, operator } from './harness';

/**
 * A crash between a create's record and its first page of members (Campaigns.create writes the record,
 * then adds page 0): the campaign must not complete empty, and the repeated create (a retried request,
 * a redelivered queue message) must finish the job, once.
 */

type Harness = ReturnType<typeof campaignHarness>;
let harnesses: Harness[] = [];
afterEach(() => {
  for (const h of harnesses) h.cleanup();
  harnesses = [];
});
const ids = Array.from({ length: 6 }, (_, i) => `r-${i}`);

test('the create dies before its members land: the campaign stays Running, empty; the same create again adds them once and it completes', async () => {
  const h = campaignHarness({ env: { ROUTELOCK_CACHE_TIERS: 'local=10' } });
  harnesses.push(h);
  await h.routes(ids);
  const records = h.records;
  const addMembers = records.addMembers.bind(records);
  records.addMembers = async () => {
    throw new Error('the host died');
  };
  const request = { campaignId: 'c-crash', target: TARGET, resources: ids, maxConcurrent: 2 };
  await expect(h.campaigns.create(request, operator)).rejects.toThrow('the host died');
  records.addMembers = addMembers;

  // a tick of the empty `ids` campaign (a runner resumed at start-up) leaves it Running, not Completed
  const tick = await campaignTick(h.parts.deps, 'c-crash');
  expect(tick).toMatchObject({ done: false, status: 'Running' });
  expect(await h.campaigns.status('c-crash')).toMatchObject({ status: 'Running', counts: { total: 0 } });

  // other ids under the same campaignId are not taken for the create's (append them instead)
  const other = await h.campaigns.create({ ...request, resources: ['r-0'] }, operator);
  expect(other).toMatchObject({ created: false, status: { counts: { total: 0 } } });

  const again = await h.campaigns.create(request, operator);
  expect(again).toMatchObject({
    created: false,
    status: { status: 'Running', counts: { total: 6, pending: 6 } },
  });
  // once more (a redelivery): kept once
  const thrice = await h.campaigns.create(request, operator);
  expect(thrice.status.counts.total).toBe(6);
  await h.settle();
  expect(await h.campaigns.status('c-crash')).toMatchObject({
    status: 'Completed',
    counts: { total: 6, completed: 6 },
  });
  expect((await h.migrationRecords('c-crash')).map((r) => r.resourceId).sort()).toEqual(ids);
});

test('an ids campaign of no members is cancelled as any other', async () => {
  const h = campaignHarness();
  harnesses.push(h);
  const records = h.records;
  const addMembers = records.addMembers.bind(records);
  records.addMembers = async () => {
    throw new Error('the host died');
  };
  await expect(
    h.campaigns.create({ campaignId: 'c-empty', target: TARGET, resources: ['a'] }, operator),
  ).rejects.toThrow();
  records.addMembers = addMembers;
  await h.campaigns.cancel('c-empty', operator);
  // the cancel launched and woke the runner: its tick (or this one) ends it
  await campaignTick(h.parts.deps, 'c-empty');
  await h.settle();
  expect(await h.campaigns.status('c-empty')).toMatchObject({ status: 'Cancelled' });
});
