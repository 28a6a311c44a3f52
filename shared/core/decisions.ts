import type { Location } from './lock/document';
import type { Operation } from './lock/view';

/** What a service must do with one operation (design §5.5; the HTTP answer: `decisionStatus`). */
export type Decision =
  | { kind: 'allow' }
  /** A delete while the hard-delete lock is in force: record a tombstone instead of removing the item. */
  | { kind: 'tombstone' }
  /** A write (or delete) under the write lock: refuse it, and say when to come back. */
  | { kind: 'deny'; retryAfterSeconds: number }
  /** The data does not live where this service serves: send the caller to `location`. */
  | { kind: 'notHere'; location: Location }
  /** The routing service has no route for the id (404 `NotFound`): nothing is served or written. */
  | { kind: 'notFound' }
  /**
   * The routing service could not be reached (`Unreachable`), failed (500, 502–504) or throttled (429
   * `Throttled`), or only a stale view is at hand and the operation is a write or a delete
   * (`whenUnreachable: 'serveStaleReads'`).
   */
  | { kind: 'unavailable'; retryAfterSeconds: number };

/**
 * Request-path counters (design §8): what a service did with one operation, as a metric the
 * workbook's "refusals, tombstoned deletes and store throttling" panel reads. The one home of the
 * counting rule: the client's `recordDecision` and its metrics hooks, the library's `recordDecision`
 * (a telemetry sink) and the example all count through `decisionMetric`. Metrics, not events: nothing
 * redelivers a request's decision, so there is nothing to deduplicate. An allowed operation (and a
 * missing route) is not counted: it is the request rate, which the service's own request telemetry
 * already has.
 */
export const DECISION_METRIC_NAMES = [
  'writesRefused',
  'deletesTombstoned',
  'requestsMisdirected',
  'routingUnavailable',
] as const;
export type DecisionMetricName = (typeof DECISION_METRIC_NAMES)[number];

/** The metric a decision is counted under; `undefined`: not counted. */
export function decisionMetric(decision: Decision): DecisionMetricName | undefined {
  switch (decision.kind) {
    case 'deny':
      return 'writesRefused';
    case 'tombstone':
      return 'deletesTombstoned';
    case 'notHere':
      return 'requestsMisdirected';
    case 'unavailable':
      return 'routingUnavailable';
    case 'allow':
    case 'notFound':
      return undefined;
  }
}

export interface DecisionContext {
  /** The service's name (a dimension: one workbook, several services). */
  service: string;
  operation: Operation;
  /** Where the service serves from (a region name; never an account key or URL with credentials). */
  region?: string;
}

/** One counted decision as a metric: value 1 (the workbook sums them), with its dimensions. */
export interface DecisionMetric {
  name: DecisionMetricName;
  value: number;
  properties: Record<string, string>;
}

/** Where `recordDecision` sends a counted decision: a telemetry sink's `metric`, or anything like it. */
export interface DecisionSink {
  metric(metric: DecisionMetric): void;
}

/** The metric one decision is counted as; `undefined`: not counted (`decisionMetric`). */
export function decisionRecord(decision: Decision, context: DecisionContext): DecisionMetric | undefined {
  const name = decisionMetric(decision);
  if (name === undefined) return undefined;
  return {
    name,
    value: 1,
    properties: {
      service: context.service,
      operation: context.operation,
      ...(context.region !== undefined ? { region: context.region } : {}),
    },
  };
}

/** Count one decision a service acted on into `sink` (nothing for one not counted). */
export function recordDecision(sink: DecisionSink, decision: Decision, context: DecisionContext): void {
  const metric = decisionRecord(decision, context);
  if (metric !== undefined) sink.metric(metric);
}
