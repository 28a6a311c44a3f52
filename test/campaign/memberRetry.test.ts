import { assertRetryOutsideCampaign } from '../../shared/campaign/campaigns';
import { RouteLockError } from '../../shared/core/errors';
import { call, handlerServices } from '../support/handlers';
import { TARGET, campaignHarness, operator } from './harness';

/**
 * An operator's retry of a campaign member's migration (POST /migrations/{id}/retry) waits until the
 * campaign has ended: while it runs, the campaign's limits and its cancel own the member.
 */

describe("an operator's retry of a member waits for its campaign's end", () => {
  test('409 MigrationNotRetriable through POST /migrations/{id}/retry while it runs; allowed once it ended', async () => {
    const h = campaignHarness({
      env: {
        ROUTELOCK_MIGRATION_ATTEMPTS: '1',
        ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p', url: 'https://p.test/migrate' }]),
      },
      http: async (c) =>
        c.body.resourceId === 'r-0' ? { status: 422, body: { error: 'no' } } : { status: 200, body: null },
    });
    try {
      await h.routes(['r-0', 'r-1', 'r-2']);
      await h.campaigns.create(
        {
          campaignId: 'c5',
          target: TARGET,
          resources: ['r-0', 'r-1', 'r-2'],
          maxConcurrent: 1,
          startsPerMinute: 1,
        },
        operator,
      );
      await h.runUntil(async () => (await h.counts('c5')).failed === 1);
      await handlerServices({}, undefined, {
        migrations: () => h.parts.migrations,
        records: h.parts.state,
        campaigns: () => h.campaigns,
      });
      const refused = await call('retryMigration', { params: { migrationId: 'c5.0' } });
      // not 202: the retry would run outside the campaign's limits and its cancel
      expect(refused.status).toBe(409);
      expect(refused.body).toMatchObject({
        code: 'MigrationNotRetriable',
        detail: expect.stringMatching(/campaign c5.*after the campaign ends/),
      });
      expect((await h.parts.state.get('c5.0'))?.status.status).toBe('Failed');
      await h.campaigns.cancel('c5', operator);
      await h.settle();
      expect((await h.campaigns.status('c5')).status).toBe('Cancelled');
      expect((await call('retryMigration', { params: { migrationId: 'c5.0' } })).status).toBe(202);
    } finally {
      h.cleanup();
    }
  });

  test('a migration of no campaign (or of one gone) is not asked about', async () => {
    const asked: string[] = [];
    const campaigns = () => ({
      status: async (id: string) => {
        asked.push(id);
        throw new RouteLockError('NotFound', `No campaign ${id}.`);
      },
    });
    await assertRetryOutsideCampaign({ migrationId: 'm', resourceId: 'r' }, campaigns);
    await assertRetryOutsideCampaign(null, campaigns);
    await assertRetryOutsideCampaign({ migrationId: 'g.0', resourceId: 'r', campaignId: 'g' }, campaigns);
    expect(asked).toEqual(['g']);
  });
});
