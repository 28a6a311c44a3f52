/**
 * The one catalogue of what routelock emits to Application Insights (and the embedded host's log and
 * /api/metrics): every custom event, metric and availability test by name, with the measurements an
 * event carries. `TelemetryEvent.name` and `TelemetryMetric.name` are typed on these lists, so nothing
 * emits a name that is not here, and the workbook's and alerts' KQL (routelock's infra) is checked
 * against them, so no query reads a name nothing emits.
 *
 * Figures the workbook and alerts derive from the change feed or a workflow's end (hold times,
 * convergence waits, outcome counts) come from customEvents deduplicated on `eventKey`, never from
 * customMetrics: the change feed may redeliver a batch, a Durable activity may run twice, Application
 * Insights does not deduplicate, and a pre-aggregated metric cannot be. Metrics stay for rates that
 * nothing redelivers (lag, request-path counters).
 */

/** The property every event derived from a document version (or a workflow's end) carries: its dedup key. */
export const EVENT_KEY = 'eventKey';

export const telemetryEventNames = [
  // From one location-document version (migration/telemetry/lockTelemetry, the change feed).
  'LockAcquired',
  'LockReleased',
  'ForceReleased',
  'OrphanedLockReclaimed',
  'ConvergenceShortfall',
  'MigrationSwapped',
  // From the write path and the services.
  'AuditRecordDeferred',
  'ClockSkewHigh',
  // Campaigns (campaign/tick).
  'CampaignStarted',
  'CampaignEnded',
  // A migration's end, one per migration attempt that ended (outcome, code, phase reached).
  'MigrationEnded',
  // The reconciliation found a document change the telemetry did not see.
  'TelemetryGap',
  // The sweeper found a lock whose lease has expired, before it tries to reclaim it
  // (migration/sweeper; eventKey `OrphanedLockFound:${resourceId}:${version}` of the version it read).
  'OrphanedLockFound',
  // A lease renewed (from one document version: phase, the phase's new
  // expiresAt), so the stall alert sees a long copy's renewals as progress. One per renewal (lease/3).
  'LockRenewed',
  // An announced lock's write window announced (from one document version: phase `write`, `windowAt`,
  // `windowUntil`): the write lock may follow from windowAt plus the skew margin.
  'LockAnnounced',
] as const;
export type TelemetryEventName = (typeof telemetryEventNames)[number];

export const telemetryMetricNames = [
  'convergenceWaitSeconds',
  'writeLockSeconds',
  'hardDeleteSeconds',
  'migrationSeconds',
  // The change feed's lag (now − the last processed document's `_ts`), per batch.
  'changeFeedLagSeconds',
  // Changes the reconciliation found missing from the telemetry, per run.
  'telemetryGaps',
  // Request-path decisions a service reports (shared/core/decisions.ts), one per
  // refused, tombstoned, misdirected or unserved operation; and Cosmos DB throttling (429) that reached
  // the store adapter after the SDK's own retries (core/store/cosmos/common).
  'writesRefused',
  'deletesTombstoned',
  'requestsMisdirected',
  'routingUnavailable',
  'storeThrottled',
] as const;
export type TelemetryMetricName = (typeof telemetryMetricNames)[number];

export const availabilityNames = ['routelock-probe'] as const;
export type AvailabilityName = (typeof availabilityNames)[number];
