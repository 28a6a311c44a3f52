import { type JSONWebKeySet, createLocalJWKSet, createRemoteJWKSet, errors, jwtVerify } from 'jose';
import type { Authenticate } from './auth';
import { bearerTokenOf } from './auth';
import { ParticipantError, ParticipantOptionError } from './errors';

/**
 * `@routelock/participant/entra`: routelock's bearer token validated as any Entra ID access token
 * (routelock design §6.5 "Authentication"): RS256 only, signed by a key of the tenant's key set, issuer the
 * tenant's v2.0 or v1 issuer, `aud` the participant's app (its app ID URI or client id, the `audience`
 * routelock is configured with), within exp/nbf (60 s tolerance), `tid` the tenant, and, with
 * `allowedCallers`, the caller (`oid`, or `azp`/`appid`) the Functions app's managed identity. `jose` is
 * an optional peer dependency: only this entry loads it.
 */

export interface EntraCallerOptions {
  tenantId: string;
  /** The app ID URI and/or client id routelock's `audience` names. */
  audience: string | string[];
  /**
   * The callers accepted: object ids (`oid`) or application ids (`azp`, `appid`) of routelock's managed
   * identity. Required: a token for the audience alone proves little, since any identity of the tenant
   * may get one unless the app registration requires assignment. `'anyInTenant'` accepts them all, said
   * out loud.
   */
  allowedCallers: readonly string[] | 'anyInTenant';
  /** Default: the tenant's v2.0 key set at login.microsoftonline.com. */
  jwksUri?: string;
  /** A key set held locally instead of fetched (tests, air-gapped clouds). */
  keys?: JSONWebKeySet;
}

/** Allowed clock difference with the token issuer for exp/nbf. */
const CLOCK_TOLERANCE_SECONDS = 60;

const unauthenticated = (why: string) =>
  new ParticipantError('CallerUnauthenticated', `The access token is not valid: ${why}.`);

/** Why jose refused a token, in words a caller can act on (never the token itself). */
function refusal(error: unknown): ParticipantError {
  if (
    error instanceof errors.JWKSTimeout ||
    error instanceof errors.JWKSInvalid ||
    !(error instanceof errors.JOSEError)
  )
    return new ParticipantError(
      'CallerCheckUnavailable',
      "The tenant's signing keys cannot be fetched right now.",
    );
  if (error instanceof errors.JWTExpired) return unauthenticated('it has expired');
  if (error instanceof errors.JWTClaimValidationFailed)
    return unauthenticated(
      error.claim === 'nbf' ? 'it is not valid yet' : `the "${error.claim}" claim is not accepted`,
    );
  if (error instanceof errors.JOSEAlgNotAllowed || error instanceof errors.JOSENotSupported)
    return unauthenticated('only RS256 signatures are accepted');
  if (error instanceof errors.JWKSNoMatchingKey)
    return unauthenticated("it is not signed by a key of the tenant's key set");
  if (error instanceof errors.JWSSignatureVerificationFailed)
    return unauthenticated('the signature does not verify');
  return unauthenticated('it is malformed');
}

/** The accepted callers, lower-cased; undefined for `'anyInTenant'`. An empty or missing list is refused. */
function allowedCallersOf(callers: EntraCallerOptions['allowedCallers'] | undefined): string[] | undefined {
  if (callers === 'anyInTenant') return undefined;
  if (
    !Array.isArray(callers) ||
    callers.length === 0 ||
    callers.some((c) => typeof c !== 'string' || c === '')
  )
    throw new ParticipantOptionError(
      'allowedCallers',
      "of entraCaller must list routelock's managed identity (its object or application id), or be 'anyInTenant'",
    );
  return callers.map((c) => c.toLowerCase());
}

export function entraCaller(options: EntraCallerOptions): Authenticate {
  const tenant = options.tenantId.toLowerCase();
  const keys =
    options.keys !== undefined
      ? createLocalJWKSet(options.keys)
      : createRemoteJWKSet(
          new URL(options.jwksUri ?? `https://login.microsoftonline.com/${tenant}/discovery/v2.0/keys`),
          { timeoutDuration: 5000, cooldownDuration: 30_000, cacheMaxAge: 10 * 60_000 },
        );
  const issuer = [`https://login.microsoftonline.com/${tenant}/v2.0`, `https://sts.windows.net/${tenant}/`];
  const allowed = allowedCallersOf(options.allowedCallers);
  return async (request) => {
    const token = bearerTokenOf(request);
    if (token === undefined)
      throw new ParticipantError('CallerUnauthenticated', 'send Authorization: Bearer <access token>');
    let payload;
    try {
      ({ payload } = await jwtVerify(token, keys, {
        algorithms: ['RS256'],
        issuer,
        audience: options.audience,
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        requiredClaims: ['exp', 'iss', 'aud', 'tid'],
      }));
    } catch (error) {
      throw refusal(error);
    }
    if (typeof payload.tid !== 'string' || payload.tid.toLowerCase() !== tenant)
      throw unauthenticated('it was issued for another tenant');
    if (allowed === undefined) return;
    const ids = [payload.oid, payload.azp, payload.appid].filter((v): v is string => typeof v === 'string');
    if (!ids.some((id) => allowed.includes(id.toLowerCase())))
      throw new ParticipantError('CallerForbidden', 'the caller is not one this participant accepts');
  };
}
