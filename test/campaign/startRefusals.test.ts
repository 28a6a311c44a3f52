import { MAX_START_FAILURES } from '../../shared/campaign/plan';
import { campaignTick } from '../../shared/campaign/tick';
import { RouteLockError } from '../../shared/core/errors';
import { settingsFor } from '../../shared/migration/service';
import type { MigrationSettings } from '../../shared/migration/types';
import { TARGET, operator } from './harness';
import { removeTickDirs, sqliteTick, tickUntilDone } from './sqliteTick';

/**
 * A member whose start is refused: a refusal of its own skips it (at once, or after MAX_START_FAILURES in
 * a row when it may pass), an outage skips no one, and a setting the start can cap is capped, not refused.
 */

afterAll(removeTickDirs);

describe('a refused start does not hold the queue', () => {
  test('a non-retriable refusal skips its member (reason kept); the others start', async () => {
    const started: string[] = [];
    const s = sqliteTick(async (r) => {
      if (r.resourceId === 'bad') throw new RouteLockError('StoreRejected', 'the store refused the document');
      if (r.resourceId === 'odd') throw new TypeError('no code at all');
      started.push(r.resourceId);
    });
    await s.service.create(
      { campaignId: 'c4', target: TARGET, resources: ['bad', 'odd', 'x', 'y'], maxConcurrent: 10 },
      operator,
    );
    await tickUntilDone(s, 'c4');
    // the refused member does not stay at the head with the campaign Running and nothing started
    expect(started.sort()).toEqual(['x', 'y']);
    expect(await s.service.status('c4')).toMatchObject({
      status: 'Completed',
      counts: { skipped: 2, completed: 2 },
    });
    const skipped = await s.records.members('c4', { state: 'skipped', limit: 10 });
    expect(skipped.map((m) => m.reason)).toEqual(['the store refused the document', 'no code at all']);
  });

  test.each([
    ['a retriable refusal of its own: skipped after MAX_START_FAILURES in a row', 'PreconditionFailed', true],
    ['negative control: an outage (the store down) skips no one', 'StoreUnavailable', false],
  ] as const)('%s', async (_label, code, skips) => {
    const started: string[] = [];
    const s = sqliteTick(async (r) => {
      if (r.resourceId === 'flaky') throw new RouteLockError(code, `refused (${code})`);
      started.push(r.resourceId);
    });
    await s.service.create({ campaignId: 'c4r', target: TARGET, resources: ['flaky', 'x'] }, operator);
    for (let i = 0; i < MAX_START_FAILURES + 5; i += 1) {
      await campaignTick(s.deps, 'c4r');
      s.advance(61_000);
    }
    const status = await s.service.status('c4r');
    if (skips) {
      expect(status).toMatchObject({ status: 'Completed', counts: { skipped: 1, completed: 1 } });
      const [member] = await s.records.members('c4r', { state: 'skipped', limit: 1 });
      expect(member?.reason).toMatch(new RegExp(`${MAX_START_FAILURES} starts in a row failed.*refused`));
    } else {
      expect(status).toMatchObject({ status: 'Running', counts: { pending: 2, skipped: 0 } });
      expect(started).toEqual([]);
    }
  });
});

test('a campaign asking more attempts than now configured is capped, not refused', () => {
  const settings = { migrationAttempts: 2 } as MigrationSettings;
  // not BadRequest, which the tick would take for skipped (a campaign Completed, all skipped)
  expect(
    settingsFor(settings, { resourceId: 'r', target: TARGET, migrationAttempts: 3 }).migrationAttempts,
  ).toBe(2);
  expect(
    settingsFor(settings, { resourceId: 'r', target: TARGET, migrationAttempts: 1 }).migrationAttempts,
  ).toBe(1);
  expect(() => settingsFor(settings, { resourceId: 'r', target: TARGET, migrationAttempts: 0 })).toThrow(
    /whole number/,
  );
});
