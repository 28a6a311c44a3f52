import type { Decision } from '../../core/client';
import type { Operation } from '../../core/lock/view';
import type { TelemetryMetricName } from './names';
import type { TelemetrySink } from './sink';

/**
 * Request-path counters (design §8): what a service did with one operation, as a metric the
 * workbook's "refusals, tombstoned deletes and store throttling" panel reads. A service calls
 * `recordDecision` with the `Decision` it acted on (from `decide`), so nothing inside the client or the
 * router changes and a service that links the library counts the same way as the example message store.
 * Metrics, not events: nothing redelivers a request's decision, so there is nothing to deduplicate.
 * An allowed operation (and a missing route) is not counted: it is the request rate, which the
 * service's own request telemetry already has.
 */

/** The metric a decision is counted under; `undefined`: not counted. */
export function decisionMetric(decision: Decision): TelemetryMetricName | undefined {
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

/** Count one decision a service acted on (value 1; the workbook sums them). */
export function recordDecision(
  sink: Pick<TelemetrySink, 'metric'>,
  decision: Decision,
  context: DecisionContext,
): void {
  const name = decisionMetric(decision);
  if (name === undefined) return;
  sink.metric({
    name,
    value: 1,
    properties: {
      service: context.service,
      operation: context.operation,
      ...(context.region !== undefined ? { region: context.region } : {}),
    },
  });
}

/** Count one Cosmos DB 429 the store adapter saw (after the SDK's own retries), by what it was about. */
export function recordStoreThrottled(sink: Pick<TelemetrySink, 'metric'>, about: { kind: string }): void {
  sink.metric({ name: 'storeThrottled', value: 1, properties: { subject: about.kind } });
}
