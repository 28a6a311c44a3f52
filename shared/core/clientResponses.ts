import type { Location } from './lock/document';
import type { LockGrant, RouteView } from './lock/view';

/**
 * What RoutingClient accepts from the routing service, checked by hand (the client ships with
 * lru-cache as its one dependency). A body of the wrong shape is refused where it arrives, as a typed
 * error, instead of being cached and failing later inside `decide` with a TypeError. The checks cover
 * what the client and `decide` read; fields a newer server adds are let through.
 */

type Fields = Record<string, unknown>;

function isObject(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const isString = (value: unknown): value is string => typeof value === 'string';
const optional = (value: unknown, check: (v: unknown) => boolean) => value === undefined || check(value);

function isLocation(value: unknown): value is Location {
  return isObject(value) && isString(value.region) && optional(value.account, isString);
}

function isLockView(value: unknown): boolean {
  return (
    isObject(value) &&
    isString(value.migrationId) &&
    isString(value.phase) &&
    isLocation(value.target) &&
    isString(value.startsAt) &&
    isString(value.expiresAt)
  );
}

function isSecondary(value: unknown): boolean {
  return (
    isObject(value) &&
    isLocation(value.location) &&
    isString(value.role) &&
    isString(value.writesBlockedUntil)
  );
}

function isEnforcement(value: unknown): boolean {
  return (
    isObject(value) &&
    value.read === 'allow' &&
    (value.write === 'allow' || value.write === 'deny') &&
    (value.delete === 'allow' || value.delete === 'tombstone' || value.delete === 'deny') &&
    optional(value.retryAfterSeconds, (v) => typeof v === 'number' && Number.isFinite(v) && v >= 0)
  );
}

/** A route view (GET /routes/{id}, PUT, swap, release). */
export function isRouteView(value: unknown): value is RouteView {
  return (
    isObject(value) &&
    isString(value.resourceId) &&
    isLocation(value.location) &&
    (value.secondary === null || isSecondary(value.secondary)) &&
    (value.lock === null || isLockView(value.lock)) &&
    isEnforcement(value.enforcement) &&
    isString(value.etag)
  );
}

/** A lock grant (prelock, escalate, renew). */
export function isLockGrant(value: unknown): value is LockGrant {
  return (
    isObject(value) &&
    optional(value.token, isString) &&
    isString(value.migrationId) &&
    isString(value.phase) &&
    isString(value.startsAt) &&
    isString(value.expiresAt) &&
    isString(value.phaseExpiresAt) &&
    typeof value.convergenceDelaySeconds === 'number' &&
    isString(value.etag)
  );
}

/** What GET /health answers in its body (the API version comes in a header). */
export function isHealth(value: unknown): value is { status: 'ok'; store?: string } {
  return isObject(value) && value.status === 'ok' && optional(value.store, isString);
}

/** An RFC 9457 problem as routelock sends it: what the client reads of it. */
export interface Problem {
  code?: string;
  detail?: string;
  instance?: string;
}

/** The problem in an error answer's body, or undefined when the body is not one (an HTML page, empty). */
export function problemOf(parsed: unknown): Problem | undefined {
  if (!isObject(parsed) || !isString(parsed.code)) return undefined;
  return {
    code: parsed.code,
    ...(isString(parsed.detail) ? { detail: parsed.detail } : {}),
    ...(isString(parsed.instance) ? { instance: parsed.instance } : {}),
  };
}

function decoded(path: string): string {
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

/**
 * Whether a 404 is routelock's answer for the resource the request named: a problem with code
 * `NotFound` whose `instance` (the request's path, as the API's handlers set it) ends with the path the
 * client asked for. Any other 404 (a page from whatever the base URL reaches, an empty body, the host's
 * own "no endpoint" problem, which names no instance) means the request never reached a route's handler.
 */
export function isRouteNotFound(problem: Problem | undefined, path: string): boolean {
  return (
    problem?.code === 'NotFound' &&
    problem.instance !== undefined &&
    decoded(problem.instance).endsWith(decoded(path))
  );
}
