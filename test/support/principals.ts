import { appRoles } from '../../functions/http/auth';

/**
 * Callers as App Service authentication forwards them: `x-ms-client-principal`, base64 JSON of
 * {auth_typ, name_typ, role_typ, claims}, with the Entra object id, display name and app roles.
 */

export const NAME_TYPE = 'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name';
export const ROLE_TYPE = 'http://schemas.microsoft.com/ws/2008/06/identity/claims/role';
export const OID_TYPE = 'http://schemas.microsoft.com/identity/claims/objectidentifier';

export interface TestPrincipal {
  oid: string;
  name?: string;
  roles: readonly string[];
}

export function clientPrincipal({ oid, name, roles }: TestPrincipal): string {
  const claims = [
    { typ: OID_TYPE, val: oid },
    ...(name ? [{ typ: NAME_TYPE, val: name }] : []),
    ...roles.map((role) => ({ typ: 'roles', val: role })),
  ];
  return Buffer.from(
    JSON.stringify({ auth_typ: 'aad', name_typ: NAME_TYPE, role_typ: ROLE_TYPE, claims }),
  ).toString('base64');
}

/** The header a request needs to act as this principal under ROUTELOCK_AUTH=appservice. */
export function asPrincipal(principal: TestPrincipal): Record<string, string> {
  return { 'x-ms-client-principal': clientPrincipal(principal) };
}

/** An operator holding every app role: the default caller of the handler harness. */
export const allRoles: TestPrincipal = {
  oid: '00000000-0000-4000-8000-000000000001',
  name: 'test operator',
  roles: [...appRoles],
};
