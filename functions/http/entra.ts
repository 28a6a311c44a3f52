import { createRemoteJWKSet, errors, jwtVerify } from 'jose';
import type { AuthConfig } from '../../shared/config';
import type { Authenticator, Caller } from './auth';
import { HttpProblem } from './problem';

/**
 * `ROUTELOCK_AUTH=entra`: the app validates Entra ID access tokens itself (jose). Accepted: RS256 only,
 * signed by a key of the tenant's JWKS, issuer the tenant's v2.0 or v1 issuer, an audience from
 * ROUTELOCK_ENTRA_AUDIENCES, within exp/nbf (60 s tolerance), `tid` equal to the tenant, an `oid`.
 * Roles come from the `roles` claim (app roles assigned to the user or service principal).
 */

/** Allowed clock difference with the token issuer for exp/nbf. */
export const CLOCK_TOLERANCE_SECONDS = 60;

export type EntraConfig = Extract<AuthConfig, { mode: 'entra' }>;

/** Entra object ids are GUIDs; anything id-like and short is accepted, nothing that could smuggle text. */
export const objectIdPattern = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const BEARER = /^Bearer\s+([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*)\s*$/i;

function invalid(why: string): HttpProblem {
  return new HttpProblem('Unauthenticated', `The access token is not valid: ${why}.`);
}

/** Why jose refused a token, in words a caller can act on (never the token itself). */
function reason(error: InstanceType<typeof errors.JOSEError>): string {
  if (error instanceof errors.JWTExpired) return 'it has expired';
  if (error instanceof errors.JWTClaimValidationFailed) {
    return error.claim === 'nbf' ? 'it is not valid yet' : `the "${error.claim}" claim is not accepted`;
  }
  if (error instanceof errors.JOSEAlgNotAllowed || error instanceof errors.JOSENotSupported) {
    return 'only RS256 signatures are accepted';
  }
  if (error instanceof errors.JWKSNoMatchingKey) return "it is not signed by a key of the tenant's key set";
  if (error instanceof errors.JWSSignatureVerificationFailed) return 'the signature does not verify';
  return 'it is malformed';
}

/** A key set that cannot be fetched or read: not the caller's fault, so 503 rather than 401. */
function keysUnavailable(error: unknown): boolean {
  if (!(error instanceof errors.JOSEError)) return true;
  return (
    error instanceof errors.JWKSTimeout ||
    error instanceof errors.JWKSInvalid ||
    error.code === errors.JOSEError.code
  );
}

export function entraAuthenticator(config: EntraConfig): Authenticator {
  const keys = createRemoteJWKSet(new URL(config.jwksUri), {
    timeoutDuration: 5000,
    cooldownDuration: 30_000,
    cacheMaxAge: 10 * 60_000,
  });
  return {
    mode: 'entra',
    challenge: 'Bearer',
    async authenticate(request): Promise<Caller | null> {
      const header = request.headers.get('authorization');
      if (header === null || header.trim() === '') return null;
      const token = BEARER.exec(header)?.[1];
      if (!token) throw invalid('send Authorization: Bearer <JWT access token>');
      let payload;
      try {
        ({ payload } = await jwtVerify(token, keys, {
          algorithms: ['RS256'],
          issuer: config.issuers,
          audience: config.audiences,
          clockTolerance: CLOCK_TOLERANCE_SECONDS,
          requiredClaims: ['exp', 'iss', 'aud', 'tid', 'oid'],
        }));
      } catch (error) {
        if (keysUnavailable(error)) {
          throw new HttpProblem(
            'AuthUnavailable',
            "The tenant's signing keys cannot be fetched right now; retry shortly.",
            { retryAfterSeconds: 5 },
          );
        }
        throw invalid(reason(error as InstanceType<typeof errors.JOSEError>));
      }
      if (typeof payload.tid !== 'string' || payload.tid.toLowerCase() !== config.tenantId) {
        throw invalid('it was issued for another tenant');
      }
      const oid = payload.oid;
      if (typeof oid !== 'string' || !objectIdPattern.test(oid)) throw invalid('the "oid" claim is missing');
      const roles = Array.isArray(payload.roles)
        ? (payload.roles as unknown[]).filter((r): r is string => typeof r === 'string')
        : [];
      const name =
        typeof payload.name === 'string'
          ? payload.name
          : typeof payload.preferred_username === 'string'
            ? payload.preferred_username
            : undefined;
      return { objectId: oid.toLowerCase(), ...(name ? { name } : {}), roles };
    },
  };
}
