import { DECISION_METRIC_NAMES } from '../../core/decisions';
import type { TelemetryMetricName } from './names';
import type { TelemetrySink } from './sink';

/**
 * The request-path counters' rule lives in core (core/decisions), beside the client that
 * records them; the library re-exports it from here. Every name it counts under must be in the
 * telemetry catalogue (migration/telemetry/names): the assignment below fails to compile otherwise.
 */
export { decisionMetric, recordDecision } from '../../core/decisions';
export type { DecisionContext } from '../../core/decisions';

/** The metrics decisions are counted under, as telemetry names. */
export const decisionMetricNames: readonly TelemetryMetricName[] = DECISION_METRIC_NAMES;

/** Count one Cosmos DB 429 the store adapter saw (after the SDK's own retries), by what it was about. */
export function recordStoreThrottled(sink: Pick<TelemetrySink, 'metric'>, about: { kind: string }): void {
  sink.metric({ name: 'storeThrottled', value: 1, properties: { subject: about.kind } });
}
