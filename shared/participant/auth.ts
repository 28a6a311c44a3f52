import { isLoopbackHostname } from '../core/loopback';
import { ParticipantError } from './errors';

/**
 * Who may drive the participant (routelock design §6.5 "Authentication", §9). routelock's orchestrator sends
 * `Authorization: Bearer <token>` on the POST and on each poll of the same origin when the participant is
 * configured with an `audience`: a managed-identity token for `<audience>/.default`. Without an audience
 * it sends no credential at all (the embedded host on a developer's machine; there is no shared key).
 *
 * Validation is pluggable: `authenticate` is any function that returns when the caller is accepted and
 * throws a ParticipantError (`CallerUnauthenticated` 401, `CallerForbidden` 403, `CallerCheckUnavailable`
 * 503) when not. Ready-made: `entraCaller` (`@routelock/participant/entra`, the Entra access token as
 * Azure sends it, validated with `jose`) and `loopbackCallerOnly` (no token: only this machine).
 */

/** What an authenticate function sees of a request. */
export interface CallerRequest {
  method: string;
  /** The path and query. */
  url: string;
  headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  /** The TCP peer's address, when the adapter knows it. */
  remoteAddress?: string;
}

export type Authenticate = (request: CallerRequest) => Promise<void> | void;

const BEARER = /^Bearer\s+([A-Za-z0-9._~+/-]+=*)\s*$/i;

/** The bearer token of a request, or undefined; a malformed Authorization header is a 401. */
export function bearerTokenOf(request: CallerRequest): string | undefined {
  const header = request.headers.authorization;
  const value = Array.isArray(header) ? header[0] : (header as string | undefined);
  if (value === undefined || value.trim() === '') return undefined;
  const token = BEARER.exec(value)?.[1];
  if (token === undefined)
    throw new ParticipantError('CallerUnauthenticated', 'send Authorization: Bearer <access token>');
  return token;
}

/**
 * No token (routelock configured without an `audience`, as the embedded host runs): accept only a caller
 * on this machine, by the TCP peer's address. Anything else is 403: a participant reachable from the
 * network must validate a token (entraCaller).
 */
export function loopbackCallerOnly(): Authenticate {
  return (request) => {
    const peer = request.remoteAddress;
    if (peer === undefined || !isLoopbackHostname(peer))
      throw new ParticipantError(
        'CallerForbidden',
        'this participant takes calls from this machine only (configure an audience and validate its token)',
      );
  };
}
