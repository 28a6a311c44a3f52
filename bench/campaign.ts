import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Campaigns } from '../shared/campaign/campaigns';
import { InProcessCampaignRunner } from '../shared/campaign/inProcess';
import type { TickDeps } from '../shared/campaign/service';
import { campaignSettings, campaignTick } from '../shared/campaign/tick';
import {
  type CampaignMember,
  type CampaignStatus,
  MAX_IDS_PER_REQUEST,
  endedCampaignStates,
  memberStates,
} from '../shared/campaign/types';
import { parseConfig } from '../shared/config';
import { newLocationDocument } from '../shared/core/lock/document';
import { createActivities } from '../shared/migration/activities';
import { InProcessRunner } from '../shared/migration/inProcess';
import { InProcessMigrationService } from '../shared/migration/inProcessService';
import type { MigrationStatus } from '../shared/migration/types';
import { migrationSettings } from '../shared/migration/workflow';
import { Router } from '../shared/core/router';
import { TokenKeyring } from '../shared/core/security/tokenKeys';
import type { CampaignRecords } from '../shared/campaign/store/ports/campaigns';
import { resetCounters } from '../shared/core/store/ports/locations';
import { SqliteCampaignRecords } from '../shared/campaign/store/sqlite/campaigns';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import { SqliteMigrationState } from '../shared/migration/store/sqlite/migrations';
import { ManualClock } from '../testkit/clock';
import { VirtualScheduler } from '../testkit/virtualScheduler';
import { median, table } from './lib';
import {
  type SqliteCounts,
  installSqliteCounts,
  perMember,
  resetSqliteCounts,
  sqliteCounts,
} from './sqliteCounts';

/**
 * Campaigns: many lock-only migrations as one campaign, at two scales.
 *
 * Embedded host, real time: the host (dev timing profile, SQLite file) runs in a process of its own
 * (bench/campaignHost.ts); this process is the operator and the poller. The routes are seeded into the
 * SQLite file through the routing store before the host starts (faster than 10,000 PUTs, and not what
 * is measured). It POSTs the campaign in pages of 1,000 ids (POST /campaigns, then
 * POST /campaigns/{id}/resources), polls GET /campaigns/{id} every 250 ms (the running count it shows,
 * and the host's VmRSS from /proc/<pid>/status), and when it has ended reads the campaign's migrations
 * (GET /migrations?campaignId=) and, once the host has exited, its members from the SQLite file.
 * Completion is the campaign's own createdAt → endedAt. Peak running is sampled (the status's
 * `running`), and exact afterwards: the most overlapping [startedAt, endedAt) intervals of its members
 * (what the campaign counts against maxConcurrent) and of its migrations' attempts. Store reads and
 * writes: the host serves no store counters, so its process counts them (the routing store's port
 * counters, and every SQLite statement: bench/sqliteCounts.ts) and answers over IPC; they include the
 * poller's GETs. CPU: the host's and this process's own, over the campaign.
 *
 * Fleet harness, virtual time: the same parts in one process (the real Campaigns service, campaign
 * tick, in-process campaign and migration runners, router and workflow) on the virtual scheduler, with
 * SQLite in memory and the production timing profile (hours of waiting that cost no real time).
 * Peak running is the migration runner's own count of migrations in flight, sampled at every virtual
 * instant, and exact from the members afterwards.
 */

const root = join(__dirname, '..');
const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const actor = { id: 'bench-operator' };

export interface VirtualSize {
  members: number;
  maxConcurrent: number;
  profile: 'dev' | 'production';
}

export interface CampaignBenchOptions {
  embedded: { members: number; maxConcurrent: number }[];
  virtual: VirtualSize[];
}

/** The most intervals [start, end) that hold at one instant (an end and a start at one instant do not overlap). */
export function maxOverlap(intervals: readonly (readonly [number, number])[]): number {
  const events: [number, number][] = [];
  for (const [start, end] of intervals) events.push([start, 1], [end, -1]);
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, step] of events) most = Math.max(most, (now += step));
  return most;
}

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
const pages = <T>(items: readonly T[]): T[][] => {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += MAX_IDS_PER_REQUEST)
    out.push(items.slice(i, i + MAX_IDS_PER_REQUEST));
  return out;
};

/** Every member of a campaign, in every state, paged through the port. */
async function allMembers(records: CampaignRecords, campaignId: string): Promise<CampaignMember[]> {
  const all: CampaignMember[] = [];
  for (const state of memberStates) {
    let afterSeq: number | undefined;
    for (;;) {
      const page = await records.members(campaignId, {
        state,
        limit: 1000,
        ...(afterSeq === undefined ? {} : { afterSeq }),
      });
      all.push(...page);
      if (page.length < 1000) break;
      afterSeq = (page.at(-1) as CampaignMember).seq;
    }
  }
  return all;
}

const memberIntervals = (members: readonly CampaignMember[]) =>
  members
    .filter((m) => m.startedAt !== undefined && m.endedAt !== undefined)
    .map((m) => [m.startedAt, m.endedAt] as [number, number]);

function procStatusKiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) : 0;
}
const mib = (kib: number) => Math.round((kib / 1024) * 10) / 10;
const cpuSeconds = (a: NodeJS.CpuUsage, b: NodeJS.CpuUsage) =>
  Math.round(((b.user - a.user + b.system - a.system) / 1e6) * 100) / 100;

interface HostReport {
  store: { nearestReads: number; writeRegionReads: number; replaces: number; creates: number; lists: number };
  sqlite: SqliteCounts;
  cpu: NodeJS.CpuUsage;
  activeMigrations: number;
}

function startHost(path: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    ['-r', join(root, 'scripts/ts-register.js'), join(root, 'bench/campaignHost.ts'), path],
    { cwd: root, stdio: ['ignore', 'pipe', 'inherit', 'ipc'] },
  );
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('the campaign host did not start')), 60_000);
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const match = /^READY (\S+)$/m.exec(out);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve({ child, url: match[1] });
      }
    });
    child.once('exit', (code) => reject(new Error(`the campaign host exited (${code})`)));
  });
}

const ask = (child: ChildProcess, message: { reset?: boolean }): Promise<HostReport> =>
  new Promise((resolve) => {
    child.once('message', (m) => resolve(m as HostReport));
    child.send(message);
  });

async function call<T>(url: string, method: string, body?: unknown): Promise<{ status: number; body: T }> {
  let response: Response;
  try {
    response = await fetch(url, {
      method,
      headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  } catch (error) {
    const cause = (error as { cause?: { message?: string; code?: string } }).cause;
    throw new Error(
      `${method} ${url}: ${(error as Error).message} (${cause?.code ?? ''} ${cause?.message ?? ''})`,
    );
  }
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : null) as T };
}

async function expectStatus<T>(url: string, method: string, body: unknown, want: number[]): Promise<T> {
  const answer = await call<T>(url, method, body);
  if (!want.includes(answer.status))
    throw new Error(`${method} ${url}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`);
  return answer.body;
}

/** Every migration status of a campaign, through GET /migrations?campaignId= (newest first, paged). */
async function campaignMigrations(url: string, campaignId: string): Promise<MigrationStatus[]> {
  const all: MigrationStatus[] = [];
  let continuation: string | undefined;
  do {
    const query = new URLSearchParams({ campaignId, limit: '1000' });
    if (continuation) query.set('continuation', continuation);
    const page = await expectStatus<{ items: MigrationStatus[]; continuation?: string }>(
      `${url}/api/migrations?${query}`,
      'GET',
      undefined,
      [200],
    );
    all.push(...page.items);
    continuation = page.continuation;
  } while (continuation);
  return all;
}

const attemptIntervals = (statuses: readonly MigrationStatus[]) =>
  statuses.flatMap((s) => {
    const attempts = s.attempts ?? [];
    const first = attempts[0];
    const last = attempts.at(-1);
    return first && last ? [[Date.parse(first.startedAt), Date.parse(last.endedAt)] as [number, number]] : [];
  });

export async function embeddedCampaign(options: { members: number; maxConcurrent: number }) {
  const dir = mkdtempSync(join(tmpdir(), 'routelock-campaign-'));
  const path = join(dir, 'routelock.db');
  const campaignId = `bench-${options.members}-${options.maxConcurrent}`;
  const resourceIds = ids(`c${options.maxConcurrent}`, options.members);
  try {
    // The routes, through the routing store, before the host opens the file.
    const seedStarted = performance.now();
    const seed = new SqliteStore(path);
    for (const id of resourceIds) await seed.create(newLocationDocument(id, SOURCE));
    await seed.close();
    const seedSeconds = (performance.now() - seedStarted) / 1000;

    const { child, url } = await startHost(path);
    const pid = child.pid as number;
    const exited = new Promise((r) => child.once('exit', r));
    try {
      const hostBefore = await ask(child, { reset: true });
      const mineBefore = process.cpuUsage();
      const started = performance.now();
      const [first, ...rest] = pages(resourceIds);
      await expectStatus(
        `${url}/api/campaigns`,
        'POST',
        {
          campaignId,
          target: TARGET,
          resources: first,
          maxConcurrent: options.maxConcurrent,
        },
        [202],
      );
      for (const page of rest)
        await expectStatus(
          `${url}/api/campaigns/${campaignId}/resources`,
          'POST',
          { resources: page },
          [200, 202],
        );
      const postedSeconds = (performance.now() - started) / 1000;
      let sampledPeak = 0;
      let rssPeakKiB = 0;
      let polls = 0;
      const pollMs: number[] = [];
      const loadBefore = loadavg();
      let status: CampaignStatus;
      const pollErrors: string[] = [];
      for (;;) {
        const asked = performance.now();
        try {
          status = await expectStatus<CampaignStatus>(
            `${url}/api/campaigns/${campaignId}`,
            'GET',
            undefined,
            [200],
          );
        } catch (error) {
          // a poll that failed on the wire is counted and asked again; the host must still be there
          pollErrors.push((error as Error).message);
          if (child.exitCode !== null || pollErrors.length > 20) throw error;
          await new Promise((r) => setTimeout(r, 250));
          continue;
        }
        polls += 1;
        pollMs.push(performance.now() - asked);
        sampledPeak = Math.max(sampledPeak, status.counts.running);
        rssPeakKiB = Math.max(rssPeakKiB, procStatusKiB(pid, 'VmRSS'));
        if (endedCampaignStates.has(status.status)) break;
        if (performance.now() - started > 3600_000) throw new Error(`${campaignId} did not end in an hour`);
        await new Promise((r) => setTimeout(r, 250));
      }
      const wallSeconds = (performance.now() - started) / 1000;
      const mine = cpuSeconds(mineBefore, process.cpuUsage());
      const hostAfter = await ask(child, {});
      const hostCpu = cpuSeconds(hostBefore.cpu, hostAfter.cpu);
      const hwmKiB = procStatusKiB(pid, 'VmHWM');
      const migrations = await campaignMigrations(url, campaignId);
      child.send({ close: true });
      await exited;

      const records = new SqliteCampaignRecords(path);
      const members = await allMembers(records, campaignId);
      records.close();
      const completionSeconds =
        status.endedAt !== undefined
          ? (Date.parse(status.endedAt) - Date.parse(status.createdAt)) / 1000
          : wallSeconds;
      const s = hostAfter.store;
      return {
        ...options,
        campaignId,
        routesSeededBy: 'SqliteStore.create into the file before the host starts',
        seedSeconds,
        postSeconds: postedSeconds,
        status: status.status,
        counts: status.counts,
        completionSeconds,
        wallSeconds,
        migrationsPerSecond: options.members / completionSeconds,
        peakRunning: {
          limit: options.maxConcurrent,
          sampled: sampledPeak,
          members: maxOverlap(memberIntervals(members)),
          migrations: maxOverlap(attemptIntervals(migrations)),
        },
        migrationsListed: migrations.length,
        polls,
        pollMs: { median: median(pollMs), max: Math.max(...pollMs) },
        pollErrors,
        /** The machine's 1-minute load average before and after (other work on it shows here). */
        loadAverage: [loadBefore[0] ?? 0, loadavg()[0] ?? 0],
        routingStorePerMigration: {
          reads: (s.nearestReads + s.writeRegionReads) / options.members,
          writes: (s.replaces + s.creates) / options.members,
        },
        sqlitePerMigration: perMember(hostAfter.sqlite, options.members),
        cpuSeconds: { host: hostCpu, loadGenerator: mine },
        hostRssMiB: { sampledPeak: mib(rssPeakKiB), highWaterMark: mib(hwmKiB) },
      };
    } finally {
      if (child.exitCode === null) child.kill('SIGTERM');
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function virtualCampaign(options: VirtualSize) {
  installSqliteCounts();
  // The peak RSS from here on (Linux: "5" resets VmHWM), not an earlier benchmark's in this process.
  try {
    writeFileSync('/proc/self/clear_refs', '5');
  } catch {
    // not Linux, or not allowed: the high-water mark is the process's since it started
  }
  const config = parseConfig({ ROUTELOCK_PROFILE: options.profile });
  const clock = new ManualClock();
  const scheduler = new VirtualScheduler(clock);
  const store = new SqliteStore(':memory:');
  const resourceIds = ids('v', options.members);
  for (const id of resourceIds) await store.create(newLocationDocument(id, SOURCE, clock.now()));
  const router = new Router({
    store,
    timing: config.timing,
    clock: clock.now,
    cacheMax: options.members + 10,
  });
  const state = new SqliteMigrationState(':memory:', clock.now);
  const keyring = TokenKeyring.ephemeral();
  const runner = new InProcessRunner({
    activities: createActivities(router, config.timing, { keyring, records: state }),
    keyring,
    state,
    scheduler,
    settings: migrationSettings(config),
    http: async () => ({ status: 200, body: null }),
  });
  const campaignRecords = new SqliteCampaignRecords(':memory:');
  const deps: TickDeps = {
    campaigns: campaignRecords,
    migrations: new InProcessMigrationService(runner, router),
    records: state,
    store,
    router,
    now: clock.now,
    settings: campaignSettings(config),
  };
  let ended = false;
  let ticks = 0;
  const campaignRunner = new InProcessCampaignRunner({
    tick: async (campaignId) => {
      ticks += 1;
      const result = await campaignTick(deps, campaignId);
      if (result.done) ended = true;
      return result;
    },
    scheduler,
    campaigns: campaignRecords,
  });
  const service = new Campaigns({
    campaigns: campaignRecords,
    router,
    launcher: campaignRunner,
    now: clock.now,
    maxMigrationAttempts: config.migration.migrationAttempts,
  });

  resetCounters(store.counters);
  resetSqliteCounts();
  const startedAt = clock.now();
  const started = performance.now();
  const [first, ...rest] = pages(resourceIds);
  const campaignId = 'virtual';
  await service.create(
    { campaignId, target: TARGET, resources: first, maxConcurrent: options.maxConcurrent },
    actor,
  );
  for (const page of rest) await service.addResources(campaignId, page, actor);
  let peak = 0;
  let rssPeak = 0;
  let instants = 0;
  while (!ended) {
    await scheduler.runUntilIdle({ maxTimers: 1 });
    peak = Math.max(peak, runner.activeCount);
    rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
    instants += 1;
    if (clock.now() - startedAt > 10_000 * 3600_000) throw new Error('the virtual campaign did not end');
  }
  const realSeconds = (performance.now() - started) / 1000;
  const virtualSeconds = (clock.now() - startedAt) / 1000;
  const counts = sqliteCounts();
  const c = store.counters;
  const status = await service.status(campaignId);
  const members = await allMembers(campaignRecords, campaignId);
  campaignRunner.stop();
  runner.stop();
  state.close();
  campaignRecords.close();
  await store.close();
  return {
    ...options,
    tickSeconds: config.campaign.tickSeconds,
    status: status.status,
    counts: status.counts,
    virtualSeconds,
    virtualHours: virtualSeconds / 3600,
    realSeconds,
    migrationsPerVirtualSecond: options.members / virtualSeconds,
    migrationsPerRealSecond: options.members / realSeconds,
    ticks,
    /** Virtual instants stepped through (peak running is sampled at each). */
    instants,
    peakRunning: {
      limit: options.maxConcurrent,
      sampled: peak,
      members: maxOverlap(memberIntervals(members)),
    },
    routingStorePerMigration: {
      reads: (c.nearestReads + c.writeRegionReads) / options.members,
      writes: (c.replaces + c.creates) / options.members,
    },
    sqlitePerMigration: perMember(counts, options.members),
    rssMiB: {
      sampledPeak: mib(rssPeak / 1024),
      highWaterMark: mib(procStatusKiB(process.pid, 'VmHWM')),
    },
  };
}

export async function runCampaign(options: CampaignBenchOptions) {
  const embedded = [];
  for (const size of options.embedded) embedded.push(await embeddedCampaign(size));
  const virtual = [];
  for (const size of options.virtual) virtual.push(await virtualCampaign(size));
  const fastest = embedded[0];
  const text = [
    table(
      [
        'embedded host, real time, dev timing',
        'maxConcurrent',
        'members',
        'completion s',
        'migrations/s',
        'peak running: sampled / members / migrations',
        'store reads / writes per migration (routes; all SQLite)',
        'CPU s host / load generator',
        'host RSS MiB (peak)',
      ],
      embedded.map((r) => [
        r.status,
        r.maxConcurrent,
        r.members,
        r.completionSeconds,
        r.migrationsPerSecond,
        `${r.peakRunning.sampled} / ${r.peakRunning.members} / ${r.peakRunning.migrations}`,
        `${r.routingStorePerMigration.reads.toFixed(2)} / ${r.routingStorePerMigration.writes.toFixed(2)}; ${r.sqlitePerMigration.reads} / ${r.sqlitePerMigration.writes}`,
        `${r.cpuSeconds.host} / ${r.cpuSeconds.loadGenerator}`,
        r.hostRssMiB.highWaterMark,
      ]),
    ),
    '',
    table(
      [
        'fleet harness, virtual time',
        'timing (tick s)',
        'maxConcurrent',
        'members',
        'virtual h',
        'real s',
        'migrations per virtual s',
        'peak running: sampled / members',
        'store reads / writes per migration (routes; all SQLite)',
        'RSS MiB (peak)',
      ],
      virtual.map((v) => [
        v.status,
        `${v.profile} (${v.tickSeconds})`,
        v.maxConcurrent,
        v.members,
        v.virtualHours,
        v.realSeconds,
        v.migrationsPerVirtualSecond,
        `${v.peakRunning.sampled} / ${v.peakRunning.members}`,
        `${v.routingStorePerMigration.reads.toFixed(2)} / ${v.routingStorePerMigration.writes.toFixed(2)}; ${v.sqlitePerMigration.reads} / ${v.sqlitePerMigration.writes}`,
        v.rssMiB.highWaterMark,
      ]),
    ),
    '',
    table(
      [
        'SQLite statements per migration, reads / writes',
        'routes',
        'migration records',
        'journal',
        'campaign + members',
        'audit',
      ],
      [
        ...embedded.map((r) => [`embedded, maxConcurrent ${r.maxConcurrent}`, r.sqlitePerMigration] as const),
        ...virtual.map(
          (v) => [`virtual, ${v.profile}, maxConcurrent ${v.maxConcurrent}`, v.sqlitePerMigration] as const,
        ),
      ].map(([name, c]) => [
        name,
        ...(['routes', 'migrations', 'journal', 'campaigns', 'audit'] as const).map(
          (g) => `${c[g].reads} / ${c[g].writes}`,
        ),
      ]),
    ),
    '',
    `Routes seeded through the routing store into the host's SQLite file before it starts. "routes" is ` +
      `the routing store's own port counters; "all SQLite" every statement the host process ran ` +
      `(bench/sqliteCounts.ts), the poller's GETs included. Peak running: sampled from GET ` +
      `/campaigns/{id} every 250 ms, then exact from the members' and the migrations' intervals. ` +
      (fastest && embedded[1]
        ? `Throughput at maxConcurrent ${fastest.maxConcurrent} ÷ at ${embedded[1].maxConcurrent}: ` +
          `${(fastest.migrationsPerSecond / embedded[1].migrationsPerSecond).toFixed(2)}. `
        : '') +
      `Load average (1 min) around the embedded runs: ${embedded
        .map((r) => r.loadAverage.map((l) => l.toFixed(1)).join(' → '))
        .join(', ')} on ${cpus().length} cores.`,
  ].join('\n');
  return {
    table: text,
    data: {
      embedded,
      virtual,
      ...(fastest && embedded[1]
        ? { throughputRatio: fastest.migrationsPerSecond / embedded[1].migrationsPerSecond }
        : {}),
    },
  };
}
