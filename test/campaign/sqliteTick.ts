import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Campaigns } from '../../shared/campaign/campaigns';
import type { CampaignLauncher, TickDeps } from '../../shared/campaign/service';
import { campaignTick } from '../../shared/campaign/tick';
import type { MigrationRecord } from '../../shared/migration/records';
import type { MigrationRequest } from '../../shared/migration/service';
import type { CampaignRecords } from '../../shared/campaign/store/ports/campaigns';
import { SqliteCampaignRecords } from '../../shared/campaign/store/sqlite/campaigns';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { TARGET } from './harness';

/**
 * A campaign tick against real SQLite campaign records, with a start that ends its migration at once (or
 * refuses), and seams on the records: a hook that runs just before a save or an append, and a count of the
 * member counts. For the races and refusals a whole host would hide. Each test file removes its
 * directories with `afterAll(removeTickDirs)`.
 */

const launcher: CampaignLauncher = { launch: async () => {}, wake: async () => {} };
const dirs: string[] = [];

/** Removes every directory `sqliteTick` made in this test file. */
export function removeTickDirs(): void {
  dirs.forEach((d) => rmSync(d, { recursive: true, force: true }));
}

type Start = (
  request: MigrationRequest,
) => Promise<{ migrationId: string; instanceId: string; created: boolean }>;

/** Runs before each start: throws to refuse it. */
export type BeforeStart = (request: MigrationRequest) => Promise<void>;

/**
 * The campaign service and the tick's dependencies over one fresh SQLite file, on a clock `advance` moves.
 */
export function sqliteTick(startImpl?: BeforeStart) {
  const dir = mkdtempSync(join(tmpdir(), 'routelock-tick-'));
  dirs.push(dir);
  const records = new SqliteCampaignRecords(join(dir, 'campaigns.db'));
  let now = Date.parse('2025-01-01T00:00:00Z');
  const clock = () => now;
  const migrations = new Map<string, MigrationRecord>();
  // the tick passes each listed copy on with its member's start: the router is never asked
  const router = { allowedRegions: null } as unknown as TickDeps['router'];
  const hooks: { beforeReplace?: () => Promise<void>; beforeAddMembers?: () => Promise<void> } = {};
  let counted = 0;
  // the records with seams: a hook runs once, just before the write it names
  const wrapped: CampaignRecords = Object.create(records) as CampaignRecords;
  wrapped.replace = async (record, etag) => {
    const hook = record.tickLease === undefined ? hooks.beforeReplace : undefined;
    if (hook) {
      delete hooks.beforeReplace;
      await hook();
    }
    return records.replace(record, etag);
  };
  wrapped.addMembers = async (id, members) => {
    const hook = hooks.beforeAddMembers;
    if (hook) {
      delete hooks.beforeAddMembers;
      await hook();
    }
    return records.addMembers(id, members);
  };
  wrapped.countMembers = async (id) => {
    counted += 1;
    return records.countMembers(id);
  };
  const ended = (request: MigrationRequest): MigrationRecord =>
    ({
      migrationId: request.migrationId,
      resourceId: request.resourceId,
      done: true,
      createdAt: new Date(now).toISOString(),
      status: {
        migrationId: request.migrationId,
        resourceId: request.resourceId,
        status: 'Completed',
        phase: 'released',
        target: TARGET,
        timeline: { prelockAt: null, hardDeleteAt: null, writeAt: null, swappedAt: null },
      },
    }) as unknown as MigrationRecord;
  const start: Start = async (request) => {
    if (startImpl) await startImpl(request);
    migrations.set(request.migrationId as string, ended(request));
    return { migrationId: request.migrationId as string, instanceId: 'i', created: true };
  };
  const deps: TickDeps = {
    campaigns: wrapped,
    migrations: { start } as unknown as TickDeps['migrations'],
    records: { get: async (id: string) => migrations.get(id) ?? null },
    store: {} as LocationStore,
    router,
    now: clock,
    settings: { tickMs: 5000 },
  };
  const service = new Campaigns({
    campaigns: wrapped,
    router,
    launcher,
    now: clock,
    maxMigrationAttempts: 3,
  });
  return {
    records,
    service,
    deps,
    hooks,
    counted: () => counted,
    advance: (ms: number) => (now += ms),
  };
}

export type SqliteTick = ReturnType<typeof sqliteTick>;

/** Ticks 61 s apart until a tick says done (at most `most` ticks). */
export async function tickUntilDone(s: SqliteTick, campaignId: string, most = 50): Promise<void> {
  for (let i = 0; i < most; i += 1) {
    if ((await campaignTick(s.deps, campaignId)).done) return;
    s.advance(61_000);
  }
}
