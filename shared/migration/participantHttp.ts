import type { Scheduler } from './scheduler';
import type { HttpCall, HttpResult } from './types';

/**
 * Call a participant as Durable's `callHttp` with `enablePolling` does: POST, and while the answer is
 * 202 with a Location, wait Retry-After (or the default) and GET that Location. A transport failure is
 * status 0, which the workflow treats like a 5xx (retried with backoff).
 */
export async function callParticipant(
  call: HttpCall,
  scheduler: Scheduler,
  options: { fetch?: typeof fetch; defaultPollSeconds?: number; maxPolls?: number } = {},
): Promise<HttpResult> {
  const fetchImpl = options.fetch ?? fetch;
  const defaultPollMs = (options.defaultPollSeconds ?? 1) * 1000;
  const maxPolls = options.maxPolls ?? 100_000;
  try {
    let response = await fetchImpl(call.url, {
      method: call.method,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(call.body),
    });
    for (
      let polls = 0;
      response.status === 202 && response.headers.get('location') && polls < maxPolls;
      polls += 1
    ) {
      const location = new URL(response.headers.get('location') as string, call.url).href;
      const retryAfter = Number(response.headers.get('retry-after'));
      await response.arrayBuffer();
      const wait = Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : defaultPollMs;
      await scheduler.timer(scheduler.now() + wait).promise;
      response = await fetchImpl(location, { method: 'GET' });
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
