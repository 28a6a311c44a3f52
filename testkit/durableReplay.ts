import { InvocationContext } from '@azure/functions';
import type { OrchestrationHandler } from 'durable-functions';
import { ExecutionStartedEvent } from 'durable-functions/lib/src/history/ExecutionStartedEvent';
import type { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
import { HistoryEventOptions } from 'durable-functions/lib/src/history/HistoryEventOptions';
import { OrchestratorStartedEvent } from 'durable-functions/lib/src/history/OrchestratorStartedEvent';
import { TaskCompletedEvent } from 'durable-functions/lib/src/history/TaskCompletedEvent';
import { TaskFailedEvent } from 'durable-functions/lib/src/history/TaskFailedEvent';
import { TaskScheduledEvent } from 'durable-functions/lib/src/history/TaskScheduledEvent';
import { TimerCreatedEvent } from 'durable-functions/lib/src/history/TimerCreatedEvent';
import { TimerFiredEvent } from 'durable-functions/lib/src/history/TimerFiredEvent';
import { DurableOrchestrationInput, createOrchestrator } from 'durable-functions/lib/src/util/testingUtils';

/**
 * Replays an orchestrator through durable-functions' own executor, playing the extension's part:
 * run the orchestrator on the history, take its new actions, perform them (real activities against
 * a real store, participant calls, durable timers on a virtual clock), append the events the
 * extension would (OrchestratorStarted, TaskScheduled + TaskCompleted/TaskFailed, TimerCreated +
 * TimerFired, with ids = each action's sequence number), and run again from the start, until done.
 *
 * Every run must reproduce the actions of the runs before it (determinism under replay). Activities
 * called with retry follow the extension's retry shape: failure, a retry timer, a new attempt, each
 * taking a sequence number.
 */

interface Action {
  actionType: number;
  functionName?: string;
  input?: unknown;
  retryOptions?: {
    firstRetryIntervalInMilliseconds: number;
    maxNumberOfAttempts: number;
    backoffCoefficient?: number;
  };
  fireAt?: string | Date;
  isCanceled?: boolean;
  httpRequest?: { method: string; uri: string; content?: string };
}

export interface HttpReply {
  statusCode: number;
  content?: string;
  /** Virtual milliseconds the participant takes (the extension polls meanwhile). */
  durationMs?: number;
}

export interface ReplayOptions {
  orchestrator: OrchestrationHandler;
  name: string;
  instanceId: string;
  input: unknown;
  start: number;
  /** Runs an activity by its function name, at the harness's virtual time. */
  activity: (functionName: string, input: unknown) => Promise<unknown>;
  http?: (request: { method: string; url: string; body: unknown; now: number }) => HttpReply;
  /** Replace the orchestrator (a fresh process) before this run number: a crash and resume. */
  crashBeforeRun?: number;
  maxRuns?: number;
}

export interface ReplayResult {
  output: unknown;
  error: string | undefined;
  runs: number;
  statuses: unknown[];
  /** Every action the orchestration issued, in order, with its sequence id. */
  actions: { id: number; kind: string; name?: string; input?: unknown; fireAt?: number; url?: string }[];
  history: HistoryEvent[];
}

const kindOf: Record<number, string> = { 0: 'activity', 1: 'activity', 5: 'timer', 8: 'http' };

export class DurableReplay {
  now: number;
  private readonly history: HistoryEvent[] = [];
  private sequence = 0;
  private processed = 0;
  private pending: { at: number; events: HistoryEvent[] }[] = [];
  private readonly log: ReplayResult['actions'] = [];
  private seenActions: string[] = [];

  constructor(private readonly options: ReplayOptions) {
    this.now = options.start;
  }

  private opts(): HistoryEventOptions {
    return new HistoryEventOptions(-1, new Date(this.now));
  }

  async run(): Promise<ReplayResult> {
    const { options } = this;
    this.history.push(new OrchestratorStartedEvent(this.opts()));
    this.history.push(
      new ExecutionStartedEvent({
        ...this.opts(),
        name: options.name,
        input: JSON.stringify(options.input),
      } as never),
    );
    let orchestrate = createOrchestrator(options.orchestrator);
    const statuses: unknown[] = [];
    for (let run = 1; run <= (options.maxRuns ?? 2000); run += 1) {
      if (options.crashBeforeRun === run) orchestrate = createOrchestrator(options.orchestrator);
      let state: {
        isDone: boolean;
        actions: Action[][];
        output?: unknown;
        error?: string;
        customStatus?: unknown;
      };
      try {
        state = (await orchestrate(
          new DurableOrchestrationInput(options.instanceId, this.history, options.input) as never,
          new InvocationContext({ functionName: options.name }),
        )) as never;
      } catch (error) {
        const failed = (error as { state?: typeof state }).state;
        if (!failed) throw error;
        state = failed;
      }
      if (state.customStatus !== undefined) statuses.push(state.customStatus);
      const flat = state.actions.flat();
      this.assertDeterministic(flat, run);
      if (state.isDone || state.error) {
        return {
          output: state.output,
          error: state.error,
          runs: run,
          statuses,
          actions: this.log,
          history: this.history,
        };
      }
      const fresh = flat.slice(this.processed);
      this.processed = flat.length;
      const before = this.history.length;
      for (const action of fresh) await this.perform(action);
      // Activities answer at once; only when the orchestration waits on time does the clock move.
      const answered = this.history.slice(before).some((e) => e.EventType === 5 || e.EventType === 6);
      if (!answered) this.deliverNext();
    }
    throw new Error('orchestration did not finish');
  }

  /** The actions a replay produces for the part of the history already processed must not change. */
  private assertDeterministic(flat: Action[], run: number): void {
    const keys = flat.map((a) => JSON.stringify({ ...a, isCanceled: undefined }));
    for (let i = 0; i < this.seenActions.length; i += 1) {
      if (keys[i] !== this.seenActions[i]) {
        throw new Error(
          `non-deterministic replay at run ${run}, action ${i}:\n  was ${this.seenActions[i]}\n  now ${keys[i]}`,
        );
      }
    }
    this.seenActions = keys;
  }

  private async perform(action: Action): Promise<void> {
    const kind = kindOf[action.actionType];
    if (kind === 'timer') {
      const id = this.sequence++;
      const fireAt = new Date(action.fireAt as string).getTime();
      this.log.push({ id, kind, fireAt });
      this.history.push(new TimerCreatedEvent({ ...this.opts(), fireAt } as never));
      this.schedule(fireAt, [
        new TimerFiredEvent({ ...this.opts(), timerId: id, fireAt: new Date(fireAt).toISOString() } as never),
      ]);
      return;
    }
    if (kind === 'http') {
      const id = this.sequence++;
      const request = action.httpRequest as NonNullable<Action['httpRequest']>;
      const body = request.content ? (JSON.parse(request.content) as unknown) : undefined;
      this.log.push({ id, kind, url: request.uri, input: body });
      this.history.push(new TaskScheduledEvent({ ...this.opts(), name: 'BuiltIn::HttpActivity' } as never));
      const reply = this.options.http?.({
        method: request.method,
        url: request.uri,
        body,
        now: this.now,
      }) ?? { statusCode: 200 };
      const at = this.now + (reply.durationMs ?? 0);
      const result = JSON.stringify({
        statusCode: reply.statusCode,
        content: reply.content ?? '',
        headers: {},
      });
      this.schedule(at, [
        new TaskCompletedEvent({
          ...new HistoryEventOptions(-1, new Date(at)),
          taskScheduledId: id,
          result,
        } as never),
      ]);
      return;
    }
    if (kind !== 'activity') throw new Error(`unexpected action type ${action.actionType}`);
    const name = action.functionName as string;
    const retry = action.retryOptions;
    const attempts = retry?.maxNumberOfAttempts ?? 1;
    let delay = retry?.firstRetryIntervalInMilliseconds ?? 0;
    for (let attempt = 1; ; attempt += 1) {
      const id = this.sequence++;
      this.log.push({ id, kind, name, input: action.input });
      this.history.push(new TaskScheduledEvent({ ...this.opts(), name } as never));
      try {
        const value = await this.options.activity(name, action.input);
        this.history.push(new OrchestratorStartedEvent(this.opts()));
        this.history.push(
          new TaskCompletedEvent({
            ...this.opts(),
            taskScheduledId: id,
            result: JSON.stringify(value ?? null),
          } as never),
        );
        return;
      } catch (error) {
        this.history.push(new OrchestratorStartedEvent(this.opts()));
        this.history.push(
          new TaskFailedEvent({
            ...this.opts(),
            taskScheduledId: id,
            reason: (error as Error).message,
            details: 'activity failed',
          } as never),
        );
        if (attempt >= attempts) return;
        // The extension waits out the retry interval on a timer, then schedules the next attempt.
        const timerId = this.sequence++;
        this.now += delay;
        this.history.push(new TimerCreatedEvent({ ...this.opts(), fireAt: this.now } as never));
        this.history.push(new OrchestratorStartedEvent(this.opts()));
        this.history.push(
          new TimerFiredEvent({ ...this.opts(), timerId, fireAt: new Date(this.now).toISOString() } as never),
        );
        delay *= retry?.backoffCoefficient ?? 1;
      }
    }
  }

  private schedule(at: number, events: HistoryEvent[]): void {
    this.pending.push({ at, events });
  }

  /** Deliver whatever is due next on the virtual clock, as the extension would wake the orchestration. */
  private deliverNext(): void {
    if (this.pending.length === 0) return;
    this.pending.sort((a, b) => a.at - b.at);
    const next = this.pending.shift() as { at: number; events: HistoryEvent[] };
    this.now = Math.max(this.now, next.at);
    this.history.push(new OrchestratorStartedEvent(this.opts()));
    this.history.push(...next.events);
  }
}
