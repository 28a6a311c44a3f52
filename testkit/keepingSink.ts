import type { TelemetryEvent, TelemetryMetric } from '../shared/migration/telemetry/lockTelemetry';
import type { TelemetrySink } from '../shared/migration/telemetry/sink';

/** A sink that keeps everything it is sent, as Application Insights does (it does not deduplicate). */
export class KeepingSink implements TelemetrySink {
  events: TelemetryEvent[] = [];
  metrics: TelemetryMetric[] = [];
  event(e: TelemetryEvent): void {
    this.events.push(e);
  }
  metric(m: TelemetryMetric): void {
    this.metrics.push(m);
  }
  availability(): void {}
  async flush(): Promise<void> {}
}
