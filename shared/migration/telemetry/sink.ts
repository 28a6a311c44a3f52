import type { LockTelemetry, TelemetryEvent, TelemetryMetric } from './lockTelemetry';
import { type AvailabilityName, EVENT_KEY } from './names';

/**
 * Where telemetry goes: Application Insights in Azure (through `applicationinsights` v3), structured log
 * lines and the recorder behind `GET /api/metrics` on the embedded host.
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

/** How migrations ended (MigrationEnded's `outcome`), each attempt once. */
export interface MigrationOutcomes {
  completed: number;
  failed: number;
  conflicts: number;
  cancelled: number;
  noOps: number;
}

export interface ProbeCounts {
  runs: number;
  failures: number;
  last: Availability | null;
}

export interface MetricsSnapshot {
  writeLockSeconds: Distribution;
  convergenceWaitSeconds: Distribution;
  migrationSeconds: Distribution;
  hardDeleteSeconds: Distribution;
  /** Events by name, each `eventKey` once. */
  events: Record<string, number>;
  convergenceShortfalls: number;
  migrations: MigrationOutcomes;
  /** Changes the reconciliation found the telemetry did not see (TelemetryGap events, each key once). */
  telemetryGaps: number;
  /** Events dropped because their `eventKey` was counted already (a redelivered batch). */
  duplicatesIgnored: number;
  probes: ProbeCounts;
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

/**
 * The distributions, each fed by the measurements of the events named (a swap's LockReleased also carries
 * the convergence wait; counting it from MigrationSwapped too would count a swap twice). The write-lock
 * hold comes from a swap's MigrationSwapped and from the LockReleased of a write lock downgraded or
 * released without a swap, which alone carries `writeLockSeconds` among the LockReleased.
 */
const distributionSources = {
  writeLockSeconds: ['MigrationSwapped', 'LockReleased'],
  hardDeleteSeconds: ['MigrationSwapped'],
  migrationSeconds: ['MigrationSwapped'],
  convergenceWaitSeconds: ['LockReleased'],
} as const satisfies Record<string, readonly TelemetryEvent['name'][]>;
type DistributionName = keyof typeof distributionSources;

const outcomeCounters: Record<string, keyof MigrationOutcomes> = {
  Completed: 'completed',
  Failed: 'failed',
  Conflict: 'conflicts',
  Cancelled: 'cancelled',
  NoOp: 'noOps',
};

/** Values kept per distribution: the most recent 10 000. */
export const VALUES_PER_DISTRIBUTION = 10_000;

/**
 * Event keys remembered for deduplication. A key comes back when the change feed redelivers a batch
 * (the trigger's retries: 10, backed off from 5 s to 5 minutes, so within about 25 minutes), when the
 * embedded host's handler runs a version again, or when overlapping reconciliation runs find the same
 * gap (a window of an hour). 100 000 keys cover an hour at 25 events a second, far above one host's
 * write rate, in about 18 MB of heap (measured); a key older than that is counted again, which no
 * redelivery reaches.
 */
export const DEDUP_WINDOW_KEYS = 100_000;

/** The recorder's bounds (tests shrink them to see them hold). */
export interface RecorderLimits {
  keys: number;
  values: number;
}
export const recorderLimits: RecorderLimits = { keys: DEDUP_WINDOW_KEYS, values: VALUES_PER_DISTRIBUTION };

/** What the recorder has counted: what a journal restores. */
export interface RecorderState {
  /** Oldest first. */
  keys: string[];
  /** `event:<name>`, `outcome:<counter>`, `duplicates`. */
  counts: Record<string, number>;
  /** Oldest first. */
  values: Partial<Record<DistributionName, number[]>>;
  probes: ProbeCounts;
}

/** One counted event, as a journal persists it. */
export interface RecordedEvent {
  key: string | undefined;
  counts: string[];
  values: { name: DistributionName; value: number }[];
}

/**
 * Where the recorder's counts survive a restart (migration/store/sqlite/telemetry on the embedded host);
 * synchronous, like the sink calls it serves. It trims to the same limits as the recorder.
 */
export interface RecorderJournal {
  load(): RecorderState;
  recordEvent(event: RecordedEvent): void;
  recordDuplicate(): void;
  recordProbes(probes: ProbeCounts): void;
}

/**
 * The recorder behind `GET /api/metrics`: counts each `eventKey` once (an event without one, such as
 * AuditRecordDeferred, every time) and derives its distributions from the counted events' measurements,
 * never from metrics, so a redelivered batch changes nothing. With a journal it resumes where it was.
 */
export class MetricsRecorder implements TelemetrySink {
  private readonly keys = new Set<string>();
  private readonly values = new Map<DistributionName, number[]>();
  private readonly counts = new Map<string, number>();
  private probes: ProbeCounts = { runs: 0, failures: 0, last: null };

  constructor(
    private readonly journal?: RecorderJournal,
    private readonly limits: RecorderLimits = recorderLimits,
  ) {
    if (!journal) return;
    const state = journal.load();
    for (const key of state.keys) this.keys.add(key);
    for (const [name, count] of Object.entries(state.counts)) this.counts.set(name, count);
    for (const [name, list] of Object.entries(state.values))
      this.values.set(name as DistributionName, [...list]);
    this.probes = state.probes;
  }

  // Journal first, memory after it committed: a journal write that throws leaves nothing counted, so
  // the batch's retry counts the event then (counted in memory first, the retry would be a "duplicate"
  // and the event gone after a restart).
  event(event: TelemetryEvent): void {
    const key = event.properties[EVENT_KEY];
    if (key !== undefined && this.keys.has(key)) {
      this.journal?.recordDuplicate();
      this.bump('duplicates');
      return;
    }
    const counts = [`event:${event.name}`];
    const outcome =
      event.name === 'MigrationEnded' ? outcomeCounters[event.properties.outcome ?? ''] : undefined;
    if (outcome) counts.push(`outcome:${outcome}`);
    const values: RecordedEvent['values'] = [];
    for (const [name, sources] of Object.entries(distributionSources) as [
      DistributionName,
      readonly string[],
    ][]) {
      const value = event.measurements?.[name];
      if (sources.includes(event.name) && value !== undefined) values.push({ name, value });
    }
    this.journal?.recordEvent({ key, counts, values });
    if (key !== undefined) {
      this.keys.add(key);
      if (this.keys.size > this.limits.keys) this.keys.delete(this.keys.values().next().value as string);
    }
    for (const name of counts) this.bump(name);
    for (const { name, value } of values) {
      const list = this.values.get(name) ?? [];
      list.push(value);
      if (list.length > this.limits.values) list.shift();
      this.values.set(name, list);
    }
  }
  /** Metrics are not counted here: the distributions come from the deduplicated events. */
  metric(_metric: TelemetryMetric): void {}
  availability(a: Availability): void {
    const probes = {
      runs: this.probes.runs + 1,
      failures: this.probes.failures + (a.success ? 0 : 1),
      last: a,
    };
    this.journal?.recordProbes(probes);
    this.probes = probes;
  }
  async flush(): Promise<void> {}

  private bump(name: string): void {
    this.counts.set(name, (this.counts.get(name) ?? 0) + 1);
  }
  private count(name: string): number {
    return this.counts.get(name) ?? 0;
  }

  snapshot(): MetricsSnapshot {
    const d = (name: DistributionName) => distribution(this.values.get(name) ?? []);
    const events = [...this.counts.entries()]
      .filter(([name]) => name.startsWith('event:'))
      .map(([name, count]) => [name.slice('event:'.length), count] as const)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return {
      writeLockSeconds: d('writeLockSeconds'),
      convergenceWaitSeconds: d('convergenceWaitSeconds'),
      migrationSeconds: d('migrationSeconds'),
      hardDeleteSeconds: d('hardDeleteSeconds'),
      events: Object.fromEntries(events),
      convergenceShortfalls: this.count('event:ConvergenceShortfall'),
      migrations: {
        completed: this.count('outcome:completed'),
        failed: this.count('outcome:failed'),
        conflicts: this.count('outcome:conflicts'),
        cancelled: this.count('outcome:cancelled'),
        noOps: this.count('outcome:noOps'),
      },
      telemetryGaps: this.count('event:TelemetryGap'),
      duplicatesIgnored: this.count('duplicates'),
      probes: this.probes,
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
