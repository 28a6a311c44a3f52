import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { BREAKER_GAUGE, RoutingClient, RoutingClientOptionError } from '../../shared/core/client';
import { Front, type HostOnClock, SOURCE, T, hostOnManualClock } from './harness';

/**
 * The client's metrics through a real OpenTelemetry MeterProvider (@opentelemetry/sdk-metrics, an
 * in-memory exporter): the client is handed the SDK's Meter, typed structurally, and records cache hits
 * and misses, request durations, errors by code, the breaker's state and the counted decisions.
 */

let h: HostOnClock | undefined;
let front: Front | undefined;
afterEach(async () => {
  await front?.kill();
  await h?.host.close();
  h = undefined;
  front = undefined;
});

interface Point {
  value: unknown;
  attributes: Record<string, unknown>;
}

/** Every instrument's data points, after a collection. */
async function collect(reader: PeriodicExportingMetricReader, exporter: InMemoryMetricExporter) {
  await reader.forceFlush();
  const points = new Map<string, Point[]>();
  for (const resource of exporter.getMetrics())
    for (const scope of resource.scopeMetrics)
      for (const metric of scope.metrics)
        points.set(
          metric.descriptor.name,
          metric.dataPoints.map((p) => ({
            value:
              metric.dataPointType === DataPointType.HISTOGRAM
                ? (p.value as { count: number }).count
                : p.value,
            attributes: p.attributes,
          })),
        );
  exporter.reset();
  return points;
}

test('a real Meter: hits, misses, request durations, errors by code, the breaker state, decisions', async () => {
  h = await hostOnManualClock('dev');
  front = await Front.start(h.api);
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  try {
    const client = new RoutingClient({
      baseUrl: front.api,
      clock: h.clock.now,
      meter: provider.getMeter('service'),
      breakerFailures: 1,
    });
    await client.putRoute('conv-1', SOURCE);
    await client.resolve('conv-1'); // a miss, one GET
    for (let i = 0; i < 3; i += 1) await client.resolve('conv-1'); // three hits
    await client.resolve('conv-none').catch(() => undefined); // a miss, a 404: NotFound
    client.recordDecision(
      { kind: 'deny', retryAfterSeconds: 1 },
      { service: 'orders', operation: 'write', region: 'westeurope' },
    );
    client.recordDecision({ kind: 'allow' }, { service: 'orders', operation: 'read' }); // not counted
    let points = await collect(reader, exporter);
    expect(points.get('routelock.client.cache.hits')).toEqual([{ value: 3, attributes: {} }]);
    expect(points.get('routelock.client.cache.misses')).toEqual([{ value: 2, attributes: {} }]);
    expect(points.get('routelock.client.request.duration')).toEqual(
      expect.arrayContaining([
        { value: 1, attributes: { method: 'PUT', outcome: 'ok', background: 'false' } },
        { value: 1, attributes: { method: 'GET', outcome: 'ok', background: 'false' } },
        { value: 1, attributes: { method: 'GET', outcome: 'NotFound', background: 'false' } },
      ]),
    );
    expect(points.get('routelock.client.errors')).toEqual([{ value: 1, attributes: { code: 'NotFound' } }]);
    expect(points.get('routelock.client.decisions')).toEqual([
      {
        value: 1,
        attributes: { metric: 'writesRefused', service: 'orders', operation: 'write', region: 'westeurope' },
      },
    ]);
    expect(points.get('routelock.client.breaker.state')).toEqual([
      { value: BREAKER_GAUGE.closed, attributes: {} },
    ]);

    await front.kill(); // one connection failure opens the breaker; the next call is refused at once
    h.clock.set(T + 10_000);
    await client.resolve('conv-1').catch(() => undefined);
    await client.resolve('conv-1').catch(() => undefined);
    points = await collect(reader, exporter);
    expect(points.get('routelock.client.breaker.state')).toEqual([
      { value: BREAKER_GAUGE.open, attributes: {} },
    ]);
    expect(points.get('routelock.client.errors')).toEqual(
      expect.arrayContaining([
        { value: 1, attributes: { code: 'Unreachable' } },
        { value: 1, attributes: { code: 'BreakerOpen' } },
      ]),
    );
  } finally {
    await provider.shutdown();
  }
});

test('bad metrics options are refused when the client is built, naming the hook', () => {
  const baseUrl = 'http://127.0.0.1:9/api';
  const build = (options: object) => {
    try {
      new RoutingClient({ baseUrl, ...options });
      return 'built';
    } catch (error) {
      return error;
    }
  };
  expect(build({ metrics: { cacheHit: 1 } })).toMatchObject({
    option: 'metrics.cacheHit',
    code: 'InvalidClientOption',
  });
  expect(build({ metrics: { cachehit: () => 0 } })).toMatchObject({ option: 'metrics.cachehit' });
  expect(build({ meter: { createCounter: () => ({}) } })).toBeInstanceOf(RoutingClientOptionError);
  expect(build({ refreshAheadShare: 1.5 })).toMatchObject({ option: 'refreshAheadShare' });
  expect(build({ metrics: {}, refreshAheadShare: 0 })).toBe('built');
});
