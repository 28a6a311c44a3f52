import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Campaigns } from '../../shared/campaign/campaigns';
import { InProcessCampaignRunner } from '../../shared/campaign/inProcess';
import { countsFrom } from '../../shared/campaign/plan';
import type { TickDeps, TickResult } from '../../shared/campaign/service';
import { type TickRules, campaignSettings, campaignTick } from '../../shared/campaign/tick';
import type { CampaignMember, MemberState } from '../../shared/campaign/types';
import { InProcessMigrationService } from '../../shared/migration/inProcessService';
import { type MigrationService } from '../../shared/migration/service';
import type { HttpCall, HttpResult } from '../../shared/migration/types';
import type { MigrationRecord } from '../../shared/migration/records';
import type { TokenKeyring } from '../../shared/core/security/tokenKeys';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import type { TelemetrySink } from '../../shared/migration/telemetry/sink';
import { SqliteCampaignRecords } from '../../shared/campaign/store/sqlite/campaigns';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { ManualClock } from '../../testkit/clock';
import { virtualRunner } from '../support/migrationHarness';

/**
 * A campaign on the embedded host's real parts, on virtual time: the in-process migration runner and
 * service over SQLite files (routes, migration state, campaigns), the campaign tick and its in-process
 * runner. `restart()` builds every part again over the same files, as a host that crashed and came back.
 */

export const SOURCE = { region: 'westeurope', account: 'chatweu01' };
export const TARGET = { region: 'eastus', account: 'chatuse01' };
export const operator = { id: 'operator-1' };

export interface CampaignHarnessOptions {
  env?: Record<string, string>;
  http?: (call: HttpCall) => Promise<HttpResult>;
  rules?: TickRules;
  sink?: TelemetrySink;
  /** Wraps the location store the router and the tick use (a FaultyStore). */
  wrapStore?: (store: LocationStore) => LocationStore;
}

/** What a campaign did, seen from outside: sampled at every migration start and every tick. */
export interface Observed {
  /** The most migrations unfinished at once (sampled as each start returns). */
  peakRunning: number;
  /** The most members `running` at once (sampled after each tick). */
  peakMembersRunning: number;
  ticks: number;
}

export function campaignHarness(options: CampaignHarnessOptions = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'routelock-campaign-'));
  const clock = new ManualClock();
  const env = { ROUTELOCK_PROFILE: 'dev', ...options.env };
  const baseStore = new SqliteStore(join(dir, 'routes.db'));
  const store = options.wrapStore ? options.wrapStore(baseStore) : baseStore;
  const observed: Observed = { peakRunning: 0, peakMembersRunning: 0, ticks: 0 };
  let keyring: TokenKeyring | undefined;
  const build = () => {
    const m = virtualRunner({
      env,
      store,
      statePath: join(dir, 'migrations.db'),
      clock,
      ...(keyring === undefined ? {} : { keyring }),
      ...(options.http === undefined ? {} : { http: options.http }),
    });
    keyring = m.keyring;
    const records = new SqliteCampaignRecords(join(dir, 'campaigns.db'));
    const service = new InProcessMigrationService(m.runner, m.router);
    // every start through the real service; the peak is read as each returns
    const migrations: MigrationService = {
      start: async (request) => {
        const started = await service.start(request);
        observed.peakRunning = Math.max(observed.peakRunning, m.runner.activeCount);
        return started;
      },
      status: (id) => service.status(id),
      cancel: (id, actor) => service.cancel(id, actor),
      retry: (id, actor) => service.retry(id, actor),
      list: (query) => service.list(query),
    };
    const deps: TickDeps = {
      campaigns: records,
      migrations,
      records: m.state,
      store,
      router: m.router,
      now: clock.now,
      settings: campaignSettings(m.config),
      ...(options.sink === undefined ? {} : { sink: options.sink }),
    };
    const tick = async (campaignId: string): Promise<TickResult> => {
      const result = await campaignTick(deps, campaignId, options.rules);
      observed.ticks += 1;
      const running = (await records.countMembers(campaignId)).running ?? 0;
      observed.peakMembersRunning = Math.max(observed.peakMembersRunning, running);
      return result;
    };
    const runner = new InProcessCampaignRunner({ tick, scheduler: m.scheduler, campaigns: records });
    const campaigns = new Campaigns({
      campaigns: records,
      router: m.router,
      launcher: runner,
      now: clock.now,
      maxMigrationAttempts: m.config.migration.migrationAttempts,
    });
    const { runner: migrationRunner, ...rest } = m;
    return {
      ...rest,
      migrationRunner,
      records,
      migrations: service,
      deps,
      campaignRunner: runner,
      campaigns,
    };
  };
  let parts = build();
  const h = {
    dir,
    clock,
    store,
    baseStore,
    observed,
    get parts() {
      return parts;
    },
    get campaigns() {
      return parts.campaigns;
    },
    get records() {
      return parts.records;
    },
    async routes(ids: readonly string[], at = SOURCE): Promise<void> {
      for (const id of ids) await parts.router.createRoute(id, at);
    },
    /** Run virtual time until no campaign loop and no migration runs. */
    settle(): Promise<void> {
      return parts.scheduler.runWhile(
        () => parts.campaignRunner.activeCount > 0 || parts.migrationRunner.activeCount > 0,
      );
    },
    /** Fire timers one at a time until `reached` holds. */
    async runUntil(reached: () => Promise<boolean> | boolean, limit = 100_000): Promise<void> {
      for (let i = 0; i < limit; i += 1) {
        if (await reached()) return;
        const fired = await parts.scheduler.runUntilIdle({ maxTimers: 1 });
        if (fired === 0 && !(await reached()))
          throw new Error('nothing left to run before the point waited for');
      }
      throw new Error('runUntil: too many timers');
    },
    /** The host dies: both runners stop (after the tick under way), then new parts over the same files. */
    async restart(): Promise<{ campaignsResumed: number; migrationsResumed: number }> {
      parts.campaignRunner.stop();
      parts.migrationRunner.stop();
      await parts.campaignRunner.idle();
      parts = build();
      const migrationsResumed = parts.migrationRunner.resumeAll();
      const campaignsResumed = await parts.campaignRunner.resumeAll();
      return { campaignsResumed, migrationsResumed };
    },
    async members(campaignId: string, state: MemberState): Promise<CampaignMember[]> {
      const out: CampaignMember[] = [];
      let afterSeq: number | undefined;
      for (;;) {
        const page = await parts.records.members(campaignId, {
          state,
          limit: 1000,
          ...(afterSeq === undefined ? {} : { afterSeq }),
        });
        out.push(...page);
        if (page.length < 1000) return out;
        afterSeq = page[page.length - 1]!.seq;
      }
    },
    async counts(campaignId: string) {
      return countsFrom(await parts.records.countMembers(campaignId));
    },
    /** Every migration record of the campaign. */
    async migrationRecords(campaignId: string): Promise<MigrationRecord[]> {
      const out: MigrationRecord[] = [];
      let continuation: string | undefined;
      do {
        const page = await parts.state.list({ campaignId, limit: 1000, continuation });
        out.push(...page.records);
        continuation = page.continuation;
      } while (continuation !== undefined);
      return out;
    },
    cleanup(): void {
      parts.campaignRunner.stop();
      parts.migrationRunner.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return h;
}

/** The most starts in any 60 s window (t − 60 s, t], from the start instants. */
export function worstMinute(startTimes: readonly number[]): number {
  const sorted = [...startTimes].sort((a, b) => a - b);
  let worst = 0;
  let from = 0;
  for (let i = 0; i < sorted.length; i += 1) {
    while ((sorted[from] as number) <= (sorted[i] as number) - 60_000) from += 1;
    worst = Math.max(worst, i - from + 1);
  }
  return worst;
}
