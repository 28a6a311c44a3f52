/**
 * The embedded host's defence against cross-site requests from a browser on the same machine (it checks
 * no function keys, and under ROUTELOCK_AUTH=none every caller holds every role). It reads what browsers
 * send on their own and a page cannot forge: the Fetch Metadata header `Sec-Fetch-Site` and `Origin`
 * (both forbidden request headers). A request carrying neither (curl, the CLI, a service, Node's fetch)
 * is not from a browser page and passes: this is no identity check, identities and roles stay as they are.
 *
 * Refused: `Sec-Fetch-Site: cross-site` or `same-site` (another site, or another port or scheme of this
 * one, e.g. a second dev server on localhost), and an `Origin` that is not the host's own. Allowed: a
 * person following a link to a page (a top-level GET navigation, which sends no `Origin` and whose
 * answer only the person sees), so a link from elsewhere to the status page still opens it.
 */

export interface CrossSiteInput {
  method: string;
  /** The `Host` header the request came with (already checked to name loopback while bound there). */
  host: string | undefined;
  origin: string | undefined;
  secFetchSite: string | undefined;
  secFetchMode: string | undefined;
  secFetchDest: string | undefined;
}

/** Why the request is refused as cross-site, or null when it may proceed. */
export function crossSiteRefusal(input: CrossSiteInput): string | null {
  const site = input.secFetchSite?.trim().toLowerCase();
  if (site === 'cross-site' || site === 'same-site') {
    if (!isPageNavigation(input))
      return `A browser sent this request from another site (Sec-Fetch-Site: ${site}); this host answers its own pages and clients without a browser only.`;
  }
  if (input.origin !== undefined && !isOwnOrigin(input.origin, input.host))
    return `A browser sent this request from ${input.origin}, not from this host; this host answers its own pages and clients without a browser only.`;
  return null;
}

/** A person opening a page by a link: GET or HEAD, navigating a top-level document (nothing embedded). */
function isPageNavigation(input: CrossSiteInput): boolean {
  return (
    (input.method === 'GET' || input.method === 'HEAD') &&
    input.secFetchMode?.trim().toLowerCase() === 'navigate' &&
    (input.secFetchDest === undefined || input.secFetchDest.trim().toLowerCase() === 'document')
  );
}

/** `origin` is `http://<the Host header>` (the host serves plain HTTP), default port and case normalized. */
function isOwnOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    const own = new URL(`http://${host}`);
    const theirs = new URL(origin);
    // `null` (a sandboxed frame, a file: page, a redirect across sites) parses to no host at all.
    return theirs.origin !== 'null' && theirs.origin === own.origin && theirs.pathname === '/';
  } catch {
    return false;
  }
}
