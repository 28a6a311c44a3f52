import type { RouteView } from '../core/lock/view';
import type { EndStep, JobRequest, PreflightQuestion, VerifyAnswer } from '../core/participantWire';
import type { Authenticate } from './auth';
import { ParticipantOptionError } from './errors';

/**
 * What the notice rules use of a routing client: `@routelock/client`'s `RoutingClient` and its test double
 * fit it as they are (typed structurally, so this package does not depend on the client).
 */
export interface RouteReader {
  resolve(id: string): Promise<RouteView>;
  forget(id: string): void;
}

/** A copy job as the team's function gets it: the request, the job's id and which run of it this is. */
export interface ParticipantJob extends JobRequest {
  readonly id: string;
  readonly run: number;
}

/** A delete the notice rules cleared: the region's copy of the resource may go now. */
export interface CleanUpOrder {
  migrationId: string;
  resourceId: string;
  /** The notice it follows: the source's copy after `completed`, the target's after `failed`/`cancelled`. */
  step: EndStep;
  region: string;
}

export interface ParticipantOptions {
  /**
   * Copy everything the source holds of `job.resourceId` to the target, tombstones included. `signal`
   * aborts when the job is superseded, its migration ended or the handler closed: a copy must not land
   * after that, so check `signal.aborted` just before it commits (in the commit's transaction).
   */
  bulkCopy: (job: ParticipantJob, signal: AbortSignal) => Promise<void>;
  /** Copy what changed since the bulk copy began, quickly: writes wait. `signal` as for bulkCopy. */
  deltaCopy: (job: ParticipantJob, signal: AbortSignal) => Promise<void>;
  /** Compare source and target (copy nothing); without it `verify` answers 404, "not implemented". */
  verify?: (job: JobRequest, signal: AbortSignal) => Promise<VerifyAnswer> | VerifyAnswer;
  /** A dry run's question: answer at once with anything useful; without it 404. */
  preflight?: (question: PreflightQuestion, signal: AbortSignal) => Promise<unknown> | unknown;
  /**
   * Delete a region's copy. Called only once the notice rules allow it: after `completed` not before
   * `cleanUpSourceAfter`, and only if the route, resolved afresh through `routing`, is neither there nor
   * being brought there by a lock. Without it notices only stop the ended migration's copies.
   */
  onNotice?: (order: CleanUpOrder, signal: AbortSignal) => Promise<void> | void;
  /**
   * How the notice rules resolve the route (a RoutingClient, or the test double; only `resolve` and
   * `forget` are used): needed with onNotice.
   */
  routing?: RouteReader;
  /** Who may call: required (entraCaller, loopbackCallerOnly, or your own). */
  authenticate: Authenticate;
  /** Where routelock POSTs (default `/migrate`). */
  path?: string;
  /** Where jobs are polled: `<jobsPath>/<id>` (default `/jobs`). */
  jobsPath?: string;
  /**
   * The public origin of the poll Location (`https://messages.example`): behind a gateway the request's
   * own Host is not what routelock can reach. Default: the request's origin as the adapter sees it.
   */
  publicUrl?: string | (() => string);
  /** The Retry-After (seconds) of a 202 while a job runs (default 1). */
  retryAfterSeconds?: number;
  /** Whether `Prefer: wait=N` holds the answer until the job ends (default true; false: 202 at once). */
  honoursPreferWait?: boolean;
  /**
   * How long a job a newer one outranked is still answered on its poll (`409` when it was superseded,
   * `200` when it had finished), in seconds (default 3600). After it, the poll answers `404`, and
   * routelock's re-POST of that job gets the `409` its poll would have: the outcome is the same, one
   * request later. At most 8 such jobs are kept per resource whatever the retention.
   */
  retainOlderJobsSeconds?: number;
  /**
   * Forget a resource this long after its newest job ended, in seconds (default 86 400, a day; at least
   * 3600; `Infinity` keeps every resource). A forgotten resource cannot refuse an older job or answer a
   * re-POST of its last one from memory, exactly as after a restart of the process: both need a request
   * delayed by longer than this, and routelock abandons each request within 240 s.
   */
  forgetEndedAfterSeconds?: number;
  clock?: () => number;
}

/** The defaults of the two retentions (seconds): see `retainOlderJobsSeconds`, `forgetEndedAfterSeconds`. */
export const DEFAULT_RETAIN_OLDER_JOBS_SECONDS = 3600;
export const DEFAULT_FORGET_ENDED_AFTER_SECONDS = 86_400;
/** The shortest forget retention: far above routelock's 240 s ceiling on a request and its retries of one. */
const MIN_FORGET_ENDED_AFTER_SECONDS = 3600;

const known = new Set([
  'bulkCopy',
  'deltaCopy',
  'verify',
  'preflight',
  'onNotice',
  'routing',
  'authenticate',
  'path',
  'jobsPath',
  'publicUrl',
  'retryAfterSeconds',
  'honoursPreferWait',
  'retainOlderJobsSeconds',
  'forgetEndedAfterSeconds',
  'clock',
]);

const isFunction = (v: unknown) => typeof v === 'function';
const isPath = (v: unknown) => typeof v === 'string' && /^\/[^?#]*$/.test(v) && !v.endsWith('/');

/** Validate the options when the handler is built: a mistake fails at start-up, not at the first job. */
export function checkOptions(options: ParticipantOptions): void {
  const o = options as unknown as Record<string, unknown>;
  if (typeof options !== 'object' || options === null)
    throw new ParticipantOptionError('(options)', 'must be an object');
  for (const name of Object.keys(o))
    if (!known.has(name)) throw new ParticipantOptionError(name, 'is not an option');
  for (const name of ['bulkCopy', 'deltaCopy', 'authenticate'])
    if (!isFunction(o[name])) throw new ParticipantOptionError(name, 'must be a function');
  for (const name of ['verify', 'preflight', 'onNotice', 'clock'])
    if (o[name] !== undefined && !isFunction(o[name]))
      throw new ParticipantOptionError(name, 'must be a function when given');
  if (options.onNotice !== undefined && options.routing === undefined)
    throw new ParticipantOptionError(
      'routing',
      'is required with onNotice (the route is resolved before any delete)',
    );
  for (const name of ['path', 'jobsPath'])
    if (o[name] !== undefined && !isPath(o[name]))
      throw new ParticipantOptionError(name, 'must be a path starting with / and not ending with /');
  const retry = options.retryAfterSeconds;
  if (retry !== undefined && !(Number.isInteger(retry) && retry >= 0))
    throw new ParticipantOptionError('retryAfterSeconds', 'must be a whole number of seconds ≥ 0');
  checkRetentions(options);
  if (typeof options.publicUrl === 'string' && !/^https?:\/\/[^/]+\/?$/.test(options.publicUrl))
    throw new ParticipantOptionError('publicUrl', 'must be an origin, http(s)://host[:port]');
}

function checkRetentions(options: ParticipantOptions): void {
  const retain = options.retainOlderJobsSeconds;
  if (retain !== undefined && !(Number.isInteger(retain) && retain >= 0))
    throw new ParticipantOptionError('retainOlderJobsSeconds', 'must be a whole number of seconds ≥ 0');
  const forget = options.forgetEndedAfterSeconds;
  if (
    forget !== undefined &&
    forget !== Infinity &&
    !(Number.isInteger(forget) && forget >= MIN_FORGET_ENDED_AFTER_SECONDS)
  )
    throw new ParticipantOptionError(
      'forgetEndedAfterSeconds',
      `must be a whole number of seconds ≥ ${MIN_FORGET_ENDED_AFTER_SECONDS}, or Infinity`,
    );
}
