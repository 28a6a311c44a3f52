import type { OrchestrationContext, Task } from 'durable-functions';
import {
  CAMPAIGN_TICK_ACTIVITY,
  TICKS_PER_EXECUTION,
  campaignOrchestrator,
  tickRetryOptions,
} from '../../functions/campaignOrchestrator';
import { CAMPAIGN_ORCHESTRATOR, WAKE_EVENT, campaignInstanceId } from '../../functions/durable/campaigns';
import type { TickResult } from '../../shared/campaign/service';
import { DurableReplay, EventType, type RaisedEvent, type ReplayResult } from '../../testkit/durableReplay';

/**
 * The campaign orchestrator replayed through durable-functions' own executor (testkit/durableReplay.ts
 * plays the extension), with a scripted tick: a function of the virtual time only, so a run resumed
 * from any recorded history must reproduce the uninterrupted run exactly.
 */

const START = Date.UTC(2026, 5, 1);
const TICK_MS = 10_000;
const CAMPAIGN = 'c-1';

interface Script {
  /** The tick answers done from this virtual time on. */
  endAt: number;
  /** The store is down (the tick throws) in [from, to). */
  down?: { from: number; to: number };
  events?: RaisedEvent[];
  history?: ReplayResult['history'];
  stopAfterRun?: number;
  orchestrator?: typeof campaignOrchestrator;
}

async function run(script: Script) {
  const ticks: number[] = [];
  const replay: DurableReplay = new DurableReplay({
    orchestrator: script.orchestrator ?? campaignOrchestrator,
    name: CAMPAIGN_ORCHESTRATOR,
    instanceId: campaignInstanceId(CAMPAIGN),
    input: { campaignId: CAMPAIGN },
    start: START,
    maxRuns: 2_000,
    activity: async (name, input): Promise<TickResult> => {
      // a wrong call fails the tick (and so the test) rather than throwing inside the harness
      if (
        name !== CAMPAIGN_TICK_ACTIVITY ||
        JSON.stringify(input) !== JSON.stringify({ campaignId: CAMPAIGN })
      )
        return { done: true, status: 'Cancelled', nextTickAt: 0 };
      const now = replay.now;
      ticks.push(now - START);
      if (script.down && now >= script.down.from && now < script.down.to)
        throw new Error('The store did not answer');
      return now >= script.endAt
        ? { done: true, status: 'Completed', nextTickAt: now }
        : { done: false, status: 'Running', nextTickAt: now + TICK_MS };
    },
    ...(script.events ? { events: script.events } : {}),
    ...(script.history ? { history: script.history } : {}),
    ...(script.stopAfterRun ? { stopWhen: ({ runs }) => runs === script.stopAfterRun } : {}),
  });
  const result = await replay.run();
  return { result, ticks };
}

const activities = (result: ReplayResult) => result.actions.filter((a) => a.kind === 'activity');

describe('campaignOrchestrator on the Durable engine', () => {
  test('ticks at each nextTickAt until the tick says done; the status is the output', async () => {
    const { result, ticks } = await run({ endAt: START + 45_000 });
    expect(result).toMatchObject({ runtimeStatus: 'Completed', output: 'Completed', error: undefined });
    expect(ticks).toEqual([0, 10_000, 20_000, 30_000, 40_000, 50_000]);
    // tick, timer at its nextTickAt, tick …: ids in order, nothing else scheduled
    expect(result.actions.map((a) => (a.kind === 'timer' ? a.fireAt! - START : a.name))).toEqual([
      CAMPAIGN_TICK_ACTIVITY,
      10_000,
      CAMPAIGN_TICK_ACTIVITY,
      20_000,
      CAMPAIGN_TICK_ACTIVITY,
      30_000,
      CAMPAIGN_TICK_ACTIVITY,
      40_000,
      CAMPAIGN_TICK_ACTIVITY,
      50_000,
      CAMPAIGN_TICK_ACTIVITY,
    ]);
    expect(result.continuedAsNewWith).toEqual([]);
  });

  test('a wake ends the wait early: the next tick runs when it arrives, its timer cancelled', async () => {
    const { result, ticks } = await run({
      endAt: START + 25_000,
      events: [{ name: WAKE_EVENT, input: {}, at: START + 3_000 }],
    });
    expect(result).toMatchObject({ runtimeStatus: 'Completed', output: 'Completed' });
    expect(ticks).toEqual([0, 3_000, 13_000, 23_000, 33_000]);
    // the first wait's timer (due at 10 s) was cancelled: its action carries isCanceled
    const cancelled = JSON.stringify(result.orchestratorActions).match(/"isCanceled":true/g) ?? [];
    expect(cancelled).toHaveLength(1);
  });

  test('a wake raised while a tick runs (a stale waiter takes it) makes the next tick run at once', async () => {
    // raised right after the episode that scheduled the second tick, before that tick answers
    const events: RaisedEvent[] = [
      {
        name: WAKE_EVENT,
        input: {},
        when: ({ actions }) => actions.filter((a) => a.kind === 'activity').length === 2,
      },
    ];
    const { result, ticks } = await run({ endAt: START + 25_000, events });
    expect(result).toMatchObject({ runtimeStatus: 'Completed' });
    expect(ticks).toEqual([0, 10_000, 10_000, 20_000, 30_000]);

    // negative control: a loop that always waits on a fresh waiter loses that wake to the stale one
    const naive = function* (context: OrchestrationContext) {
      const { campaignId } = context.df.getInput<{ campaignId: string }>();
      for (;;) {
        const tick = (yield context.df.callActivityWithRetry(CAMPAIGN_TICK_ACTIVITY, tickRetryOptions(), {
          campaignId,
        })) as TickResult;
        if (tick.done) return tick.status;
        const timer = context.df.createTimer(new Date(tick.nextTickAt));
        const winner = (yield context.df.Task.any([
          timer,
          context.df.waitForExternalEvent(WAKE_EVENT),
        ])) as unknown as Task;
        if (winner !== timer) timer.cancel();
      }
    };
    const control = await run({ endAt: START + 25_000, events, orchestrator: naive as never });
    expect(control.ticks).toEqual([0, 10_000, 20_000, 30_000]);
  });

  test(`continue-as-new after ${TICKS_PER_EXECUTION} ticks, with the same campaignId; the history stays small`, async () => {
    const ticksWanted = 2 * TICKS_PER_EXECUTION + 10;
    const { result, ticks } = await run({ endAt: START + (ticksWanted - 1) * TICK_MS });
    expect(result).toMatchObject({ runtimeStatus: 'Completed', output: 'Completed' });
    expect(result.continuedAsNewWith).toEqual([{ campaignId: CAMPAIGN }, { campaignId: CAMPAIGN }]);
    // no tick lost or doubled across the executions: one every TICK_MS
    expect(ticks).toEqual(Array.from({ length: ticksWanted }, (_, i) => i * TICK_MS));
    // the last execution's history holds its 10 ticks only (ids start again from 0)
    const scheduled = result.history.filter((e) => e.EventType === EventType.TaskScheduled);
    expect(scheduled.map((e) => e.EventId)).toEqual(Array.from({ length: 10 }, (_, i) => 2 * i));
    // about eight events a tick: 10 ticks' worth, not the 110 of the whole campaign
    expect(result.history.length).toBeLessThan(100);
  });

  test('a tick that fails through its retries does not end the campaign: it waits and ticks again', async () => {
    const { result, ticks } = await run({
      endAt: START + 100_000,
      down: { from: START + 20_000, to: START + 60_000 },
    });
    expect(result).toMatchObject({ runtimeStatus: 'Completed', output: 'Completed' });
    // 20 s: the attempt and its retries after 5 s and 10 s (backoff 2) fail; the orchestrator waits
    // the last tick's interval (10 s) after the failure and tries again
    expect(ticks.slice(0, 6)).toEqual([0, 10_000, 20_000, 25_000, 35_000, 45_000]);
    expect(ticks.at(-1)).toBeGreaterThanOrEqual(100_000);
    // the first call failed for good (20, 25, 35 s); the next one failed at 45 and 50 s, then got through
    const failures = result.history.filter((e) => e.EventType === EventType.TaskFailed);
    expect(failures.map((e) => Date.parse(e.Timestamp) - START)).toEqual([
      20_000, 25_000, 35_000, 45_000, 50_000,
    ]);
    expect(ticks).toContain(60_000);
    expect(activities(result).length).toBe(ticks.length);
  });

  test('crash survival: resumed from the recorded history after any episode, the run is the same', async () => {
    const script: Script = {
      endAt: START + 120_000,
      down: { from: START + 30_000, to: START + 40_000 },
      events: [{ name: WAKE_EVENT, input: {}, at: START + 64_000 }],
    };
    const whole = await run(script);
    expect(whole.result).toMatchObject({ runtimeStatus: 'Completed', output: 'Completed' });
    for (let crashAfter = 1; crashAfter < whole.result.runs; crashAfter += 1) {
      const before = await run({ ...script, stopAfterRun: crashAfter });
      expect(before.result.runtimeStatus).toBe('Running');
      // the wake was raised to the instance: a raise not yet in the history is still on its way
      const raised = before.result.history.some((e) => e.EventType === EventType.EventRaised);
      const resumed = await run({
        ...script,
        history: before.result.history,
        events: raised ? [] : (script.events ?? []),
      });
      // the same output, statuses and scheduled work (a recorded timer does not say it was a retry's)
      const same = (r: ReplayResult) => ({
        crashAfter,
        output: r.output,
        runtimeStatus: r.runtimeStatus,
        actions: r.actions.map(({ purpose: _purpose, ...action }) => action),
        orchestratorActions: r.orchestratorActions,
      });
      expect(same(resumed.result)).toEqual(same(whole.result));
      expect([...before.ticks, ...resumed.ticks].filter((t, i, all) => all.indexOf(t) === i)).toEqual(
        whole.ticks.filter((t, i, all) => all.indexOf(t) === i),
      );
    }
  });

  test('crash survival across continue-as-new: resumed from either execution, the same ticks and outcome', async () => {
    const script: Script = { endAt: START + (TICKS_PER_EXECUTION + 4) * TICK_MS };
    const whole = await run(script);
    expect(whole.result).toMatchObject({
      runtimeStatus: 'Completed',
      continuedAsNewWith: [{ campaignId: CAMPAIGN }],
    });
    const distinct = (ticks: number[]) => [...new Set(ticks)];
    // around the boundary: the last episodes of execution 1 and the first of execution 2
    for (const crashAfter of [
      2 * TICKS_PER_EXECUTION - 2,
      2 * TICKS_PER_EXECUTION - 1,
      2 * TICKS_PER_EXECUTION,
      2 * TICKS_PER_EXECUTION + 1,
      2 * TICKS_PER_EXECUTION + 2,
    ]) {
      const before = await run({ ...script, stopAfterRun: crashAfter });
      const resumed = await run({ ...script, history: before.result.history });
      expect({ crashAfter, output: resumed.result.output }).toEqual({ crashAfter, output: 'Completed' });
      expect(distinct([...before.ticks, ...resumed.ticks])).toEqual(whole.ticks);
    }
  });
});

describe('testkit/durableReplay: continueAsNew as DTFx runs it', () => {
  test('a new execution with the new input and a fresh history; an event raised later reaches the new one', async () => {
    const seen: unknown[] = [];
    const orchestrator = function* (context: OrchestrationContext) {
      const { n } = context.df.getInput<{ n: number }>();
      seen.push(n);
      if (n === 2) return (yield context.df.waitForExternalEvent('go')) as unknown;
      yield context.df.createTimer(new Date(context.df.currentUtcDateTime.getTime() + 500));
      context.df.continueAsNew({ n: n + 1 });
      return undefined;
    };
    const result = await new DurableReplay({
      orchestrator: orchestrator as never,
      name: 'tiny',
      instanceId: 'tiny-1',
      input: { n: 0 },
      start: START,
      activity: async () => null,
      events: [{ name: 'go', input: 'went', at: START + 1_200 }],
    }).run();
    expect(result).toMatchObject({ runtimeStatus: 'Completed', output: 'went' });
    expect(result.continuedAsNewWith).toEqual([{ n: 1 }, { n: 2 }]);
    const started = result.history.filter((e) => e.EventType === EventType.ExecutionStarted);
    expect(started).toEqual([expect.objectContaining({ Input: JSON.stringify({ n: 2 }) })]);
    expect(result.history.some((e) => e.EventType === EventType.TimerFired)).toBe(false);
    expect(new Set(seen)).toEqual(new Set([0, 1, 2]));
  });
});
