import * as df from 'durable-functions';
import type { OrchestrationContext, Task } from 'durable-functions';
import {
  CANCEL_EVENT,
  participantCallFailed,
  type ActivityName,
  type CancelRequest,
  type HttpResult,
  type MigrationSettings,
  type MigrationStatus,
  type TaskStep,
} from '../../shared/migration/types';
import type { Workflow } from '../../shared/migration/workflow';
import { audienceScope } from '../../shared/migration/participantHttp';

/**
 * Runs the shared migration workflow on Durable Functions: each step becomes a Durable task
 * (activity with RetryOptions — participants too, `callParticipant`, one request each —, durable timer,
 * Task.any; version 1's `http` step: callHttp with polling and, for a participant with an
 * audience, a ManagedIdentityTokenSource), time comes from
 * `currentUtcDateTime`, and status from `setCustomStatus`. Deterministic under replay because the
 * workflow itself never looks outside the steps it yields.
 */

/** Function names of the activities (HTTP function names like `prelock` are taken). */
export const activityFunctionName = (name: ActivityName): string =>
  `migration${name[0]?.toUpperCase()}${name.slice(1)}`;

export function retryOptions(settings: MigrationSettings): df.RetryOptions {
  const options = new df.RetryOptions(settings.retryIntervalSeconds * 1000, settings.retryAttempts);
  options.backoffCoefficient = 2;
  return options;
}

function toHttpResult(value: unknown): HttpResult {
  const response = value as { statusCode?: number; content?: unknown };
  let body: unknown = response.content ?? null;
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body);
    } catch {
      // keep text
    }
  }
  return { status: response.statusCode ?? 0, body };
}

export function* runOnDurable(
  context: OrchestrationContext,
  workflow: Workflow,
  settings: MigrationSettings,
): Generator<Task, MigrationStatus, unknown> {
  const retry = retryOptions(settings);

  const toTask = (step: TaskStep): Task => {
    switch (step.kind) {
      case 'activity':
        // A participant call never throws (no answer is status 0, judged by the workflow), so the
        // extension's retry timers would only delay a copy round past its renewal: called once.
        return step.name === 'callParticipant'
          ? context.df.callActivity(activityFunctionName(step.name), step.input)
          : context.df.callActivityWithRetry(activityFunctionName(step.name), retry, step.input);
      case 'timer':
        return context.df.createTimer(new Date(step.fireAt));
      case 'http':
        // Version 1 only (WORKFLOW_VERSION): instances started before version 2 replay these calls.
        return context.df.callHttp({
          method: step.call.method,
          url: step.call.url,
          body: JSON.stringify(step.call.body),
          headers: { 'Content-Type': 'application/json' },
          // The extension fetches the managed identity's token for the scope and adds the bearer header.
          ...(step.call.audience === undefined
            ? {}
            : { tokenSource: new df.ManagedIdentityTokenSource(audienceScope(step.call.audience)) }),
          enablePolling: true,
        });
    }
  };
  const result = (step: TaskStep, value: unknown): unknown =>
    step.kind === 'http' ? toHttpResult(value) : step.kind === 'timer' ? null : value;
  // A participant that cannot be reached is an answer (status 0, retried by the workflow), not a crash:
  // version 1's `http` step, or a `callParticipant` activity the host gave up on (it never throws itself).
  const failure = (step: TaskStep, error: unknown): { value: unknown } | { error: unknown } =>
    step.kind === 'http'
      ? { value: { status: 0, body: (error as Error).message } }
      : step.kind === 'activity' && step.name === 'callParticipant'
        ? { value: participantCallFailed(error) }
        : { error };

  // What each task of a race (or an `all`) answered: its result, its failure as an answer, or null.
  const settledOf = (steps: TaskStep[], tasks: Task[]): unknown[] =>
    tasks.map((task, i) => {
      const inner = steps[i] as TaskStep;
      if (task.isFaulted) {
        const failed = failure(inner, task.result);
        return 'value' in failed ? failed.value : null;
      }
      return task.isCompleted ? result(inner, task.result) : null;
    });

  // Cancel (workflow version 3) is the `cancel` external event: a terminated orchestration runs nothing,
  // so it could never release its lock. Each cancellable wait races a FRESH waitForExternalEvent beside
  // its timer. Both sides keep the waiters of a name as a stack and give an event to the newest:
  // durable-js 3.5.0 (TaskOrchestrationExecutor: trackOpenTask pushes onto `openEvents[name]`,
  // setTaskValue pops) and the extension (DurableOrchestrationContext.WaitForExternalEvent pushes onto
  // `pendingExternalEvents`, "easier for users to abandon external events … a Task.WhenAny in a loop";
  // RaiseEvent takes the head). So the current wait gets it; waiters left by earlier races do nothing.
  // A task raced again would be tracked twice and, once complete, never end a later race (durable-js
  // builds the WhenAny without looking at its children), hence fresh ones. Between waits,
  // `cancelRequested` reads the newest waiter without yielding: a tracked task completes where
  // EventRaised sits in the history, the same in every replay. Before any waiter is tracked durable-js
  // defers the event (deferredTasks), so the first check tracks one against a timer due now (one timer
  // per instance).
  let cancelWaiter: Task | undefined;
  const waitForCancel = (): Task => {
    cancelWaiter = context.df.waitForExternalEvent(CANCEL_EVENT);
    return cancelWaiter;
  };
  const cancelArrived = (): CancelRequest | null =>
    cancelWaiter?.isCompleted === true ? (cancelWaiter.result as CancelRequest) : null;

  let next = workflow.next();
  while (!next.done) {
    const step = next.value;
    let outcome: { value: unknown } | { error: unknown };
    switch (step.kind) {
      case 'now':
        outcome = { value: context.df.currentUtcDateTime.getTime() };
        break;
      case 'status':
        context.df.setCustomStatus(step.status);
        outcome = { value: undefined };
        break;
      case 'cancelRequested': {
        if (cancelWaiter === undefined) {
          const event = waitForCancel();
          const timer = context.df.createTimer(context.df.currentUtcDateTime);
          const winner = (yield context.df.Task.any([event, timer])) as unknown as Task;
          if (winner !== timer) timer.cancel();
        }
        outcome = { value: cancelArrived() };
        break;
      }
      case 'activity':
      case 'timer':
      case 'http':
        if (step.kind === 'timer' && step.cancellable) {
          // A cancel that came while an activity ran went to the waiter already tracked: answer it,
          // never track a fresh one that would wait for an event already given away.
          const arrived = cancelArrived();
          if (arrived) {
            outcome = { value: arrived };
            break;
          }
          const timer = context.df.createTimer(new Date(step.fireAt));
          const event = waitForCancel();
          const winner = (yield context.df.Task.any([timer, event])) as unknown as Task;
          if (winner === event) timer.cancel();
          outcome = { value: winner === event ? (event.result as CancelRequest) : null };
          break;
        }
        try {
          outcome = { value: result(step, yield toTask(step)) };
        } catch (error) {
          outcome = failure(step, error);
        }
        break;
      case 'race': {
        const arrived = step.cancellable ? cancelArrived() : null;
        if (arrived) {
          // as for a timer: the cancel already arrived, the round never starts
          outcome = {
            value: { deadlineFirst: false, settled: step.tasks.map(() => null), cancelled: arrived },
          };
          break;
        }
        const tasks = step.tasks.map(toTask);
        const timer = context.df.createTimer(new Date(step.deadline));
        const event = step.cancellable ? waitForCancel() : undefined;
        const racers = [context.df.Task.all(tasks), timer, ...(event ? [event] : [])];
        const winner = (yield context.df.Task.any(racers)) as unknown as Task;
        const deadlineFirst = winner === timer;
        if (!deadlineFirst) timer.cancel();
        const settled = settledOf(step.tasks, tasks);
        outcome = {
          value:
            event !== undefined && winner === event
              ? { deadlineFirst: false, settled, cancelled: event.result as CancelRequest }
              : { deadlineFirst, settled },
        };
        break;
      }
      case 'all': {
        const tasks = step.tasks.map(toTask);
        try {
          yield context.df.Task.all(tasks);
        } catch {
          // a task failed (its host gave up): answered below, like any other settled task
        }
        outcome = { value: { deadlineFirst: false, settled: settledOf(step.tasks, tasks) } };
        break;
      }
    }
    next = 'error' in outcome ? workflow.throw(outcome.error) : workflow.next(outcome.value);
  }
  return next.value;
}
