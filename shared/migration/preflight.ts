import type { TimingConfig } from '../core/settings';
import { type Participant, participantsFor } from './participants';
import { isRouteLockError } from '../core/errors';
import { type Location, type LocationDocument, normalizeLocation, sameLocation } from '../core/lock/document';
import { announcedStartsAt, prelockStartsAt } from '../core/lock/rules';
import {
  announcedWaitUntil,
  earliestEscalationAt,
  liveLock,
  phaseExpiresAt,
  retiredSourceWindow,
} from '../core/lock/state';
import { type AllowedRegions, isAllowedRegion } from '../core/regions';
import type { Router } from '../core/router';
import type { MigrationRecords } from './store/ports/migrations';
import type { MigrationRecord } from './records';
import { classifyAnswer, participantTiming } from './participantContract';
import { type ParticipantHttpOptions, requestParticipant } from './participantHttp';
import type { MigrationRequest } from './service';
import { nextWriteSlot, sameWindow, windowProblem } from './window';
import {
  type CutoverWindow,
  type HttpAnswer,
  type MigrationSettings,
  type PreflightCheck,
  type PreflightCheckName,
  type PreflightReport,
  type PreflightTiming,
  migrationStates,
  terminalStates,
} from './types';

/**
 * A migration's dry run (docs/design.md §6.2): what a start would meet, answered without writing anything (no
 * record, lock, claim, audit record or telemetry). `preflight` is the pure core (table-tested);
 * `runPreflight` does the reads and the participants' `preflight` calls. Both runners answer it through
 * the same HTTP handler, so it has one home.
 */

export type { PreflightCheck, PreflightCheckName, PreflightReport, PreflightTiming } from './types';

/** A migration of the resource that has not ended, as the records' claim shows it (read only). */
export interface RunningMigration {
  migrationId: string;
  status: string;
  target: Location;
  /** Its cutover window: a start naming another joins nothing (409), as joinRunning decides. */
  window?: CutoverWindow | undefined;
}

/** What the I/O shell read: the route (null: none), a running migration, the participants' answers. */
export interface PreflightFacts {
  resourceId: string;
  target: Location;
  doc: LocationDocument | null;
  running: RunningMigration | null;
  participants: readonly { name: string; answer: HttpAnswer }[];
  /** The request's cutover window (docs/design.md §6.10), if it has one. */
  window?: CutoverWindow | undefined;
}

export interface PreflightSettings {
  timing: TimingConfig;
  migration: MigrationSettings;
  allowedRegions: AllowedRegions;
}

type Rule = (facts: PreflightFacts, now: number, s: PreflightSettings) => PreflightCheck | null;

const check = (name: PreflightCheckName, ok: boolean, detail: string): PreflightCheck => ({
  check: name,
  ok,
  detail,
});

/**
 * The route checks, in the order a start meets them. Each asks the lock rules' own helpers (state.ts),
 * never a copy of them. A missing route is a failing check, not a 404: the report is the answer.
 */
export const preflightRules: readonly Rule[] = [
  ({ doc, resourceId }) =>
    check('routeExists', doc !== null, doc ? `route ${resourceId} exists` : `no route ${resourceId}`),
  ({ doc }, now) => {
    if (!doc) return null;
    const lock = liveLock(doc, now);
    return lock
      ? check(
          'notLocked',
          false,
          `locked by ${lock.owner} (migration ${lock.migrationId}), phase ${lock.phase} until ${phaseExpiresAt(lock)}`,
        )
      : check('notLocked', true, 'no live lock');
  },
  ({ doc, target }) => {
    if (!doc) return null;
    const there = sameLocation(doc.location, normalizeLocation(target));
    return there
      ? check('notAtTarget', false, 'the resource already sits at the target: a migration would end NoOp')
      : check('notAtTarget', true, `moves from ${doc.location.region} to ${target.region}`);
  },
  ({ target }, _now, s) =>
    // No allowlist is no check: say so, rather than a pass that reads as if the region had been vetted.
    s.allowedRegions == null
      ? {
          ...check('regionAllowed', true, 'no region allowlist set (ROUTELOCK_REGIONS): any region accepted'),
          outcome: 'notConfigured',
        }
      : isAllowedRegion(s.allowedRegions, target.region)
        ? check('regionAllowed', true, `${target.region} is one of ROUTELOCK_REGIONS`)
        : check(
            'regionAllowed',
            false,
            `${target.region} is not one of ROUTELOCK_REGIONS (${(s.allowedRegions ?? []).join(', ')})`,
          ),
  ({ doc }, now) => {
    if (!doc) return null;
    const retired = retiredSourceWindow(doc, now);
    return retired
      ? check(
          'noRetiredSourceWindow',
          false,
          `the last swap's source ${retired.location.region} is write-blocked until ${retired.writesBlockedUntil}`,
        )
      : check('noRetiredSourceWindow', true, 'no retired source is write-blocked');
  },
  ({ running, target, window }) => {
    if (!running) return check('noMigrationRunning', true, 'no migration of the resource is running');
    const same =
      sameLocation(running.target, normalizeLocation(target)) &&
      (window === undefined || sameWindow(running.window, window));
    return check(
      'noMigrationRunning',
      false,
      `migration ${running.migrationId} is ${running.status} towards ${running.target.region}${same ? ' (a start would join it)' : ' (a start would get 409 MigrationInProgress)'}`,
    );
  },
  windowCheck,
];

/**
 * The cutover window, as the workflow meets it (workflow/window.ts): a slot that holds the write budget
 * at or after the earliest write lock, and within a new lock's cap (now + ROUTELOCK_PRELOCK_MAX_SECONDS
 * less the clock-skew margin). Without a window there is no check.
 */
function windowCheck(facts: PreflightFacts, now: number, s: PreflightSettings): PreflightCheck | null {
  const { window } = facts;
  if (window === undefined) return null;
  const problem = windowProblem(window, now);
  if (problem !== undefined) return check('windowReachable', false, problem);
  const holdMs = s.migration.writeBudgetSeconds * 1000;
  const slot = windowSlot(facts, now, s);
  if (slot === null)
    return check(
      'windowReachable',
      false,
      `no slot left that holds the write budget (${s.migration.writeBudgetSeconds} s): the migration would fail WindowClosed`,
    );
  const cap = now + (s.timing.prelockMaxSeconds - s.timing.clockSkewSeconds) * 1000;
  const at = new Date(slot).toISOString();
  if (slot + holdMs > cap)
    return check(
      'windowReachable',
      false,
      `the next slot (${at}) and its write budget end past a new lock's cap (${new Date(cap).toISOString()}, ROUTELOCK_PRELOCK_MAX_SECONDS): the migration would fail WindowUnreachable`,
    );
  return check('windowReachable', true, `the write lock would wait for the window's slot at ${at}`);
}

/** The window's first slot from the earliest write lock (epoch ms), null when it has none. */
function windowSlot(facts: PreflightFacts, now: number, s: PreflightSettings): number | null {
  if (facts.window === undefined) return null;
  const from = Date.parse(earliestWriteLockAt(facts, now, s));
  return nextWriteSlot(facts.window, from, s.migration.writeBudgetSeconds * 1000);
}

/** A participant's answer to `preflight`, an optional step: 404 is "not implemented", not a failure. */
export function participantCheck(name: string, answer: HttpAnswer): PreflightCheck {
  const verdict = classifyAnswer('post', 'optional', answer);
  const base = { check: 'participant' as const, participant: name };
  switch (verdict.kind) {
    case 'done':
      return { ...base, ok: true, outcome: 'ready', detail: `${name} answered 200${bodyNote(answer.body)}` };
    case 'notImplemented':
      return { ...base, ok: true, outcome: 'notImplemented', detail: `${name} does not implement preflight` };
    case 'transient':
      return { ...base, ok: false, outcome: 'transient', detail: `${name}: ${verdict.reason}` };
    case 'running':
      return {
        ...base,
        ok: false,
        outcome: 'failed',
        detail: `${name} answered 202: preflight must answer at once`,
      };
    case 'failed':
      return { ...base, ok: false, outcome: 'failed', detail: `${name}: ${verdict.reason}` };
  }
}

const bodyNote = (body: unknown) =>
  body == null || body === ''
    ? ''
    : `: ${(typeof body === 'string' ? body : JSON.stringify(body)).slice(0, 200)}`;

/** The timing a start would meet from `now`, by the workflow's own rule (earliestEscalationAt). */
export function preflightTiming(facts: PreflightFacts, now: number, s: PreflightSettings): PreflightTiming {
  const copying = participantsFor(facts.resourceId, s.migration.participants).length > 0;
  const slot = facts.window === undefined ? undefined : windowSlot(facts, now, s);
  return {
    convergenceWaitSeconds: Math.ceil((escalationAt(now, s) - now) / 1000),
    earliestWriteLockAt: earliestWriteLockAt(facts, now, s),
    bulkCopyDuration: copying ? 'unknown' : 'none',
    writeBudgetSeconds: s.migration.writeBudgetSeconds,
    migrationAttempts: s.migration.migrationAttempts ?? 1,
    ...(slot === undefined ? {} : { nextWriteSlotAt: slot === null ? null : new Date(slot).toISOString() }),
    ...(slot === null ? {} : writeWindowAt(slot ?? Date.parse(earliestWriteLockAt(facts, now, s)), s)),
  };
}

/**
 * Whether a migration started now takes announced locks: the settings it would start with (the flag,
 * fixed into its input, workflow/announced.ts).
 */
const announced = (s: PreflightSettings): boolean => s.migration.announcedLocks === true;

/**
 * The earliest a first escalation can succeed after a pre-lock taken now (the workflow's rule). Under
 * announced locks: when the pre-lock, the hard-delete lock itself, is in force on every clock.
 */
function escalationAt(now: number, s: PreflightSettings): number {
  if (announced(s))
    return announcedWaitUntil(
      { startsAt: new Date(announcedStartsAt(now, s.timing)).toISOString() },
      s.timing.clockSkewSeconds,
    );
  const startsAt = prelockStartsAt(now, s.timing);
  return earliestEscalationAt(
    { acquiredAt: new Date(now).toISOString(), startsAt: new Date(startsAt).toISOString() },
    {
      replicationBoundSeconds: s.migration.replicationBoundSeconds,
      safetyBufferSeconds: s.migration.safetyBufferSeconds,
      clockSkewSeconds: s.timing.clockSkewSeconds,
    },
  );
}

/**
 * now + convergence wait + in-flight grace (the bulk copy's duration, unknown, comes on top). Under
 * announced locks the write window is announced when the bulk copy ends and the write lock taken a
 * lead and a skew margin later: now + L + S + G + L + S (docs/design.md §4).
 */
function earliestWriteLockAt(facts: PreflightFacts, now: number, s: PreflightSettings): string {
  const copying = participantsFor(facts.resourceId, s.migration.participants).length > 0;
  // the in-flight grace guards each copy; a lock-only migration skips it (docs/design.md §6.3)
  const grace = copying ? (s.migration.inFlightGraceSeconds ?? 0) * 1000 : 0;
  const window = announced(s) ? (s.timing.announceLeadSeconds + s.timing.clockSkewSeconds) * 1000 : 0;
  return new Date(escalationAt(now, s) + grace + window).toISOString();
}

/**
 * Under announced locks, the write window the write lock would be taken in: from the earliest write lock
 * (or the cutover slot) less the skew margin, when readers start reading the write region through.
 */
function writeWindowAt(writeLockAt: number, s: PreflightSettings): { writeWindowAt?: string } {
  if (!announced(s)) return {};
  return { writeWindowAt: new Date(writeLockAt - s.timing.clockSkewSeconds * 1000).toISOString() };
}

/** The pure core: (facts, now, settings) → the report. `rules` is a seam for the negative control. */
export function preflight(
  facts: PreflightFacts,
  now: number,
  s: PreflightSettings,
  rules: readonly Rule[] = preflightRules,
): PreflightReport {
  const checks = [
    ...rules.map((rule) => rule(facts, now, s)).filter((c): c is PreflightCheck => c !== null),
    ...facts.participants.map((p) => participantCheck(p.name, p.answer)),
  ];
  return {
    dryRun: true,
    resourceId: facts.resourceId,
    target: facts.target,
    ok: checks.every((c) => c.ok),
    checks,
    timing: preflightTiming(facts, now, s),
  };
}

/** A preflight question is short: at most this long, or the configured request timeout if shorter. */
export const PREFLIGHT_TIMEOUT_SECONDS = 10;

export interface PreflightDeps {
  router: Pick<Router, 'readAuthoritative' | 'allowedRegions'>;
  records: Pick<MigrationRecords, 'list'>;
  timing: TimingConfig;
  settings: MigrationSettings;
  now: () => number;
  http?: ParticipantHttpOptions;
}

/** The states of a migration that has not ended: a record in one holds the resource's claim. */
export const unfinishedStates = migrationStates.filter((state) => !terminalStates.has(state));

/** The route as a start would read it (authoritative); null when there is none. */
export function readPreflightRoute(
  router: Pick<Router, 'readAuthoritative'>,
  resourceId: string,
): Promise<LocationDocument | null> {
  return router.readAuthoritative(resourceId).then(
    (stored) => stored.doc,
    (error: unknown) => {
      if (isRouteLockError(error, 'NotFound')) return null;
      throw error;
    },
  );
}

/** A record's claim as the dry run names it (the record is unfinished). */
export const runningOf = (record: MigrationRecord): RunningMigration => ({
  migrationId: record.migrationId,
  status: record.status.status,
  target: record.target,
  ...(record.input.window === undefined ? {} : { window: record.input.window }),
});

/** Each participant in scope of the resource, asked `preflight` (from the route's location). */
export function askParticipants(
  deps: Pick<PreflightDeps, 'settings' | 'http'>,
  request: Pick<MigrationRequest, 'resourceId' | 'migrationId'>,
  from: Location,
  target: Location,
): Promise<PreflightFacts['participants']> {
  return Promise.all(
    participantsFor(request.resourceId, deps.settings.participants).map(async (p) => ({
      name: p.name,
      answer: await askParticipant(p, from, target, request, deps),
    })),
  );
}

/** The I/O shell: reads the route and the records (nothing written), asks each participant in scope. */
export async function runPreflight(deps: PreflightDeps, request: MigrationRequest): Promise<PreflightReport> {
  const { resourceId } = request;
  const target = normalizeLocation(request.target);
  const doc = await readPreflightRoute(deps.router, resourceId);
  const page = await deps.records.list({ resourceId, states: unfinishedStates, limit: 1 });
  const record = page.records[0];
  const running = record ? runningOf(record) : null;
  // without a route there is no source to name: the participants are not asked
  const participants = doc ? await askParticipants(deps, request, doc.location, target) : [];
  const { window } = request;
  return preflight(
    { resourceId, target, doc, running, participants, window },
    deps.now(),
    preflightSettings(deps),
  );
}

/** The pure core's settings, from the shell's deps. */
export const preflightSettings = (
  deps: Pick<PreflightDeps, 'router' | 'timing' | 'settings'>,
): PreflightSettings => ({
  timing: deps.timing,
  migration: deps.settings,
  allowedRegions: deps.router.allowedRegions,
});

function askParticipant(
  p: Participant,
  from: Location,
  to: Location,
  request: Pick<MigrationRequest, 'resourceId' | 'migrationId'>,
  deps: Pick<PreflightDeps, 'settings' | 'http'>,
): Promise<HttpAnswer> {
  return requestParticipant(
    {
      participant: p.name,
      participantUrl: p.url,
      ...(p.audience === undefined ? {} : { audience: p.audience }),
      timeoutSeconds: Math.min(PREFLIGHT_TIMEOUT_SECONDS, participantTiming(deps.settings).timeoutSeconds),
      method: 'POST',
      body: {
        ...(request.migrationId === undefined ? {} : { migrationId: request.migrationId }),
        resourceId: request.resourceId,
        from,
        to,
        step: 'preflight',
      },
    },
    deps.http,
  );
}
