import type { HttpRequest } from '@azure/functions';
import { z } from 'zod';
import {
  MAX_CAMPAIGN_RESOURCES,
  MAX_IDS_PER_REQUEST,
  MAX_MAX_CONCURRENT,
  campaignStates,
} from '../../shared/campaign/types';
import { MAX_MIGRATION_ATTEMPTS } from '../../shared/config';
import { resourceIdPattern } from '../../shared/core/lock/document';
import { isRouteLockError } from '../../shared/core/errors';
import { migrationStates } from '../../shared/migration/types';
import { windowIssue } from '../../shared/migration/window';
import { isProbeId } from '../../shared/migration/probe';
import { HttpProblem } from './problem';

/** Request validation (docs/design.md §4). Bad input is a 4xx problem and changes nothing. */

export const MAX_BODY_BYTES = 64 * 1024;

export { resourceIdPattern };
export const regionPattern = /^[a-z][a-z0-9-]{1,49}$/;
export const accountPattern = /^[a-z0-9][a-z0-9-]{0,62}$/;

export const resourceId = z.string().regex(resourceIdPattern, {
  message: 'must match ^[A-Za-z0-9][A-Za-z0-9._:@-]{0,254}$',
});
/** A route's id, as callers may name it: the probe's ids (`probe-…`) are reserved for the probe. */
export const routeResourceId = resourceId.refine((id) => !isProbeId(id), {
  message: 'ids starting with "probe-" are reserved for the synthetic probe',
});
export const location = z.strictObject({
  region: z.string().regex(regionPattern, { message: 'must match ^[a-z][a-z0-9-]{1,49}$' }),
  account: z.string().regex(accountPattern, { message: 'must match ^[a-z0-9][a-z0-9-]{0,62}$' }).optional(),
});
const token = z.string().min(1).max(512);
const label = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[\x21-\x7e][\x20-\x7e]*$/, { message: 'must be printable ASCII' });

export const putRouteBody = z.strictObject({ location });
export const prelockBody = z.strictObject({
  migrationId: resourceId,
  owner: label,
  target: location,
  /** An announced lock (design §3.7); `false` is the same as absent. The host's flag decides whether it is taken. */
  announced: z.boolean({ message: 'must be true or false' }).optional(),
});
export const escalateBody = z.strictObject({ token, phase: z.enum(['hardDelete', 'write']) });
/** An instant a caller names: ISO 8601 with `Z` or an offset, as the rules compare instants. */
const instant = z.iso.datetime({ offset: true, message: 'must be an ISO 8601 instant' });
/** POST /routes/{id}/announce: the write window of an announced lock, no earlier than the lead allows. */
export const announceBody = z.strictObject({ token, phase: z.literal('write'), at: instant.optional() });
export const renewBody = z.strictObject({
  token,
  phase: z.enum(['prelock', 'hardDelete', 'write']).optional(),
});
/** The write-lock attempt a swap or downgrade belongs to: the `writeAt` its escalation granted. */
const writeAt = z.iso.datetime({ message: 'must be the writeAt timestamp the write-lock grant carried' });
/** Over HTTP a swap and a downgrade must name their attempt: a late one never lands on a later attempt. */
export const swapBody = z.strictObject({ token, writeAt });
/** A release's `reason` is text here; its length and content are the lock rule's (checkedReleaseReason). */
export const releaseBody = z
  .strictObject({
    token,
    phase: z.literal('write').optional(),
    writeAt: writeAt.optional(),
    reason: z.string({ message: 'must be text' }).optional(),
  })
  .refine((b) => (b.writeAt !== undefined) === (b.phase === 'write'), {
    message: 'a downgrade (phase "write") names its attempt with writeAt; a full release takes none',
    path: ['writeAt'],
  });
/** `limit` in a query string: a whole number from 1 to 1000. */
const limitParam = z
  .string()
  .regex(/^\d{1,4}$/, { message: 'must be a whole number from 1 to 1000' })
  .transform(Number)
  .refine((n) => n >= 1 && n <= 1000, { message: 'must be a whole number from 1 to 1000' })
  .optional();

export const listQuery = z.strictObject({
  locked: z.enum(['true', 'false']).optional(),
  limit: limitParam,
  continuation: z.string().min(1).max(4096).optional(),
});

/** GET /migrations: every filter optional; `status` one of the states, ids as ids are written. */
export const migrationListQuery = z.strictObject({
  status: z.enum(migrationStates, { message: `must be one of ${migrationStates.join(', ')}` }).optional(),
  resourceId: resourceId.optional(),
  campaignId: resourceId.optional(),
  limit: limitParam,
  continuation: z.string().min(1).max(4096).optional(),
});

/** POST /migrations/{id}/cancel and /retry take no fields: an empty body (or `{}`). */
export const migrationCommandBody = z.strictObject({});

/**
 * A campaign's id: at most 200 characters, so its members' migration ids (`<campaignId>.<seq>`, seq
 * below 100,000) are still valid resource ids.
 */
export const campaignIdPattern = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$/;
export const campaignId = z.string().regex(campaignIdPattern, {
  message: 'must match ^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$',
});

/**
 * A cutover window (docs/design.md §6.10): its form here, by the one rule (shared/migration/window.ts), the
 * field at fault named; whether `notAfter` is already past the starter checks by its own clock.
 */
export const cutoverWindow = z
  .strictObject({
    notBefore: z.string().max(64).optional(),
    notAfter: z.string().max(64).optional(),
    daily: z
      .strictObject({ start: z.string().max(16), end: z.string().max(16), timeZone: z.string().max(64) })
      .optional(),
  })
  .superRefine((window, ctx) => {
    const issue = windowIssue(window, Number.NEGATIVE_INFINITY);
    if (issue) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.field.split('.') });
  });

/** A whole number in [min, max], the message naming the range. */
const wholeNumber = (min: number, max: number) =>
  z
    .number({ message: `must be a whole number from ${min} to ${max}` })
    .int({ message: `must be a whole number from ${min} to ${max}` })
    .min(min, { message: `must be a whole number from ${min} to ${max}` })
    .max(max, { message: `must be a whole number from ${min} to ${max}` });

export const MAX_STARTS_PER_MINUTE = 100_000;
const maxConcurrent = wholeNumber(1, MAX_MAX_CONCURRENT);
const startsPerMinute = wholeNumber(1, MAX_STARTS_PER_MINUTE);

/** One request's ids: 1 to 1,000 route ids (more are appended with POST …/resources, page by page). */
const campaignResources = z
  .array(routeResourceId, { message: 'must be an array of resource ids' })
  .min(1, { message: `must hold 1 to ${MAX_IDS_PER_REQUEST} ids` })
  .max(MAX_IDS_PER_REQUEST, { message: `must hold 1 to ${MAX_IDS_PER_REQUEST} ids` });

/** POST /campaigns (and a `campaigns` queue message): exactly one of `resources` or `from`. */
export const startCampaignBody = z
  .strictObject({
    campaignId: campaignId.optional(),
    target: location,
    resources: campaignResources.optional(),
    from: z
      .strictObject({
        region: location.shape.region,
        limit: wholeNumber(1, MAX_CAMPAIGN_RESOURCES).optional(),
      })
      .optional(),
    maxConcurrent: maxConcurrent.optional(),
    startsPerMinute: startsPerMinute.optional(),
    migrationAttempts: wholeNumber(1, MAX_MIGRATION_ATTEMPTS).optional(),
    window: cutoverWindow.optional(),
    /** A dry run (docs/design.md §6.2): 200 with a campaign preflight report, nothing written. HTTP only. */
    dryRun: z.boolean().optional(),
  })
  .refine((b) => (b.resources === undefined) !== (b.from === undefined), {
    message: 'give exactly one of resources (a list of ids) or from ({region, limit?})',
    path: ['resources'],
  });

/** POST /campaigns/{campaignId}/resources: one more page of ids. */
export const addCampaignResourcesBody = z.strictObject({ resources: campaignResources });

/** PATCH /campaigns/{campaignId}: new limits (`startsPerMinute: null` removes the rate limit). */
export const campaignLimitsBody = z
  .strictObject({
    maxConcurrent: maxConcurrent.optional(),
    startsPerMinute: startsPerMinute.nullable().optional(),
  })
  .refine((b) => b.maxConcurrent !== undefined || b.startsPerMinute !== undefined, {
    message: 'give maxConcurrent, startsPerMinute or both',
  });

/** POST /campaigns/{campaignId}/pause, /resume and /cancel take no fields: an empty body (or `{}`). */
export const campaignCommandBody = z.strictObject({});

/** GET /campaigns: every filter optional. */
export const campaignListQuery = z.strictObject({
  status: z.enum(campaignStates, { message: `must be one of ${campaignStates.join(', ')}` }).optional(),
  limit: limitParam,
  continuation: z.string().min(1).max(4096).optional(),
});

/**
 * A list's store refused its continuation (the only query input a store can refuse): the 400 names
 * it, as the query's other 400s do. Anything else is rethrown.
 */
export async function namingContinuation<T>(
  continuation: string | undefined,
  list: () => Promise<T>,
): Promise<T> {
  try {
    return await list();
  } catch (error) {
    if (continuation !== undefined && isRouteLockError(error, 'BadRequest')) {
      const errors = [`continuation: ${error.message}`];
      throw new HttpProblem('BadRequest', `Invalid query: ${errors.join('; ')}`, { errors });
    }
    throw error;
  }
}

export const idempotencyKey = label;

export const actorName = label;
/** A force-release's `reason` is text here; its length and content are the lock rule's (checkedReleaseReason). */
export const forceReleaseBody = z.strictObject({
  reason: z.string({ message: 'must be text' }),
  actor: label.optional(),
});
export const approveBody = z.strictObject({ actor: label.optional() });
export const auditQuery = z.strictObject({ limit: limitParam });

export const startMigrationBody = z.strictObject({
  resourceId: routeResourceId,
  target: location,
  migrationId: resourceId.optional(),
  /** A dry run: 200 with a preflight report, nothing written. HTTP only: a queue cannot answer. */
  dryRun: z.boolean().optional(),
  /** The write lock only inside this window. */
  window: cutoverWindow.optional(),
});

function describeIssues(error: z.ZodError, where: string): string[] {
  return error.issues.map((issue) => {
    const path = issue.path.length > 0 ? issue.path.join('.') : where;
    if (issue.code === 'unrecognized_keys')
      return `${path === where ? where : path}: unknown field(s) ${issue.keys.join(', ')}`;
    return `${path}: ${issue.message}`;
  });
}

export function parse<T extends z.ZodType>(schema: T, value: unknown, where: string): z.output<T> {
  const result = schema.safeParse(value);
  if (!result.success) {
    const errors = describeIssues(result.error, where);
    throw new HttpProblem('BadRequest', `Invalid ${where}: ${errors.join('; ')}`, { errors });
  }
  return result.data;
}

export function routeId(request: HttpRequest): string {
  return parse(routeResourceId, request.params.id ?? '', 'resource id');
}

/** `application/json` or a `+json` type (`application/merge-patch+json`), parameters allowed. */
export function isJsonMediaType(contentType: string): boolean {
  return /^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(contentType.trim());
}

/** Read a JSON body: at most 64 KiB, JSON media type when one is declared, an object at the top. */
export async function readJson(request: HttpRequest): Promise<unknown> {
  const value = await readJsonBody(request);
  if (value === undefined) throw new HttpProblem('BadRequest', 'A JSON body is required.');
  return value;
}

/** Like readJson, but an empty body (nothing sent, however it was framed) is `{}`. */
export async function readOptionalJson(request: HttpRequest): Promise<unknown> {
  return (await readJsonBody(request)) ?? {};
}

/**
 * The one guarded parse behind readJson and readOptionalJson: the declared and the actual size are
 * both capped, a declared media type must be JSON, invalid UTF-8 or JSON is a 400, and the top level
 * must be an object. An empty body (or only whitespace) is `undefined`, for the caller to decide.
 */
async function readJsonBody(request: HttpRequest): Promise<object | undefined> {
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > MAX_BODY_BYTES) throw tooLarge();
  const contentType = request.headers.get('content-type');
  if (contentType !== null && !isJsonMediaType(contentType)) {
    throw new HttpProblem(
      'UnsupportedMediaType',
      `Content-Type must be application/json, not ${contentType}.`,
    );
  }
  const bytes = Buffer.from(await request.arrayBuffer());
  if (bytes.length > MAX_BODY_BYTES) throw tooLarge();
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new HttpProblem('BadRequest', 'The body is not valid JSON (UTF-8).');
  }
  if (text.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new HttpProblem('BadRequest', 'The body is not valid JSON (UTF-8).');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new HttpProblem('BadRequest', 'The body must be a JSON object.');
  }
  return value;
}

/** Query parameters as a plain object; a repeated parameter is refused. */
export function queryObject(request: HttpRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of request.query.entries()) {
    if (Object.prototype.hasOwnProperty.call(out, key)) {
      throw new HttpProblem('BadRequest', `Query parameter ${key} is given more than once.`);
    }
    out[key] = value;
  }
  return out;
}

function tooLarge(): HttpProblem {
  return new HttpProblem('PayloadTooLarge', `The body exceeds ${MAX_BODY_BYTES} bytes.`);
}

export function ifMatch(request: HttpRequest): string | undefined {
  const raw = request.headers.get('if-match');
  if (raw === null || raw.trim() === '' || raw.trim() === '*') return undefined;
  const value = raw.trim();
  if (value.includes(',')) throw new HttpProblem('BadRequest', 'If-Match takes a single ETag.');
  const match = /^(?:W\/)?"([^"]*)"$/.exec(value);
  return match ? match[1] : value;
}
