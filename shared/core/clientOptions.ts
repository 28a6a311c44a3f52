import type { BreakerSettings } from './breaker';
import {
  type ClientMetrics,
  METRIC_HOOKS,
  type MeterLike,
  combinedMetrics,
  otelMetrics,
} from './clientMetrics';
import type { RefreshAheadSettings } from './refreshAhead';
import { COALESCE_GRACE_SHARE } from './inflight';
import { DEFAULT_CLOCK_SKEW_SECONDS } from './lock/state';
import { profiles } from './profiles';

/**
 * RoutingClient's options checked once, when the client is built: a bad option is a configuration
 * mistake, so it fails the service at start-up with one typed error naming the option and the value,
 * instead of surfacing later as a silent default (an unknown `whenUnreachable`) or a wrong decision (a
 * negative skew margin serving a started lock from the cache).
 */

/** The production profile's ROUTELOCK_INFLIGHT_GRACE_SECONDS (core/profiles). */
export const DEFAULT_INFLIGHT_GRACE_SECONDS = Number(profiles.production.ROUTELOCK_INFLIGHT_GRACE_SECONDS);
/** `timeoutMs`'s default. */
export const DEFAULT_TIMEOUT_MS = 2_000;
/** `coalesceJoinMs`'s default (1 % of the production grace). */
export const DEFAULT_COALESCE_JOIN_MS = 50;
/** The production profile's ROUTELOCK_COALESCE_JOIN_MS (core/profiles). */
export const DEFAULT_SERVER_COALESCE_JOIN_MS = Number(profiles.production.ROUTELOCK_COALESCE_JOIN_MS);
/** `notFoundTtlMs`'s default. */
export const DEFAULT_NOT_FOUND_TTL_MS = 1_000;
/** `staleForMs`'s default. */
export const DEFAULT_STALE_FOR_MS = 60_000;
/** `cacheMax`'s default. */
export const DEFAULT_CACHE_MAX = 10_000;
/**
 * `maxCacheSeconds`'s default: the production profile's `local` tier TTL (60 s), the most max-age a
 * production routelock ever sends (core/lock/view cacheControl). The pre-lock's convergence
 * wait counts that TTL once, so a longer max-age (a proxy that rewrites it) would let a view outlive a
 * lock's start; a shorter cap costs only requests.
 */
export const DEFAULT_MAX_CACHE_SECONDS = Number(
  /(?:^|,)local=(\d+)/.exec(profiles.production.ROUTELOCK_CACHE_TIERS)?.[1] ?? 60,
);
/**
 * `breakerFailures`'s default: one lost connection or slow answer is not an outage, five in a row are
 * (with ten concurrent workers, the first wave of timeouts against a hung host).
 */
export const DEFAULT_BREAKER_FAILURES = 5;
/** `breakerBackoffMs`'s default: the first open period, half a default timeout. */
export const DEFAULT_BREAKER_BACKOFF_MS = 1_000;
/** `breakerMaxBackoffMs`'s default: a routelock back after a restart is found within half a minute. */
export const DEFAULT_BREAKER_MAX_BACKOFF_MS = 30_000;
/** `breakerJitter`'s default: a backoff is between half and all of its nominal length. */
export const DEFAULT_BREAKER_JITTER = 0.5;

/**
 * `refreshAheadShare`'s default: a hit in the last fifth of a view's lifetime refreshes it in the
 * background (the last 12 s of the production 60 s; 400 ms of the dev profile's 2 s), long enough for
 * a fetch to come back before the view expires, short enough that a busy id costs one request per 48 s
 * rather than per 60 s plus a waiting request.
 */
export const DEFAULT_REFRESH_AHEAD_SHARE = 0.2;

/** The outage policies `whenUnreachable` accepts. */
export const OUTAGE_POLICIES = ['fail', 'serveStaleReads'] as const;
export type OutagePolicy = (typeof OUTAGE_POLICIES)[number];

/**
 * A RoutingClient option that is unknown, of the wrong type or out of range. A RangeError, as a bad
 * argument is; `code` is stable, `option` names the option and `value` is what was given.
 */
export class RoutingClientOptionError extends RangeError {
  override readonly name = 'RoutingClientOptionError';
  readonly code = 'InvalidClientOption' as const;
  constructor(
    readonly option: string,
    readonly value: unknown,
    rule: string,
  ) {
    super(`RoutingClient: option ${option} ${rule} (got ${shown(value)})`);
  }
}

/** A value as an error message shows it: strings quoted, functions and objects by kind. */
function shown(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'function') return 'a function';
  if (value === null || typeof value !== 'object') return String(value);
  return Array.isArray(value) ? 'an array' : 'an object';
}

/** The options RoutingClient knows: any other key is a typo (`timeoutMS`) that would be ignored. */
const KNOWN = new Set([
  'baseUrl',
  'functionKey',
  'accessToken',
  'clock',
  'clockSkewSeconds',
  'cacheMax',
  'timeoutMs',
  'inFlightGraceSeconds',
  'coalesceJoinMs',
  'serverCoalesceJoinMs',
  'notFoundTtlMs',
  'whenUnreachable',
  'staleForMs',
  'maxCacheSeconds',
  'breakerFailures',
  'breakerBackoffMs',
  'breakerMaxBackoffMs',
  'breakerJitter',
  'refreshAheadShare',
  'metrics',
  'meter',
  'fetch',
]);

/** What the constructor keeps of its options: each number checked and defaulted. */
export interface ClientSettings {
  baseUrl: string;
  clockSkewSeconds: number;
  cacheMax: number;
  timeoutMs: number;
  inFlightGraceSeconds: number;
  coalesceJoinMs: number;
  serverCoalesceJoinMs: number;
  notFoundTtlMs: number;
  whenUnreachable: OutagePolicy;
  /** 0 unless `whenUnreachable` is `serveStaleReads`. */
  staleForMs: number;
  maxCacheSeconds: number;
  breaker: BreakerSettings;
  refreshAhead: RefreshAheadSettings;
  /** The `metrics` hooks and the `meter`'s, combined; undefined when neither is given. */
  metrics: ClientMetrics | undefined;
}

type Rule = 'atLeastZero' | 'aboveZero' | 'wholeAboveZero' | 'wholeAtLeastZero' | 'fraction';
const ruleText: Record<Rule, string> = {
  atLeastZero: 'must be a finite number ≥ 0',
  aboveZero: 'must be a finite number > 0',
  wholeAboveZero: 'must be a whole number ≥ 1',
  wholeAtLeastZero: 'must be a whole number ≥ 0',
  fraction: 'must be a number from 0 to 1',
};

function obeys(value: number, rule: Rule): boolean {
  if (rule === 'aboveZero') return value > 0;
  if (rule === 'wholeAboveZero') return value >= 1 && Number.isInteger(value);
  if (rule === 'wholeAtLeastZero') return value >= 0 && Number.isInteger(value);
  if (rule === 'fraction') return value >= 0 && value <= 1;
  return value >= 0;
}

function numberOption(options: Record<string, unknown>, name: string, rule: Rule, fallback: number): number {
  const value = options[name];
  if (value === undefined) return fallback;
  const ok = typeof value === 'number' && Number.isFinite(value) && obeys(value, rule);
  if (!ok) throw new RoutingClientOptionError(name, value, ruleText[rule]);
  return value;
}

/** The breaker's options; a cap below the first backoff is refused (it would silently replace it). */
function breakerOptions(options: Record<string, unknown>): BreakerSettings {
  const backoffMs = numberOption(options, 'breakerBackoffMs', 'aboveZero', DEFAULT_BREAKER_BACKOFF_MS);
  const maxBackoffMs = numberOption(
    options,
    'breakerMaxBackoffMs',
    'aboveZero',
    Math.max(backoffMs, DEFAULT_BREAKER_MAX_BACKOFF_MS),
  );
  if (maxBackoffMs < backoffMs)
    throw new RoutingClientOptionError(
      'breakerMaxBackoffMs',
      maxBackoffMs,
      `must be at least breakerBackoffMs (${backoffMs} ms)`,
    );
  return {
    failures: numberOption(options, 'breakerFailures', 'wholeAtLeastZero', DEFAULT_BREAKER_FAILURES),
    backoffMs,
    maxBackoffMs,
    jitter: numberOption(options, 'breakerJitter', 'fraction', DEFAULT_BREAKER_JITTER),
  };
}

/** The `metrics` hooks (an object of known hooks, each a function) and the `meter`'s, combined. */
function metricsOption(options: Record<string, unknown>): ClientMetrics | undefined {
  const { metrics, meter } = options;
  if (metrics !== undefined) {
    if (metrics === null || typeof metrics !== 'object')
      throw new RoutingClientOptionError('metrics', metrics, 'must be an object of hooks');
    for (const [hook, call] of Object.entries(metrics))
      if (!METRIC_HOOKS.includes(hook) || typeof call !== 'function')
        throw new RoutingClientOptionError(
          `metrics.${hook}`,
          call,
          METRIC_HOOKS.includes(hook) ? 'must be a function' : `is not a hook (${METRIC_HOOKS.join(', ')})`,
        );
  }
  if (meter !== undefined) {
    const calls = ['createCounter', 'createHistogram', 'createObservableGauge'];
    const fits =
      meter !== null &&
      typeof meter === 'object' &&
      calls.every((c) => typeof (meter as Record<string, unknown>)[c] === 'function');
    if (!fits)
      throw new RoutingClientOptionError(
        'meter',
        meter,
        `must be an OpenTelemetry Meter (${calls.join(', ')})`,
      );
  }
  const sets = [
    metrics as ClientMetrics | undefined,
    meter === undefined ? undefined : otelMetrics(meter as MeterLike),
  ];
  const given = sets.filter((set): set is ClientMetrics => set !== undefined);
  return given.length === 0 ? undefined : combinedMetrics(...given);
}

function baseUrlOption(value: unknown): string {
  let url: URL | undefined;
  try {
    url = typeof value === 'string' ? new URL(value) : undefined;
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:'))
    throw new RoutingClientOptionError('baseUrl', value, 'must be an absolute http(s) URL');
  return (value as string).replace(/\/$/, '');
}

function checkKinds(options: Record<string, unknown>): void {
  for (const key of Object.keys(options))
    if (!KNOWN.has(key))
      throw new RoutingClientOptionError(key, options[key], 'is not a RoutingClient option');
  for (const name of ['accessToken', 'clock', 'fetch'])
    if (options[name] !== undefined && typeof options[name] !== 'function')
      throw new RoutingClientOptionError(name, options[name], 'must be a function');
  if (options.functionKey !== undefined && typeof options.functionKey !== 'string')
    throw new RoutingClientOptionError('functionKey', options.functionKey, 'must be a string');
  const policy = options.whenUnreachable;
  if (policy !== undefined && !(OUTAGE_POLICIES as readonly unknown[]).includes(policy))
    throw new RoutingClientOptionError(
      'whenUnreachable',
      policy,
      `must be one of ${OUTAGE_POLICIES.join(', ')}`,
    );
}

/**
 * The join bounds: this client's join and the server's together take at most a tenth of the grace (the
 * server's own rule, timingInequalities' fifth), so a joined view keeps nine tenths of it. The
 * default client join is lowered to what the grace leaves; one given explicitly above it is refused.
 */
function joinBounds(options: Record<string, unknown>, graceSeconds: number) {
  const serverCoalesceJoinMs = numberOption(
    options,
    'serverCoalesceJoinMs',
    'atLeastZero',
    DEFAULT_SERVER_COALESCE_JOIN_MS,
  );
  const given = numberOption(options, 'coalesceJoinMs', 'atLeastZero', DEFAULT_COALESCE_JOIN_MS);
  const budgetMs = (graceSeconds * 1000) / COALESCE_GRACE_SHARE;
  const leftMs = Math.max(0, budgetMs - serverCoalesceJoinMs);
  const tooMuch = (options.coalesceJoinMs !== undefined && given > leftMs) || serverCoalesceJoinMs > budgetMs;
  if (tooMuch) {
    const [option, value, other] =
      options.coalesceJoinMs !== undefined
        ? ['coalesceJoinMs', given, `serverCoalesceJoinMs (${serverCoalesceJoinMs} ms)`]
        : ['serverCoalesceJoinMs', serverCoalesceJoinMs, `coalesceJoinMs (${given} ms)`];
    throw new RoutingClientOptionError(
      option,
      value,
      `plus ${other}, together must not exceed a tenth of the in-flight grace (${budgetMs} ms): a joined view is as old as the read it joined`,
    );
  }
  return { serverCoalesceJoinMs, coalesceJoinMs: Math.min(given, leftMs) };
}

/** Check every option and apply the defaults; throws RoutingClientOptionError for the first bad one. */
export function clientSettings(given: object): ClientSettings {
  if (given === null || typeof given !== 'object')
    throw new RoutingClientOptionError('options', given, 'must be an object');
  const options = given as Record<string, unknown>;
  checkKinds(options);
  const baseUrl = baseUrlOption(options.baseUrl);
  const inFlightGraceSeconds = numberOption(
    options,
    'inFlightGraceSeconds',
    'atLeastZero',
    DEFAULT_INFLIGHT_GRACE_SECONDS,
  );
  const whenUnreachable = (options.whenUnreachable as OutagePolicy | undefined) ?? 'fail';
  const staleForMs = numberOption(options, 'staleForMs', 'atLeastZero', DEFAULT_STALE_FOR_MS);
  return {
    baseUrl,
    clockSkewSeconds: numberOption(options, 'clockSkewSeconds', 'atLeastZero', DEFAULT_CLOCK_SKEW_SECONDS),
    cacheMax: numberOption(options, 'cacheMax', 'wholeAboveZero', DEFAULT_CACHE_MAX),
    timeoutMs: numberOption(options, 'timeoutMs', 'aboveZero', DEFAULT_TIMEOUT_MS),
    inFlightGraceSeconds,
    ...joinBounds(options, inFlightGraceSeconds),
    notFoundTtlMs: numberOption(options, 'notFoundTtlMs', 'atLeastZero', DEFAULT_NOT_FOUND_TTL_MS),
    whenUnreachable,
    staleForMs: whenUnreachable === 'serveStaleReads' ? staleForMs : 0,
    maxCacheSeconds: numberOption(options, 'maxCacheSeconds', 'atLeastZero', DEFAULT_MAX_CACHE_SECONDS),
    breaker: breakerOptions(options),
    refreshAhead: {
      share: numberOption(options, 'refreshAheadShare', 'fraction', DEFAULT_REFRESH_AHEAD_SHARE),
    },
    metrics: metricsOption(options),
  };
}
