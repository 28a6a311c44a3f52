import { InvocationContext } from '@azure/functions';
import type { OrchestrationHandler } from 'durable-functions';
import { createOrchestrator } from 'durable-functions/lib/src/util/testingUtils';

/**
 * What this remains for, now that the real engine runs in tests (hosts/webjobs): fast unit replays on
 * a virtual clock (a migration with minutes of participant polls replays in milliseconds) and injected
 * histories (recorded fixtures, a deployment or crash mid-run, store outages, a participant slower than
 * the 240 s client, 10-day timers, the action limit), which the engine cannot run in a test's time or
 * at all. It is held to the engine: test/functionsHost/replayHarness.test.ts runs each path modelled
 * here on the engine and replays the engine's histories through it, episode by episode. Not modelled
 * on its own: the engine fires a durable timer up to a second early (queue visibility in whole
 * seconds); here a timer fires at its FireAt, and `firedEarly` injects an early one into a history.
 * Opt-in (`dotNetDates`): the engine's rewriting of ISO instants in
 * activity results and outputs.
 *
 * Replays an orchestrator through durable-functions' own executor (the pinned 3.5.0) while playing
 * the Durable extension's part as its sources describe it, so that what passes here has a chance on
 * the real host. Every behaviour below was read in the projects' sources (Azure/azure-functions-
 * durable-extension `src/WebJobs.Extensions.DurableTask/…`, Azure/durabletask `src/DurableTask.Core/…`,
 * durable-functions `lib/src/…`); the comment at each place names the file and function.
 *
 * One episode is what the extension does for one work item (one message by default, or every message
 * due at the same virtual time with `batchSameTime`); `history` resumes a recorded instance (its
 * unanswered tasks and unfired timers are delivered again, as their queued messages would be), and
 * `stopWhen` ends a run right after an episode committed (a deployment):
 * 1. The orchestrator runs on the whole history, with the binding the extension builds
 *    (OrchestrationTriggerAttributeBindingProvider.OrchestrationContextToString): `upperSchemaVersion`
 *    V2 and `upperSchemaVersionNew` V4, as the pinned extension (3.19.0) sends them (durable-js
 *    Orchestrator.handle takes the new one, so replay schema V4), `longRunningTimerIntervalDuration`
 *    / `maximumShortTimerDuration` of the Azure Storage provider (AzureStorageDurabilityProvider: 3 days / 6 days, TimeSpan text) and
 *    `defaultHttpAsyncRequestSleepTimeMillseconds` (HttpOptions.DefaultAsyncRequestSleepTimeMilliseconds,
 *    30000). History events carry DTFx's own property names (EventType, EventId, TaskScheduledId …).
 * 2. The extension replays the orchestrator's actions the way OutOfProcOrchestrationShim
 *    .ProcessAsyncActionsV2 does for schema V2 and later: one top-level action after the other, each awaited
 *    (its failure swallowed), WhenAll/WhenAny as Task.WhenAll/WhenAny over their children, each API call
 *    going to DurableOrchestrationContext and from there to DTFx's TaskOrchestrationContext, which gives
 *    every scheduled task and timer the next sequence number at the moment it is scheduled
 *    (TaskOrchestrationContext.ScheduleTaskInternal / CreateTimer: `idCounter++`). Continuations run
 *    inline as each history event is processed (TaskOrchestrationExecutor.ExecuteCore, with its
 *    SynchronousTaskScheduler), so a callHttp that answered 202 creates its poll timer when that
 *    answer is replayed, and schedules the poll GET only when that timer's TimerFired is replayed
 *    (DurableOrchestrationContext.CallHttpAsync). durable-js numbers the same GET when the 202 arrives
 *    (CallHttpWithPollingTask.trySetValue → executor.trackOpenTask): when anything else is scheduled
 *    in between, the two sides disagree on ids. This harness reproduces that disagreement instead of
 *    hiding it, since it reads the ids the extension would write.
 * 3. TaskScheduled / TimerCreated events already in the history must match what the replay schedules
 *    at that id (TaskOrchestrationContext.HandleTaskScheduledEvent / HandleTimerCreatedEvent, else
 *    NonDeterministicOrchestrationException: the instance fails). What is scheduled and not yet in the
 *    history becomes new TaskScheduled / TimerCreated events, ids = sequence numbers.
 * 4. The instance completes (or fails, when the orchestrator reported an error) only once the shim
 *    has replayed every action and no task is left open (TaskOrchestrationShim.InvokeUserCodeAndHandle
 *    Results → OutOfProcOrchestrationShim.ScheduleDurableTaskEvents; ExecuteCore's `HasOpenTasks`).
 *
 * The world outside: activities run for real at the virtual time; the built-in HTTP activity calls
 * `http` (TaskHttpActivityShim.RunAsync), and a participant slower than the Durable HTTP client's
 * fixed 240 s (DurableHttpClientFactory.GetClient: `Timeout = 240 s`) fails the task with .NET's
 * HttpClient timeout; durable timers fire at their time. Activity retry is DTFx's RetryInterceptor
 * .Invoke: a failure, a retry timer (firstRetryInterval × backoff^n, capped by the extension's
 * RetryOptions default MaxRetryInterval of 6 days), a new attempt (each its own id), and after the
 * last failed attempt one more timer due at once ("Dummy timer for back-compat") before the error
 * reaches the orchestrator. The action limit (DurableTaskOptions.MaxOrchestrationActions, host.json
 * `maxOrchestrationActions`, default 100000) is counted as DurableOrchestrationContext
 * .IncrementActionsOrThrowException does; the exception lands inside an async API call that the shim
 * awaits and swallows, so the orchestrator never hears of it and the instance waits forever: the
 * harness reports it as `Running` with nothing left to deliver.
 *
 * External events (`events`, raised as DurableClient.raiseEvent would): an EventRaised message at its
 * virtual time. DTFx's TaskOrchestrationExecutor hands it to TaskOrchestrationShim.RaiseEvent →
 * DurableOrchestrationContext.RaiseEvent, which completes the NEWEST waiter of that name (its
 * pendingExternalEvents are a linked-list stack: "easier for users to abandon external events that they
 * no longer care about. The common case is a Task.WhenAny in a loop") or, with none, buffers it in
 * bufferedExternalEvents until a WaitForExternalEvent of the name takes it. A WaitForExternalEvent
 * action (OutOfProcOrchestrationShim.InvokeAPIFromAction, AsyncActionType.WaitForExternalEvent) takes
 * no sequence number and counts no action, and a waiter left open does not hold the instance open
 * (HasOpenTasks counts DTFx's scheduled tasks and timers). The extension compares names
 * OrdinalIgnoreCase; durable-js (openEvents, deferredTasks) exactly, so a name must match exactly.
 *
 * Stricter than the extension, on purpose: every run must reproduce the orchestrator actions of the
 * runs before it, inputs and timer times included (DTFx compares names and kinds only).
 */

/** A history event as the extension serializes DTFx's HistoryEvent for an out-of-process worker. */
export interface WireEvent {
  EventType: number;
  EventId: number;
  IsPlayed: boolean;
  Timestamp: string;
  [field: string]: unknown;
}

export const EventType = {
  ExecutionStarted: 0,
  ExecutionCompleted: 1,
  TaskScheduled: 4,
  TaskCompleted: 5,
  TaskFailed: 6,
  TimerCreated: 10,
  TimerFired: 11,
  OrchestratorStarted: 12,
  OrchestratorCompleted: 13,
  EventRaised: 15,
} as const;

/** The reserved name of the extension's HTTP activity (HttpOptions.HttpTaskActivityReservedName). */
export const HTTP_ACTIVITY = 'BuiltIn::HttpActivity';
/** DurableHttpClientFactory.GetClient. */
export const HTTP_CLIENT_TIMEOUT_MS = 240_000;
/** HttpOptions.DefaultAsyncRequestSleepTimeMilliseconds. */
export const DEFAULT_HTTP_ASYNC_SLEEP_MS = 30_000;
/** DurableTaskOptions.MaxOrchestrationActions. */
export const DEFAULT_MAX_ORCHESTRATION_ACTIONS = 100_000;
const DAY_MS = 86_400_000;
/** AzureStorageDurabilityProvider.MaximumDelayTime / LongRunningTimerIntervalLength. */
const MAXIMUM_SHORT_TIMER_MS = 6 * DAY_MS;
const LONG_TIMER_INTERVAL_MS = 3 * DAY_MS;
/** RetryOptions (the extension's): DefaultMaxRetryinterval. */
const DEFAULT_MAX_RETRY_INTERVAL_MS = 6 * DAY_MS;
/** .NET's HttpClient message when its Timeout elapses (TaskCanceledException). */
const HTTP_TIMEOUT_MESSAGE =
  'The request was canceled due to the configured HttpClient.Timeout of 240 seconds elapsing.';

export interface HttpReply {
  statusCode: number;
  content?: string;
  /** Response headers, e.g. Location and Retry-After for a 202. */
  headers?: Record<string, string>;
  /** Virtual milliseconds before the answer; past 240 s the Durable HTTP client gives up. */
  durationMs?: number;
  /** The request never got an answer (connection refused, DNS): an HttpRequestException. */
  transportError?: string;
}

export interface HttpRequestSeen {
  method: string;
  url: string;
  body: unknown;
  headers: Record<string, unknown>;
  now: number;
}

export interface ReplayOptions {
  orchestrator: OrchestrationHandler;
  name: string;
  instanceId: string;
  input: unknown;
  start: number;
  /** Runs an activity by its function name, at the harness's virtual time. */
  activity: (functionName: string, input: unknown) => Promise<unknown>;
  /** Answers the built-in HTTP activity: the first POST and every poll GET. Default: 200. */
  http?: (request: HttpRequestSeen) => HttpReply;
  /** Replace the orchestrator (a fresh process) before this run number: a crash and resume. */
  crashBeforeRun?: number;
  maxRuns?: number;
  /** ExecutionStarted.Version: host.json `defaultVersion`; '' when none (DurableClient.DefaultVersion). */
  version?: string;
  /** host.json `maxOrchestrationActions`. */
  maxOrchestrationActions?: number;
  /** Start from a recorded history instead of a new instance: replay it, then carry on. */
  history?: WireEvent[];
  /**
   * Messages due at the same virtual time arrive in one episode (a batch, as a storage provider may
   * fetch them) instead of one episode each (the default: the order they were sent).
   */
  batchSameTime?: boolean;
  /** Sees the orchestrator's actions (as sent) after every run. */
  observe?: (run: number, orchestratorActions: unknown[]) => void;
  /**
   * External events to raise: at a virtual time (`at`), or right after the first episode where `when`
   * holds (before that episode's activities answer: an event raised while they run).
   */
  events?: RaisedEvent[];
  /** Stop after the episode where this holds (a deployment mid-run); the result is then `Running`. */
  stopWhen?: (state: { actions: ReplayResult['actions']; runs: number; now: number }) => boolean;
  /**
   * Store activity results and the output as the engine does (`throughDotNetJson`: ISO instants lose
   * their fraction's trailing zeros). Off by default: the suites' expectations are written as JS
   * writes the values; the comparison with the engine turns it on.
   */
  dotNetDates?: boolean;
  /**
   * Stop (as `Running`) once the next message is due after this virtual time, to resume the instance
   * from its `history` later: several instances stepped along one clock.
   */
  pauseAt?: number;
}

/** An external event, as DurableClient.raiseEvent(instanceId, name, input) sends it. */
export interface RaisedEvent {
  name: string;
  input: unknown;
  at?: number;
  when?: (state: { actions: ReplayResult['actions']; statuses: unknown[]; now: number }) => boolean;
}

export interface LoggedAction {
  id: number;
  kind: 'activity' | 'timer' | 'http';
  name?: string;
  input?: unknown;
  fireAt?: number;
  url?: string;
  method?: string;
  /** Who created a timer besides the orchestrator: a callHttp poll or an activity retry. */
  purpose?: 'poll' | 'retry';
}

export interface ReplayResult {
  output: unknown;
  /** What the instance records as its failure (as the extension words it). */
  error: string | undefined;
  /** Running: nothing left to deliver and not finished (stuck), or stopped by `stopWhen`. */
  runtimeStatus: 'Completed' | 'Failed' | 'Running';
  runs: number;
  /** The input of each continueAsNew, in order (`history` is the current execution's). */
  continuedAsNewWith: unknown[];
  statuses: unknown[];
  /** Every task and timer the extension scheduled, in id order, with its DTFx id. */
  actions: LoggedAction[];
  history: WireEvent[];
  /** The orchestrator's actions (as sent to the extension) on its last run. */
  orchestratorActions: unknown[];
}

// ---------------------------------------------------------------------------------------------
// A .NET Task in miniature: continuations run inline, as under DTFx's SynchronousTaskScheduler.

type Outcome = { ok: true; value: unknown } | { ok: false; error: string };

class Pending {
  outcome: Outcome | undefined;
  private readonly waiters: ((outcome: Outcome) => void)[] = [];

  then(waiter: (outcome: Outcome) => void): void {
    if (this.outcome) waiter(this.outcome);
    else this.waiters.push(waiter);
  }

  settle(outcome: Outcome): void {
    if (this.outcome) return;
    this.outcome = outcome;
    for (const waiter of this.waiters.splice(0)) waiter(outcome);
  }
}

/** An async method: runs to its first unfinished await now; an exception faults its task. */
function asyncMethod(body: Generator<Pending, unknown, Outcome>): Pending {
  const task = new Pending();
  const step = (input: Outcome | undefined): void => {
    let next: IteratorResult<Pending, unknown>;
    try {
      next = input === undefined ? body.next() : body.next(input);
    } catch (error) {
      task.settle({ ok: false, error: (error as Error).message });
      return;
    }
    if (next.done) task.settle({ ok: true, value: next.value });
    else next.value.then(step);
  };
  step(undefined);
  return task;
}

/** `await` that rethrows a failure, inside an asyncMethod body. */
function* awaitTask(task: Pending): Generator<Pending, unknown, Outcome> {
  const outcome = yield task;
  if (!outcome.ok) throw new Error(outcome.error);
  return outcome.value;
}

function whenAll(tasks: Pending[]): Pending {
  const all = new Pending();
  let left = tasks.length;
  if (left === 0) all.settle({ ok: true, value: [] });
  for (const task of tasks)
    task.then(() => {
      left -= 1;
      if (left > 0) return;
      const failed = tasks.find((t) => t.outcome && !t.outcome.ok);
      all.settle(failed?.outcome ?? { ok: true, value: null });
    });
  return all;
}

function whenAny(tasks: Pending[]): Pending {
  const any = new Pending();
  for (const task of tasks) task.then(() => any.settle({ ok: true, value: null }));
  return any;
}

class NonDeterministic extends Error {}

interface Decision {
  id: number;
  kind: 'task' | 'timer';
  name?: string;
  input?: string;
  fireAt?: number;
  purpose?: 'poll' | 'retry';
}

interface WireAction {
  actionType: number;
  functionName?: string;
  input?: unknown;
  retryOptions?: {
    firstRetryIntervalInMilliseconds: number;
    maxNumberOfAttempts: number;
    backoffCoefficient?: number;
    maxRetryIntervalInMilliseconds?: number;
    retryTimeoutInMilliseconds?: number;
  };
  fireAt?: string;
  isCanceled?: boolean;
  externalEventName?: string;
  httpRequest?: {
    method: string;
    uri: string;
    content?: string;
    headers?: Record<string, unknown>;
    tokenSource?: unknown;
    asynchronousPatternEnabled?: boolean;
  };
  compoundActions?: WireAction[];
}

interface HttpResponseWire {
  statusCode: number;
  headers?: Record<string, string | string[]>;
  content?: string;
}

const header = (response: HttpResponseWire, name: string): string | undefined => {
  // DurableHttpResponse keeps headers in an OrdinalIgnoreCase dictionary.
  const key = Object.keys(response.headers ?? {}).find((k) => k.toLowerCase() === name.toLowerCase());
  if (key === undefined) return undefined;
  const value = (response.headers as Record<string, string | string[]>)[key] as string | string[];
  return Array.isArray(value) ? value.join(',') : value;
};

/**
 * The extension's side of one episode: DTFx's TaskOrchestrationContext (ids, open tasks, the
 * actions map checked against history) driven by the shim over the orchestrator's actions.
 */
class ExtensionReplay {
  now = 0;
  private idCounter = 0;
  private actionCount = 0;
  get nextId(): number {
    return this.idCounter;
  }
  readonly pendingDecisions = new Map<number, Decision>();
  readonly openTasks = new Map<number, Pending>();
  /** DurableOrchestrationContext.pendingExternalEvents (a stack per name) and bufferedExternalEvents. */
  private readonly eventWaiters = new Map<string, Pending[]>();
  private readonly bufferedEvents = new Map<string, string[]>();
  /** Set when the orchestrator called continueAsNew in this episode. */
  continuedAsNew: { input: unknown } | undefined;

  constructor(
    private readonly maxActions: number,
    private readonly defaultHttpSleepMs: number,
  ) {}

  // --- DTFx TaskOrchestrationContext -------------------------------------------------------
  scheduleTask(name: string, input: unknown): Pending {
    const id = this.idCounter++;
    this.pendingDecisions.set(id, { id, kind: 'task', name, input: JSON.stringify([input]) });
    const task = new Pending();
    this.openTasks.set(id, task);
    return task;
  }

  createTimer(fireAt: number, purpose?: 'poll' | 'retry', cancel?: CancelToken): Pending {
    const id = this.idCounter++;
    this.pendingDecisions.set(id, { id, kind: 'timer', fireAt, ...(purpose ? { purpose } : {}) });
    const task = new Pending();
    this.openTasks.set(id, task);
    cancel?.register(() => {
      if (task.outcome) return;
      task.settle({ ok: false, error: 'A task was canceled.' });
      this.openTasks.delete(id);
    });
    return task;
  }

  handle(event: WireEvent): void {
    switch (event.EventType) {
      case EventType.OrchestratorStarted:
        this.now = Date.parse(event.Timestamp);
        return;
      case EventType.TaskScheduled: {
        const decision = this.pendingDecisions.get(event.EventId);
        if (!decision)
          throw new NonDeterministic(
            `A previous execution of this orchestration scheduled an activity task with sequence ID ${event.EventId} and name '${String(event.Name)}' (version ''), but the current replay execution hasn't (yet?) scheduled this task. Was a change made to the orchestrator code after this instance had already started running?`,
          );
        if (decision.kind !== 'task')
          throw new NonDeterministic(
            `A previous execution of this orchestration scheduled an activity task with sequence number ${event.EventId} named '${String(event.Name)}', but the current orchestration replay instead produced a CreateTimerOrchestratorAction action with this sequence number. Was a change made to the orchestrator code after this instance had already started running?`,
          );
        if (String(event.Name).toLowerCase() !== String(decision.name).toLowerCase())
          throw new NonDeterministic(
            `A previous execution of this orchestration scheduled an activity task with sequence number ${event.EventId} named '${String(event.Name)}', but the current orchestration replay instead scheduled an activity task named '${String(decision.name)}' with this sequence number.  Was a change made to the orchestrator code after this instance had already started running?`,
          );
        this.pendingDecisions.delete(event.EventId);
        return;
      }
      case EventType.TimerCreated: {
        const decision = this.pendingDecisions.get(event.EventId);
        if (!decision)
          throw new NonDeterministic(
            `A previous execution of this orchestration scheduled a timer task with sequence number ${event.EventId} but the current replay execution hasn't (yet?) scheduled this task. Was a change made to the orchestrator code after this instance had already started running?`,
          );
        if (decision.kind !== 'timer')
          throw new NonDeterministic(
            `A previous execution of this orchestration scheduled a timer task with sequence number ${event.EventId} named but the current orchestration replay instead produced a ScheduleTaskOrchestratorAction action with this sequence number. Was a change made to the orchestrator code after this instance had already started running?`,
          );
        this.pendingDecisions.delete(event.EventId);
        return;
      }
      case EventType.TaskCompleted:
        return this.complete(event.TaskScheduledId as number, {
          ok: true,
          value: JSON.parse(event.Result as string) as unknown,
        });
      case EventType.TaskFailed:
        return this.complete(event.TaskScheduledId as number, { ok: false, error: String(event.Reason) });
      case EventType.TimerFired:
        return this.complete(event.TimerId as number, { ok: true, value: null });
      case EventType.EventRaised:
        return this.raiseEvent(String(event.Name), String(event.Input));
      default:
        return;
    }
  }

  /** A completion for an id no longer open is logged as a duplicate and dropped (LogDuplicateEvent). */
  private complete(id: number, outcome: Outcome): void {
    const task = this.openTasks.get(id);
    if (!task) return;
    this.openTasks.delete(id);
    task.settle(outcome);
  }

  // --- DurableOrchestrationContext ---------------------------------------------------------
  /** WaitForExternalEvent<T>(name, reason): a new waiter on top of the name's stack; a buffered event now. */
  private waitForExternalEvent(name: string): Pending {
    const key = name.toLowerCase();
    const waiter = new Pending();
    this.eventWaiters.set(key, [...(this.eventWaiters.get(key) ?? []), waiter]);
    const buffered = this.bufferedEvents.get(key);
    if (buffered !== undefined) {
      const input = buffered.shift() as string;
      if (buffered.length === 0) this.bufferedEvents.delete(key);
      this.raiseEvent(name, input);
    }
    return waiter;
  }

  /** RaiseEvent(name, input): the newest waiter takes it; with none it waits in the buffer. */
  private raiseEvent(name: string, input: string): void {
    const key = name.toLowerCase();
    const waiters = this.eventWaiters.get(key);
    const newest = waiters?.pop();
    if (waiters?.length === 0) this.eventWaiters.delete(key);
    if (newest) {
      newest.settle({ ok: true, value: JSON.parse(input) as unknown });
      return;
    }
    this.bufferedEvents.set(key, [...(this.bufferedEvents.get(key) ?? []), input]);
  }

  private incrementActions(): void {
    if (this.actionCount >= this.maxActions)
      throw new Error(
        `Maximum amount of orchestration actions (${this.maxActions}) has been reached. This value can be configured in host.json file as MaxOrchestrationActions.`,
      );
    this.actionCount += 1;
  }

  /** CallDurableTaskFunctionAsync for an activity, with or without RetryOptions. */
  private callActivity(name: string, input: unknown, retry?: WireAction['retryOptions']): Pending {
    return asyncMethod(
      function* (this: ExtensionReplay): Generator<Pending, unknown, Outcome> {
        this.incrementActions();
        return yield* awaitTask(retry ? this.withRetry(name, input, retry) : this.scheduleTask(name, input));
      }.call(this),
    );
  }

  /** DTFx RetryInterceptor.Invoke over ScheduleTask. */
  private withRetry(name: string, input: unknown, retry: NonNullable<WireAction['retryOptions']>): Pending {
    return asyncMethod(
      function* (this: ExtensionReplay): Generator<Pending, unknown, Outcome> {
        const firstAttempt = this.now;
        let lastError: string | undefined;
        for (let retryCount = 0; retryCount < retry.maxNumberOfAttempts; retryCount += 1) {
          const outcome = yield this.scheduleTask(name, input);
          if (outcome.ok) return outcome.value;
          lastError = outcome.error;
          if (retryCount + 1 === retry.maxNumberOfAttempts) {
            yield this.createTimer(this.now, 'retry'); // "Dummy timer for back-compat"
            break;
          }
          const expires =
            retry.retryTimeoutInMilliseconds === undefined
              ? Infinity
              : firstAttempt + retry.retryTimeoutInMilliseconds;
          if (this.now >= expires) break;
          const delay = Math.min(
            retry.firstRetryIntervalInMilliseconds * (retry.backoffCoefficient ?? 1) ** retryCount,
            retry.maxRetryIntervalInMilliseconds ?? DEFAULT_MAX_RETRY_INTERVAL_MS,
          );
          if (delay === 0) break;
          yield this.createTimer(this.now + delay, 'retry');
        }
        throw new Error(lastError);
      }.call(this),
    );
  }

  /** IDurableOrchestrationContext.CreateTimer, long timers split as the extension splits them. */
  private durableTimer(fireAt: number, cancel: CancelToken): Pending {
    return asyncMethod(
      function* (this: ExtensionReplay): Generator<Pending, unknown, Outcome> {
        if (fireAt - this.now <= MAXIMUM_SHORT_TIMER_MS) {
          this.incrementActions();
          return yield* awaitTask(this.createTimer(fireAt, undefined, cancel));
        }
        let intervalFireAt = this.now + LONG_TIMER_INTERVAL_MS;
        while (this.now < fireAt && !cancel.canceled) {
          this.incrementActions();
          yield* awaitTask(this.createTimer(intervalFireAt, undefined, cancel));
          const remaining = fireAt - this.now;
          if (remaining <= 0) break;
          intervalFireAt = this.now + Math.min(remaining, LONG_TIMER_INTERVAL_MS);
        }
        return null;
      }.call(this),
    );
  }

  /** DurableOrchestrationContext.CallHttpAsync: POST, then on 202 a timer and a GET of Location. */
  private callHttp(request: NonNullable<WireAction['httpRequest']>): Pending {
    const send = (req: NonNullable<WireAction['httpRequest']>) =>
      asyncMethod(
        function* (this: ExtensionReplay): Generator<Pending, unknown, Outcome> {
          this.incrementActions(); // ScheduleDurableHttpActivityAsync → CallDurableTaskFunctionAsync
          return yield* awaitTask(this.scheduleTask(HTTP_ACTIVITY, req));
        }.call(this),
      );
    return asyncMethod(
      function* (this: ExtensionReplay): Generator<Pending, unknown, Outcome> {
        let response = (yield* awaitTask(send(request))) as HttpResponseWire;
        while (response.statusCode === 202 && request.asynchronousPatternEnabled) {
          const retryAfter = header(response, 'Retry-After');
          if (retryAfter !== undefined && !/^\s*[+-]?\d+\s*$/.test(retryAfter))
            throw new Error(`The input string '${retryAfter}' was not in a correct format.`); // int.Parse
          const fireAt =
            this.now + (retryAfter === undefined ? this.defaultHttpSleepMs : Number(retryAfter) * 1000);
          this.incrementActions();
          yield* awaitTask(this.createTimer(fireAt, 'poll'));
          // CreateLocationPollRequest: Headers["Location"] (throws when absent), then new Uri(location).
          const location = header(response, 'Location');
          if (location === undefined)
            throw new Error("The given key 'Location' was not present in the dictionary.");
          if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(location))
            throw new Error('Invalid URI: The format of the URI could not be determined.');
          const headers = { ...(request.headers ?? {}) };
          delete headers['x-functions-key'];
          response = (yield* awaitTask(
            send({
              method: 'GET',
              uri: location,
              headers,
              ...(request.tokenSource === undefined ? {} : { tokenSource: request.tokenSource }),
            }),
          )) as HttpResponseWire;
        }
        return response;
      }.call(this),
    );
  }

  /** OutOfProcOrchestrationShim.InvokeAPIFromAction. */
  private invoke(action: WireAction): Pending {
    switch (action.actionType) {
      case 0:
        return this.callActivity(action.functionName as string, action.input);
      case 1:
        return this.callActivity(action.functionName as string, action.input, action.retryOptions);
      case 5: {
        const cancel = new CancelToken();
        const task = this.durableTimer(Date.parse(action.fireAt as string), cancel);
        if (action.isCanceled) cancel.cancel();
        return task;
      }
      case 4: {
        // DurableOrchestrationContext.ContinueAsNew(input) (preserveUnprocessedEvents false): fire and forget
        this.continuedAsNew = { input: action.input };
        const done = new Pending();
        done.settle({ ok: true, value: null });
        return done;
      }
      case 6:
        return this.waitForExternalEvent(action.externalEventName as string);
      case 8:
        return this.callHttp(action.httpRequest as NonNullable<WireAction['httpRequest']>);
      case 11:
        return whenAny((action.compoundActions ?? []).map((a) => this.invoke(a)));
      case 12:
        return whenAll((action.compoundActions ?? []).map((a) => this.invoke(a)));
      default:
        throw new Error(
          `Received an unexpected action type from the out-of-proc function: '$${action.actionType}'.`,
        );
    }
  }

  /** ProcessAsyncActionsV2: each action awaited in turn, its exceptions ignored. */
  replayActions(actions: WireAction[]): Pending {
    return asyncMethod(
      function* (this: ExtensionReplay): Generator<Pending, unknown, Outcome> {
        for (const action of actions) yield this.invoke(action);
        return null;
      }.call(this),
    );
  }
}

class CancelToken {
  canceled = false;
  private readonly callbacks: (() => void)[] = [];
  register(callback: () => void): void {
    if (this.canceled) callback();
    else this.callbacks.push(callback);
  }
  cancel(): void {
    this.canceled = true;
    for (const callback of this.callbacks.splice(0)) callback();
  }
}

// ---------------------------------------------------------------------------------------------

interface OrchestratorState {
  isDone: boolean;
  actions: WireAction[][];
  output?: unknown;
  error?: string;
  customStatus?: unknown;
  /** The invocation threw without an orchestrator state. */
  invocationFailed?: boolean;
}

/** What one episode comes to: the tasks and timers it schedules, and how the instance ends, if it does. */
type Verdict = {
  decisions: Decision[];
  actions: WireAction[];
  customStatus: unknown;
  /** The next sequence number: the id DTFx gives the ExecutionCompleted event (CompleteOrchestration). */
  nextId: number;
} & (
  | { kind: 'failed'; reason: string }
  | { kind: 'continuedAsNew'; input: unknown }
  | { kind: 'completed'; output: unknown }
  | { kind: 'open' }
);

interface EpisodeEnd {
  output?: unknown;
  failed?: string;
  continuedAsNew?: boolean;
  id: number;
}

function endOf(verdict: Verdict): EpisodeEnd | undefined {
  const id = verdict.nextId;
  if (verdict.kind === 'failed') return { failed: verdict.reason, id };
  if (verdict.kind === 'continuedAsNew') return { continuedAsNew: true, id };
  if (verdict.kind === 'completed') return { output: verdict.output, id };
  return undefined;
}

/** A message on its way back to the instance: a completion, a failure, a timer. */
interface Delivery {
  at: number;
  order: number;
  event: Omit<WireEvent, 'Timestamp' | 'IsPlayed' | 'EventId'> & { EventId?: number };
}

/**
 * What an activity function is handed: durable-js sends a string input JSON-encoded
 * (Utils.processInput), and on the engine the activity receives the string itself, not its JSON text.
 */
function activityInput(input: unknown): unknown {
  if (typeof input !== 'string') return input;
  try {
    return JSON.parse(input) as unknown;
  } catch {
    return input;
  }
}

/**
 * An activity's result and the orchestrator's output as the engine stores them: their JSON goes through
 * Newtonsoft with its default DateParseHandling, so a string shaped like an ISO UTC instant becomes a
 * DateTime and is written back with the fraction's trailing zeros dropped ("…:17.310Z" → "…:17.31Z",
 * "…:17.000Z" → "…:17Z"). The orchestrator then reads that text.
 */
export function throughDotNetJson(json: string): string {
  return json.replace(
    /"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,7}))?Z"/g,
    (_match, seconds: string, fraction: string | undefined) => {
      const kept = (fraction ?? '').replace(/0+$/, '');
      return `"${seconds}${kept === '' ? '' : `.${kept}`}Z"`;
    },
  );
}

/**
 * A history resumed at an early wake, as the engine delivers one: cut right after the TimerFired of
 * timer `timerId`, with that episode's OrchestratorStarted and the TimerFired itself `earlyMs` before
 * the timer's FireAt (the orchestrator's clock is its episode's OrchestratorStarted). Replay it with
 * `history` and stop after the first run to see what the orchestrator does on that wake.
 */
export function firedEarly(history: readonly WireEvent[], timerId: number, earlyMs: number): WireEvent[] {
  const fired = history.findIndex((e) => e.EventType === EventType.TimerFired && e.TimerId === timerId);
  let started = fired - 1;
  while (started >= 0 && history[started]?.EventType !== EventType.OrchestratorStarted) started -= 1;
  if (fired < 0 || started < 0) throw new Error(`timer ${timerId} never fired in this history`);
  const at = new Date(Date.parse(history[fired]?.FireAt as string) - earlyMs).toISOString();
  return history
    .slice(0, fired + 1)
    .map((e, i) =>
      i === fired || i === started ? { ...structuredClone(e), Timestamp: at } : structuredClone(e),
    );
}

/** The OutOfProcData label durable-js appends to a failure (OutOfProcExceptionHelpers reads it). */
const OUT_OF_PROC_DATA = '\n\n$OutOfProcData$:';

/**
 * Activities, timers, external events, callHttp, Task.all/any and continueAsNew: what routelock's
 * orchestrators use, and all this models.
 */
const MODELLED = new Set([0, 1, 4, 5, 6, 8, 11, 12]);
function assertModelled(actions: WireAction[]): void {
  for (const action of actions) {
    if (!MODELLED.has(action.actionType))
      throw new Error(
        `testkit/durableReplay does not model action type ${action.actionType} (sub-orchestrations, entities)`,
      );
    assertModelled(action.compoundActions ?? []);
  }
}

const withoutCancel = (actions: unknown): string =>
  JSON.stringify(actions, (key, value: unknown) => (key === 'isCanceled' ? undefined : value));

export class DurableReplay {
  now: number;
  private history: WireEvent[] = [];
  private readonly deliveries: Delivery[] = [];
  private order = 0;
  private readonly log: LoggedAction[] = [];
  private seenActions: string[] = [];
  /** The current execution's input: the start's, then each continueAsNew's. */
  private input: unknown;
  private readonly continuedWith: unknown[] = [];

  constructor(private readonly options: ReplayOptions) {
    this.now = options.start;
    this.input = options.input;
  }

  private executionStarted(execution: number): WireEvent {
    return this.event({
      EventType: EventType.ExecutionStarted,
      OrchestrationInstance: {
        InstanceId: this.options.instanceId,
        ExecutionId: `${this.options.instanceId}-execution-${execution}`,
      },
      Name: this.options.name,
      Version: this.options.version ?? '',
      Input: JSON.stringify(this.input),
    });
  }

  /**
   * ContinueAsNew as DTFx's TaskOrchestrationDispatcher does it: the execution ends ContinuedAsNew and
   * a new one starts in the same work item with the new input and a fresh history. Messages for the
   * old execution (its tasks' answers, its timers) are discarded when they arrive; a raised event is
   * addressed to the instance and reaches the new one; events the old one had not taken are dropped
   * (preserveUnprocessedEvents is false on the out-of-process path).
   */
  private continueAsNew(input: unknown): void {
    this.input = input;
    this.continuedWith.push(input);
    this.seenActions = [];
    const kept = this.deliveries.filter((d) => d.event.EventType === EventType.EventRaised);
    this.deliveries.splice(0, this.deliveries.length, ...kept);
    for (const e of this.history) e.IsPlayed = true;
    // The dispatcher closes the new execution's start in the same work item before the orchestrator
    // runs on it (its first decisions follow that OrchestratorCompleted, under no OrchestratorStarted).
    this.history = [
      this.event({ EventType: EventType.OrchestratorStarted }),
      this.executionStarted(this.continuedWith.length + 1),
      this.event({ EventType: EventType.OrchestratorCompleted }),
    ];
  }

  private event(
    fields: Omit<WireEvent, 'Timestamp' | 'IsPlayed' | 'EventId'> & { EventId?: number },
    at = this.now,
  ): WireEvent {
    return { EventId: -1, IsPlayed: false, ...fields, Timestamp: new Date(at).toISOString() } as WireEvent;
  }

  async run(): Promise<ReplayResult> {
    const { options } = this;
    if (options.history) {
      this.history = structuredClone(options.history);
      const started = this.history.find((e) => e.EventType === EventType.ExecutionStarted);
      if (started) this.input = JSON.parse(started.Input as string) as unknown;
      this.now = Math.max(...this.history.map((e) => Date.parse(e.Timestamp)));
      this.redeliverOutstanding();
      this.logRecordedDecisions();
    } else {
      this.history.push(this.event({ EventType: EventType.OrchestratorStarted }));
      this.history.push(this.executionStarted(1));
    }
    let orchestrate = createOrchestrator(options.orchestrator);
    const statuses: unknown[] = [];
    const raised = (event: RaisedEvent, at: number): void => {
      this.deliveries.push({
        at,
        order: this.order++,
        event: { EventType: EventType.EventRaised, Name: event.name, Input: JSON.stringify(event.input) },
      });
    };
    const waiting = (options.events ?? []).filter((event) => {
      if (event.at === undefined) return true;
      raised(event, event.at);
      return false;
    });
    let jsActions: WireAction[] = [];
    const finish = (
      runtimeStatus: ReplayResult['runtimeStatus'],
      runs: number,
      output: unknown,
      error?: string,
    ): ReplayResult => ({
      output,
      error,
      runtimeStatus,
      runs,
      continuedAsNewWith: this.continuedWith,
      statuses,
      actions: this.log,
      history: this.history,
      orchestratorActions: jsActions,
    });
    for (let run = 1; run <= (options.maxRuns ?? 5000); run += 1) {
      if (options.crashBeforeRun === run) orchestrate = createOrchestrator(options.orchestrator);
      const verdict = await this.decide(orchestrate, run);
      if (verdict.customStatus !== undefined) statuses.push(verdict.customStatus);
      jsActions = verdict.actions;
      // A recorded history's first run only replays it: no message arrived, so no episode to close.
      if (options.history === undefined || run > 1) this.closeEpisode(verdict.decisions, endOf(verdict));
      if (verdict.kind === 'failed') return finish('Failed', run, undefined, verdict.reason);
      if (verdict.kind === 'continuedAsNew') {
        this.continueAsNew(verdict.input);
        continue; // the new execution runs at once, no message needed
      }
      if (verdict.kind === 'completed') return finish('Completed', run, verdict.output);
      const { decisions } = verdict;
      // A deployment right after this episode committed: its new messages were never processed.
      if (options.stopWhen?.({ actions: this.log, runs: run, now: this.now }))
        return finish('Running', run, undefined);
      for (const event of waiting.splice(0)) {
        if (event.when?.({ actions: this.log, statuses, now: this.now })) raised(event, this.now);
        else waiting.push(event);
      }
      await this.dispatch(decisions);
      const nextDue = this.deliveries.reduce((at, d) => Math.min(at, d.at), Infinity);
      if (options.pauseAt !== undefined && nextDue !== Infinity && nextDue > options.pauseAt)
        return finish('Running', run, undefined);
      if (!this.deliverNext()) return finish('Running', run, undefined, 'nothing left to deliver');
    }
    throw new Error('orchestration did not finish');
  }

  /**
   * One episode on the history as it stands: the orchestrator's run, then the extension's replay of
   * its actions against the history, and what the extension makes of it (the episode not yet closed).
   */
  private async decide(orchestrate: ReturnType<typeof createOrchestrator>, run: number): Promise<Verdict> {
    const { options } = this;
    const state = await this.runOrchestrator(orchestrate, run);
    // The shim's exception reaches DTFx's FailOrchestration, which numbers the completion like a task.
    const failed = (reason: string, nextId: number, decisions: Decision[] = [], actions: WireAction[] = []) =>
      ({ kind: 'failed', reason, nextId, decisions, actions, customStatus: state.customStatus }) as Verdict;
    if (state.invocationFailed)
      return failed(`Orchestrator function '${options.name}' failed: ${String(state.error)}`, 0);
    const actions = JSON.parse(JSON.stringify(state.actions[0] ?? [])) as WireAction[];
    options.observe?.(run, actions);
    this.assertDeterministic(actions, run);
    assertModelled(actions);

    const extension = new ExtensionReplay(
      options.maxOrchestrationActions ?? DEFAULT_MAX_ORCHESTRATION_ACTIONS,
      DEFAULT_HTTP_ASYNC_SLEEP_MS,
    );
    let shim: Pending | undefined;
    try {
      for (const event of this.history) {
        if (event.EventType === EventType.ExecutionStarted) shim = extension.replayActions(actions);
        else extension.handle(event);
      }
    } catch (error) {
      if (!(error instanceof NonDeterministic)) throw error;
      return failed(`Non-Deterministic workflow detected: ${error.message}`, extension.nextId, [], actions);
    }
    // The shim's own exception (an action it cannot invoke) fails the instance (ScheduleDurableTaskEvents).
    if (shim?.outcome && !shim.outcome.ok)
      return failed(
        `Orchestrator function '${options.name}' failed: ${shim.outcome.error}`,
        extension.nextId,
        [],
        actions,
      );
    const settled = shim?.outcome !== undefined && extension.openTasks.size === 0;
    const decisions = [...extension.pendingDecisions.values()].sort((a, b) => a.id - b.id);
    const common = { decisions, actions, customStatus: state.customStatus, nextId: extension.nextId };
    if (settled && state.error !== undefined)
      return failed(
        `Orchestrator function '${options.name}' failed: ${state.error}`,
        extension.nextId,
        decisions,
        actions,
      );
    if (settled && state.isDone && extension.continuedAsNew)
      return { kind: 'continuedAsNew', input: extension.continuedAsNew.input, ...common };
    if (settled && state.isDone) return { kind: 'completed', output: state.output, ...common };
    return { kind: 'open', ...common };
  }

  private stored(json: string): string {
    return this.options.dotNetDates ? throughDotNetJson(json) : json;
  }

  private episodes = 0;
  private episodeOrchestrator: ReturnType<typeof createOrchestrator> | undefined;

  /**
   * One episode of a recorded history (a real engine's), closed as the extension would close it:
   * `history` holds the episodes before it, then this episode's OrchestratorStarted and the messages it
   * delivers. Returns what the extension appends: TaskScheduled / TimerCreated with their ids, the
   * ExecutionCompleted if the instance ends, OrchestratorCompleted. Called for each episode of one
   * execution in order on one DurableReplay, each replay's actions are held to the ones before.
   */
  async replayEpisode(history: WireEvent[]): Promise<WireEvent[]> {
    this.history = structuredClone(history);
    const started = this.history.find((e) => e.EventType === EventType.ExecutionStarted);
    if (started) this.input = JSON.parse(started.Input as string) as unknown;
    this.now = Math.max(...this.history.map((e) => Date.parse(e.Timestamp)));
    this.episodes += 1;
    this.episodeOrchestrator ??= createOrchestrator(this.options.orchestrator);
    const verdict = await this.decide(this.episodeOrchestrator, this.episodes);
    this.closeEpisode(verdict.decisions, endOf(verdict));
    return this.history.slice(history.length);
  }

  private async runOrchestrator(
    orchestrate: ReturnType<typeof createOrchestrator>,
    run: number,
  ): Promise<OrchestratorState> {
    const { options } = this;
    // The binding as OrchestrationContextToString writes it; JSON round-trip as on the wire.
    const binding = JSON.parse(
      JSON.stringify({
        history: this.history,
        input: this.input,
        instanceId: options.instanceId,
        isReplaying: run > 1,
        parentInstanceId: null,
        upperSchemaVersion: 1,
        upperSchemaVersionNew: 3,
        longRunningTimerIntervalDuration: '3.00:00:00',
        maximumShortTimerDuration: '6.00:00:00',
        defaultHttpAsyncRequestSleepTimeMillseconds: DEFAULT_HTTP_ASYNC_SLEEP_MS,
      }),
    ) as unknown;
    try {
      return (await orchestrate(
        binding as never,
        new InvocationContext({ functionName: options.name }),
      )) as unknown as OrchestratorState;
    } catch (error) {
      // OrchestrationFailureError carries the state after a label (OutOfProcExceptionHelpers).
      const message = (error as Error).message ?? '';
      const at = message.indexOf(OUT_OF_PROC_DATA);
      // Without the state (durable-js itself threw while replaying), the shim fails the instance
      // with the invocation's message and replays nothing (TaskOrchestrationShim
      // .InvokeUserCodeAndHandleResults, the branch where TryExtractOutOfProcStateJson finds none).
      if (at < 0) return { isDone: false, actions: [[]], error: message, invocationFailed: true };
      return JSON.parse(message.slice(at + OUT_OF_PROC_DATA.length)) as OrchestratorState;
    }
  }

  /** The actions a replay produces for the part of the history already processed must not change. */
  private assertDeterministic(actions: WireAction[], run: number): void {
    const keys = actions.map((a) => withoutCancel(a));
    for (let i = 0; i < this.seenActions.length; i += 1) {
      if (keys[i] !== this.seenActions[i]) {
        throw new Error(
          `non-deterministic replay at run ${run}, action ${i}:\n  was ${this.seenActions[i]}\n  now ${keys[i]}`,
        );
      }
    }
    this.seenActions = keys;
  }

  /** End the episode: new TaskScheduled/TimerCreated events, the outcome if any, OrchestratorCompleted. */
  private closeEpisode(decisions: Decision[], end?: EpisodeEnd): void {
    for (const decision of decisions) {
      if (decision.kind === 'timer') {
        this.history.push(
          this.event({
            EventType: EventType.TimerCreated,
            EventId: decision.id,
            FireAt: new Date(decision.fireAt as number).toISOString(),
          }),
        );
      } else {
        this.history.push(
          this.event({
            EventType: EventType.TaskScheduled,
            EventId: decision.id,
            Name: decision.name,
            Version: '',
            Input: decision.input,
          }),
        );
      }
      this.log.push(this.logged(decision));
    }
    if (end)
      this.history.push(
        this.event({
          EventType: EventType.ExecutionCompleted,
          EventId: end.id,
          OrchestrationStatus: end.continuedAsNew
            ? 'ContinuedAsNew'
            : end.failed === undefined
              ? 'Completed'
              : 'Failed',
          Result:
            end.failed === undefined ? throughDotNetJson(JSON.stringify(end.output ?? null)) : end.failed,
        }),
      );
    this.history.push(this.event({ EventType: EventType.OrchestratorCompleted }));
  }

  private logged(decision: Decision): LoggedAction {
    if (decision.kind === 'timer')
      return {
        id: decision.id,
        kind: 'timer',
        fireAt: decision.fireAt as number,
        ...(decision.purpose ? { purpose: decision.purpose } : {}),
      };
    const input = (JSON.parse(decision.input as string) as unknown[])[0];
    if (decision.name !== HTTP_ACTIVITY)
      return { id: decision.id, kind: 'activity', name: decision.name as string, input };
    const request = input as NonNullable<WireAction['httpRequest']>;
    return {
      id: decision.id,
      kind: 'http',
      method: request.method,
      url: request.uri,
      input: request.content ? (JSON.parse(request.content) as unknown) : undefined,
    };
  }

  /** The decision log of a recorded history, so a resumed run reports the whole instance. */
  private logRecordedDecisions(): void {
    for (const e of this.history) {
      if (e.EventType === EventType.TimerCreated)
        this.log.push({ id: e.EventId, kind: 'timer', fireAt: Date.parse(e.FireAt as string) });
      if (e.EventType === EventType.TaskScheduled)
        this.log.push(
          this.logged({ id: e.EventId, kind: 'task', name: e.Name as string, input: e.Input as string }),
        );
    }
  }

  /** Work the recorded history scheduled and never heard back from: its messages are still queued. */
  private redeliverOutstanding(): void {
    const done = new Set(
      this.history
        .filter((e) => e.EventType === EventType.TaskCompleted || e.EventType === EventType.TaskFailed)
        .map((e) => e.TaskScheduledId as number),
    );
    const fired = new Set(
      this.history.filter((e) => e.EventType === EventType.TimerFired).map((e) => e.TimerId as number),
    );
    const open: Decision[] = [];
    for (const e of this.history) {
      if (e.EventType === EventType.TaskScheduled && !done.has(e.EventId))
        open.push({ id: e.EventId, kind: 'task', name: e.Name as string, input: e.Input as string });
      if (e.EventType === EventType.TimerCreated && !fired.has(e.EventId))
        open.push({ id: e.EventId, kind: 'timer', fireAt: Date.parse(e.FireAt as string) });
    }
    this.pendingRedelivery = open;
  }

  private pendingRedelivery: Decision[] = [];

  /** Carry out the episode's decisions: activities and HTTP calls now, timers at their time. */
  private async dispatch(decisions: Decision[]): Promise<void> {
    const all = [...this.pendingRedelivery.splice(0), ...decisions];
    for (const decision of all) {
      const order = this.order++;
      if (decision.kind === 'timer') {
        const fireAt = decision.fireAt as number;
        this.deliveries.push({
          at: fireAt,
          order,
          event: {
            EventType: EventType.TimerFired,
            TimerId: decision.id,
            FireAt: new Date(fireAt).toISOString(),
          },
        });
        continue;
      }
      const input = (JSON.parse(decision.input as string) as unknown[])[0];
      if (decision.name === HTTP_ACTIVITY) {
        this.deliveries.push({
          ...this.callParticipant(decision.id, input as NonNullable<WireAction['httpRequest']>),
          order,
        });
        continue;
      }
      try {
        const value = await this.options.activity(decision.name as string, activityInput(input));
        this.deliveries.push({
          at: this.now,
          order,
          event: {
            EventType: EventType.TaskCompleted,
            TaskScheduledId: decision.id,
            Result: this.stored(JSON.stringify(value ?? null)),
          },
        });
      } catch (error) {
        // TaskActivityShim: the function's failure becomes a TaskFailureException with this reason.
        const message = (error as Error).message;
        this.deliveries.push({
          at: this.now,
          order,
          event: {
            EventType: EventType.TaskFailed,
            TaskScheduledId: decision.id,
            Reason: `Activity function '${String(decision.name)}' failed: ${message}`,
            Details: JSON.stringify({ message }),
          },
        });
      }
    }
  }

  /** TaskHttpActivityShim.RunAsync with the 240 s client. */
  private callParticipant(
    id: number,
    request: NonNullable<WireAction['httpRequest']>,
  ): Omit<Delivery, 'order'> {
    const reply = this.options.http?.({
      method: request.method,
      url: request.uri,
      body: request.content ? (JSON.parse(request.content) as unknown) : undefined,
      headers: request.headers ?? {},
      now: this.now,
    }) ?? { statusCode: 200 };
    const duration = reply.durationMs ?? 0;
    if (reply.transportError !== undefined || duration > HTTP_CLIENT_TIMEOUT_MS) {
      const timedOut = reply.transportError === undefined;
      const message = timedOut ? HTTP_TIMEOUT_MESSAGE : (reply.transportError as string);
      const errorType = timedOut
        ? 'System.Threading.Tasks.TaskCanceledException'
        : 'System.Net.Http.HttpRequestException';
      return {
        at: this.now + Math.min(duration, HTTP_CLIENT_TIMEOUT_MS),
        event: {
          EventType: EventType.TaskFailed,
          TaskScheduledId: id,
          Reason: message,
          Details: JSON.stringify({ ClassName: errorType, Message: message }),
          FailureDetails: { ErrorType: errorType, ErrorMessage: message, IsNonRetriable: false },
        },
      };
    }
    return {
      at: this.now + duration,
      event: {
        EventType: EventType.TaskCompleted,
        TaskScheduledId: id,
        Result: JSON.stringify({
          statusCode: reply.statusCode,
          headers: reply.headers ?? {},
          content: reply.content ?? '',
        }),
      },
    };
  }

  /** Wake the instance with what is due next on the virtual clock (one message, or all due then). */
  private deliverNext(): boolean {
    if (this.deliveries.length === 0) return false;
    this.deliveries.sort((a, b) => a.at - b.at || a.order - b.order);
    const at = (this.deliveries[0] as Delivery).at;
    const due = this.options.batchSameTime
      ? this.deliveries.filter((d) => d.at === at)
      : this.deliveries.slice(0, 1);
    this.deliveries.splice(0, due.length);
    this.now = Math.max(this.now, at);
    for (const e of this.history) e.IsPlayed = true;
    this.history.push(this.event({ EventType: EventType.OrchestratorStarted }));
    for (const d of due) this.history.push(this.event(d.event));
    return true;
  }
}
