import * as df from 'durable-functions';
import type { OrchestrationContext, Task } from 'durable-functions';
import {
  CANCEL_EVENT,
  participantCallFailed,
  type ActivityName,
  type CancelRequest,
  type MigrationSettings,
  type MigrationStatus,
  type Step,
  type TaskStep,
} from '../../shared/migration/types';
import type { Workflow } from '../../shared/migration/workflow';

/**
 * Runs the shared migration workflow on Durable Functions: each step becomes a Durable task (an
 * activity with RetryOptions, a participant request a `callParticipant` activity called once, a durable
 * timer, Task.any / Task.all), time comes from `currentUtcDateTime`, and status from
 * `setCustomStatus`. Deterministic under replay because the workflow itself never looks outside the
 * steps it yields.
 */

/** Function names of the activities (HTTP function names like `prelock` are taken). */
export const activityFunctionName = (name: ActivityName): string =>
  `migration${name[0]?.toUpperCase()}${name.slice(1)}`;

export function retryOptions(settings: MigrationSettings): df.RetryOptions {
  const options = new df.RetryOptions(settings.retryIntervalSeconds * 1000, settings.retryAttempts);
  options.backoffCoefficient = 2;
  return options;
}

/** What a step came to: the value sent back into the workflow, or the error thrown into it. */
type Outcome = { value: unknown } | { error: unknown };

/**
 * What the runner carries from one step to the next: the orchestration, its activities' retry policy,
 * and the newest waiter of the `cancel` event (undefined before the first).
 *
 * Cancel is the `cancel` external event: a terminated orchestration runs nothing, so it could never
 * release its lock. Each cancellable wait races a FRESH waitForExternalEvent beside its timer. Both
 * sides keep the waiters of a name as a stack and give an event to the newest: durable-js 3.5.0
 * (TaskOrchestrationExecutor: trackOpenTask pushes onto `openEvents[name]`, setTaskValue pops) and the
 * extension (DurableOrchestrationContext.WaitForExternalEvent pushes onto `pendingExternalEvents`,
 * "easier for users to abandon external events … a Task.WhenAny in a loop"; RaiseEvent takes the head).
 * So the current wait gets it; waiters left by earlier races do nothing. A task raced again would be
 * tracked twice and, once complete, never end a later race (durable-js builds the WhenAny without
 * looking at its children), hence fresh ones. Between waits, `cancelRequested` reads the newest waiter
 * without yielding: a tracked task completes where EventRaised sits in the history, the same in every
 * replay. Before any waiter is tracked durable-js defers the event (deferredTasks), so the first check
 * tracks one against a timer due now (one timer per instance).
 */
interface Run {
  readonly context: OrchestrationContext;
  readonly retry: df.RetryOptions;
  readonly waiter: Task | undefined;
}

/** A step performed: its outcome, and the cancel waiter after it. */
interface Performed {
  outcome: Outcome;
  waiter: Task | undefined;
}

export function* runOnDurable(
  context: OrchestrationContext,
  workflow: Workflow,
  settings: MigrationSettings,
): Generator<Task, MigrationStatus, unknown> {
  let run: Run = { context, retry: retryOptions(settings), waiter: undefined };
  let next = workflow.next();
  while (!next.done) {
    const { outcome, waiter } = yield* perform(run, next.value);
    run = { ...run, waiter };
    next = 'error' in outcome ? workflow.throw(outcome.error) : workflow.next(outcome.value);
  }
  return next.value;
}

function* perform(run: Run, step: Step): Generator<Task, Performed, unknown> {
  const { context, waiter } = run;
  switch (step.kind) {
    case 'now':
      return { outcome: { value: context.df.currentUtcDateTime.getTime() }, waiter };
    case 'status':
      context.df.setCustomStatus(step.status);
      return { outcome: { value: undefined }, waiter };
    case 'cancelRequested':
      return yield* checkCancel(run);
    case 'activity':
    case 'timer':
      if (step.kind === 'timer' && step.cancellable) return yield* cancellableTimer(run, step.fireAt);
      return { outcome: yield* oneTask(run, step), waiter };
    case 'race':
      return yield* race(run, step);
    case 'all':
      return { outcome: yield* all(run, step), waiter };
  }
}

function toTask(run: Run, step: TaskStep): Task {
  const { context } = run;
  switch (step.kind) {
    case 'activity':
      // A participant call never throws (no answer is status 0, judged by the workflow), so the
      // extension's retry timers would only delay a copy round past its renewal: called once.
      return step.name === 'callParticipant'
        ? context.df.callActivity(activityFunctionName(step.name), step.input)
        : context.df.callActivityWithRetry(activityFunctionName(step.name), run.retry, step.input);
    case 'timer':
      return context.df.createTimer(new Date(step.fireAt));
  }
}

const result = (step: TaskStep, value: unknown): unknown => (step.kind === 'timer' ? null : value);

/**
 * A participant that cannot be reached is an answer (status 0, retried by the workflow), not a crash:
 * a `callParticipant` activity the host gave up on (it never throws itself).
 */
const failure = (step: TaskStep, error: unknown): Outcome =>
  step.kind === 'activity' && step.name === 'callParticipant'
    ? { value: participantCallFailed(error) }
    : { error };

/** What each task of a race (or an `all`) answered: its result, its failure as an answer, or null. */
const settledOf = (steps: TaskStep[], tasks: Task[]): unknown[] =>
  tasks.map((task, i) => {
    const inner = steps[i] as TaskStep;
    if (task.isFaulted) {
      const failed = failure(inner, task.result);
      return 'value' in failed ? failed.value : null;
    }
    return task.isCompleted ? result(inner, task.result) : null;
  });

const arrivedAt = (waiter: Task | undefined): CancelRequest | null =>
  waiter?.isCompleted === true ? (waiter.result as CancelRequest) : null;

function* oneTask(run: Run, step: TaskStep): Generator<Task, Outcome, unknown> {
  try {
    return { value: result(step, yield toTask(run, step)) };
  } catch (error) {
    return failure(step, error);
  }
}

/** Between waits: the newest waiter's event, tracking the first waiter against a timer due now. */
function* checkCancel(run: Run): Generator<Task, Performed, unknown> {
  if (run.waiter !== undefined) return { outcome: { value: arrivedAt(run.waiter) }, waiter: run.waiter };
  const { context } = run;
  const event = context.df.waitForExternalEvent(CANCEL_EVENT);
  const timer = context.df.createTimer(context.df.currentUtcDateTime);
  const winner = (yield context.df.Task.any([event, timer])) as unknown as Task;
  if (winner !== timer) timer.cancel();
  return { outcome: { value: arrivedAt(event) }, waiter: event };
}

function* cancellableTimer(run: Run, fireAt: number): Generator<Task, Performed, unknown> {
  // A cancel that came while an activity ran went to the waiter already tracked: answer it, never
  // track a fresh one that would wait for an event already given away.
  const arrived = arrivedAt(run.waiter);
  if (arrived) return { outcome: { value: arrived }, waiter: run.waiter };
  const { context } = run;
  const timer = context.df.createTimer(new Date(fireAt));
  const event = context.df.waitForExternalEvent(CANCEL_EVENT);
  const winner = (yield context.df.Task.any([timer, event])) as unknown as Task;
  if (winner === event) timer.cancel();
  return { outcome: { value: winner === event ? (event.result as CancelRequest) : null }, waiter: event };
}

function* race(run: Run, step: Extract<Step, { kind: 'race' }>): Generator<Task, Performed, unknown> {
  const arrived = step.cancellable ? arrivedAt(run.waiter) : null;
  if (arrived) {
    // as for a timer: the cancel already arrived, the round never starts
    const value = { deadlineFirst: false, settled: step.tasks.map(() => null), cancelled: arrived };
    return { outcome: { value }, waiter: run.waiter };
  }
  const { context } = run;
  const tasks = step.tasks.map((t) => toTask(run, t));
  const timer = context.df.createTimer(new Date(step.deadline));
  const event = step.cancellable ? context.df.waitForExternalEvent(CANCEL_EVENT) : undefined;
  const racers = [context.df.Task.all(tasks), timer, ...(event ? [event] : [])];
  const winner = (yield context.df.Task.any(racers)) as unknown as Task;
  const deadlineFirst = winner === timer;
  if (!deadlineFirst) timer.cancel();
  const settled = settledOf(step.tasks, tasks);
  const value =
    event !== undefined && winner === event
      ? { deadlineFirst: false, settled, cancelled: event.result as CancelRequest }
      : { deadlineFirst, settled };
  return { outcome: { value }, waiter: event ?? run.waiter };
}

function* all(run: Run, step: Extract<Step, { kind: 'all' }>): Generator<Task, Outcome, unknown> {
  const tasks = step.tasks.map((t) => toTask(run, t));
  try {
    yield run.context.df.Task.all(tasks);
  } catch {
    // a task failed (its host gave up): answered below, like any other settled task
  }
  return { value: { deadlineFirst: false, settled: settledOf(step.tasks, tasks) } };
}
