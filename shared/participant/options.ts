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
  clock?: () => number;
}

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
  if (typeof options.publicUrl === 'string' && !/^https?:\/\/[^/]+\/?$/.test(options.publicUrl))
    throw new ParticipantOptionError('publicUrl', 'must be an origin, http(s)://host[:port]');
}
