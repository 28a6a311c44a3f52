import { RouteLockError } from './errors';
import type { Location } from './lock/document';

/**
 * Declared regions (`ROUTELOCK_REGIONS`). A route may only be placed in, locked towards or moved to a
 * declared region. The check sits in the library (the router's lock mutations, the migration services'
 * start), so every caller obeys it: HTTP, the queue trigger, the workflow and library users alike.
 * `null` (the variable unset, off Azure or under the dev profile) means unrestricted.
 */
export type AllowedRegions = readonly string[] | null;

export function isAllowedRegion(allowed: AllowedRegions | undefined, region: string): boolean {
  return allowed == null || allowed.includes(region);
}

/** Throws `RegionNotAllowed` (HTTP 400) naming the region and the declared list; checks nothing else. */
export function assertAllowedRegion(
  allowed: AllowedRegions | undefined,
  target: Location,
  what: string,
  resourceId?: string,
): void {
  if (isAllowedRegion(allowed, target.region)) return;
  throw new RouteLockError(
    'RegionNotAllowed',
    `Region "${target.region}" is not one of the declared regions (ROUTELOCK_REGIONS: ${(allowed ?? []).join(', ')}); ${what} refused.`,
    resourceId === undefined ? {} : { resourceId },
  );
}
