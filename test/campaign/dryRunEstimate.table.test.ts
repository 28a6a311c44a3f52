import { parseConfig } from '../../shared/config';
import { newLocationDocument } from '../../shared/core/lock/document';
import {
  type CampaignPreflightFacts,
  type CampaignPreflightSettings,
  campaignPreflight,
  firstToStart,
} from '../../shared/campaign/preflight';
import { bindingLimit, campaignEstimate, minimumCampaignMs, wavesOf } from '../../shared/campaign/plan';
import { MAX_SKIPS_LISTED } from '../../shared/campaign/types';
import type { PreflightTiming } from '../../shared/migration/types';
import { migrationSettings } from '../../shared/migration/workflow';

/**
 * The campaign dry run's pure parts (docs/design.md §6.2): the least duration under maxConcurrent and
 * startsPerMinute, and the report from facts (each resource's migration preflight, counted by reason).
 */

const NOW = Date.parse('2026-12-01T12:00:00.000Z');

describe('minimumCampaignMs: waves of maxConcurrent, the startsPerMinute sliding window', () => {
  test.each([
    // [migrations, maxConcurrent, startsPerMinute, per migration (s), least (s), limited by, waves]
    [0, 10, undefined, 60, 0, 'none', 0],
    [1, 10, undefined, 60, 60, 'none', 1],
    [10, 10, undefined, 60, 60, 'none', 1],
    [25, 10, undefined, 60, 180, 'maxConcurrent', 3],
    // 10 a minute: starts at 0, 60 and 120 s, the last ending at 180 s; maxConcurrent alone: 60 s
    [25, 100, 10, 60, 180, 'startsPerMinute', 1],
    // both bind: the rate (a group of 5 each 60 s) outlasts the slots (free after 30 s)
    [20, 5, 5, 30, 210, 'startsPerMinute', 4],
    // a slow migration: the slots bind, the rate does not
    [20, 5, 5, 600, 2400, 'maxConcurrent', 4],
    [1000, 10, undefined, 90, 9000, 'maxConcurrent', 100],
  ] as const)('%i migrations, maxConcurrent %i, %s/min, %i s each → %i s', (n, c, r, d, least, by, waves) => {
    const input = {
      migrations: n,
      limits: { maxConcurrent: c, ...(r === undefined ? {} : { startsPerMinute: r }) },
      perMigrationMs: d * 1000,
    };
    expect(minimumCampaignMs(input) / 1000).toBe(least);
    expect(bindingLimit(input)).toBe(by);
    expect(wavesOf(n, c)).toBe(waves);
  });

  test('the sliding window: the 11th start at 10 a minute waits 60 s, at 11 a minute none', () => {
    // negative control: a rule that lets the (r+1)-th start in the same minute would finish sooner
    const input = {
      migrations: 11,
      limits: { maxConcurrent: 100, startsPerMinute: 10 },
      perMigrationMs: 1000,
    };
    expect(minimumCampaignMs(input)).toBe(61_000);
    expect(minimumCampaignMs({ ...input, limits: { maxConcurrent: 100, startsPerMinute: 11 } })).toBe(1000);
  });

  test('campaignEstimate: the floor from the timing, with and without the write budget', () => {
    const timing: PreflightTiming = {
      convergenceWaitSeconds: 65,
      earliestWriteLockAt: new Date(NOW + 75_000).toISOString(),
      bulkCopyDuration: 'unknown',
      writeBudgetSeconds: 30,
      migrationAttempts: 1,
    };
    expect(campaignEstimate(25, { maxConcurrent: 10 }, timing, NOW)).toEqual({
      migrations: 25,
      perMigrationMinimumSeconds: 75,
      writeBudgetSeconds: 30,
      bulkCopyDuration: 'unknown',
      waves: 3,
      limitedBy: 'maxConcurrent',
      lowerBoundSeconds: 225,
      withWriteBudgetSeconds: 315,
    });
    expect(campaignEstimate(0, { maxConcurrent: 10 }, null, NOW)).toMatchObject({
      migrations: 0,
      lowerBoundSeconds: 0,
      withWriteBudgetSeconds: 0,
      bulkCopyDuration: 'none',
    });
  });
});

describe('campaignPreflight: the migration preflight per resource', () => {
  const config = parseConfig({});
  const settings = (allowedRegions: readonly string[] | null = null): CampaignPreflightSettings => ({
    timing: config.timing,
    migration: migrationSettings(config),
    allowedRegions,
    maxMigrationAttempts: 3,
  });
  const route = (id: string) => newLocationDocument(id, { region: 'westeurope' }, NOW - 3_600_000);
  const facts = (ids: string[], withRoutes = true): CampaignPreflightFacts => ({
    request: { target: { region: 'eastus' }, resources: ids },
    resources: ids.map((resourceId) => ({
      resourceId,
      doc: withRoutes ? route(resourceId) : null,
      running: null,
    })),
    duplicates: 0,
    standing: null,
  });

  test('a target outside ROUTELOCK_REGIONS skips every resource for regionAllowed: not ok', () => {
    const report = campaignPreflight(facts(['a', 'b']), NOW, settings(['westeurope']));
    expect(report).toMatchObject({
      ok: false,
      wouldStart: 0,
      skipped: { count: 2, byReason: { regionAllowed: 2 } },
    });
    expect(firstToStart(facts(['a', 'b']), NOW, settings(['westeurope']))).toBeNull();
    expect(campaignPreflight(facts(['a', 'b']), NOW, settings(['eastus'])).wouldStart).toBe(2);
  });

  test(`every skip is counted, the first ${MAX_SKIPS_LISTED} named`, () => {
    const ids = Array.from({ length: 150 }, (_, i) => `gone-${i}`);
    const report = campaignPreflight(facts(ids, false), NOW, settings());
    expect(report.skipped).toMatchObject({ count: 150, byReason: { routeExists: 150 }, truncated: true });
    expect(report.skipped.resources).toHaveLength(MAX_SKIPS_LISTED);
    expect(report.skipped.resources[0]).toEqual({
      resourceId: 'gone-0',
      reason: 'routeExists',
      detail: 'no route gone-0',
    });
  });

  test('the participants answered about the first resource are its checks; a failing one fails the report', () => {
    const f: CampaignPreflightFacts = {
      ...facts(['a', 'b']),
      participants: { resourceId: 'a', answers: [{ name: 'p', answer: { status: 500, body: 'boom' } }] },
    };
    const report = campaignPreflight(f, NOW, settings());
    expect(report.ok).toBe(false);
    expect(report.checks.filter((c) => c.check === 'participant')).toEqual([
      expect.objectContaining({ ok: false, participant: 'p', resourceId: 'a', outcome: 'transient' }),
    ]);
    expect(report.wouldStart).toBe(2);
  });
});
