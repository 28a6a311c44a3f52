// durable-functions' replay internals, used only by the replay test harness (version pinned in
// package.json). Typed just enough for the harness.
declare module 'durable-functions/lib/src/history/HistoryEvent' {
  export class HistoryEvent {
    EventType: number;
    EventId: number;
    Timestamp: Date;
  }
}
declare module 'durable-functions/lib/src/history/HistoryEventOptions' {
  export class HistoryEventOptions {
    constructor(eventId: number, timestamp: Date, isPlayed?: boolean);
  }
}
declare module 'durable-functions/lib/src/history/OrchestratorStartedEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class OrchestratorStartedEvent extends HistoryEvent {
    constructor(options: unknown);
  }
}
declare module 'durable-functions/lib/src/history/ExecutionStartedEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class ExecutionStartedEvent extends HistoryEvent {
    constructor(options: unknown);
  }
}
declare module 'durable-functions/lib/src/history/TaskScheduledEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class TaskScheduledEvent extends HistoryEvent {
    constructor(options: unknown);
  }
}
declare module 'durable-functions/lib/src/history/TaskCompletedEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class TaskCompletedEvent extends HistoryEvent {
    constructor(options: unknown);
  }
}
declare module 'durable-functions/lib/src/history/TaskFailedEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class TaskFailedEvent extends HistoryEvent {
    constructor(options: unknown);
  }
}
declare module 'durable-functions/lib/src/history/TimerCreatedEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class TimerCreatedEvent extends HistoryEvent {
    constructor(options: unknown);
  }
}
declare module 'durable-functions/lib/src/history/TimerFiredEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class TimerFiredEvent extends HistoryEvent {
    constructor(options: unknown);
  }
}
declare module 'durable-functions/lib/src/util/testingUtils' {
  import type { OrchestrationHandler } from 'durable-functions';
  export class DurableOrchestrationInput {
    constructor(instanceId?: string, history?: unknown[], input?: unknown);
  }
  export function createOrchestrator(
    fn: OrchestrationHandler,
  ): (input: unknown, context: unknown) => Promise<unknown>;
}
