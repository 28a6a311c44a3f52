import type { BreakerState } from './breaker';
import type { DecisionContext, DecisionMetric } from './decisions';

/**
 * RoutingClient's metrics: hooks it calls as things happen (option `metrics`), and `otelMetrics`, the
 * hooks that feed an OpenTelemetry meter (option `meter`). The client depends on no metrics library:
 * the meter is typed by the three calls it uses, which an @opentelemetry/api `Meter` has. Every hook is
 * optional and called synchronously; a hook that throws is the service's bug, not the route's, so the
 * client lets it fail the call that made it (a metrics mistake is not hidden).
 */

/** One request to the routing service as `request` reports it. */
export interface RequestMetric {
  method: string;
  /** From just before it was sent to its answer's body, or its failure (ms, a monotonic clock). */
  durationMs: number;
  /** `ok` for a 2xx answer, else the error's code (`Unreachable`, `NotFound`, `HTTP500`, ...). */
  outcome: string;
  /** Whether it was a refresh-ahead request, which no caller waited for. */
  background: boolean;
}

export interface ClientMetrics {
  /** A resolve answered from the cache (a view or a remembered 404), without a request. */
  cacheHit?(): void;
  /** A resolve the cache could not answer: it waited for a request (its own or one it joined). */
  cacheMiss?(): void;
  /** A hit in a view's last stretch started a background refresh (refresh ahead). */
  refreshAhead?(): void;
  /** A request to the routing service ended (sent: a call the breaker refused is only an error). */
  request?(request: RequestMetric): void;
  /** A call failed, with its code (`BreakerOpen`, `Unreachable`, `Throttled`, `NotFound`, `Aborted`, ...). */
  error?(code: string): void;
  /** The breaker moved to another kind of state (closed, open, halfOpen). */
  breaker?(state: BreakerState): void;
  /** A counted decision the service acted on (`recordDecision`; allow and notFound are not counted). */
  decision?(metric: DecisionMetric, context: DecisionContext): void;
}

/** Attributes as OpenTelemetry takes them. */
type Attributes = Record<string, string>;

/** What an observable instrument's callback is handed. */
export interface ObservableResultLike {
  observe(value: number, attributes?: Attributes): void;
}

/** What the client uses of an OpenTelemetry `Meter` (@opentelemetry/api), typed structurally. */
export interface MeterLike {
  createCounter(
    name: string,
    options?: { description?: string; unit?: string },
  ): { add(value: number, attributes?: Attributes): void };
  createHistogram(
    name: string,
    options?: { description?: string; unit?: string },
  ): { record(value: number, attributes?: Attributes): void };
  createObservableGauge(
    name: string,
    options?: { description?: string; unit?: string },
  ): { addCallback(callback: (result: ObservableResultLike) => void): void };
}

/** The breaker gauge's values: 0 closed, 1 half-open (a probe is out), 2 open. */
export const BREAKER_GAUGE: Readonly<Record<BreakerState['kind'], number>> = Object.freeze({
  closed: 0,
  halfOpen: 1,
  open: 2,
});

/**
 * The hooks that record into `meter` (names under `routelock.client.`): counters `cache.hits`,
 * `cache.misses`, `refresh_ahead`, `errors` (attribute `code`) and `decisions` (attributes `metric`,
 * `service`, `operation`, `region`); the histogram `request.duration` (ms; `method`, `outcome`,
 * `background`); the gauge `breaker.state` (BREAKER_GAUGE, the state last reported, closed before).
 */
export function otelMetrics(meter: MeterLike): ClientMetrics {
  const hits = meter.createCounter('routelock.client.cache.hits', {
    description: 'resolves answered from the cache',
  });
  const misses = meter.createCounter('routelock.client.cache.misses', {
    description: 'resolves that waited for a request',
  });
  const ahead = meter.createCounter('routelock.client.refresh_ahead', {
    description: 'background refreshes started',
  });
  const errors = meter.createCounter('routelock.client.errors', { description: 'calls failed, by code' });
  const decisions = meter.createCounter('routelock.client.decisions', { description: 'counted decisions' });
  const duration = meter.createHistogram('routelock.client.request.duration', {
    description: 'requests to the routing service',
    unit: 'ms',
  });
  let breakerKind: BreakerState['kind'] = 'closed';
  meter
    .createObservableGauge('routelock.client.breaker.state', { description: '0 closed, 1 half-open, 2 open' })
    .addCallback((result) => result.observe(BREAKER_GAUGE[breakerKind]));
  return {
    cacheHit: () => hits.add(1),
    cacheMiss: () => misses.add(1),
    refreshAhead: () => ahead.add(1),
    request: (r) =>
      duration.record(r.durationMs, {
        method: r.method,
        outcome: r.outcome,
        background: String(r.background),
      }),
    error: (code) => errors.add(1, { code }),
    breaker: (state) => {
      breakerKind = state.kind;
    },
    decision: (metric) => decisions.add(metric.value, { metric: metric.name, ...metric.properties }),
  };
}

const HOOKS = ['cacheHit', 'cacheMiss', 'refreshAhead', 'request', 'error', 'breaker', 'decision'] as const;

/** Hooks that call each of `sets`' hooks in turn (the `metrics` option's and the `meter`'s). */
export function combinedMetrics(...present: ClientMetrics[]): ClientMetrics {
  if (present.length === 1) return present[0] as ClientMetrics;
  const combined: Record<string, (...args: never[]) => void> = {};
  for (const hook of HOOKS) {
    const calls = present.map((set) => set[hook]).filter((call) => call !== undefined) as ((
      ...args: never[]
    ) => void)[];
    if (calls.length > 0) combined[hook] = (...args: never[]) => calls.forEach((call) => call(...args));
  }
  return combined as ClientMetrics;
}

/** The hook names `metrics` may hold (any other key is a typo, refused when the client is built). */
export const METRIC_HOOKS: readonly string[] = HOOKS;
