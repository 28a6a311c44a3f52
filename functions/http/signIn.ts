import type { HttpRequest, HttpResponseInit } from '@azure/functions';
import { PRINCIPAL_HEADER } from './auth';
import { HttpProblem, problemResponse } from './problem';

/**
 * Browser sign-in for a page under ROUTELOCK_AUTH=appservice (docs/design.md §9). An API caller without
 * an identity gets 401 from App Service itself (`Return401`); a page cannot answer a person that way, so
 * the page's path is excluded from that action and the page sends a caller who carries no identity at all
 * to App Service's own sign-in, `/.auth/login/aad`, which returns them to the page with a session cookie.
 *
 * Where they return is the page's own path, fixed by its declaration, never anything from the request
 * (its query, Host or Referer): the sign-in cannot be turned into an open redirect. The marker query
 * parameter stops a loop: back from sign-in and still without an identity (App Service forwarded none),
 * the page answers 401 saying so instead of sending the browser round again.
 */

/** Added to the return path: this request comes back from a sign-in. */
export const SIGNED_IN_MARKER = 'signedIn';

/** Where App Service's server-directed Entra sign-in starts (its `/.auth` routes never reach the app). */
export const APP_SERVICE_LOGIN = '/.auth/login/aad';

/** The sign-in URL that returns to `returnTo` (a path of this app, starting with one `/`). */
export function signInLocation(returnTo: string): string {
  if (!/^\/[A-Za-z0-9/_-]*$/.test(returnTo) || returnTo.startsWith('//'))
    throw new Error(`a page's sign-in return path must be a plain local path, not ${returnTo}`);
  const back = `${returnTo}?${SIGNED_IN_MARKER}=1`;
  return `${APP_SERVICE_LOGIN}?post_login_redirect_uri=${encodeURIComponent(back)}`;
}

/**
 * The answer for a page request the role check refused with `error`: a 302 to sign in when the request
 * carries no principal at all and has not just come back from signing in; a 401 that says why when it has;
 * null (answer the refusal as it is) for anything else — a principal that does not parse is never
 * retried, and an identity without the role stays 403.
 */
export function signInAnswer(
  error: unknown,
  request: HttpRequest,
  returnTo: string,
): HttpResponseInit | null {
  if (!(error instanceof HttpProblem) || error.code !== 'Unauthenticated') return null;
  const principal = request.headers.get(PRINCIPAL_HEADER);
  if (principal !== null && principal.trim() !== '') return null;
  const url = new URL(request.url, 'http://localhost');
  if (url.searchParams.has(SIGNED_IN_MARKER)) {
    return problemResponse(
      'Unauthenticated',
      `Back from sign-in, but App Service forwarded no identity to ${returnTo}: check that App Service authentication is on for this app and the browser keeps its session cookie; open ${returnTo} to sign in again.`,
      { instance: url.pathname },
    );
  }
  return {
    status: 302,
    headers: { Location: signInLocation(returnTo), 'Cache-Control': 'no-store' },
    body: '',
  };
}
