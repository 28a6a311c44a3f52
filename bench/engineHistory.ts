import type { TableRow } from './engineHost';

/**
 * What the real engine recorded for each orchestration, read from the task hub's History table (one row
 * per history event, in RowKey order, plus a `sentinel` row per instance). Counted as the engine
 * dispatches work: an orchestrator episode is one OrchestratorStarted … OrchestratorCompleted run (one
 * control-queue work item), an activity execution one TaskCompleted or TaskFailed (one work-item-queue
 * message), an entity batch one episode of an `@…` instance (entities run as orchestrations on the Azure
 * Storage backend). Pure: the tables are read by bench/engineHost.ts.
 */

export interface EngineCount {
  /** History events (rows other than the sentinel). */
  historyEvents: number;
  episodes: number;
  /** Lock activities scheduled (participant requests aside). */
  activities: number;
  /** `migrationCallParticipant` activities scheduled. */
  httpCalls: number;
  activityExecutions: number;
  timers: number;
  timersFired: number;
  /**
   * Timers created again with the FireAt of the one before: the workflow woke before its due time (the
   * TimerFired arrived early) and sleeps again until it.
   */
  rearmedTimers: number;
  entityBatches: number;
  /** episodes + activity executions + entity batches: the engine's work items. */
  workItems: number;
  /** The Durable Task Scheduler's unit, as the sizing table counts it: start + 2 per activity + 1 per timer. */
  schedulerActions: number;
}

export interface EngineLatency {
  /** An activity's TaskScheduled → its TaskCompleted: queue, dispatch, the worker's hop and the run. */
  activityMs: number[];
  /** A TaskCompleted → the OrchestratorStarted of the episode that took it: the control queue's pickup. */
  pickupMs: number[];
  /** OrchestratorStarted → OrchestratorCompleted: the replay in the worker, its hop, the checkpoint. */
  episodeMs: number[];
  /** A timer's FireAt → the OrchestratorStarted of the episode that took its TimerFired (< 0: early). */
  timerLateMs: number[];
}

const PARTICIPANT_CALL = 'migrationCallParticipant';

export function byInstance(rows: TableRow[]): Map<string, TableRow[]> {
  const map = new Map<string, TableRow[]>();
  for (const row of rows) {
    if (row.RowKey === 'sentinel') continue;
    const list = map.get(row.PartitionKey) ?? [];
    list.push(row);
    map.set(row.PartitionKey, list);
  }
  for (const list of map.values()) list.sort((a, b) => a.RowKey.localeCompare(b.RowKey));
  return map;
}

export function countEvents(events: TableRow[], instanceId: string): EngineCount {
  const of = (type: string, name?: (n: string) => boolean) =>
    events.filter((e) => e.EventType === type && (name === undefined || name(String(e.Name ?? '')))).length;
  const episodes = of('OrchestratorStarted');
  const activities = of('TaskScheduled', (n) => n !== PARTICIPANT_CALL);
  const httpCalls = of('TaskScheduled', (n) => n === PARTICIPANT_CALL);
  const activityExecutions = of('TaskCompleted') + of('TaskFailed');
  const timers = of('TimerCreated');
  const entityBatches = instanceId.startsWith('@') ? episodes : 0;
  return {
    historyEvents: events.length,
    episodes: entityBatches > 0 ? 0 : episodes,
    activities,
    httpCalls,
    activityExecutions,
    timers,
    timersFired: of('TimerFired'),
    rearmedTimers: rearmed(events),
    entityBatches,
    workItems: episodes + activityExecutions,
    schedulerActions: 1 + 2 * (activities + httpCalls) + timers,
  };
}

const at = (row: TableRow): number => Date.parse(String(row._Timestamp));

function rearmed(events: TableRow[]): number {
  const fireAts = events.filter((e) => e.EventType === 'TimerCreated').map((e) => String(e.FireAt));
  return fireAts.filter((fireAt, i) => i > 0 && fireAts[i - 1] === fireAt).length;
}

/** Where an orchestration's time went, from the events' own timestamps (one clock: Azurite's host). */
export function latencies(events: TableRow[]): EngineLatency {
  const result: EngineLatency = { activityMs: [], pickupMs: [], episodeMs: [], timerLateMs: [] };
  const scheduled = new Map<number, number>();
  let episodeStart: TableRow | undefined;
  for (const event of events) {
    if (event.EventType === 'OrchestratorStarted') episodeStart = event;
    else if (event.EventType === 'OrchestratorCompleted' && episodeStart)
      result.episodeMs.push(at(event) - at(episodeStart));
    else if (event.EventType === 'TaskScheduled') scheduled.set(Number(event.EventId), at(event));
    else if (event.EventType === 'TaskCompleted' && episodeStart) {
      const sent = scheduled.get(Number(event.TaskScheduledId));
      if (sent !== undefined) result.activityMs.push(at(event) - sent);
      result.pickupMs.push(at(episodeStart) - at(event));
    } else if (event.EventType === 'TimerFired' && episodeStart)
      result.timerLateMs.push(at(episodeStart) - Date.parse(String(event.FireAt)));
  }
  return result;
}

/** The mean count over instances (every field), for a table row. */
export function meanCount(counts: EngineCount[]): EngineCount {
  const keys = Object.keys(counts[0] ?? {}) as (keyof EngineCount)[];
  return Object.fromEntries(
    keys.map((k) => [k, counts.reduce((sum, c) => sum + c[k], 0) / Math.max(1, counts.length)]),
  ) as unknown as EngineCount;
}
