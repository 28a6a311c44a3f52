import { writeFileSync } from 'node:fs';
import { type Server, createServer } from 'node:http';
import { join } from 'node:path';
import type { OrchestrationHandler } from 'durable-functions';
import { campaignOrchestrator } from '../../functions/campaignOrchestrator';
import { campaignInstanceId } from '../../functions/durable/campaigns';
import { migrationOrchestrator } from '../../functions/migrationOrchestrator';
import { MessageStore } from '../../examples/message-store/service';
import { WORKFLOW_VERSION } from '../../shared/migration/types';
import {
  DurableReplay,
  type ReplayOptions,
  type ReplayResult,
  type WireEvent,
} from '../../testkit/durableReplay';
import { poll } from '../support/poll';
import { scratchDir } from '../support/scratch';
import { type EpisodeComparison, compareEpisodes, engineHistory, outgoing, typeName } from './engineHistory';
import { type FunctionsHost, hostSecret, json, startHost, watchMigration } from './host';
import { ACTIVITIES, ORCHESTRATORS } from './replayScenarios';

/**
 * testkit/durableReplay.ts held against the real Durable engine (hosts/webjobs): each path the harness
 * models runs on the engine (the orchestrators of replayScenarios.ts, and migrations of the app), and
 * its history, read event for event from the task hub, is compared with the harness's:
 * - episode by episode: the harness replays the engine's history up to each episode's messages and
 *   must append what the engine appended (event types, EventIds, activity names, timer fire times,
 *   the outcome);
 * - whole runs: the harness runs the scenario on its own clock and must schedule the same tasks and
 *   timers under the same ids and end the same way.
 * One host for the file, the scenarios started together.
 */

jest.setTimeout(180_000);

const ROOT = join(__dirname, '../..');
const HUB = `replay${Date.now().toString(36)}`;

/**
 * The timers an execution created (TimerCreated), those set for an instant an earlier one was set for,
 * and the re-sleeps among them: a timer created in the episode its own instant's timer woke, before that
 * instant (the engine fires a timer up to a second early; a copy loop of version 6 runs what was due).
 */
function timerRepeats(events: readonly WireEvent[]): { timers: number; repeated: number; reslept: number } {
  const seen = new Set<string>();
  let woken: WireEvent | undefined;
  const counts = { timers: 0, repeated: 0, reslept: 0 };
  for (const e of events) {
    if (e.EventType === 12) woken = undefined;
    if (e.EventType === 11) woken = e;
    if (e.EventType !== 10) continue;
    const at = Date.parse(e.FireAt as string);
    counts.timers += 1;
    if (seen.has(String(at))) counts.repeated += 1;
    seen.add(String(at));
    if (woken && Date.parse(woken.FireAt as string) === at) counts.reslept += 1;
  }
  return counts;
}

describe('testkit/durableReplay against the real Durable engine', () => {
  let host: FunctionsHost;
  let store: MessageStore;
  let participant: Server;
  let participantUrl = '';
  const polls: string[] = [];
  const slowCopies: string[] = [];

  /** The worker loads the app as deployed (dist/) and the scenarios beside it. */
  function scenarioApp(): string {
    const dir = scratchDir('replay-app-');
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ main: 'app.js' }));
    writeFileSync(
      join(dir, 'app.js'),
      [
        `require(${JSON.stringify(join(ROOT, 'scripts/ts-register.js'))});`,
        `const { readdirSync } = require('node:fs');`,
        `const dist = ${JSON.stringify(join(ROOT, 'dist/functions'))};`,
        `for (const f of readdirSync(dist).filter((f) => f.endsWith('.js')).sort()) require(dist + '/' + f);`,
        `require(${JSON.stringify(join(__dirname, 'replayScenarios.ts'))}).register();`,
      ].join('\n'),
    );
    return dir;
  }

  beforeAll(async () => {
    // the callHttp scenario's participant: 202 + Location + Retry-After 1 to the POST, 200 to the poll
    participant = createServer((req, res) => {
      req.resume();
      if (req.method === 'POST') {
        res.writeHead(202, { Location: `${participantUrl}/jobs/1`, 'Retry-After': '1' });
        res.end();
        return;
      }
      polls.push(String(req.url));
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('copied');
    });
    await new Promise<void>((resolve) => participant.listen(0, '127.0.0.1', resolve));
    participantUrl = `http://127.0.0.1:${(participant.address() as { port: number }).port}`;
    const dir = scratchDir('participant-');
    store = new MessageStore({
      regions: { westeurope: join(dir, 'we.db'), eastus: join(dir, 'eus.db') },
      honoursPreferWait: false,
      // a resource named slow-… takes its bulk copy long enough to cancel it while it runs
      copyDelayMs: (job) => {
        if (!job.resourceId.startsWith('slow-') || job.step !== 'bulkCopy') return 200;
        slowCopies.push(job.resourceId);
        return 20_000;
      },
    });
    await store.listen();
    host = await startHost({
      ROUTELOCK_APP_ROOT: scenarioApp(),
      ROUTELOCK_TASK_HUB: HUB,
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'messages', url: `${store.url}/migrate` }]),
    });
    store.useRouting(host.api);
    process.stdout.write(`functionsHost/replayHarness: host listening after ${host.startedMs} ms\n`);
  }, 620_000);

  afterAll(async () => {
    await host?.stop();
    await store?.close();
    await new Promise((resolve) => participant?.close(resolve));
  });

  const durableApi = (path: string) =>
    `${host.origin}/runtime/webhooks/durabletask/${path}${path.includes('?') ? '&' : '?'}code=${encodeURIComponent(hostSecret(host))}`;

  async function start(name: string, instanceId: string, input: unknown): Promise<void> {
    const started = await fetch(durableApi(`orchestrators/${name}/${instanceId}`), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(input),
    });
    expect(started.status).toBe(202);
  }

  async function raise(instanceId: string, event: string, input: unknown): Promise<void> {
    const raised = await fetch(durableApi(`instances/${instanceId}/raiseEvent/${event}`), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(input),
    });
    if (raised.status !== 202)
      throw new Error(
        `raiseEvent ${event} answered ${raised.status}: ${await raised.text()}; the instance: ${JSON.stringify((await json(durableApi(`instances/${instanceId}?showHistory=true`))).body)}`,
      );
  }

  async function ended(instanceId: string, statuses = ['Completed', 'Failed', 'Terminated']) {
    return poll(
      async () => (await json(durableApi(`instances/${instanceId}`))).body,
      (body) => statuses.includes(String(body.runtimeStatus)),
      90_000,
    );
  }

  /** Every episode of every execution: the harness must append what the engine appended. */
  async function expectSameEpisodes(
    instanceId: string,
    orchestrator: OrchestrationHandler,
    name: string,
  ): Promise<WireEvent[][]> {
    const executions = await engineHistory(host.storage, HUB, instanceId);
    const compared: EpisodeComparison[] = [];
    for (const execution of executions)
      compared.push(...(await compareEpisodes(execution, orchestrator, name)));
    const differing = compared.filter((c) => JSON.stringify(c.engine) !== JSON.stringify(c.harness));
    expect(compared.length).toBeGreaterThan(0);
    if (differing.length > 0)
      throw new Error(
        `${instanceId}: the harness appends other events than the engine in ${differing.length} of ${compared.length} episodes:\n${JSON.stringify(differing, null, 1)}\nthe engine's history:\n${JSON.stringify(executions, null, 1)}`,
      );
    return executions;
  }

  /** The harness's own run of a scenario: the same tasks and timers under the same ids, the same end. */
  async function expectSameRun(
    executions: WireEvent[][],
    name: string,
    input: unknown,
    options: Partial<ReplayOptions> = {},
  ): Promise<ReplayResult> {
    const last = executions[executions.length - 1] as WireEvent[];
    const result = await new DurableReplay({
      orchestrator: ORCHESTRATORS[name] as OrchestrationHandler,
      name,
      instanceId: 'harness',
      input,
      start: Date.UTC(2026, 0, 1),
      version: `${WORKFLOW_VERSION}.0`,
      dotNetDates: true,
      activity: async (fn, activityInput) => (ACTIVITIES[fn] as (i: unknown) => unknown)(activityInput),
      ...options,
    }).run();
    // The timer times are the clock's (checked episode by episode above) and the batching of messages
    // into episodes is the queue's; the tasks and timers scheduled, their ids and the end must be equal.
    // An activity's exception is worded by the worker stand-in (hosts/webjobs), not by the engine: only
    // its words are compared, not their spacing nor the details after the first line.
    const words = (value: unknown): unknown =>
      typeof value === 'string' ? (value.split('\n')[0] as string).replace(/\s+/g, ' ').trim() : value;
    const shape = (events: WireEvent[]) =>
      events
        .map(outgoing)
        .filter((e) => e.type !== 'OrchestratorCompleted' && e.id !== -1)
        .map(({ fireAt, result, ...rest }) => ({
          ...rest,
          ...(fireAt === undefined ? {} : { timer: true }),
          ...(result === undefined
            ? {}
            : { result: JSON.parse(JSON.stringify(result), (_k, v: unknown) => words(v)) as unknown }),
        }));
    expect(shape(result.history)).toEqual(shape(last));
    // how the execution opens (a continued one: closed before the orchestrator runs)
    const opening = (events: WireEvent[]) => events.slice(0, 3).map((e) => typeName(e.EventType));
    expect(opening(result.history)).toEqual(opening(last));
    return result;
  }

  test('the binding durable-js is given: schema, timer limits, HTTP poll default, version', async () => {
    await start('replayBinding', 'binding-1', null);
    const body = await ended('binding-1');
    const executions = await expectSameEpisodes(
      'binding-1',
      ORCHESTRATORS.replayBinding as never,
      'replayBinding',
    );
    await expectSameRun(executions, 'replayBinding', null);
    expect(body.runtimeStatus).toBe('Completed');
  });

  test('activities in sequence around a timer; a fan-out, then a race the activity wins (its timer cancelled)', async () => {
    await Promise.all([start('replaySequence', 'sequence-1', null), start('replayFanOut', 'fanout-1', null)]);
    for (const [id, name] of [
      ['sequence-1', 'replaySequence'],
      ['fanout-1', 'replayFanOut'],
    ] as const) {
      expect((await ended(id)).runtimeStatus).toBe('Completed');
      await expectSameRun(await expectSameEpisodes(id, ORCHESTRATORS[name] as never, name), name, null);
    }
  });

  test('activity retry: a failure, its retry timer, a new attempt; all attempts failed, the back-compat timer', async () => {
    await start('replayRetry', 'retry-1', { key: 'retry-1' });
    expect((await ended('retry-1')).runtimeStatus).toBe('Completed');
    const executions = await expectSameEpisodes('retry-1', ORCHESTRATORS.replayRetry as never, 'replayRetry');
    await expectSameRun(executions, 'replayRetry', { key: 'retry-1' });
  });

  test('an orchestrator that throws: Failed, worded as the extension words it', async () => {
    await start('replayFails', 'fails-1', { key: 'fails-1' });
    expect((await ended('fails-1')).runtimeStatus).toBe('Failed');
    const executions = await expectSameEpisodes('fails-1', ORCHESTRATORS.replayFails as never, 'replayFails');
    await expectSameRun(executions, 'replayFails', { key: 'fails-1' });
  });

  test('continueAsNew: each execution numbered afresh, the last one completes', async () => {
    await start('replayContinue', 'continue-1', { n: 0 });
    expect((await ended('continue-1')).output).toBe(2);
    const executions = await expectSameEpisodes(
      'continue-1',
      ORCHESTRATORS.replayContinue as never,
      'replayContinue',
    );
    // the Azure Storage provider keeps the last execution's history only
    expect(executions).toHaveLength(1);
    const run = await expectSameRun(executions, 'replayContinue', { n: 0 });
    expect(run.continuedAsNewWith).toEqual([{ n: 1 }, { n: 2 }]);
  });

  test('external events: one raised at once (buffered if early), one raced against timers in a loop', async () => {
    await start('replayEvents', 'events-1', null);
    await raise('events-1', 'go', { n: 1 });
    await new Promise((resolve) => setTimeout(resolve, 4500));
    await raise('events-1', 'poke', 'now');
    const body = await ended('events-1');
    expect(body.output).toMatchObject({ go: { n: 1 }, poke: 'now' });
    await expectSameEpisodes('events-1', ORCHESTRATORS.replayEvents as never, 'replayEvents');
  });

  test('callHttp with polling: POST, 202 + Location + Retry-After, the poll timer, the GET', async () => {
    await start('replayHttp', 'http-1', { url: `${participantUrl}/copy` });
    const body = await ended('http-1');
    expect(body.output).toEqual({ statusCode: 200, content: 'copied' });
    expect(polls).toEqual(['/jobs/1']);
    const executions = await expectSameEpisodes('http-1', ORCHESTRATORS.replayHttp as never, 'replayHttp');
    await expectSameRun(
      executions,
      'replayHttp',
      { url: `${participantUrl}/copy` },
      {
        http: (request) =>
          request.method === 'POST'
            ? { statusCode: 202, headers: { Location: `${participantUrl}/jobs/1`, 'Retry-After': '1' } }
            : { statusCode: 200, content: 'copied' },
      },
    );
  });

  test('a 10-day timer: the first piece the extension schedules', async () => {
    await start('replayLongTimer', 'long-1', null);
    const first = await poll(
      () => engineHistory(host.storage, HUB, 'long-1'),
      (executions) => (executions[0] ?? []).some((e) => e.EventType === 13),
      30_000,
    );
    expect(first).toHaveLength(1);
    await expectSameEpisodes('long-1', ORCHESTRATORS.replayLongTimer as never, 'replayLongTimer');
    await fetch(durableApi('instances/long-1/terminate?reason=done'), { method: 'POST' });
  });

  async function migrate(resourceId: string): Promise<{ migrationId: string; instanceId: string }> {
    const put = await json(`${host.api}/routes/${resourceId}`, {
      method: 'PUT',
      body: JSON.stringify({ location: { region: 'westeurope' } }),
    });
    expect(put.status).toBe(201);
    const started = await json(`${host.api}/migrations`, {
      method: 'POST',
      body: JSON.stringify({ resourceId, target: { region: 'eastus' } }),
    });
    expect(started.status).toBe(202);
    return { migrationId: String(started.body.migrationId), instanceId: String(started.body.instanceId) };
  }

  test('migrations of the app: one completed with its participant polled, one cancelled during its bulk copy', async () => {
    const walk = await migrate(`walk-${Date.now()}`);
    const slowId = `slow-${Date.now()}`;
    const slow = await migrate(slowId);
    await poll(
      () => slowCopies.includes(slowId),
      (started) => started,
      60_000,
    );
    const cancel = await json(`${host.api}/migrations/${encodeURIComponent(slow.migrationId)}/cancel`, {
      method: 'POST',
      body: '{}',
    });
    expect(cancel.status).toBe(200);
    expect((await watchMigration(host, walk.migrationId)).body.status).toBe('Completed');
    expect((await watchMigration(host, slow.migrationId)).body.status).toBe('Cancelled');
    const walked = [];
    for (const { instanceId } of [walk, slow])
      walked.push(await expectSameEpisodes(instanceId, migrationOrchestrator, 'migrationOrchestrator'));
    const repeats = timerRepeats(walked[0]?.flat() ?? []);
    process.stdout.write(
      `functionsHost/replayHarness: the completed migration's timers ${JSON.stringify(repeats)}\n`,
    );
    // a copy loop woken early by its timer runs what was due (timerFiredIsDue) instead of sleeping again
    expect(repeats.reslept).toBe(0);
  });

  test('a campaign of two routes, one at a time: its runner ticking on timers, then Completed', async () => {
    const ids = [`camp-a-${Date.now()}`, `camp-b-${Date.now()}`];
    for (const id of ids) {
      const put = await json(`${host.api}/routes/${id}`, {
        method: 'PUT',
        body: JSON.stringify({ location: { region: 'westeurope' } }),
      });
      expect(put.status).toBe(201);
    }
    const started = await json(`${host.api}/campaigns`, {
      method: 'POST',
      body: JSON.stringify({ resources: ids, target: { region: 'eastus' }, maxConcurrent: 1 }),
    });
    expect(started.status).toBe(202);
    const campaignId = String(started.body.campaignId);
    const body = await poll(
      async () => (await json(`${host.api}/campaigns/${encodeURIComponent(campaignId)}`)).body,
      (campaign) => ['Completed', 'Cancelled'].includes(String(campaign.status)),
      150_000,
    );
    expect(body.status).toBe('Completed');
    await expectSameEpisodes(campaignInstanceId(campaignId), campaignOrchestrator, 'campaignOrchestrator');
  });
});
