import type { LockTelemetry, TelemetryEvent, TelemetryMetric } from './lockTelemetry';
import type { AvailabilityName } from './names';

/**
 * Where telemetry goes: Application Insights in Azure (through `applicationinsights` v3), structured log
 * lines and the in-memory recorder behind `GET /api/metrics` on the embedded host.
 */
export interface Availability {
  name: AvailabilityName;
  success: boolean;
  durationMs: number;
  runLocation: string;
  message?: string;
  properties?: Record<string, string>;
}

export interface TelemetrySink {
  event(event: TelemetryEvent): void;
  metric(metric: TelemetryMetric): void;
  availability(availability: Availability): void;
  flush(): Promise<void>;
}

export function send(sink: TelemetrySink, telemetry: LockTelemetry): void {
  for (const event of telemetry.events) sink.event(event);
  for (const metric of telemetry.metrics) sink.metric(metric);
}

export class FanOutSink implements TelemetrySink {
  constructor(private readonly sinks: TelemetrySink[]) {}
  event(event: TelemetryEvent): void {
    for (const s of this.sinks) s.event(event);
  }
  metric(metric: TelemetryMetric): void {
    for (const s of this.sinks) s.metric(metric);
  }
  availability(availability: Availability): void {
    for (const s of this.sinks) s.availability(availability);
  }
  async flush(): Promise<void> {
    await Promise.all(this.sinks.map((s) => s.flush()));
  }
}

export const nullSink: TelemetrySink = {
  event() {},
  metric() {},
  availability() {},
  flush: async () => undefined,
};

/** One structured log line per item. */
export class LogSink implements TelemetrySink {
  constructor(private readonly log: (message: string, fields: Record<string, unknown>) => void) {}
  event(event: TelemetryEvent): void {
    this.log(`telemetry event ${event.name}`, {
      telemetry: 'event',
      name: event.name,
      ...event.properties,
      ...event.measurements,
    });
  }
  metric(metric: TelemetryMetric): void {
    this.log(`telemetry metric ${metric.name}=${metric.value}`, {
      telemetry: 'metric',
      name: metric.name,
      value: metric.value,
      ...metric.properties,
    });
  }
  availability(a: Availability): void {
    this.log(`telemetry availability ${a.name} ${a.success ? 'ok' : 'FAILED'}`, {
      telemetry: 'availability',
      ...a,
      ...a.properties,
    });
  }
  async flush(): Promise<void> {}
}

export interface Distribution {
  count: number;
  p50: number | null;
  p75: number | null;
  p99: number | null;
  max: number | null;
}

export interface MetricsSnapshot {
  writeLockSeconds: Distribution;
  convergenceWaitSeconds: Distribution;
  migrationSeconds: Distribution;
  hardDeleteSeconds: Distribution;
  events: Record<string, number>;
  convergenceShortfalls: number;
  probes: { runs: number; failures: number; last: Availability | null };
}

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1] as number;
}

export function distribution(values: number[]): Distribution {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    count: sorted.length,
    p50: percentile(sorted, 50),
    p75: percentile(sorted, 75),
    p99: percentile(sorted, 99),
    max: sorted.length ? (sorted[sorted.length - 1] as number) : null,
  };
}

/** In-memory recorder behind `GET /api/metrics` (bounded: the most recent 10 000 values per metric). */
export class MetricsRecorder implements TelemetrySink {
  private readonly values = new Map<string, number[]>();
  private readonly events = new Map<string, number>();
  private probeRuns = 0;
  private probeFailures = 0;
  private lastProbe: Availability | null = null;

  event(event: TelemetryEvent): void {
    this.events.set(event.name, (this.events.get(event.name) ?? 0) + 1);
  }
  metric(metric: TelemetryMetric): void {
    const list = this.values.get(metric.name) ?? [];
    list.push(metric.value);
    if (list.length > 10_000) list.shift();
    this.values.set(metric.name, list);
  }
  availability(a: Availability): void {
    this.probeRuns += 1;
    if (!a.success) this.probeFailures += 1;
    this.lastProbe = a;
  }
  async flush(): Promise<void> {}

  snapshot(): MetricsSnapshot {
    const d = (name: string) => distribution(this.values.get(name) ?? []);
    return {
      writeLockSeconds: d('writeLockSeconds'),
      convergenceWaitSeconds: d('convergenceWaitSeconds'),
      migrationSeconds: d('migrationSeconds'),
      hardDeleteSeconds: d('hardDeleteSeconds'),
      events: Object.fromEntries([...this.events.entries()].sort()),
      convergenceShortfalls: this.events.get('ConvergenceShortfall') ?? 0,
      probes: { runs: this.probeRuns, failures: this.probeFailures, last: this.lastProbe },
    };
  }
}

/** The subset of `applicationinsights` v3's TelemetryClient this app uses (tests pass a fake). */
export interface TelemetryClientLike {
  trackEvent(telemetry: {
    name: string;
    properties?: Record<string, string>;
    measurements?: Record<string, number>;
  }): void;
  trackMetric(telemetry: { name: string; value: number; properties?: Record<string, string> }): void;
  trackAvailability(telemetry: {
    id: string;
    name: string;
    success: boolean;
    duration: number;
    runLocation: string;
    message: string;
    properties?: Record<string, string>;
  }): void;
  flush(): Promise<void>;
}

export class TelemetryClientSink implements TelemetrySink {
  constructor(
    private readonly client: TelemetryClientLike,
    private readonly newId: () => string = () => crypto.randomUUID(),
  ) {}
  event(event: TelemetryEvent): void {
    this.client.trackEvent({
      name: event.name,
      properties: event.properties,
      ...(event.measurements ? { measurements: event.measurements } : {}),
    });
  }
  metric(metric: TelemetryMetric): void {
    this.client.trackMetric({ name: metric.name, value: metric.value, properties: metric.properties });
  }
  availability(a: Availability): void {
    this.client.trackAvailability({
      id: this.newId(),
      name: a.name,
      success: a.success,
      duration: a.durationMs,
      runLocation: a.runLocation,
      message: a.message ?? '',
      ...(a.properties ? { properties: a.properties } : {}),
    });
  }
  flush(): Promise<void> {
    return this.client.flush();
  }
}

/**
 * Application Insights when `APPLICATIONINSIGHTS_CONNECTION_STRING` is set, with Entra (managed
 * identity) authentication when `APPLICATIONINSIGHTS_AUTHENTICATION_STRING` says `Authorization=AAD`.
 * Imported lazily: nothing loads the SDK unless telemetry is configured.
 */
export async function applicationInsightsSink(
  env: Record<string, string | undefined>,
): Promise<TelemetrySink | undefined> {
  const connectionString = env.APPLICATIONINSIGHTS_CONNECTION_STRING?.trim();
  if (!connectionString) return undefined;
  const { TelemetryClient } = await import('applicationinsights');
  const client = new TelemetryClient(connectionString, { useGlobalProviders: false });
  const auth = env.APPLICATIONINSIGHTS_AUTHENTICATION_STRING ?? '';
  if (/Authorization=AAD/i.test(auth)) {
    const { ManagedIdentityCredential } = await import('@azure/identity');
    const clientId = /ClientId=([^;]+)/i.exec(auth)?.[1];
    client.config.aadTokenCredential = clientId
      ? new ManagedIdentityCredential({ clientId })
      : new ManagedIdentityCredential();
  }
  return new TelemetryClientSink(client as unknown as TelemetryClientLike);
}
