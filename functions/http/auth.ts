import type { HttpRequest } from '@azure/functions';
import { z } from 'zod';
import type { Actor } from '../../shared/core/audit';
import type { AuthConfig } from '../../shared/config';
import { entraAuthenticator, objectIdPattern } from './entra';
import { HttpProblem } from './problem';

/**
 * Identities and app roles. Every HTTP endpoint declares the one app role it needs beside its route
 * (`functions/*.ts`); `authorize` enforces it, once, in the `handle()` wrapper, before the handler runs:
 * no identity is 401 `Unauthenticated`, an identity without the role is 403 `Forbidden`.
 *
 * Roles are Entra ID app roles (the app registration's `appRoles`), assigned to users, groups or
 * service principals; they reach the app as the `roles` claim. A role grants exactly its own endpoints:
 * none implies another.
 */
export const appRoles = [
  'Routes.Read',
  'Routes.Write',
  'Locks.Write',
  'Migrations.Write',
  'Ops.Read',
  'Ops.Operator',
  'Ops.Approver',
] as const;
export type AppRole = (typeof appRoles)[number];
/** What an endpoint declares: one app role, or `anonymous` (GET /api/health only). */
export type EndpointRole = AppRole | 'anonymous';

/** The authenticated caller a handler receives. `objectId` is the identity; `name` is for humans only. */
export interface Caller {
  /** Entra object id (`oid`) of the user or service principal: what approvals and the audit compare. */
  objectId: string;
  /** Display name or UPN, for log lines and the audit ledger's readers; never compared. */
  name?: string;
  roles: readonly string[];
}

export interface Authenticator {
  readonly mode: AuthConfig['mode'];
  /**
   * The caller, or null when the request carries no credentials at all. Malformed or invalid
   * credentials throw `Unauthenticated`; an identity provider that cannot be reached, `AuthUnavailable`.
   */
  authenticate(request: HttpRequest): Promise<Caller | null>;
  /** `WWW-Authenticate` for a 401 (entra only: `Bearer`). */
  readonly challenge?: string;
}

/** The operator a command is recorded for: the authenticated caller (its object id; the name for readers). */
export const actorOf = (caller: Caller): Actor => ({ id: caller.objectId, name: caller.name });

/** `ROUTELOCK_AUTH=none`: one fixed local identity holding every role. */
export const localCaller: Caller = Object.freeze({
  objectId: 'local',
  name: 'local',
  roles: Object.freeze([...appRoles]),
});

export const noneAuthenticator: Authenticator = {
  mode: 'none',
  authenticate: async () => localCaller,
};

/** A caller for `anonymous` endpoints: no identity, no roles. */
export const anonymousCaller: Caller = Object.freeze({ objectId: 'anonymous', roles: Object.freeze([]) });

// ---------------------------------------------------------------------------------------------------
// App Service authentication ("Easy Auth"): the platform validates the caller and forwards
// `x-ms-client-principal`, base64 JSON of {auth_typ, name_typ, role_typ, claims: [{typ, val}]}, and
// strips that header from every outside request. Only that stripping makes it trustworthy, which is why
// config refuses `appservice` in Azure unless WEBSITE_AUTH_ENABLED=True. `x-ms-client-principal-name`
// is never read: it is a display name, and a caller could choose it.
// ---------------------------------------------------------------------------------------------------

export const PRINCIPAL_HEADER = 'x-ms-client-principal';
export const OBJECT_ID_CLAIMS = ['http://schemas.microsoft.com/identity/claims/objectidentifier', 'oid'];
const MAX_PRINCIPAL_HEADER = 16 * 1024;

const clientPrincipal = z.object({
  auth_typ: z.string().optional(),
  name_typ: z.string().optional(),
  role_typ: z.string().optional(),
  claims: z.array(z.object({ typ: z.string(), val: z.string() })).max(1000),
});

export function parseClientPrincipal(header: string): Caller {
  const invalid = (why: string) =>
    new HttpProblem('Unauthenticated', `The ${PRINCIPAL_HEADER} header is not valid: ${why}.`);
  if (header.length > MAX_PRINCIPAL_HEADER) throw invalid('too long');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(header.trim())) throw invalid('not base64');
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(header.trim(), 'base64').toString('utf8'));
  } catch {
    throw invalid('not base64 JSON');
  }
  const parsed = clientPrincipal.safeParse(value);
  if (!parsed.success) throw invalid('expected {auth_typ, name_typ, role_typ, claims: [{typ, val}]}');
  const { claims, name_typ: nameType, role_typ: roleType } = parsed.data;
  // Object ids are GUIDs: compared in one case, so an upper-case copy is not a second approver.
  const objectIds = [
    ...new Set(claims.filter((c) => OBJECT_ID_CLAIMS.includes(c.typ)).map((c) => c.val.toLowerCase())),
  ];
  if (objectIds.length !== 1) {
    throw invalid(objectIds.length === 0 ? 'no object id claim (oid)' : 'more than one object id');
  }
  const objectId = objectIds[0]!;
  if (!objectIdPattern.test(objectId)) throw invalid('the object id is not an id');
  const roles = claims.filter((c) => c.typ === 'roles' || (roleType && c.typ === roleType)).map((c) => c.val);
  const name = nameType ? claims.find((c) => c.typ === nameType)?.val : undefined;
  return { objectId, ...(name ? { name } : {}), roles: [...new Set(roles)] };
}

export const appServiceAuthenticator: Authenticator = {
  mode: 'appservice',
  authenticate: async (request) => {
    const header = request.headers.get(PRINCIPAL_HEADER);
    return header === null || header.trim() === '' ? null : parseClientPrincipal(header);
  },
};

export function createAuthenticator(auth: AuthConfig): Authenticator {
  switch (auth.mode) {
    case 'none':
      return noneAuthenticator;
    case 'appservice':
      return appServiceAuthenticator;
    case 'entra':
      return entraAuthenticator(auth);
  }
}

/**
 * The one place a declared role is enforced. Returns the caller the handler receives; throws 401
 * `Unauthenticated` (no or invalid identity, with `WWW-Authenticate` under entra) or 403 `Forbidden`.
 */
export async function authorize(
  role: EndpointRole,
  request: HttpRequest,
  authenticator: Authenticator,
): Promise<Caller> {
  if (role === 'anonymous') return anonymousCaller;
  const challenge = authenticator.challenge;
  let caller: Caller | null;
  try {
    caller = await authenticator.authenticate(request);
  } catch (error) {
    if (error instanceof HttpProblem && error.code === 'Unauthenticated' && challenge) {
      throw new HttpProblem('Unauthenticated', error.message, {
        headers: { 'WWW-Authenticate': `${challenge} error="invalid_token"` },
      });
    }
    throw error;
  }
  if (!caller) {
    throw new HttpProblem(
      'Unauthenticated',
      authenticator.mode === 'entra'
        ? 'This operation needs an identity: send Authorization: Bearer <Entra ID access token>.'
        : 'This operation needs an identity: the request carries no x-ms-client-principal (enable App Service authentication and sign in).',
      challenge ? { headers: { 'WWW-Authenticate': challenge } } : {},
    );
  }
  if (!caller.roles.includes(role)) {
    throw new HttpProblem(
      'Forbidden',
      `This operation needs the app role ${role}, which the caller (object id ${caller.objectId}) does not hold.`,
      challenge ? { headers: { 'WWW-Authenticate': `${challenge} error="insufficient_scope"` } } : {},
    );
  }
  return caller;
}
