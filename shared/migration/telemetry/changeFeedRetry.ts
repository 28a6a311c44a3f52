/** The shape of @azure/functions' ExponentialBackoffRetryOptions (shared/ does not import the runtime). */
interface Duration {
  hours?: number;
  minutes?: number;
  seconds?: number;
  milliseconds?: number;
}
export interface ExponentialBackoffRetry {
  strategy: 'exponentialBackoff';
  maxRetryCount: number;
  minimumInterval: Duration | number;
  maximumInterval: Duration | number;
}

/**
 * The change-feed trigger's retry policy (functions/lockTelemetry.ts registers it) and how long it can
 * keep a batch in flight: the one home of both, so the reconciliation's grace is checked against the
 * policy the trigger really runs (shared/migration/settings.ts) and a batch still being retried is never a gap.
 *
 * The host does not re-run a batch whose invocation threw unless the function has a retry policy: with
 * this one a failed batch is retried (the lease not advanced) with backoff from 5 s to 5 min, then given
 * up so one bad batch cannot stall the feed forever.
 */
export const changeFeedRetry = {
  strategy: 'exponentialBackoff',
  maxRetryCount: 10,
  minimumInterval: { seconds: 5 },
  maximumInterval: { minutes: 5 },
} as const satisfies ExponentialBackoffRetry;

const durationSeconds = (d: Duration | number): number =>
  typeof d === 'number'
    ? d / 1000
    : (d.hours ?? 0) * 3600 + (d.minutes ?? 0) * 60 + (d.seconds ?? 0) + (d.milliseconds ?? 0) / 1000;

/**
 * The longest a failed batch waits for its last retry: the sum of the backoff delays (the k-th retry
 * waits min(minimum · 2^(k−1), maximum)). 5 s doubling to 5 min, 10 retries: 1515 s (25¼ minutes).
 */
export function retryHorizonSeconds(policy: ExponentialBackoffRetry = changeFeedRetry): number {
  const min = durationSeconds(policy.minimumInterval);
  const max = durationSeconds(policy.maximumInterval);
  let total = 0;
  for (let k = 0; k < policy.maxRetryCount; k += 1) total += Math.min(min * 2 ** k, max);
  return total;
}

/**
 * The reconciliation's default grace: the horizon (1515 s) with room for the retried invocations' own
 * run time and the feed's ordinary lag, rounded to half an hour.
 */
export const DEFAULT_RECONCILE_GRACE_SECONDS = 1800;
