import { Campaigns } from '../../shared/campaign/campaigns';
import { InProcessCampaignRunner } from '../../shared/campaign/inProcess';
import type { CampaignService, TickDeps } from '../../shared/campaign/service';
import { campaignSettings, campaignTick } from '../../shared/campaign/tick';
import {
  type CampaignMember,
  type CampaignRecord,
  MAX_MAX_CONCURRENT,
  type MemberState,
  endedCampaignStates,
  memberStates,
} from '../../shared/campaign/types';
import { RouteLockError } from '../../shared/core/errors';
import type { Location } from '../../shared/core/lock/document';
import { InProcessMigrationService } from '../../shared/migration/inProcessService';
import { type MigrationService } from '../../shared/migration/service';
import { terminalStates } from '../../shared/migration/types';
import { Router } from '../../shared/core/router';
import type { CampaignRecords, VersionedCampaign } from '../../shared/campaign/store/ports/campaigns';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { SqliteCampaignRecords } from '../../shared/campaign/store/sqlite/campaigns';
import { ForwardingStore, type StoreCall } from '../../testkit/forwardingStore';
import { InstanceScheduler, storeFault } from './faults';
import { crash } from './orchestrator';
import { type Fleet, drawOffset, harnessError, note, pause, violation } from './state';
import type { FleetCampaignStats } from './types';
import { CRASH_STEPS, pick } from './world';

/**
 * A campaign in the fleet (docs/design.md §6.9): one campaign over every resource of the fleet, to one
 * target, with a `maxConcurrent` and a `startsPerMinute`, driven by the real `Campaigns` service,
 * `campaignTick` and `InProcessCampaignRunner` in the orchestrator's process, starting its migrations
 * through the ordinary start path of the crashing orchestrator's runner. The environment misbehaves:
 *
 * - the campaign store (the real SQLite adapter) fails at the fleet's fault rate: throttling (429),
 *   outages (503) and timeouts, half of the timed-out writes committed (the caller cannot tell);
 * - the process dies with the orchestrator's (after its planned journal step of each migration) and, on
 *   its own, at a campaign store call now and then: right before the call, or right after it committed,
 *   so mid-tick; a dead process does nothing more (every store call of its instance is refused), and
 *   the restarted one resumes every unfinished campaign (`resumeAll`);
 * - a rival deployment now and then starts a migration of a campaign resource (its members then end
 *   Conflict or find the rival's lock).
 *
 * Oracles, beside the fleet's own: at every virtual instant, never more of the campaign's migrations
 * unfinished than `maxConcurrent` (its migration records, the truth); never more starts than
 * `startsPerMinute` in any 60 s less the declared clock skew (each process's clock is off by up to half
 * of it); at most one campaign migration per resource; and at the end, the campaign Completed with
 * every member ended, each member's state its migration's outcome.
 */

export const FLEET_CAMPAIGN_ID = 'fleet-campaign';
const TARGET: Location = { region: 'northeurope' };
/** The share of campaign store calls at which the process dies (half before the call, half after). */
const CAMPAIGN_CRASH_SHARE = 0.002;
const RIVAL_START_SHARE = 0.003;

export interface CampaignActor {
  limits: { maxConcurrent: number; startsPerMinute?: number };
  /** The campaign store itself: the oracles read it directly. */
  truth: SqliteCampaignRecords;
  instance: CampaignInstance | null;
  /** True time of every start that created a migration. */
  starts: number[];
  /** The most starts in one window reported so far (each excess is reported once). */
  reportedRate: number;
  stats: FleetCampaignStats;
}

interface CampaignInstance {
  dead: boolean;
  runner: InProcessCampaignRunner;
  service: CampaignService;
}

class ProcessDied extends Error {
  constructor() {
    super('the process died');
  }
}

export function newCampaignActor(limits: CampaignActor['limits']): CampaignActor {
  return {
    limits,
    truth: new SqliteCampaignRecords(':memory:'),
    instance: null,
    starts: [],
    reportedRate: 0,
    stats: {
      maxConcurrent: limits.maxConcurrent,
      ...(limits.startsPerMinute === undefined ? {} : { startsPerMinute: limits.startsPerMinute }),
      members: {},
      status: 'none',
      starts: 0,
      peakRunning: 0,
      peakStartsInWindow: 0,
      ticks: 0,
      crashes: 0,
      faults: 0,
      rivalStarts: 0,
    },
  };
}

const alive = (instance: { dead: boolean }) => {
  if (instance.dead) throw new ProcessDied();
};

/** The routing store as a process sees it: nothing more once it has died, even a call already sent. */
class DyingStore extends ForwardingStore {
  constructor(
    inner: LocationStore,
    private readonly instance: { dead: boolean },
  ) {
    super(inner);
  }
  protected override async around<T>(_call: StoreCall, work: () => Promise<T>): Promise<T> {
    alive(this.instance);
    const result = await work();
    alive(this.instance);
    return result;
  }
}

type Method = keyof CampaignRecords;
const writes: ReadonlySet<Method> = new Set(['create', 'replace', 'addMembers', 'saveMembers']);

/**
 * The campaign store as one process sees it: the fleet's fault rate, the process dying at a call now
 * and then, and (negative controls) limits planted into what the tick reads.
 */
class ProcessCampaignRecords implements CampaignRecords {
  constructor(
    private readonly f: Fleet,
    private readonly a: CampaignActor,
    private readonly instance: { dead: boolean },
  ) {}

  private async call<T>(method: Method, work: () => Promise<T>): Promise<T> {
    const { random } = this.f;
    alive(this.instance);
    const dies = random() < CAMPAIGN_CRASH_SHARE ? (random() < 0.5 ? 'before' : 'after') : 'no';
    if (dies === 'before') this.die(method);
    if (random() < this.f.options.faultRate) {
      this.a.stats.faults += 1;
      const fault = pick(random, ['throttled', 'unavailable', 'timeout'] as const);
      if (fault === 'timeout' && writes.has(method) && random() < 0.5) await work();
      fail(fault);
    }
    const result = await work();
    if (dies === 'after') this.die(method);
    alive(this.instance);
    return result;
  }

  private die(method: Method): never {
    this.a.stats.crashes += 1;
    note(this.f, FLEET_CAMPAIGN_ID, `the process dies at a campaign store call (${method})`);
    crash(this.f);
    throw new ProcessDied();
  }

  /** The limits the tick is handed: the stored ones, or a control's. */
  private planted(v: VersionedCampaign): VersionedCampaign {
    const control = this.f.control;
    if (control === 'campaignIgnoresMaxConcurrent')
      return {
        ...v,
        record: { ...v.record, limits: { ...v.record.limits, maxConcurrent: MAX_MAX_CONCURRENT } },
      };
    if (control === 'campaignIgnoresStartsPerMinute') {
      const { startsPerMinute: _ignored, ...limits } = v.record.limits;
      return { ...v, record: { ...v.record, limits } };
    }
    return v;
  }

  create(record: CampaignRecord) {
    return this.call('create', () => this.a.truth.create(record));
  }
  get(campaignId: string) {
    return this.call('get', () => this.a.truth.get(campaignId)).then((v) => (v ? this.planted(v) : v));
  }
  replace(record: CampaignRecord, etag: string) {
    return this.call('replace', () => this.a.truth.replace(record, etag)).then((v) =>
      v ? this.planted(v) : v,
    );
  }
  list(query: Parameters<CampaignRecords['list']>[0]) {
    return this.call('list', () => this.a.truth.list(query));
  }
  idsInStates(states: Parameters<CampaignRecords['idsInStates']>[0]) {
    return this.call('idsInStates', () => this.a.truth.idsInStates(states));
  }
  addMembers(campaignId: string, members: Parameters<CampaignRecords['addMembers']>[1]) {
    return this.call('addMembers', () => this.a.truth.addMembers(campaignId, members));
  }
  members(campaignId: string, query: Parameters<CampaignRecords['members']>[1]) {
    return this.call('members', () => this.a.truth.members(campaignId, query));
  }
  saveMembers(campaignId: string, members: readonly CampaignMember[]) {
    return this.call('saveMembers', () => this.a.truth.saveMembers(campaignId, members));
  }
  countMembers(campaignId: string) {
    return this.call('countMembers', () => this.a.truth.countMembers(campaignId));
  }
}

const fail = storeFault;

/**
 * A new process's campaign parts, beside the orchestrator instance `f.runner` that has just started:
 * its own clock offset, its own view of the stores, the ordinary start path of that runner.
 */
export function startCampaignInstance(f: Fleet): void {
  const a = f.campaign;
  const runner = f.runner;
  if (!a || !runner) return;
  const offsetMs = drawOffset(f);
  const now = () => f.clock.now() + offsetMs;
  const instance = { dead: false } as CampaignInstance;
  const records = new ProcessCampaignRecords(f, a, instance);
  const store = new DyingStore(f.store, instance);
  const router = new Router({ store, timing: f.orchestratorTiming, clock: now });
  const starts = new InProcessMigrationService(runner, router);
  const migrations: MigrationService = {
    start: async (request) => {
      alive(instance);
      const started = await starts.start(request);
      if (started.created) {
        f.started += 1;
        f.crashPlan.set(started.migrationId, 1 + (f.started % CRASH_STEPS));
        f.running.set(request.resourceId, started.migrationId);
        a.starts.push(f.clock.now());
        note(f, request.resourceId, `${started.migrationId} started by the campaign`);
      }
      return started;
    },
    status: (id) => (alive(instance), starts.status(id)),
    cancel: (id, actor) => (alive(instance), starts.cancel(id, actor)),
    retry: (id, actor) => (alive(instance), starts.retry(id, actor)),
    list: (query) => (alive(instance), starts.list(query)),
  };
  const deps: TickDeps = {
    campaigns: records,
    migrations,
    records: {
      get: async (id) => {
        alive(instance);
        return f.state.get(id);
      },
    },
    store,
    router,
    now,
    settings: campaignSettings(f.config),
  };
  const campaignRunner = new InProcessCampaignRunner({
    tick: (campaignId) => {
      a.stats.ticks += 1;
      return campaignTick(deps, campaignId);
    },
    scheduler: new InstanceScheduler(f.scheduler, offsetMs, async () => undefined),
    campaigns: records,
  });
  const service = new Campaigns({
    campaigns: records,
    router,
    launcher: campaignRunner,
    now,
    maxMigrationAttempts: f.config.migration.migrationAttempts,
  });
  instance.runner = campaignRunner;
  instance.service = service;
  a.instance = instance;
  void resume(f, instance, campaignRunner);
}

/** A process start resumes every unfinished campaign, trying again while the store fails. */
async function resume(f: Fleet, instance: { dead: boolean }, runner: InProcessCampaignRunner) {
  for (;;) {
    if (instance.dead || f.done) return;
    try {
      await runner.resumeAll();
      return;
    } catch (error) {
      if (error instanceof ProcessDied) return;
      await pause(f, 5000);
    }
  }
}

/** The process died: its campaign runner stops, and nothing it had in flight does anything more. */
export function killCampaignInstance(f: Fleet): void {
  const instance = f.campaign?.instance;
  if (!instance || !f.campaign) return;
  f.campaign.instance = null;
  instance.dead = true;
  instance.runner.stop();
}

/**
 * The operator starts the campaign over every resource, as a client of the API would: a create that
 * failed is sent again with the same id; one answered `created: false` after a failure appends its
 * ids with addResources (what the service's contract says to do), again until taken.
 */
export async function createCampaign(f: Fleet): Promise<void> {
  const a = f.campaign as CampaignActor;
  let created: boolean | undefined;
  while (created === undefined) {
    const service = a.instance?.service;
    if (service) {
      try {
        created = (
          await service.create(
            {
              campaignId: FLEET_CAMPAIGN_ID,
              target: TARGET,
              resources: f.resources,
              maxConcurrent: a.limits.maxConcurrent,
              ...(a.limits.startsPerMinute === undefined
                ? {}
                : { startsPerMinute: a.limits.startsPerMinute }),
            },
            { id: 'fleet-operator' },
          )
        ).created;
        note(f, FLEET_CAMPAIGN_ID, `the operator created the campaign (created: ${created})`);
        break;
      } catch (error) {
        if (!(error instanceof ProcessDied) && !(error instanceof RouteLockError)) throw error;
        note(f, FLEET_CAMPAIGN_ID, `the operator's create failed: ${(error as Error).message}`);
      }
    }
    await pause(f, 5000);
  }
  if (created) return;
  for (;;) {
    const service = a.instance?.service;
    if (service) {
      try {
        const added = await service.addResources(FLEET_CAMPAIGN_ID, f.resources, { id: 'fleet-operator' });
        note(f, FLEET_CAMPAIGN_ID, `the operator appended its ids: ${added.added} added`);
        return;
      } catch (error) {
        if (error instanceof RouteLockError && error.code === 'CampaignEnded') {
          note(f, FLEET_CAMPAIGN_ID, `the operator could not append its ids: ${error.message}`);
          return;
        }
        if (!(error instanceof ProcessDied) && !(error instanceof RouteLockError)) throw error;
      }
    }
    await pause(f, 5000);
  }
}

/** Now and then a rival deployment starts a migration of a resource nobody is migrating. */
export function rivalStart(f: Fleet, busy: Set<string>): void {
  const a = f.campaign as CampaignActor;
  if (!f.rival || f.random() >= RIVAL_START_SHARE) return;
  const idle = f.resources.filter((id) => !busy.has(id) && !f.deleting.has(id));
  if (idle.length === 0) return;
  const resourceId = pick(f.random, idle);
  const { record, created } = f.rival.start({ resourceId, target: { region: 'eastus' } });
  if (!created) return;
  a.stats.rivalStarts += 1;
  busy.add(resourceId);
  f.running.set(resourceId, record.migrationId);
  note(f, resourceId, `${record.migrationId} started (rival, beside the campaign)`);
}

/** The campaign has ended, as its record says. */
export async function campaignEnded(f: Fleet): Promise<boolean> {
  const stored = await f.campaign?.truth.get(FLEET_CAMPAIGN_ID);
  return stored !== null && stored !== undefined && endedCampaignStates.has(stored.record.status);
}

/** At every virtual instant: the campaign's unfinished migrations against maxConcurrent. */
export function checkCampaignStep(f: Fleet): void {
  const a = f.campaign;
  if (!a) return;
  const running = f.state.unfinished().filter((r) => r.campaignId === FLEET_CAMPAIGN_ID);
  a.stats.peakRunning = Math.max(a.stats.peakRunning, running.length);
  if (running.length > a.limits.maxConcurrent)
    violation(
      f,
      FLEET_CAMPAIGN_ID,
      `${running.length} campaign migrations running, over maxConcurrent ${a.limits.maxConcurrent}: ${running
        .map((r) => r.migrationId)
        .slice(0, 12)
        .join(', ')}`,
      'campaign',
    );
  checkRate(f, a);
}

/** No window of 60 s less the declared skew holds more than startsPerMinute starts (true time). */
function checkRate(f: Fleet, a: CampaignActor): void {
  const last = a.starts.at(-1);
  if (last === undefined) return;
  const windowMs = 60_000 - f.timing.clockSkewSeconds * 1000;
  const inWindow = a.starts.filter((t) => t > last - windowMs).length;
  a.stats.peakStartsInWindow = Math.max(a.stats.peakStartsInWindow, inWindow);
  const limit = a.limits.startsPerMinute;
  if (limit !== undefined && inWindow > limit && inWindow > a.reportedRate) {
    a.reportedRate = inWindow;
    violation(
      f,
      FLEET_CAMPAIGN_ID,
      `${inWindow} campaign starts within ${windowMs / 1000} s, over startsPerMinute ${limit}`,
      'campaign',
    );
  }
}

const outcomeOf: Partial<Record<MemberState, string>> = {
  completed: 'Completed',
  noOp: 'NoOp',
  failed: 'Failed',
  conflict: 'Conflict',
  cancelled: 'Cancelled',
};

/** At the end: Completed, every member ended as its migration did, one campaign migration a resource. */
export async function judgeCampaign(f: Fleet): Promise<void> {
  const a = f.campaign;
  if (!a) return;
  f.stats.campaign = a.stats;
  const stored = await a.truth.get(FLEET_CAMPAIGN_ID);
  a.stats.status = stored?.record.status ?? 'none';
  a.stats.starts = a.starts.length;
  const members: CampaignMember[] = [];
  for (const state of memberStates)
    members.push(...(await a.truth.members(FLEET_CAMPAIGN_ID, { state, limit: 100_000 })));
  for (const m of members) a.stats.members[m.state] = (a.stats.members[m.state] ?? 0) + 1;
  if (f.options.stopAtFirstViolation) return;
  if (a.stats.status !== 'Completed')
    violation(f, FLEET_CAMPAIGN_ID, `the campaign ended ${a.stats.status}, not Completed`, 'lifecycle');
  if (members.length !== f.resources.length)
    violation(
      f,
      FLEET_CAMPAIGN_ID,
      `${members.length} members of ${f.resources.length} resources`,
      'lifecycle',
    );
  const records = f.state.recent(1_000_000).filter((r) => r.campaignId === FLEET_CAMPAIGN_ID);
  const byResource = new Map<string, string[]>();
  for (const r of records)
    byResource.set(r.resourceId, [...(byResource.get(r.resourceId) ?? []), r.migrationId]);
  for (const [resourceId, ids] of byResource)
    if (ids.length > 1)
      violation(
        f,
        resourceId,
        `${ids.length} campaign migrations of one resource: ${ids.join(', ')}`,
        'campaign',
      );
  for (const m of members) {
    if (m.state === 'pending' || m.state === 'running') {
      violation(f, m.resourceId, `campaign member ended ${m.state}`, 'lifecycle');
      continue;
    }
    const want = outcomeOf[m.state];
    if (want === undefined) continue; // skipped: its start was refused for good
    const record = m.migrationId === undefined ? null : await f.state.get(m.migrationId);
    const got = record?.status.status;
    if (!record || !terminalStates.has(record.status.status) || got !== want)
      violation(
        f,
        m.resourceId,
        `campaign member ${m.state}, its migration ${m.migrationId ?? '(none)'} ${got ?? 'not found'}`,
        'lifecycle',
      );
  }
}

export const campaignHarnessError = (f: Fleet) => harnessError(f, FLEET_CAMPAIGN_ID);
