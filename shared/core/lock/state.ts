import type { Lock, LocationDocument, Secondary } from './document';

/**
 * What a lock means at `now` (design §2–§3): the one home of every time predicate the rules, the router's
 * read path, the route view, Cache-Control, RoutingClient, the sweeper and the probe ask. Pure functions of
 * (lock, now, skew); `now` in epoch ms.
 *
 * Clock skew (`ROUTELOCK_CLOCK_SKEW_SECONDS`): two clocks may disagree by up to `skew`, so each side of a
 * phase boundary counts it on its own safe side:
 * - enforcement (route view, Cache-Control, the caches) treats a lock as started `skew` early
 *   (`hasStarted(lock, now, skew)`: from startsAt − skew), so a clock behind still enforces once the holder
 *   may act;
 * - the holder acts as if a phase starts `skew` late (`startedEverywhereAt`: startsAt + skew) and ends `skew`
 *   early (`beforeEnd`), so no copy starts while some service still allows what the phase forbids, and no
 *   swap lands after some service already allows writes again;
 * - phase ends are enforced at face value (`hardDeleteInForce`, `writeLockInForce`: no margin): the holder's
 *   early end already covers the skew;
 * - a lock the write region shows past its lease is dead only once `2 × skew` more has passed
 *   (`deadInWriteRegion`): the copy's reader and the lock's last writer may each be `skew` off, in opposite
 *   directions, so one skew margin is not enough to know that no holder still renews it.
 */

/**
 * The production profile's ROUTELOCK_CLOCK_SKEW_SECONDS, and RoutingClient's margin when it is not told
 * the server's: a client cannot read the server's configuration, so it assumes the production bound. Against
 * a server with a smaller margin (the dev profile's 0) it only fetches a started lock a little early, never late.
 */
export const DEFAULT_CLOCK_SKEW_SECONDS = 5;

const SECOND = 1000;

/**
 * Epoch ms of an ISO instant, exactly as `Date.parse` gives it: the read path dates every lock on every
 * read-through, and `Date.parse` costs a tenth of it. The canonical shape `toISOString`
 * writes (`YYYY-MM-DDTHH:MM:SS.sssZ`, year 0100–9999, every field in range) is read digit by digit;
 * anything else (an offset, fewer digits, a day past the month's end, `24:00`) goes to `Date.parse`
 * itself, so the two never disagree (a test checks it against `Date.parse`).
 */
export function instantMs(iso: string): number {
  if (
    iso.length !== 24 ||
    iso.charCodeAt(4) !== DASH ||
    iso.charCodeAt(7) !== DASH ||
    iso.charCodeAt(10) !== T ||
    iso.charCodeAt(13) !== COLON ||
    iso.charCodeAt(16) !== COLON ||
    iso.charCodeAt(19) !== DOT ||
    iso.charCodeAt(23) !== Z
  )
    return Date.parse(iso);
  // A position that is not a digit makes its field NaN, which fails every range check below.
  const year = digit(iso, 0) * 1000 + digit(iso, 1) * 100 + digit(iso, 2) * 10 + digit(iso, 3);
  const month = digit(iso, 5) * 10 + digit(iso, 6);
  const day = digit(iso, 8) * 10 + digit(iso, 9);
  const hour = digit(iso, 11) * 10 + digit(iso, 12);
  const minute = digit(iso, 14) * 10 + digit(iso, 15);
  const second = digit(iso, 17) * 10 + digit(iso, 18);
  const milli = digit(iso, 20) * 100 + digit(iso, 21) * 10 + digit(iso, 22);
  // Any field out of range, and years before 0100 (a naive Date.UTC reads 0–99 as 19xx), are Date.parse's.
  if (!(year >= 100 && month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth(year, month)))
    return Date.parse(iso);
  if (!(hour <= 23 && minute <= 59 && second <= 59 && milli >= 0)) return Date.parse(iso);
  return daysSinceEpoch(year, month, day) * DAY + hour * HOUR + minute * MINUTE + second * SECOND + milli;
}

const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/**
 * Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's days_from_civil: whole 400-year eras of
 * 146,097 days, years counted from March so the leap day ends each one). Faster than `Date.UTC`.
 */
function daysSinceEpoch(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}

const DASH = 45;
const T = 84;
const COLON = 58;
const DOT = 46;
const Z = 90;

/** The digit at `index`, or NaN. */
function digit(text: string, index: number): number {
  const value = text.charCodeAt(index) - 48;
  return value >= 0 && value <= 9 ? value : Number.NaN;
}

function daysInMonth(year: number, month: number): number {
  if (month !== 2) return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
}

const ms = instantMs;

// ---------------------------------------------------------------------------------------------
// Live
// ---------------------------------------------------------------------------------------------

/**
 * A lock is live while its parent lease runs: `now < expiresAt`. A lock that is not live restricts nothing.
 * (Narrows `Lock | null` to `Lock` when true; when false, ask `liveLock` if the lock is still needed.)
 */
export function isLive(lock: Lock | null, now: number): lock is Lock {
  return lock !== null && now < ms(lock.expiresAt);
}

/** The lock as everyone must see it: a lock that is not live is absent. */
export function liveLock(doc: LocationDocument, now: number): Lock | null {
  return isLive(doc.lock, now) ? doc.lock : null;
}

/**
 * Seen by a copy read from the write region at `fetchedAt`: the lock is past its lease by more than twice
 * the skew margin, so it cannot come back (a new lock would start over, after a full convergence delay).
 */
export function deadInWriteRegion(lock: Lock, fetchedAt: number, skewSeconds: number): boolean {
  return ms(lock.expiresAt) + 2 * skewSeconds * SECOND <= fetchedAt;
}

// ---------------------------------------------------------------------------------------------
// Started
// ---------------------------------------------------------------------------------------------

/** From this instant enforcement counts the lock as started: startsAt less the skew margin. */
export function enforcedFrom(lock: Pick<Lock, 'startsAt'>, skewSeconds: number): number {
  return ms(lock.startsAt) - skewSeconds * SECOND;
}

/** Enforcement's view: the lock has started, counted from startsAt − skew (0 skew: at face value). */
export function hasStarted(lock: Pick<Lock, 'startsAt'>, now: number, skewSeconds = 0): boolean {
  return enforcedFrom(lock, skewSeconds) <= now;
}

/** The holder's view: from this instant the lock has started on every clock (startsAt + skew). */
export function startedEverywhereAt(lock: Pick<Lock, 'startsAt'>, skewSeconds: number): number {
  return ms(lock.startsAt) + skewSeconds * SECOND;
}

// ---------------------------------------------------------------------------------------------
// Phases
// ---------------------------------------------------------------------------------------------

/** Deletes are intercepted (tombstoned): a live lock past pre-lock whose hard-delete lease runs. */
export function hardDeleteInForce(lock: Lock | null, now: number): boolean {
  return isLive(lock, now) && lock.phase !== 'prelock' && now < ms(lock.hardDeleteExpiresAt);
}

/** Writes (and deletes) are refused: a live lock in the write phase whose write lease runs. */
export function writeLockInForce(lock: Lock | null, now: number): boolean {
  return isLive(lock, now) && lock.phase === 'write' && now < ms(lock.writeExpiresAt);
}

/** When the lock's current phase ends: its phase lease, or the parent lease for a pre-lock. */
export function phaseExpiresAt(lock: Lock): string {
  if (lock.phase === 'write') return lock.writeExpiresAt;
  if (lock.phase === 'hardDelete') return lock.hardDeleteExpiresAt;
  return lock.expiresAt;
}

/** The holder's own end of a phase ending at `endsAt`: its end less the skew margin (epoch ms). */
export function holderEndsAt(endsAt: string, skewSeconds: number): number {
  return ms(endsAt) - skewSeconds * SECOND;
}

/** The holder may still act (renew, escalate, swap) within a phase ending at `endsAt`. */
export function beforeEnd(endsAt: string, now: number, skewSeconds: number): boolean {
  return now < holderEndsAt(endsAt, skewSeconds);
}

// ---------------------------------------------------------------------------------------------
// Secondary locations
// ---------------------------------------------------------------------------------------------

/**
 * The retired source while its window runs (writes through it blocked until `writesBlockedUntil`): no new
 * pre-lock and no DELETE then, while caches may still send writes to it. Null otherwise.
 */
export function retiredSourceWindow(doc: LocationDocument, now: number): Secondary | null {
  const secondary = doc.secondary;
  return secondary?.role === 'retiredSource' && now < ms(secondary.writesBlockedUntil) ? secondary : null;
}

/** The secondary as it stands at `now`: a pending target lives with its lock, a retired source until its time. */
export function secondaryInForce(doc: LocationDocument, now: number): Secondary | null {
  const secondary = doc.secondary;
  if (!secondary || now >= ms(secondary.writesBlockedUntil)) return null;
  if (secondary.role === 'pendingTarget' && !liveLock(doc, now)) return null;
  return secondary;
}

// ---------------------------------------------------------------------------------------------
// Convergence
// ---------------------------------------------------------------------------------------------

export interface ConvergenceMargins {
  replicationBoundSeconds: number;
  safetyBufferSeconds: number;
}

/**
 * When the orchestrator may escalate a pre-lock: after every cache tier and replica has seen it, i.e.
 * max(startsAt, acquiredAt + replication bound) + safety buffer.
 */
export function convergenceWaitUntil(
  grant: Pick<Lock, 'acquiredAt' | 'startsAt'>,
  margins: ConvergenceMargins,
): number {
  return (
    Math.max(ms(grant.startsAt), ms(grant.acquiredAt) + margins.replicationBoundSeconds * SECOND) +
    margins.safetyBufferSeconds * SECOND
  );
}

/**
 * The earliest a first escalation can succeed: the orchestrator's convergence wait, and the rules' start on
 * every clock (startsAt + skew). Start-up refuses a pre-lock cap that does not outlast it.
 */
export function earliestEscalationAt(
  grant: Pick<Lock, 'acquiredAt' | 'startsAt'>,
  margins: ConvergenceMargins & { clockSkewSeconds: number },
): number {
  return Math.max(convergenceWaitUntil(grant, margins), startedEverywhereAt(grant, margins.clockSkewSeconds));
}

// ---------------------------------------------------------------------------------------------
// Announced locks (design §3.7)
// ---------------------------------------------------------------------------------------------

/**
 * When readers start reading an announced lock's write window through (the write region on every
 * resolve): its `writeWindowAt` less the skew margin, so a reader whose clock is behind is already in
 * the window when the holder may activate (`activationOpensAt`). +∞ without a window.
 */
export function windowOpensAt(lock: Pick<Lock, 'writeWindowAt'>, skewSeconds: number): number {
  return lock.writeWindowAt === undefined
    ? Number.POSITIVE_INFINITY
    : ms(lock.writeWindowAt) - skewSeconds * SECOND;
}

/**
 * The holder's first instant to activate the write lock inside the window: `writeWindowAt` plus the skew
 * margin, when every clock reads at least `writeWindowAt` and so every reader reads through. +∞ without
 * a window.
 */
export function activationOpensAt(lock: Pick<Lock, 'writeWindowAt'>, skewSeconds: number): number {
  return lock.writeWindowAt === undefined
    ? Number.POSITIVE_INFINITY
    : ms(lock.writeWindowAt) + skewSeconds * SECOND;
}

/**
 * The holder's last instant to activate: `writeWindowUntil` less the skew margin, so an activation never
 * lands on a clock that may already have left the window (readers leave it from `writeWindowUntil` + 2
 * skew, `windowDeadInWriteRegion`). −∞ without a window.
 */
export function activationClosesAt(lock: Pick<Lock, 'writeWindowUntil'>, skewSeconds: number): number {
  return lock.writeWindowUntil === undefined
    ? Number.NEGATIVE_INFINITY
    : ms(lock.writeWindowUntil) - skewSeconds * SECOND;
}

/**
 * Seen by a copy of an announced lock read from the write region at `fetchedAt`: nothing on it can
 * tighten without a new announcement, so the reader may leave the write window (design §1.4, case 3).
 * The parent is dead (`deadInWriteRegion`); or the write lock's lease ended more than twice the skew
 * margin ago (no renewal or swap can still be decided, `beforeEnd`); or, in the hard-delete phase, there
 * is no window or it closed more than twice the margin ago (no activation can still land,
 * `activationClosesAt`). The margins are doubled for the reason `deadInWriteRegion` gives.
 */
export function windowDeadInWriteRegion(lock: Lock, fetchedAt: number, skewSeconds: number): boolean {
  if (deadInWriteRegion(lock, fetchedAt, skewSeconds)) return true;
  const margin = 2 * skewSeconds * SECOND;
  if (lock.phase === 'write') return ms(lock.writeExpiresAt) + margin <= fetchedAt;
  if (lock.writeWindowUntil === undefined) return true;
  return ms(lock.writeWindowUntil) + margin <= fetchedAt;
}

/**
 * Whether a renewal at `now` of an announced lock's lease ending at `end` reaches every reader before
 * its old end: at least the announcement lead `L` left, so a reader whose copy still shows the old end
 * holds the new one before it would stop enforcing (design §3.7).
 */
export function renewalLeadOk(end: string, now: number, leadSeconds: number): boolean {
  return ms(end) - now >= leadSeconds * SECOND;
}

/**
 * When the holder of an announced pre-lock may rely on its hard-delete lock (start the bulk copy, less
 * the in-flight grace it adds): `startsAt` plus the skew margin, when every reader's clock has passed
 * `startsAt`. The lead already holds the convergence delay and the buffer, so nothing is added after it.
 */
export function announcedWaitUntil(grant: Pick<Lock, 'startsAt'>, skewSeconds: number): number {
  return startedEverywhereAt(grant, skewSeconds);
}
