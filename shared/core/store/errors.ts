import { RouteLockError } from '../errors';

/**
 * The errors every adapter raises for a stored item, worded by what the item is: a conflict on a
 * migration record must not read "Route … already exists". Both backends build them here.
 */

/** What a stored item is, as messages name it. */
export type StoredKind =
  | 'route'
  | 'migration record'
  | 'audit entry'
  | 'force-release request'
  | 'campaign'
  | 'campaign member'
  | 'telemetry record';

export interface StoreSubject {
  kind: StoredKind;
  id: string;
  /** The resource the item belongs to, when known (problem details carry it). */
  resourceId?: string | undefined;
}

/** A route is named by its resource id. */
export function routeSubject(id: string): StoreSubject {
  return { kind: 'route', id, resourceId: id };
}

function capitalized(kind: StoredKind): string {
  return kind.charAt(0).toUpperCase() + kind.slice(1);
}

function detail(subject: StoreSubject): { resourceId?: string } {
  return subject.resourceId === undefined ? {} : { resourceId: subject.resourceId };
}

export function notFound(subject: StoreSubject): RouteLockError {
  const message =
    subject.kind === 'route' ? `No route for resource ${subject.id}.` : `No ${subject.kind} ${subject.id}.`;
  return new RouteLockError('NotFound', message, detail(subject));
}

export function alreadyExists(subject: StoreSubject): RouteLockError {
  return new RouteLockError(
    'AlreadyExists',
    `${capitalized(subject.kind)} ${subject.id} already exists.`,
    detail(subject),
  );
}

/** A conditional write lost: the stored version is no longer the one the caller read. */
export function changedSinceRead(subject: StoreSubject): RouteLockError {
  const message =
    subject.kind === 'route'
      ? `Route ${subject.id} changed since it was read (ETag mismatch).`
      : `${capitalized(subject.kind)} ${subject.id} changed concurrently; retry.`;
  return new RouteLockError('PreconditionFailed', message, detail(subject));
}

export function migrationRecordSubject(migrationId: string): StoreSubject {
  return { kind: 'migration record', id: migrationId };
}

export function auditEntrySubject(id: string, resourceId: string): StoreSubject {
  return { kind: 'audit entry', id, resourceId };
}

export function forceReleaseRequestSubject(id: string, resourceId?: string): StoreSubject {
  return { kind: 'force-release request', id, resourceId };
}

export function campaignSubject(campaignId: string): StoreSubject {
  return { kind: 'campaign', id: campaignId };
}

/** A member is named with its campaign: "No campaign member r1 of campaign c1." */
export function campaignMemberSubject(campaignId: string, resourceId: string): StoreSubject {
  return { kind: 'campaign member', id: `${resourceId} of campaign ${campaignId}`, resourceId };
}

/** What the change handler recorded as seen for a resource, or the metrics recorder's journal. */
export function telemetryRecordSubject(id: string, resourceId?: string): StoreSubject {
  return { kind: 'telemetry record', id, resourceId };
}
