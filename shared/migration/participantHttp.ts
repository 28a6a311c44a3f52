import { type AccessToken, DefaultAzureCredential, type TokenCredential } from '@azure/identity';
import type { Scheduler } from './scheduler';
import type { HttpAnswer, HttpCall, HttpResult, ParticipantCall, PreflightCall } from './types';
import { isLoopbackHostname } from '../core/loopback';
import { parseRetryAfter } from '../core/retryAfter';
import { preferWaitSeconds, resolveLocation } from './participantContract';

/** The OAuth scope for a participant's audience: `<audience>/.default`, unless it already is one. */
export function audienceScope(audience: string): string {
  return audience.endsWith('/.default') ? audience : `${audience}/.default`;
}

/** A cached token is used until this long before it expires (or its own refresh time, if sooner). */
const REFRESH_MARGIN_MS = 5 * 60_000;

const tokenCaches = new WeakMap<TokenCredential, Map<string, Promise<AccessToken>>>();
let defaultCredential: TokenCredential | undefined;

/**
 * A bearer token for the scope, cached per credential until near expiry; concurrent callers share
 * one request. A failed or empty answer is not cached.
 */
export async function bearerToken(
  credential: TokenCredential,
  scope: string,
  signal?: AbortSignal,
): Promise<string> {
  // The caller stops waiting at its own deadline; the shared request goes on for the others.
  return untilAborted(cachedToken(credential, scope), signal);
}

function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error as Error);
      },
    );
  });
}

async function cachedToken(credential: TokenCredential, scope: string): Promise<string> {
  let cache = tokenCaches.get(credential);
  if (!cache) tokenCaches.set(credential, (cache = new Map()));
  const cached = cache.get(scope);
  if (cached) {
    const token = await cached.catch(() => undefined);
    const refreshAt = Math.min(
      (token?.expiresOnTimestamp ?? 0) - REFRESH_MARGIN_MS,
      token?.refreshAfterTimestamp ?? Number.POSITIVE_INFINITY,
    );
    if (token && Date.now() < refreshAt) return token.token;
    if (cache.get(scope) !== cached) return cachedToken(credential, scope); // another caller refreshed
  }
  const pending = credential.getToken(scope).then((token) => {
    if (!token?.token) throw new Error('the credential returned no token');
    return token;
  });
  cache.set(scope, pending);
  try {
    return (await pending).token;
  } catch (error) {
    if (cache.get(scope) === pending) cache.delete(scope);
    throw error;
  }
}

export interface ParticipantHttpOptions {
  fetch?: typeof fetch;
  credential?: TokenCredential;
}

const credentialFor = (audience: string | undefined, options: ParticipantHttpOptions) =>
  audience === undefined
    ? undefined
    : (options.credential ?? (defaultCredential ??= new DefaultAzureCredential()));

/** A body is stored in the orchestration history and in failure reasons: only its first 4 KiB are read. */
const MAX_BODY_BYTES = 4096;

/**
 * Read at most `MAX_BODY_BYTES` of a response body and drop the rest unread (a participant answering
 * megabytes must not make the app buffer them). Answers the text, marked with … when cut.
 */
async function boundedText(response: Response): Promise<string> {
  if (response.body === null) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let cut = false;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.byteLength;
    if (size > MAX_BODY_BYTES) {
      cut = true;
      await reader.cancel();
      break;
    }
  }
  const bytes = Buffer.concat(chunks).subarray(0, MAX_BODY_BYTES);
  // a multi-byte character cut at the limit decodes as U+FFFD, which is fine for a reason text
  return cut ? `${bytes.toString('utf8')}…` : bytes.toString('utf8');
}

/**
 * One request of the participant protocol v2 (the `callParticipant` activity): the job's POST, or a GET
 * of its poll Location, which must be on the participant's origin (resolveLocation checked it; checked
 * again here, so nothing but the configured origin is ever requested). No redirect is followed (a 3xx
 * is an answer, which the contract fails); the whole request, the token included, is aborted after
 * `timeoutSeconds`, and it carries `Prefer: wait=N` with N at least half a second inside that timeout
 * (preferWaitSeconds); only the first 4 KiB of the answer are read. Never throws: a transport failure, a
 * timeout or a token that cannot be had is status 0 with the reason.
 */
export async function requestParticipant(
  call: ParticipantCall | PreflightCall,
  options: ParticipantHttpOptions = {},
): Promise<HttpAnswer> {
  const fetchImpl = options.fetch ?? fetch;
  const url = call.method === 'POST' ? call.participantUrl : call.url;
  const signal = AbortSignal.timeout(call.timeoutSeconds * 1000);
  const startedAt = Date.now();
  try {
    if (new URL(url).origin !== new URL(call.participantUrl).origin)
      return {
        status: 0,
        body: `refused: a poll URL on another origin than ${new URL(call.participantUrl).origin}`,
      };
    const credential = credentialFor(call.audience, options);
    const headers: Record<string, string> =
      call.method === 'POST' ? { 'content-type': 'application/json' } : {};
    if (credential !== undefined && call.audience !== undefined) {
      try {
        headers.authorization = `Bearer ${await bearerToken(credential, audienceScope(call.audience), signal)}`;
      } catch (error) {
        return { status: 0, body: `no token for audience ${call.audience}: ${(error as Error).message}` };
      }
    }
    // A participant that finishes within the wait answers 200 at once: no poll (participantContract.ts).
    // Measured from now, after the token: the wait must end inside what is left of the timeout.
    const wait = preferWaitSeconds(call.timeoutSeconds - (Date.now() - startedAt) / 1000);
    if (wait !== undefined) headers.prefer = `wait=${wait}`;
    const response = await fetchImpl(url, {
      method: call.method,
      headers,
      ...(call.method === 'POST' ? { body: JSON.stringify(call.body) } : {}),
      redirect: 'manual',
      signal,
    });
    const text = await boundedText(response);
    let body: unknown = text === '' ? null : text;
    if (text !== '' && !text.endsWith('…')) {
      try {
        body = JSON.parse(text);
      } catch {
        // a non-JSON answer is kept as text
      }
    }
    const retryAfterSeconds = parseRetryAfter(response.headers.get('retry-after'));
    return {
      status: response.status,
      body,
      ...(response.status === 202 ? resolveLocation(response.headers.get('location'), url) : {}),
      ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
    };
  } catch (error) {
    const e = error as Error;
    const cause = (e.cause as Error | undefined)?.message;
    const reason =
      e.name === 'TimeoutError' || signal.aborted
        ? `no answer within ${call.timeoutSeconds} s`
        : `${e.message || String(error)}${cause ? ` (${cause})` : ''}`;
    return { status: 0, body: reason };
  }
}

/**
 * Version 1's participant call (the in-process runner's `http` step), as Durable's `callHttp` with `enablePolling` does: POST, and while the answer is
 * 202 with a Location, wait Retry-After (or the default) and GET that Location. A transport failure is
 * status 0, which the workflow treats like a 5xx (retried with backoff); so is a token that cannot be
 * had. A call with an `audience` carries `Authorization: Bearer …` from the credential (by default
 * DefaultAzureCredential: the managed identity in Azure), on the POST and on polls of the same origin
 * — never to a Location elsewhere.
 */
export async function callParticipant(
  call: HttpCall,
  scheduler: Scheduler,
  options: {
    fetch?: typeof fetch;
    defaultPollSeconds?: number;
    maxPolls?: number;
    credential?: TokenCredential;
  } = {},
): Promise<HttpResult> {
  const fetchImpl = options.fetch ?? fetch;
  const defaultPollMs = (options.defaultPollSeconds ?? 1) * 1000;
  const maxPolls = options.maxPolls ?? 100_000;
  const credential = credentialFor(call.audience, options);
  // Asked again for every request (cached): a copy polled for hours outlives one token.
  const authorization = async (): Promise<Record<string, string>> => {
    if (credential === undefined || call.audience === undefined) return {};
    try {
      return { authorization: `Bearer ${await bearerToken(credential, audienceScope(call.audience))}` };
    } catch (error) {
      throw new Error(`no token for audience ${call.audience}: ${(error as Error).message}`);
    }
  };
  try {
    const origin = new URL(call.url).origin;
    // Redirects are not followed: a participant's URL is the one the configuration checked (https,
    // no secrets), and a 3xx answer fails the step with its status like any other non-2xx.
    let response = await fetchImpl(call.url, {
      method: call.method,
      headers: { 'content-type': 'application/json', ...(await authorization()) },
      body: JSON.stringify(call.body),
      redirect: 'manual',
    });
    for (
      let polls = 0;
      response.status === 202 && response.headers.get('location') && polls < maxPolls;
      polls += 1
    ) {
      const location = new URL(response.headers.get('location') as string, call.url);
      if (location.protocol !== 'https:' && !isLoopbackHostname(location.hostname)) {
        throw new Error(`the poll Location ${location.origin} is not https`);
      }
      const retryAfter = Number(response.headers.get('retry-after'));
      await response.arrayBuffer();
      const wait = Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : defaultPollMs;
      await scheduler.timer(scheduler.now() + wait).promise;
      response = await fetchImpl(location.href, {
        method: 'GET',
        headers: location.origin === origin ? await authorization() : {},
        redirect: 'manual',
      });
    }
    const text = await response.text();
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      // a non-JSON answer is kept as text
    }
    return { status: response.status, body };
  } catch (error) {
    return { status: 0, body: (error as Error).message };
  }
}
