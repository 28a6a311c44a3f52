import * as df from 'durable-functions';
import type { OrchestrationContext, OrchestrationHandler } from 'durable-functions';

/**
 * Small orchestrators, one per path testkit/durableReplay.ts models (activities in sequence, fan-out,
 * a race with a cancelled timer, activity retry, external events buffered and raced, continueAsNew,
 * callHttp with 202 polling, an orchestrator failure, a long timer, the binding durable-js is given),
 * run both by the harness and by the real engine (replayHarness.test.ts), whose histories are then
 * compared. `register()` adds them to the app when the engine's worker loads them (replayApp.js).
 */

type Orchestrator = (context: OrchestrationContext) => Generator<unknown, unknown, unknown>;

const after = (context: OrchestrationContext, ms: number) =>
  new Date(context.df.currentUtcDateTime.getTime() + ms);

export interface FlakyInput {
  key: string;
  failures: number;
}

/** Per process: how many times each key was tried. A key fails its first `failures` attempts. */
const tried = new Map<string, number>();

export const ACTIVITIES: Record<string, (input: unknown) => unknown> = {
  replayEcho: (input) => input,
  replayFlaky: (input) => {
    const { key, failures } = input as FlakyInput;
    const attempt = (tried.get(key) ?? 0) + 1;
    tried.set(key, attempt);
    if (attempt <= failures) throw new Error(`flaky ${key} attempt ${attempt}`);
    return `${key} ok on attempt ${attempt}`;
  },
};

const binding: Orchestrator = function* (context) {
  yield context.df.callActivity('replayEcho', 'first');
  // what the extension's binding gave durable-js (OrchestrationContextToString)
  const seen = context.df as unknown as Record<string, { toISOString?: () => string } | undefined>;
  return {
    schemaVersion: seen.schemaVersion,
    maximumShortTimerDuration: seen.maximumShortTimerDuration?.toISOString?.(),
    longRunningTimerIntervalDuration: seen.longRunningTimerIntervalDuration?.toISOString?.(),
    defaultHttpAsyncRequestSleepTimeMillseconds: seen.defaultHttpAsyncRequestSleepTimeMillseconds,
    version: context.df.version ?? null,
    parentInstanceId: context.df.parentInstanceId ?? null,
  };
};

const sequence: Orchestrator = function* (context) {
  const first = yield context.df.callActivity('replayEcho', 1);
  yield context.df.createTimer(after(context, 1000));
  const second = yield context.df.callActivity('replayEcho', 2);
  return [first, second];
};

const fanOut: Orchestrator = function* (context) {
  const all = yield context.df.Task.all([1, 2, 3].map((n) => context.df.callActivity('replayEcho', n)));
  const timer = context.df.createTimer(after(context, 60_000));
  const work = context.df.callActivity('replayEcho', 'raced');
  const winner = yield context.df.Task.any([work, timer]);
  if (winner === work) timer.cancel();
  return { all, raced: winner === work ? work.result : 'timer' };
};

const retry: Orchestrator = function* (context) {
  const input = context.df.getInput() as { key: string };
  const options = new df.RetryOptions(1000, 3);
  options.backoffCoefficient = 2;
  const second = yield context.df.callActivityWithRetry('replayFlaky', options, {
    key: `${input.key}-a`,
    failures: 1,
  });
  try {
    yield context.df.callActivityWithRetry('replayFlaky', new df.RetryOptions(1000, 2), {
      key: `${input.key}-b`,
      failures: 9,
    });
    return { second, third: 'answered' };
  } catch (error) {
    return { second, third: (error as Error).message.split('\n')[0] };
  }
};

/** `go` is raised at once (before or after the first wait: buffered either way), `poke` a round or two later. */
const events: Orchestrator = function* (context) {
  yield context.df.callActivity('replayEcho', 'work');
  const go = yield context.df.waitForExternalEvent('go');
  // 3 s timers: the engine fires a timer up to a second early, so shorter ones hardly wait at all
  for (let round = 1; round <= 30; round += 1) {
    const timer = context.df.createTimer(after(context, 3000));
    const poke = context.df.waitForExternalEvent('poke');
    const winner = yield context.df.Task.any([timer, poke]);
    if (winner === poke) {
      timer.cancel();
      return { go, poke: poke.result as unknown };
    }
  }
  return { go, poke: 'never' };
};

const continued: Orchestrator = function* (context) {
  const { n } = context.df.getInput() as { n: number };
  yield context.df.callActivity('replayEcho', n);
  if (n < 2) {
    context.df.continueAsNew({ n: n + 1 });
    return undefined;
  }
  return n;
};

const http: Orchestrator = function* (context) {
  const { url } = context.df.getInput() as { url: string };
  const response = (yield context.df.callHttp({ method: 'POST', url, body: { job: 1 } })) as {
    statusCode: number;
    content?: string;
  };
  return { statusCode: response.statusCode, content: response.content ?? null };
};

const fails: Orchestrator = function* (context) {
  const { key } = context.df.getInput() as { key: string };
  yield context.df.callActivity('replayFlaky', { key, failures: 9 });
  return 'not reached';
};

const longTimer: Orchestrator = function* (context) {
  yield context.df.createTimer(after(context, 10 * 86_400_000));
  return 'woke';
};

export const ORCHESTRATORS: Record<string, OrchestrationHandler> = {
  replayBinding: binding as OrchestrationHandler,
  replaySequence: sequence as OrchestrationHandler,
  replayFanOut: fanOut as OrchestrationHandler,
  replayRetry: retry as OrchestrationHandler,
  replayEvents: events as OrchestrationHandler,
  replayContinue: continued as OrchestrationHandler,
  replayHttp: http as OrchestrationHandler,
  replayFails: fails as OrchestrationHandler,
  replayLongTimer: longTimer as OrchestrationHandler,
};

/** Register the scenarios with the app: in the engine's worker only (it provides @azure/functions-core). */
export function register(): void {
  for (const [name, handler] of Object.entries(ORCHESTRATORS)) df.app.orchestration(name, handler);
  for (const [name, run] of Object.entries(ACTIVITIES))
    df.app.activity(name, { handler: (input: unknown) => run(input) });
}
