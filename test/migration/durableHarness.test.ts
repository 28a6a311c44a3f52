import type { OrchestrationContext } from 'durable-functions';
import * as df from 'durable-functions';
import { DurableReplay, EventType, type HttpReply, type ReplayOptions } from '../../testkit/durableReplay';

/**
 * The faithful harness's own behaviours, each on a tiny orchestrator, each as testkit/durableReplay.ts
 * cites it from the extension's or DTFx's sources: ids, 202 polling, the 240 s client, the retry
 * timers, the action limit, long timers. The paths the real engine runs quickly (a 202 polled once, an
 * activity retried once, a race, a fan-out, continueAsNew, events) are held to the engine's histories
 * in test/functionsHost/replayHarness.test.ts; these keep what it cannot run in a test's time.
 */

const T0 = Date.UTC(2026, 5, 1);

type Orchestrator = (context: OrchestrationContext) => Generator<unknown, unknown, unknown>;

function replay(orchestrator: Orchestrator, options: Partial<ReplayOptions> = {}) {
  return new DurableReplay({
    orchestrator: orchestrator as never,
    name: 'tiny',
    instanceId: 'tiny-1',
    input: {},
    start: T0,
    activity: async () => 'done',
    ...options,
  }).run();
}

const callOnce: Orchestrator = function* (context) {
  const response = (yield context.df.callHttp({
    method: 'POST',
    url: 'https://p.test/copy',
    body: '{}',
  })) as {
    statusCode: number;
  };
  return response.statusCode;
};

/** POST answers 202 + Location; the poll answers `poll`. */
const accepted =
  (headers: Record<string, string>, poll: HttpReply = { statusCode: 200 }) =>
  (request: { method: string }): HttpReply =>
    request.method === 'POST' ? { statusCode: 202, headers } : poll;

describe('callHttp with polling, as DurableOrchestrationContext.CallHttpAsync runs it', () => {
  test('no Retry-After: the extension default of 30 s', async () => {
    const result = await replay(callOnce, { http: accepted({ Location: 'https://p.test/jobs/1' }) });
    expect(result.actions[1]).toEqual({ id: 1, kind: 'timer', fireAt: T0 + 30_000, purpose: 'poll' });
  });

  test('a relative Location: new Uri() throws after the poll timer, durable-js waits on a GET never sent', async () => {
    const result = await replay(callOnce, { http: accepted({ Location: '/jobs/1', 'Retry-After': '1' }) });
    expect(result).toMatchObject({ runtimeStatus: 'Running', error: 'nothing left to deliver' });
    expect(result.actions.map((a) => a.kind)).toEqual(['http', 'timer']);
  });

  test('202 without Location: durable-js takes it as the answer, the extension still schedules a poll timer', async () => {
    const result = await replay(callOnce, { http: () => ({ statusCode: 202 }) });
    expect(result).toMatchObject({ runtimeStatus: 'Completed', output: 202 });
    expect(result.actions.map((a) => a.purpose ?? a.kind)).toEqual(['http', 'poll']);
  });

  test('a participant slower than 240 s: the task fails with the HttpClient timeout', async () => {
    const caught: Orchestrator = function* (context) {
      try {
        yield context.df.callHttp({ method: 'POST', url: 'https://p.test/copy', body: '{}' });
        return 'answered';
      } catch (error) {
        return (error as Error).message;
      }
    };
    const slow = await replay(caught, { http: () => ({ statusCode: 200, durationMs: 240_001 }) });
    expect(slow.output).toMatch(/TaskCanceledException: .*HttpClient.Timeout of 240 seconds elapsing/);
    const failed = slow.history.find((e) => e.EventType === EventType.TaskFailed);
    expect(failed?.Timestamp).toBe(new Date(T0 + 240_000).toISOString());
    const justInTime = await replay(caught, { http: () => ({ statusCode: 200, durationMs: 240_000 }) });
    expect(justInTime.output).toBe('answered');
  });
});

describe('activity retry, as DTFx RetryInterceptor.Invoke runs it', () => {
  const retried: Orchestrator = function* (context) {
    const options = new df.RetryOptions(1000, 3);
    options.backoffCoefficient = 2;
    try {
      return yield context.df.callActivityWithRetry('flaky', options, { n: 1 });
    } catch (error) {
      return `gave up: ${(error as Error).message.split('\n')[0]}`;
    }
  };

  test('every attempt fails: attempt, timer +1 s, attempt, timer +2 s, attempt, the back-compat timer, then the error', async () => {
    const result = await replay(retried, {
      activity: () => Promise.reject(new Error('store down')),
    });
    expect(result.output).toMatch(/^gave up: Activity function 'flaky' failed: store down/);
    expect(
      result.actions.map(({ id, kind, fireAt }) => [id, kind, fireAt === undefined ? null : fireAt - T0]),
    ).toEqual([
      [0, 'activity', null],
      [1, 'timer', 1000],
      [2, 'activity', null],
      [3, 'timer', 3000],
      [4, 'activity', null],
      [5, 'timer', 3000], // due at once: "Dummy timer for back-compat"
    ]);
  });
});

describe('the extension’s action limit (host.json maxOrchestrationActions)', () => {
  const three: Orchestrator = function* (context) {
    for (let i = 0; i < 3; i += 1) yield context.df.callActivity('step', i);
    return 'done';
  };

  test('past the limit the action is never scheduled and the instance waits forever', async () => {
    const result = await replay(three, { maxOrchestrationActions: 2 });
    expect(result).toMatchObject({ runtimeStatus: 'Running', error: 'nothing left to deliver' });
    expect(result.actions).toHaveLength(2);
    expect((await replay(three, { maxOrchestrationActions: 3 })).runtimeStatus).toBe('Completed');
  });
});

describe('long timers (over the Azure Storage provider’s 6 days)', () => {
  test('5 days: one timer on both sides', async () => {
    const wait: Orchestrator = function* (context) {
      yield context.df.createTimer(new Date(T0 + 5 * 86_400_000));
      return 'woke';
    };
    const result = await replay(wait);
    expect(result).toMatchObject({ runtimeStatus: 'Completed', output: 'woke' });
    expect(result.actions).toHaveLength(1);
  });

  test('10 days: the extension splits it at 3, 6, 9, 10 days; durable-js follows (it re-checks the time at each piece)', async () => {
    // DurableOrchestrationContext.CreateTimer takes the last piece once under 3 days; durable-js
    // LongTimerTask.getNextTimerTask aims at the end once under 6 days, but trySetValue adds another
    // piece while the end is still ahead, so both number the same four timers.
    const wait: Orchestrator = function* (context) {
      yield context.df.createTimer(new Date(T0 + 10 * 86_400_000));
      return yield context.df.callActivity('after', null);
    };
    const result = await replay(wait);
    expect(
      result.actions.map((a) => (a.kind === 'timer' ? ((a.fireAt as number) - T0) / 86_400_000 : a.kind)),
    ).toEqual([3, 6, 9, 10, 'activity']);
    expect(result.runtimeStatus).toBe('Completed');
    expect(result.output).toBe('done');
  });
});

describe('orchestration version (host.json defaultVersion, durable-js 3.3+ context.df.version)', () => {
  const version: Orchestrator = function* (context) {
    yield context.df.callActivity('step', null);
    return context.df.version ?? null;
  };

  test('the orchestrator reads the version the instance started with (ExecutionStarted.Version)', async () => {
    expect((await replay(version, { version: '2' })).output).toBe('2');
    // an instance started before any defaultVersion: the extension's empty default version
    expect((await replay(version)).output).toBe('');
  });
});

test('an action the harness does not model (a sub-orchestration) is refused, not silently passed', async () => {
  const child: Orchestrator = function* (context) {
    return yield context.df.callSubOrchestrator('child');
  };
  await expect(replay(child)).rejects.toThrow(/does not model action type 2/);
});

describe('external events, as DurableOrchestrationContext.WaitForExternalEvent / RaiseEvent handle them', () => {
  test('an event raised before anyone waits is buffered and taken by the first wait; the wait takes no sequence number', async () => {
    const waits: Orchestrator = function* (context) {
      yield context.df.callActivity('work');
      const got = yield context.df.waitForExternalEvent('go');
      yield context.df.createTimer(new Date(T0 + 1000));
      return got;
    };
    const result = await replay(waits, { events: [{ name: 'go', input: { n: 1 }, at: T0 }] });
    expect(result).toMatchObject({ runtimeStatus: 'Completed', output: { n: 1 } });
    expect(result.actions).toEqual([
      expect.objectContaining({ id: 0, kind: 'activity', name: 'work' }),
      { id: 1, kind: 'timer', fireAt: T0 + 1000 },
    ]);
  });

  test('a fresh wait per race, in a loop: the newest waiter gets the event on both sides, and the instance completes', async () => {
    const loop: Orchestrator = function* (context) {
      for (let round = 1; round <= 5; round += 1) {
        const timer = context.df.createTimer(new Date(T0 + round * 10_000));
        const event = context.df.waitForExternalEvent('go');
        const winner = yield context.df.Task.any([timer, event]);
        if (winner === event) {
          timer.cancel();
          return { round, got: event.result as unknown };
        }
      }
      return 'never';
    };
    const result = await replay(loop, { events: [{ name: 'go', input: 'now', at: T0 + 25_000 }] });
    expect(result).toMatchObject({ runtimeStatus: 'Completed', output: { round: 3, got: 'now' } });
  });
});
