import type { HttpAnswer, MigrationSettings } from './types';

/**
 * The participant protocol v2 (docs/design.md §6.5): the one home for what a participant's
 * answer means. Pure: the workflow (both versions) classifies every answer here, the activity resolves
 * Locations and reads Retry-After here, and the docs describe this table.
 */

/** Which request answered: the job's POST, or a GET of the Location a 202 gave. */
export type RequestKind = 'post' | 'poll';
/** Copy steps are required (404: "does not implement" fails); later steps (verify, notices) optional. */
export type StepNeed = 'required' | 'optional';

export type Verdict =
  | { kind: 'done' }
  /** The job runs: poll `location` (undefined on a poll that named none: poll the same one again). */
  | { kind: 'running'; location?: string; retryAfterSeconds?: number }
  /** Ask again after a backoff; `repost`: the poll found the job gone (404/410), POST it again. */
  | { kind: 'transient'; reason: string; retryAfterSeconds?: number; repost?: true }
  | { kind: 'notImplemented' }
  | { kind: 'failed'; reason: string };

const hasRetryAfter = (answer: HttpAnswer) =>
  answer.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: answer.retryAfterSeconds };

/** The classifier: (request kind, step need, answer) → verdict. */
export function classifyAnswer(kind: RequestKind, need: StepNeed, answer: HttpAnswer): Verdict {
  const { status } = answer;
  if (status === 200) {
    const body = answer.body as { done?: unknown } | null;
    if (typeof body === 'object' && body !== null && body.done === false)
      return { kind: 'failed', reason: 'protocol error: 200 with {"done": false} (only 200 means done)' };
    return { kind: 'done' };
  }
  if (status === 202) {
    if (answer.locationRefused !== undefined)
      return { kind: 'failed', reason: `protocol error: 202 with ${answer.locationRefused}` };
    if (answer.location === undefined && kind === 'post')
      return { kind: 'failed', reason: 'protocol error: 202 without a Location to poll' };
    return {
      kind: 'running',
      ...(answer.location === undefined ? {} : { location: answer.location }),
      ...hasRetryAfter(answer),
    };
  }
  if (status === 0) return { kind: 'transient', reason: `no answer (${describe(answer.body)})` };
  if (status === 408 || status === 429 || (status >= 500 && status <= 599))
    return { kind: 'transient', reason: `${status}`, ...hasRetryAfter(answer) };
  if (kind === 'poll' && (status === 404 || status === 410))
    return { kind: 'transient', reason: `${status} to the poll: the job is gone`, repost: true };
  if (status === 404 && kind === 'post')
    return need === 'optional'
      ? { kind: 'notImplemented' }
      : { kind: 'failed', reason: '404: the participant does not implement this step' };
  if (status >= 400 && status <= 499) return { kind: 'failed', reason: `${status}${detail(answer.body)}` };
  return {
    kind: 'failed',
    reason: `protocol error: ${status} (only 200 means done, 202 + Location running)`,
  };
}

/**
 * `what` (naming the participant, its status and step) followed by the verdict's reason, without
 * repeating the status the reason starts with: "participant m answered 400 to bulkCopy (attempt 1)".
 */
export function failureMessage(what: string, status: number, reason: string): string {
  const rest = reason.startsWith(String(status))
    ? reason.slice(String(status).length).replace(/^[:,]?\s*/, '')
    : reason;
  return rest === '' ? what : `${what}: ${rest}`;
}

const describe = (body: unknown) => (typeof body === 'string' && body !== '' ? body : 'transport failure');
const detail = (body: unknown) => {
  const text = typeof body === 'string' ? body : body == null ? '' : JSON.stringify(body);
  return text === '' ? '' : `: ${text.slice(0, 200)}`;
};

/**
 * A 202's Location, resolved against the request's URL (RFC 9110 §10.2.2: it may be relative). It must be
 * on the participant's own origin (scheme, host and port of the URL configured, which config checked:
 * https, or http to loopback): a Location elsewhere would let a participant point the app's polls at any
 * host it can reach (its own loopback services, private addresses, metadata endpoints), and a poll to
 * another origin could carry no token anyway.
 */
export function resolveLocation(
  header: string | null | undefined,
  requestUrl: string,
): { location?: string; locationRefused?: string } {
  if (header === null || header === undefined || header.trim() === '') return {};
  let url: URL;
  try {
    url = new URL(header.trim(), requestUrl);
  } catch {
    return { locationRefused: 'a Location that is not a URL' };
  }
  const origin = new URL(requestUrl).origin;
  if (url.origin !== origin)
    return { locationRefused: `a Location on another origin (${url.origin}, not ${origin})` };
  if (url.username !== '' || url.password !== '')
    return { locationRefused: 'a Location with credentials in it' };
  return { location: url.href };
}

/** The poll timing of a migration's settings (defaults for inputs made before they existed). */
export function participantTiming(s: MigrationSettings): {
  timeoutSeconds: number;
  pollMinSeconds: number;
  pollMaxSeconds: number;
} {
  return {
    timeoutSeconds: s.participantTimeoutSeconds ?? DEFAULT_PARTICIPANT_TIMEOUT_SECONDS,
    pollMinSeconds: s.participantPollMinSeconds ?? DEFAULT_PARTICIPANT_POLL_MIN_SECONDS,
    pollMaxSeconds: s.participantPollMaxSeconds ?? DEFAULT_PARTICIPANT_POLL_MAX_SECONDS,
  };
}

export const DEFAULT_PARTICIPANT_TIMEOUT_SECONDS = 30;
/** The Durable HTTP client's own limit: the contract stays the same whichever runner calls. */
export const MAX_PARTICIPANT_TIMEOUT_SECONDS = 240;
export const DEFAULT_PARTICIPANT_POLL_MIN_SECONDS = 1;
export const DEFAULT_PARTICIPANT_POLL_MAX_SECONDS = 30;

/** The n-th poll (n ≥ 1) waits min(pollMax, max(Retry-After, pollMin × 2^(n−1))), in ms. */
export function pollWaitMs(n: number, retryAfterSeconds: number | undefined, s: MigrationSettings): number {
  const { pollMinSeconds, pollMaxSeconds } = participantTiming(s);
  const backoff = pollMinSeconds * 2 ** Math.min(n - 1, 30);
  return Math.min(pollMaxSeconds, Math.max(retryAfterSeconds ?? 0, backoff)) * 1000;
}

/**
 * The n-th transient answer (n ≥ 1) is asked again after max(min(Retry-After, pollMax), retryInterval ×
 * 2^(n−1)), in ms. Retry-After is capped at the poll cap: a participant answering 503 with a huge one
 * would otherwise hold the lock (and, under the write lock, the resource's writes) for as long as it asked.
 */
export function transientWaitMs(
  n: number,
  retryAfterSeconds: number | undefined,
  s: MigrationSettings,
): number {
  const asked = Math.min(retryAfterSeconds ?? 0, participantTiming(s).pollMaxSeconds);
  return Math.max(asked, s.retryIntervalSeconds * 2 ** Math.min(n - 1, 30)) * 1000;
}

/** Transient answers allowed in a row: the n-th is retried while n < ROUTELOCK_RETRY_ATTEMPTS. */
export const transientExhausted = (n: number, s: MigrationSettings): boolean => n >= s.retryAttempts;

/**
 * `Prefer: wait=N` (RFC 7240 §4.3) on a participant request: "I will wait N seconds for the answer".
 * A participant that can finish within N answers 200 with the result instead of 202 (a long poll), so
 * a short write-lock step costs no poll, whose wait is at least a whole second (pollWaitMs); one that
 * ignores the header answers 202 + Location as before. N stays inside what is left of the request's own
 * timeout with half a second to spare for the answer to arrive (RFC 7240 waits are whole seconds, so a
 * 1 s timeout sends none), and at most PREFER_WAIT_MAX_SECONDS: the write-lock steps are short, and a long job is better
 * polled than held (a held request keeps an activity running on Durable).
 */
export const PREFER_WAIT_MAX_SECONDS = 5;
export const PREFER_WAIT_HEADROOM_SECONDS = 0.5;

/** The wait a request with this timeout asks for, or undefined (no header). */
export function preferWaitSeconds(timeoutSeconds: number): number | undefined {
  const wait = Math.min(PREFER_WAIT_MAX_SECONDS, Math.floor(timeoutSeconds - PREFER_WAIT_HEADROOM_SECONDS));
  return wait >= 1 ? wait : undefined;
}

/** A participant reads `Prefer: wait` with the wire's parser (one home for both sides). */
export { parsePreferWait } from '../core/participantWire';
