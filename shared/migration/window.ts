import { IANAZone } from 'luxon';
import { RouteLockError } from '../core/errors';
import type { CutoverWindow } from './types';

/**
 * Cutover windows (docs/design.md §6.10): when a migration may hold its write lock. The one
 * home of the rule: the request's validation, the dry run and the workflow all ask it. Pure functions of
 * (window, instant); instants in epoch ms. luxon answers what an IANA zone's offset is at an instant;
 * the wall-clock arithmetic below is over those offsets, so DST gaps and repeats follow one rule:
 *
 * - a daily time `HH:MM` on a local date is the first instant the zone's clock reads at least HH:MM that
 *   day: in a gap (spring forward) that is the end of the gap, in a repeated hour (fall back) its first
 *   occurrence. So `02:30` in Europe/Berlin on the spring-forward day is 03:00 CEST, and a `01:00`–`03:00`
 *   window on the fall-back day lasts three hours.
 * - one daily interval per local date: from its `start` to the first `end` after it (the next day's when
 *   `end` is before `start`: the window spans midnight).
 */

export interface WindowIssue {
  /** The field at fault, under `window` (`notAfter`, `daily.timeZone`). */
  field: string;
  message: string;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$/;
const HHMM = /^([01]\d|2[0-3]):([0-5]\d)$/;

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
/** How far ahead a window without `notAfter` is searched: a year and a bit covers every DST day. */
const SEARCH_DAYS = 400;

/** An RFC 3339 date-time (a real calendar date, an offset), in epoch ms; NaN when it is not one. */
export function rfc3339Ms(value: string): number {
  const m = RFC3339.exec(value);
  if (!m) return NaN;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const date = new Date(Date.UTC(year, month - 1, day));
  const realDate = date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
  const offsetOk = m[9] === undefined || (Number(m[9]) <= 23 && Number(m[10]) <= 59);
  if (!realDate || hour > 23 || minute > 59 || second > 59 || !offsetOk) return NaN;
  return Date.parse(value.toUpperCase());
}

const minutesOf = (hhmm: string): number => {
  const m = HHMM.exec(hhmm);
  return m ? Number(m[1]) * 60 + Number(m[2]) : NaN;
};

/**
 * What is wrong with `window` at `now`, naming the field; undefined when nothing is. `now` =
 * -Infinity checks the window's form alone (request validation, which has no clock of its own).
 */
export function windowIssue(window: CutoverWindow, now: number): WindowIssue | undefined {
  const notBefore = window.notBefore === undefined ? undefined : rfc3339Ms(window.notBefore);
  const notAfter = window.notAfter === undefined ? undefined : rfc3339Ms(window.notAfter);
  const instant = 'must be an RFC 3339 date-time with an offset (2026-12-01T22:00:00Z)';
  if (notBefore !== undefined && Number.isNaN(notBefore)) return { field: 'notBefore', message: instant };
  if (notAfter !== undefined && Number.isNaN(notAfter)) return { field: 'notAfter', message: instant };
  if (notBefore !== undefined && notAfter !== undefined && notAfter <= notBefore)
    return { field: 'notAfter', message: 'must be after notBefore' };
  if (notAfter !== undefined && notAfter <= now)
    return { field: 'notAfter', message: `is already past (${new Date(now).toISOString()})` };
  const daily = window.daily;
  if (daily !== undefined) {
    const start = minutesOf(daily.start);
    const end = minutesOf(daily.end);
    const hhmm = 'must be a local time HH:MM (00:00 to 23:59)';
    if (Number.isNaN(start)) return { field: 'daily.start', message: hhmm };
    if (Number.isNaN(end)) return { field: 'daily.end', message: hhmm };
    if (start === end)
      return { field: 'daily.end', message: 'must differ from start (an end before start spans midnight)' };
    if (!IANAZone.isValidZone(daily.timeZone))
      return { field: 'daily.timeZone', message: `unknown IANA time zone ${JSON.stringify(daily.timeZone)}` };
  }
  return undefined;
}

/** Whether two windows allow the same instants (instants compared as instants, the daily span as given). */
export function sameWindow(a: CutoverWindow | undefined, b: CutoverWindow): boolean {
  if (a === undefined) return false;
  const instant = (v: string | undefined) => (v === undefined ? undefined : rfc3339Ms(v));
  const daily = (w: CutoverWindow) =>
    w.daily === undefined ? undefined : `${w.daily.start}-${w.daily.end} ${w.daily.timeZone}`;
  return (
    instant(a.notBefore) === instant(b.notBefore) &&
    instant(a.notAfter) === instant(b.notAfter) &&
    daily(a) === daily(b)
  );
}

/** `window.<field>: <message>` for a bad window, or undefined. */
export function windowProblem(window: CutoverWindow, now: number): string | undefined {
  const issue = windowIssue(window, now);
  return issue && `window.${issue.field}: ${issue.message}`;
}

/** A starter's check (both runners, the queue, a campaign's members): a bad window is a 400. */
export function checkedWindow(window: CutoverWindow | undefined, now: number): CutoverWindow | undefined {
  if (window === undefined) return undefined;
  const problem = windowProblem(window, now);
  if (problem !== undefined) throw new RouteLockError('BadRequest', `${problem}.`);
  return window;
}

/**
 * The first instant on local date (y, m, d) at which `zone`'s clock reads at least `minutes` past
 * midnight. `wall` is that reading as if it were UTC; an instant's reading is instant + offset.
 */
function firstReadingAt(zone: IANAZone, wall: number): number {
  // the offsets in force around the date (a zone changes offset at most once in a day's span here)
  const offsets = new Set([zone.offset(wall - DAY), zone.offset(wall + DAY)]);
  const exact = [...offsets]
    .map((o) => wall - o * MINUTE)
    .filter((t) => zone.offset(t) * MINUTE === wall - t)
    .sort((a, b) => a - b);
  if (exact.length > 0) return exact[0] as number; // a repeated reading: its first occurrence
  // In a gap: the clock jumps past the reading at the transition; find it (the earliest instant whose
  // reading is at or past `wall`) between the two candidate instants.
  let lo = wall - Math.max(...offsets) * MINUTE; // reads before `wall`
  let hi = wall - Math.min(...offsets) * MINUTE; // reads past it
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (mid + zone.offset(mid) * MINUTE >= wall) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** The daily interval that starts on the local date `date` (a UTC midnight standing for it). */
function dailyInterval(
  zone: IANAZone,
  date: number,
  start: number,
  end: number,
): { opens: number; closes: number } {
  const opens = firstReadingAt(zone, date + start * MINUTE);
  const closes = firstReadingAt(zone, date + (end < start ? DAY : 0) + end * MINUTE);
  return { opens, closes };
}

/**
 * The earliest t ≥ `from` at which a write lock held for `holdMs` lies wholly inside `window`:
 * notBefore ≤ t, t + holdMs ≤ notAfter, and with `daily` both ends inside one daily interval. Null
 * when there is none: the window is over, or no daily interval left is as long as `holdMs`. The window
 * is assumed valid (windowIssue); a bad one has no slot.
 */
export function nextWriteSlot(window: CutoverWindow, from: number, holdMs: number): number | null {
  if (windowIssue(window, Number.NEGATIVE_INFINITY) !== undefined) return null;
  const lo = Math.max(from, window.notBefore === undefined ? -Infinity : rfc3339Ms(window.notBefore));
  const hi = window.notAfter === undefined ? Infinity : rfc3339Ms(window.notAfter);
  const daily = window.daily;
  if (daily === undefined) return lo + holdMs <= hi ? lo : null;
  const zone = IANAZone.create(daily.timeZone);
  const start = minutesOf(daily.start);
  const end = minutesOf(daily.end);
  // the local date at `lo`, as a UTC midnight; from the day before (its interval may span midnight)
  const localNow = lo + zone.offset(lo) * MINUTE;
  const today = localNow - (((localNow % DAY) + DAY) % DAY);
  for (let k = -1; k <= SEARCH_DAYS; k += 1) {
    const { opens, closes } = dailyInterval(zone, today + k * DAY, start, end);
    if (opens >= hi) return null;
    const t = Math.max(lo, opens);
    if (t + holdMs <= Math.min(closes, hi)) return t;
  }
  return null;
}
