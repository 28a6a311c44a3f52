import { createHmac } from 'node:crypto';
import type { OrchestrationHandler } from 'durable-functions';
import { DurableReplay, type WireEvent } from '../../testkit/durableReplay';

/**
 * The real engine's history of an instance, event for event, and its comparison with what
 * testkit/durableReplay.ts makes of the same episodes. The Durable HTTP API's `showHistory` leaves out
 * what the comparison needs (TaskScheduled, OrchestratorStarted, every EventId), so the history is read
 * where the Azure Storage provider keeps it: the task hub's History table, one row per event.
 */

/** DTFx's EventType, by the names the History table stores. */
const EVENT_TYPES: Record<string, number> = {
  ExecutionStarted: 0,
  ExecutionCompleted: 1,
  ExecutionFailed: 2,
  ExecutionTerminated: 3,
  TaskScheduled: 4,
  TaskCompleted: 5,
  TaskFailed: 6,
  TimerCreated: 10,
  TimerFired: 11,
  OrchestratorStarted: 12,
  OrchestratorCompleted: 13,
  EventSent: 14,
  EventRaised: 15,
};
const NAMES = Object.fromEntries(Object.entries(EVENT_TYPES).map(([name, n]) => [n, name]));
export const typeName = (n: number): string => NAMES[n] ?? String(n);

/** Columns the provider stores as JSON text; the extension hands them to the worker as objects. */
const JSON_COLUMNS = [
  'OrchestrationInstance',
  'ParentInstance',
  'Tags',
  'ParentTraceContext',
  'FailureDetails',
];

function setting(connection: string, key: string): string {
  const value = new RegExp(`(?:^|;)${key}=([^;]+)`).exec(connection)?.[1];
  if (value === undefined) throw new Error(`no ${key} in the storage connection string`);
  return value;
}

/** GET one page of a table query with Shared Key Lite, as the storage SDKs sign it. */
async function tablePage(
  connection: string,
  table: string,
  filter: string,
  next: { pk?: string; rk?: string },
): Promise<{ rows: Record<string, unknown>[]; next: { pk?: string; rk?: string } | undefined }> {
  const account = setting(connection, 'AccountName');
  const endpoint = new URL(setting(connection, 'TableEndpoint'));
  const path = `${endpoint.pathname.replace(/\/$/, '')}/${table}()`;
  const date = new Date().toUTCString();
  const signature = createHmac('sha256', Buffer.from(setting(connection, 'AccountKey'), 'base64'))
    .update(`${date}\n/${account}${path}`)
    .digest('base64');
  const query = new URLSearchParams({ $filter: filter });
  if (next.pk !== undefined) query.set('NextPartitionKey', next.pk);
  if (next.rk !== undefined) query.set('NextRowKey', next.rk);
  const response = await fetch(`${endpoint.origin}${path}?${query.toString()}`, {
    headers: {
      'x-ms-date': date,
      'x-ms-version': '2019-02-02',
      accept: 'application/json;odata=nometadata',
      authorization: `SharedKeyLite ${account}:${signature}`,
    },
  });
  const body = (await response.json()) as { value?: Record<string, unknown>[] };
  if (!response.ok || body.value === undefined)
    throw new Error(`History table read ${response.status}: ${JSON.stringify(body)}`);
  const pk = response.headers.get('x-ms-continuation-NextPartitionKey') ?? undefined;
  const rk = response.headers.get('x-ms-continuation-NextRowKey') ?? undefined;
  return { rows: body.value, next: pk === undefined && rk === undefined ? undefined : { pk, rk } };
}

function toWireEvent(row: Record<string, unknown>): WireEvent {
  const blob = Object.keys(row).find((key) => key.endsWith('BlobName'));
  if (blob !== undefined) throw new Error(`a history payload kept in a blob (${blob}) is not read here`);
  const { PartitionKey, RowKey, Timestamp, ExecutionId, _Timestamp, EventType, ...rest } = row;
  void [PartitionKey, RowKey, Timestamp, ExecutionId];
  const type = EVENT_TYPES[String(EventType)];
  if (type === undefined) throw new Error(`unknown history event type ${String(EventType)}`);
  for (const column of JSON_COLUMNS)
    if (typeof rest[column] === 'string') rest[column] = JSON.parse(rest[column] as string) as unknown;
  return { ...rest, EventType: type, Timestamp: String(_Timestamp) } as WireEvent;
}

/** The instance's history, one list per execution kept whole (the last, after continueAsNew), in order. */
export async function engineHistory(
  connection: string,
  hub: string,
  instanceId: string,
): Promise<WireEvent[][]> {
  const rows: Record<string, unknown>[] = [];
  const filter = `PartitionKey eq '${instanceId.replace(/'/g, "''")}'`;
  let next: { pk?: string; rk?: string } | undefined = {};
  while (next) {
    const page = await tablePage(connection, `${hub}History`, filter, next);
    rows.push(...page.rows);
    next = page.next;
  }
  rows.sort((a, b) => String(a.RowKey).localeCompare(String(b.RowKey)));
  const executions = new Map<string, WireEvent[]>();
  // the provider's sentinel row (its ETag guards the instance's history) is no event
  for (const row of rows.filter((r) => r.RowKey !== 'sentinel')) {
    const id = String(row.ExecutionId);
    executions.set(id, [...(executions.get(id) ?? []), toWireEvent(row)]);
  }
  // A continueAsNew rewrites the history from its first row: rows of the execution before that lie
  // past the new one's end are left behind, without their ExecutionStarted. Only whole executions count.
  return [...executions.values()].filter((events) => events.some((e) => e.EventType === 0));
}

/** What an episode writes, as compared: ids, names, timer times, the outcome. */
export function outgoing(event: WireEvent): Record<string, unknown> {
  const base = { type: typeName(event.EventType), id: event.EventId };
  if (event.EventType === EVENT_TYPES.TaskScheduled) return { ...base, name: event.Name };
  if (event.EventType === EVENT_TYPES.TimerCreated)
    return { ...base, fireAt: new Date(Date.parse(String(event.FireAt))).toISOString() };
  if (event.EventType === EVENT_TYPES.ExecutionCompleted) {
    const status = String(event.OrchestrationStatus);
    const result = String(event.Result);
    return { ...base, status, result: status === 'Failed' ? result : (JSON.parse(result) as unknown) };
  }
  return base;
}

const WRITTEN = new Set([
  EVENT_TYPES.TaskScheduled,
  EVENT_TYPES.TimerCreated,
  EVENT_TYPES.ExecutionCompleted,
  EVENT_TYPES.OrchestratorCompleted,
]);

export interface EpisodeComparison {
  episode: number;
  /** The messages the episode delivered (the engine's). */
  delivered: string[];
  engine: Record<string, unknown>[];
  harness: Record<string, unknown>[];
}

/**
 * Each completed episode of one execution replayed through the harness on the engine's own history
 * before it (so the same messages, in the same batches, at the same times): what the harness would
 * append beside what the engine appended. An episode the engine never closed (the instance still
 * running, or terminated) is left out.
 */
export async function compareEpisodes(
  execution: WireEvent[],
  orchestrator: OrchestrationHandler,
  name: string,
): Promise<EpisodeComparison[]> {
  const started = execution.find((e) => e.EventType === EVENT_TYPES.ExecutionStarted);
  const instanceId = String(
    (started?.OrchestrationInstance as { InstanceId?: string } | undefined)?.InstanceId,
  );
  const harness = new DurableReplay({
    orchestrator,
    name,
    instanceId,
    input: undefined,
    start: 0,
    activity: () => Promise.reject(new Error('a recorded episode runs no activity')),
    dotNetDates: true,
  });
  const comparisons: EpisodeComparison[] = [];
  // an episode ends with OrchestratorCompleted; it starts with the messages delivered, then what it wrote
  for (let from = 0; from < execution.length;) {
    const closed = execution.findIndex(
      (e, i) => i >= from && e.EventType === EVENT_TYPES.OrchestratorCompleted,
    );
    if (closed < 0) break;
    const first = execution.findIndex((e, i) => i >= from && WRITTEN.has(e.EventType));
    const delivered = execution.slice(from, first);
    if (delivered.some((e) => e.EventType === EVENT_TYPES.ExecutionTerminated)) break;
    // A continued execution's opening, closed by the dispatcher in the work item that ended the one
    // before, the orchestrator then running on in it (the next episode delivers nothing): the
    // whole-run comparison holds the harness's continueAsNew to it.
    const opening = first === closed && execution[closed + 1]?.EventType !== EVENT_TYPES.OrchestratorStarted;
    if (!opening) {
      const prefix = execution.slice(0, first).map((e, i) => ({ ...e, IsPlayed: i < from }));
      const appended = await harness.replayEpisode(prefix);
      comparisons.push({
        episode: comparisons.length + 1,
        delivered: delivered.map((e) => typeName(e.EventType)),
        engine: execution.slice(first, closed + 1).map(outgoing),
        harness: appended.map(outgoing),
      });
    }
    from = closed + 1;
  }
  return comparisons;
}
