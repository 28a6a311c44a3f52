import { campaignTick } from '../../shared/campaign/tick';
import { TARGET, operator } from './harness';
import { removeTickDirs, sqliteTick, tickUntilDone } from './sqliteTick';

/**
 * Resources appended while a tick decides the campaign has ended, or while a cancel lands: an appended
 * member is never left pending in an ended campaign, and the tick still counts the members once.
 */

afterAll(removeTickDirs);

describe('an append racing the tick that sees everything ended', () => {
  test('between the count and the save: the save counts again, the campaign runs on and completes both', async () => {
    const s = sqliteTick();
    await s.service.create({ campaignId: 'c1', target: TARGET, resources: ['a'] }, operator);
    await campaignTick(s.deps, 'c1'); // a started (and ended at once)
    s.advance(5000);
    // the next tick counts a ended, nothing pending; the append lands before its save
    s.hooks.beforeReplace = async () => {
      await s.service.addResources('c1', ['b'], operator);
    };
    await campaignTick(s.deps, 'c1');
    // not Completed with b pending (every later append would be 409 CampaignEnded)
    expect(await s.service.status('c1')).toMatchObject({ status: 'Running', counts: { pending: 1 } });
    await tickUntilDone(s, 'c1');
    expect(await s.service.status('c1')).toMatchObject({
      status: 'Completed',
      counts: { total: 2, completed: 2, pending: 0 },
    });
  });

  test('reserved before a cancel, landed after the Cancelled save: the append cancels its members', async () => {
    const s = sqliteTick();
    await s.service.create({ campaignId: 'c1b', target: TARGET, resources: ['a'] }, operator);
    await campaignTick(s.deps, 'c1b');
    s.advance(5000);
    s.hooks.beforeAddMembers = async () => {
      await s.service.cancel('c1b', operator);
      expect((await campaignTick(s.deps, 'c1b')).status).toBe('Cancelled');
    };
    await s.service.addResources('c1b', ['late'], operator);
    expect(await s.records.countMembers('c1b')).toEqual({ completed: 1, cancelled: 1 });
    expect(await s.service.status('c1b')).toMatchObject({
      status: 'Cancelled',
      counts: { total: 2, pending: 0, cancelled: 1 },
    });
  });

  test('the members are counted once a tick', async () => {
    const s = sqliteTick();
    await s.service.create({ campaignId: 'c6', target: TARGET, resources: ['a', 'b'] }, operator);
    const before = s.counted();
    await campaignTick(s.deps, 'c6');
    expect(s.counted() - before).toBe(1);
  });
});
