import { InvocationContext } from '@azure/functions';
import type { DurableClient } from 'durable-functions';
import { campaignOrchestrator } from '../../functions/campaignOrchestrator';
import { campaignTickActivity, campaignTickDeps, campaignTickHandler } from '../../functions/campaignTick';
import {
  CAMPAIGN_ORCHESTRATOR,
  DurableCampaignLauncher,
  WAKE_EVENT,
  campaignInstanceId,
} from '../../functions/durable/campaigns';
import { activityFunctionName } from '../../functions/durable/runOnDurable';
import { DurableMigrationService, ORCHESTRATOR } from '../../functions/durable/service';
import { activityNames, migrationOrchestrator } from '../../functions/migrationOrchestrator';
import { type Services, createServices } from '../../functions/services';
import { Campaigns } from '../../shared/campaign/campaigns';
import { startsAllowed, throttleAfterTick } from '../../shared/campaign/plan';
import type { TickResult } from '../../shared/campaign/service';
import { type TickRules, campaignTick } from '../../shared/campaign/tick';
import type { Activities } from '../../shared/migration/activities';
import type { MigrationService } from '../../shared/migration/service';
import { CANCEL_EVENT, type MigrationInput } from '../../shared/migration/types';
import { migrationSettings } from '../../shared/migration/workflow';
import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import { SqliteCampaignRecords } from '../../shared/campaign/store/sqlite/campaigns';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import { ManualClock } from '../../testkit/clock';
import {
  DurableReplay,
  type RaisedEvent,
  type ReplayResult,
  type WireEvent,
} from '../../testkit/durableReplay';
import { scratchConfig } from '../support/scratch';

/**
 * A campaign on the Durable runner, end to end on virtual time: the campaign orchestrator replayed
 * through durable-functions' executor (testkit/durableReplay.ts plays the extension), its
 * `campaignTick` activity for real (the Functions composition over SQLite stores), starting migrations
 * through DurableMigrationService into a task hub where every migration is the real migration
 * orchestrator, also replayed, stepped along the same clock (each paused when its next message is due
 * after the campaign's now, and resumed from its history at the next tick).
 */

const START = Date.UTC(2026, 5, 1);
const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const operator = { id: 'operator-1' };

/** The migrations' task hub: getStatus / startNew as the extension answers them (NonRunningStates). */
class MigrationTaskHub {
  readonly instances = new Map<
    string,
    {
      input: MigrationInput;
      runtimeStatus: string;
      history?: WireEvent[];
      customStatus?: unknown;
      /** Raised and not yet handed to its replay. */
      events: RaisedEvent[];
    }
  >();
  readonly raised: { instanceId: string; name: string }[] = [];
  starts = 0;
  peakRunning = 0;
  private readonly byFunction = new Map(activityNames.map((n) => [activityFunctionName(n), n]));

  constructor(
    private readonly activities: Activities,
    private readonly clock: ManualClock,
  ) {}

  private running(): number {
    return [...this.instances.values()].filter((i) => i.runtimeStatus === 'Running').length;
  }

  async getStatus(instanceId: string) {
    const instance = this.instances.get(instanceId);
    if (!instance)
      throw new Error('DurableClient error: Durable Functions extension replied with HTTP 404 response.');
    const { runtimeStatus, input, customStatus } = instance;
    return { instanceId, runtimeStatus, input, customStatus };
  }

  async startNew(name: string, options: { instanceId: string; input: MigrationInput }) {
    if (name !== ORCHESTRATOR) throw new Error(`unexpected orchestrator ${name}`);
    if (this.instances.get(options.instanceId)?.runtimeStatus === 'Running')
      throw new Error(`An instance with ID '${options.instanceId}' already exists.`);
    this.starts += 1;
    this.instances.set(options.instanceId, { input: options.input, runtimeStatus: 'Running', events: [] });
    this.peakRunning = Math.max(this.peakRunning, this.running());
    const now = this.clock.now();
    await this.step(options.instanceId, now);
    this.clock.set(now);
    return options.instanceId;
  }

  /** As the extension answers: 202 to a running instance (delivered at its next step), 410 otherwise. */
  async raiseEvent(instanceId: string, name: string, input: unknown): Promise<void> {
    const instance = this.instances.get(instanceId);
    if (!instance) throw new Error(`No instance with ID '${instanceId}' found.`);
    if (instance.runtimeStatus !== 'Running') return;
    this.raised.push({ instanceId, name });
    instance.events.push({ name, input, at: this.clock.now() });
  }

  /** Every running migration, up to `to`. */
  async advance(to: number): Promise<void> {
    for (const [instanceId, instance] of this.instances)
      if (instance.runtimeStatus === 'Running') await this.step(instanceId, to);
    this.clock.set(to);
  }

  private async step(instanceId: string, to: number): Promise<void> {
    const instance = this.instances.get(instanceId)!;
    let replay: DurableReplay | undefined = undefined;
    const current = new DurableReplay({
      orchestrator: migrationOrchestrator,
      name: ORCHESTRATOR,
      instanceId,
      input: instance.input,
      start: this.clock.now(),
      pauseAt: to,
      events: instance.events.splice(0),
      ...(instance.history ? { history: instance.history } : {}),
      activity: async (fn, input) => {
        this.clock.set(replay!.now);
        const name = this.byFunction.get(fn)!;
        return (this.activities[name] as (i: unknown) => Promise<unknown>)(input);
      },
    });
    replay = current;
    const result = await current.run();
    if (result.error === 'nothing left to deliver') throw new Error(`migration ${instanceId} is stuck`);
    instance.history = result.history;
    if (result.statuses.length > 0) instance.customStatus = result.statuses.at(-1);
    if (result.runtimeStatus !== 'Running') instance.runtimeStatus = result.runtimeStatus;
  }
}

/** The campaigns' task hub as the launcher sees it: it records the start; the test runs the instance. */
class CampaignTaskHub {
  readonly started = new Map<string, unknown>();
  async getStatus(instanceId: string) {
    if (!this.started.has(instanceId))
      throw new Error('DurableClient error: Durable Functions extension replied with HTTP 404 response.');
    return { instanceId, runtimeStatus: 'Running', input: this.started.get(instanceId) };
  }
  async startNew(_name: string, options: { instanceId: string; input: unknown }) {
    this.started.set(options.instanceId, options.input);
    return options.instanceId;
  }
  async raiseEvent(): Promise<void> {}
}

async function setup() {
  const config = scratchConfig({ ROUTELOCK_PROFILE: 'dev' });
  const clock = new ManualClock(START);
  const records = new SqliteMigrationState(':memory:');
  const campaignRecords = new SqliteCampaignRecords(':memory:');
  // compare-and-swaps on the campaign record that lost to another writer: two ticks really raced
  const cas = { lost: 0 };
  const replace = campaignRecords.replace.bind(campaignRecords);
  campaignRecords.replace = async (record, etag) => {
    const saved = await replace(record, etag);
    if (saved === null) cas.lost += 1;
    return saved;
  };
  const keyring = TokenKeyring.ephemeral();
  // the migration service needs the composition's router: bound once both exist
  const late: { migrations?: MigrationService } = {};
  const services: Services = await createServices(config, {
    clock: clock.now,
    store: new SqliteStore(':memory:'),
    records,
    campaignRecords,
    keyring,
    migrations: () => late.migrations!,
  });
  const migrationHub = new MigrationTaskHub(services.activities, clock);
  late.migrations = new DurableMigrationService(
    migrationHub as unknown as DurableClient,
    records,
    services.router,
    migrationSettings(config),
    clock.now,
    keyring,
  );
  const campaignHub = new CampaignTaskHub();
  const campaigns = new Campaigns({
    campaigns: campaignRecords,
    router: services.router,
    launcher: new DurableCampaignLauncher(campaignHub as unknown as DurableClient),
    now: clock.now,
    maxMigrationAttempts: config.migration.migrationAttempts,
  });
  return { clock, services, records, campaignRecords, migrationHub, campaignHub, campaigns, cas };
}

type Setup = Awaited<ReturnType<typeof setup>>;

interface RunOptions {
  /** Plant broken tick rules (the negative control). */
  rules?: TickRules;
  /** Run each tick twice at once: an activity delivered twice (at-least-once), or two tickers. */
  duplicateTicks?: boolean;
  history?: WireEvent[];
  stopAfterRun?: number;
  events?: RaisedEvent[];
}

/** The campaign's orchestration, its tick the real activity handler; peaks sampled at every tick. */
async function runOrchestration(h: Setup, campaignId: string, options: RunOptions = {}) {
  const peak = { membersRunning: 0, ticks: 0 };
  const context = new InvocationContext({ functionName: 'campaignTick' });
  const tick = (input: unknown): Promise<TickResult> =>
    options.rules
      ? campaignTick(campaignTickDeps(h.services, context), campaignId, options.rules)
      : campaignTickHandler(input, context, h.services);
  let replay: DurableReplay | undefined = undefined;
  const current = new DurableReplay({
    orchestrator: campaignOrchestrator,
    name: CAMPAIGN_ORCHESTRATOR,
    instanceId: campaignInstanceId(campaignId),
    input: h.campaignHub.started.get(campaignInstanceId(campaignId)),
    start: h.clock.now(),
    maxRuns: 5_000,
    ...(options.history ? { history: options.history } : {}),
    ...(options.stopAfterRun ? { stopWhen: ({ runs }) => runs === options.stopAfterRun } : {}),
    ...(options.events ? { events: options.events } : {}),
    activity: async (_name, input) => {
      await h.migrationHub.advance(replay!.now);
      const [result] = await Promise.all(options.duplicateTicks ? [tick(input), tick(input)] : [tick(input)]);
      peak.ticks += 1;
      const running = (await h.campaignRecords.countMembers(campaignId)).running ?? 0;
      peak.membersRunning = Math.max(peak.membersRunning, running);
      return result;
    },
  });
  replay = current;
  const result: ReplayResult = await current.run();
  return { result, peak };
}

async function createCampaign(h: Setup, n: number, maxConcurrent: number) {
  const ids = Array.from({ length: n }, (_, i) => `conv-${String(i).padStart(3, '0')}`);
  for (const id of ids) await h.services.router.createRoute(id, SOURCE);
  const { campaignId } = await h.campaigns.create(
    { target: TARGET, resources: ids, maxConcurrent },
    operator,
  );
  return { campaignId, ids };
}

async function expectAllMoved(h: Setup, campaignId: string, ids: string[]) {
  const status = await h.campaigns.status(campaignId);
  expect(status).toMatchObject({ status: 'Completed', counts: { total: ids.length, completed: ids.length } });
  // one migration per resource, each Completed, and every route at the target
  const page = await h.records.list({ campaignId, limit: 1000 });
  expect(page.records.map((r) => r.status.resourceId).sort()).toEqual(ids);
  expect(new Set(page.records.map((r) => r.status.status))).toEqual(new Set(['Completed']));
  expect(h.migrationHub.starts).toBe(ids.length);
  for (const id of ids)
    expect((await h.services.store.read(id, { from: 'writeRegion' })).doc).toMatchObject({
      location: TARGET,
      lock: null,
    });
}

describe('a campaign on the Durable runner', () => {
  test('20 resources, maxConcurrent 3: Completed on the orchestration, the limit never exceeded', async () => {
    const h = await setup();
    const { campaignId, ids } = await createCampaign(h, 20, 3);
    expect([...h.campaignHub.started.keys()]).toEqual([campaignInstanceId(campaignId)]);
    const { result, peak } = await runOrchestration(h, campaignId);
    expect(result).toMatchObject({ runtimeStatus: 'Completed', output: 'Completed' });
    await expectAllMoved(h, campaignId, ids);
    expect(h.migrationHub.peakRunning).toBe(3);
    expect(peak.membersRunning).toBeLessThanOrEqual(3);
    // no lock seed (the source of every fencing token) in the campaign's history or records
    const seeds = [...h.migrationHub.instances.values()].map((i) => i.input.lock.nonce);
    expect(seeds).toHaveLength(20);
    const campaignData = JSON.stringify([
      result.history,
      await h.campaignRecords.get(campaignId),
      await h.campaignRecords.members(campaignId, { state: 'completed', limit: 100 }),
    ]);
    expect(seeds.filter((nonce) => campaignData.includes(nonce))).toEqual([]);
    // dev timing, 1 s ticks: 20 migrations took 28 s of virtual time in 29 ticks
    expect(h.clock.now() - START).toBeLessThan(60_000);
    expect(peak.ticks).toBeLessThan(60);
  });

  test('negative control: a planted startsAllowed that ignores maxConcurrent is caught by the same checks', async () => {
    const h = await setup();
    const { campaignId } = await createCampaign(h, 20, 3);
    const rules: TickRules = {
      startsAllowed: (input) => startsAllowed({ ...input, limits: { ...input.limits, maxConcurrent: 100 } }),
      throttleAfterTick,
    };
    await runOrchestration(h, campaignId, { rules });
    expect(h.migrationHub.peakRunning).toBeGreaterThan(3);
  });

  test('a tick delivered twice at once (at-least-once activities, or two tickers): the limit still holds, no duplicate', async () => {
    const h = await setup();
    const { campaignId, ids } = await createCampaign(h, 20, 3);
    const { result } = await runOrchestration(h, campaignId, { duplicateTicks: true });
    expect(result).toMatchObject({ runtimeStatus: 'Completed', output: 'Completed' });
    await expectAllMoved(h, campaignId, ids);
    expect(h.migrationHub.peakRunning).toBeLessThanOrEqual(3);
    expect(h.cas.lost).toBeGreaterThan(0);
  });

  test('survives a crash of the orchestration mid-campaign: resumed from its history, it completes within the limit', async () => {
    const h = await setup();
    const { campaignId, ids } = await createCampaign(h, 20, 3);
    const before = await runOrchestration(h, campaignId, { stopAfterRun: 15 });
    expect(before.result.runtimeStatus).toBe('Running');
    const started = h.migrationHub.starts;
    expect(started).toBeGreaterThan(3);
    expect(started).toBeLessThan(20);
    const after = await runOrchestration(h, campaignId, { history: before.result.history });
    expect(after.result).toMatchObject({ runtimeStatus: 'Completed', output: 'Completed' });
    await expectAllMoved(h, campaignId, ids);
    expect(h.migrationHub.peakRunning).toBe(3);
  });
});

describe('cancel on the Durable runner', () => {
  test('cancel mid-campaign: the woken orchestration cancels the running migrations (their cancel event) and the pending, then ends Cancelled', async () => {
    const h = await setup();
    const { campaignId, ids } = await createCampaign(h, 20, 3);
    const before = await runOrchestration(h, campaignId, { stopAfterRun: 15 });
    const startedBeforeCancel = h.migrationHub.starts;
    await h.campaigns.cancel(campaignId, operator);
    // the wake reached the instance (our task hub records it; the run below delivers it)
    const after = await runOrchestration(h, campaignId, {
      history: before.result.history,
      events: [{ name: WAKE_EVENT, input: {}, at: h.clock.now() }],
    });
    expect(after.result).toMatchObject({ runtimeStatus: 'Completed', output: 'Cancelled' });
    // no start after the cancel; each running migration got the cancel event, once
    expect(h.migrationHub.starts).toBe(startedBeforeCancel);
    const cancels = h.migrationHub.raised.filter((e) => e.name === CANCEL_EVENT);
    expect(cancels.length).toBeGreaterThan(0);
    expect(new Set(cancels.map((e) => e.instanceId)).size).toBe(cancels.length);
    const status = await h.campaigns.status(campaignId);
    expect(status.status).toBe('Cancelled');
    expect(status.counts.running + status.counts.pending).toBe(0);
    expect(status.counts.cancelled).toBeGreaterThanOrEqual(ids.length - startedBeforeCancel);
    // the running ones heard the event: their migrations stopped and ended Cancelled (lock released)
    const page = await h.records.list({ campaignId, limit: 1000 });
    const outcomes = page.records.map((r) => r.status.status);
    expect(outcomes.filter((o) => o === 'Cancelled')).toHaveLength(cancels.length);
    expect(outcomes.every((o) => o === 'Cancelled' || o === 'Completed')).toBe(true);
    // every route is whole: at the source or the target, never left locked
    for (const id of ids) {
      const { doc } = await h.services.store.read(id, { from: 'writeRegion' });
      expect(doc).toMatchObject({ lock: null });
      expect([SOURCE.region, TARGET.region]).toContain(doc!.location.region);
    }
  });
});

describe('the campaignTick activity', () => {
  test('registered with a durable client input: the Functions composition builds its DurableMigrationService from it', async () => {
    const h = await setup();
    const services = await createServices(scratchConfig(), {
      store: new SqliteStore(':memory:'),
      campaignRecords: h.campaignRecords,
    });
    const [binding] = campaignTickActivity.extraInputs;
    expect(binding).toMatchObject({ type: 'durableClient' });
    const context = new InvocationContext({
      functionName: 'campaignTick',
      options: { trigger: { type: 'activityTrigger', name: 'input' }, extraInputs: [binding!] },
    });
    // what the extension hands the binding (durable-js OrchestrationClientInputData)
    context.extraInputs.set(binding!, {
      taskHubName: 'routelock',
      creationUrls: {},
      managementUrls: {},
      rpcBaseUrl: 'http://127.0.0.1:17071/durabletask/',
    });
    expect(campaignTickDeps(services, context).migrations).toBeInstanceOf(DurableMigrationService);
    // the control: without the binding there is no client to start migrations with
    const bare = new InvocationContext({ functionName: 'campaignTick' });
    expect(() => campaignTickDeps(services, bare)).toThrow(/durable client input binding/);
  });

  test('an input without campaignId is BadRequest; a campaign with no record stops its runner', async () => {
    const h = await setup();
    const warnings: string[] = [];
    const context = new InvocationContext({
      functionName: 'campaignTick',
      logHandler: (level, ...args) => void (level === 'warning' && warnings.push(String(args[0]))),
    });
    await expect(campaignTickHandler('c-1', context, h.services)).rejects.toMatchObject({
      code: 'BadRequest',
    });
    await expect(campaignTickHandler({ campaignId: 'c-gone' }, context, h.services)).resolves.toMatchObject({
      done: true,
    });
    expect(warnings).toEqual(['campaign c-gone has no record: its runner stops']);
    // a real campaign ticks (and is not done before its members have run)
    const { campaignId } = await createCampaign(h, 2, 1);
    await expect(campaignTickHandler({ campaignId }, context, h.services)).resolves.toMatchObject({
      done: false,
      status: 'Running',
    });
  });
});
