import { holderEndsAt } from '../../core/lock/state';
import type { MigrationInput, MigrationSettings, Step } from '../types';
import { nextWriteSlot } from '../window';
import { takesAnnouncedLocks } from './announced';
import { renewEveryMs, renewLock } from './copy';
import { type Ending, type Moving, type PhaseResult, failed, next, refused } from './state';
import { now, publish, sleepUntil } from './steps';

/**
 * Cutover windows in the workflow (docs/design.md §6.10). The pre-lock and the
 * copies run whenever; the write lock is only taken at a slot where the whole write budget fits in
 * `input.window` (nextWriteSlot, shared/migration/window.ts). Until then the workflow waits on durable,
 * cancellable timers, renewing the hard-delete lock as during the bulk copy, never past the lock's own
 * cap: a slot the cap cannot reach fails the attempt at once (WindowUnreachable), a window with no slot
 * left fails it (WindowClosed). Both are final (attempts.ts): another attempt would meet them again.
 */

const iso = (ms: number): string => new Date(ms).toISOString();

/** The whole freeze must fit in the window: the write budget is the hold. */
const holdMsOf = (s: MigrationSettings): number => s.writeBudgetSeconds * 1000;

// The reasons lead with their code, as a lock refusal's do (`refused` in state.ts).
const closedReason = (s: MigrationSettings): string =>
  `WindowClosed: the cutover window has no slot left that holds the write budget (${s.writeBudgetSeconds} s)`;

const unreachableReason = (slot: number, s: MigrationSettings, cap: number, whose: string): string =>
  `WindowUnreachable: the cutover window next opens at ${iso(slot)}; the write budget ` +
  `(${s.writeBudgetSeconds} s) from then would end past ${whose} cap (${iso(cap)})`;

/**
 * At an attempt's start, before its pre-lock: a window closed for good, or whose next slot a new lock's
 * cap (now + ROUTELOCK_PRELOCK_MAX_SECONDS, less the clock-skew margin: rules.ts sets maxExpiresAt so)
 * could not reach, fails the attempt before any lock is taken. Null: go on to the pre-lock. Under
 * announced locks the write lock comes two leads after the pre-lock at the earliest (the hard-delete
 * lock's, then the window's: `announcedWriteLockAfterMs`), so the slot is sought from then.
 */
export function* windowShutBeforePrelock(
  input: MigrationInput,
): Generator<Step, { reason: string; code: 'WindowClosed' | 'WindowUnreachable' } | null, unknown> {
  const { window } = input;
  if (window === undefined) return null;
  const s = input.settings;
  const t = yield* now();
  const from = takesAnnouncedLocks(input) ? t + announcedWriteLockAfterMs(s) : t;
  const slot = nextWriteSlot(window, from, holdMsOf(s));
  if (slot === null) return { reason: `${closedReason(s)}; no lock was taken`, code: 'WindowClosed' };
  if (s.prelockMaxSeconds === undefined) return null;
  const cap = t + (s.prelockMaxSeconds - (s.clockSkewSeconds ?? 0)) * 1000;
  if (slot + holdMsOf(s) <= cap) return null;
  return {
    reason: `${unreachableReason(slot, s, cap, "a new lock's")}; no lock was taken`,
    code: 'WindowUnreachable',
  };
}

/**
 * Before each write-lock attempt, holding the hard-delete lock: wait for the window's next slot. Each
 * round renews the hard-delete lock (its answer carries the cap, `maxExpiresAt`), then sleeps at most
 * one renewal period (renewEveryMs of the hard-delete lease) on a cancellable timer. While it waits the
 * status carries `waitingForWindow`; the status once open has the key removed. No window: no step at
 * all.
 */
export function* windowPhase(state: Moving): Generator<Step, PhaseResult<Moving>, unknown> {
  return yield* slotPhase(state, 0);
}

/**
 * The earliest write lock after an announced pre-lock, with a bulk copy of no length: the lead to the
 * hard-delete lock, the skew margin and the in-flight grace to the copy, then the window's lead and
 * margin (2L + 2S + G).
 */
export const announcedWriteLockAfterMs = (s: MigrationSettings): number =>
  2 * announcementLeadMs(s) + (s.inFlightGraceSeconds ?? 0) * 1000;

/** A slot reached: the state, and the slot's start (absent: no window). */
export type Slotted = { kind: 'next'; state: Moving; slot?: number } | Ending;

/**
 * The same wait for an announced lock: its write window is announced a lead L before the window opens
 * and the write lock taken the skew margin after, so the slot is sought from now + L + S and the wait
 * ends L + S before it (design §4, cutover windows). Answers the slot, which the announcement asks for
 * (less the skew margin) so the write lock is taken at the slot itself.
 */
export function* announcedWindowPhase(state: Moving): Generator<Step, Slotted, unknown> {
  return yield* slotPhase(state, announcementLeadMs(state.input.settings));
}

/** How long before a slot an announced lock's window is announced: the lead and the skew margin. */
export const announcementLeadMs = (s: MigrationSettings): number =>
  ((s.announceLeadSeconds ?? 0) + (s.clockSkewSeconds ?? 0)) * 1000;

/**
 * The wait, `leadMs` ahead of the slot (0: until the slot itself). The slot is sought from now +
 * `leadMs`, so the write lock taken that long after the wait ends still falls at a slot.
 */
function* slotPhase(state: Moving, leadMs: number): Generator<Step, Slotted, unknown> {
  const { window } = state.input;
  if (window === undefined) return next(state);
  const s = state.input.settings;
  const holdMs = holdMsOf(s);
  let current = state;
  let capEndsAt: number | undefined;
  for (;;) {
    const t = yield* now();
    const slot = nextWriteSlot(window, t + leadMs, holdMs);
    if (slot === null) return failed(notWaiting(current), closedReason(s), 'WindowClosed');
    if (slot - leadMs <= t) return { ...next(yield* opened(current)), ...(leadMs > 0 ? { slot } : {}) };
    const renewed = yield* renewLock(current, 'hardDelete');
    if (renewed.ok) {
      current = { ...current, etag: renewed.value.etag };
      // the holder's own end of the lock: its cap less the clock-skew margin
      capEndsAt = holderEndsAt(renewed.value.maxExpiresAt, s.clockSkewSeconds ?? 0);
    } else if (renewed.code !== 'MaxLeaseReached') {
      return refused(notWaiting(current), 'renew the hard-delete lock', renewed);
    }
    // MaxLeaseReached on the first round: the lease already sits at its cap, which no wait outlasts
    const cap = capEndsAt;
    if (cap === undefined)
      return failed(
        current,
        `WindowUnreachable: the cutover window next opens at ${iso(slot)}; the hard-delete lock already sits at its cap`,
        'WindowUnreachable',
      );
    if (slot + holdMs > cap)
      return failed(
        notWaiting(current),
        unreachableReason(slot, s, cap, "the hard-delete lock's"),
        'WindowUnreachable',
      );
    const nextOpening = iso(slot);
    if (current.status.waitingForWindow?.nextOpening !== nextOpening)
      current = { ...current, status: yield* publish(current.status, { waitingForWindow: { nextOpening } }) };
    yield* sleepUntil(Math.min(slot - leadMs, t + renewEveryMs(s.hardDeleteLeaseSeconds)), current.input);
  }
}

/** The state without `waitingForWindow` on its status: a failure's final status never shows a wait. */
function notWaiting(state: Moving): Moving {
  if (state.status.waitingForWindow === undefined) return state;
  const { waitingForWindow: _waiting, ...status } = state.status;
  return { ...state, status };
}

/** The window is open: publish the status without `waitingForWindow` if it was waiting. */
function* opened(state: Moving): Generator<Step, Moving, unknown> {
  if (state.status.waitingForWindow === undefined) return state;
  const open = notWaiting(state);
  return { ...open, status: yield* publish(open.status) };
}

/**
 * The history actions the waits of one attempt can record (attemptActionsBound's own term): all its
 * waits lie within the hard-delete lock's cap (the pre-lock cap), in rounds of one renewal and one
 * cancellable timer (3 actions) no longer than the renewal period, plus one short round per wait (one
 * before each write-lock attempt; under announced locks two: the cutover window's and the
 * announcement's, workflow/announced.ts).
 */
export function worstCaseWindowActions(t: {
  prelockMaxSeconds: number;
  hardDeleteLeaseSeconds: number;
  deltaAttempts: number;
  announcedLocks?: boolean | undefined;
}): number {
  const shortRounds = (t.announcedLocks ? 2 : 1) * t.deltaAttempts;
  const rounds =
    Math.ceil((t.prelockMaxSeconds * 1000) / renewEveryMs(t.hardDeleteLeaseSeconds)) + shortRounds;
  return 3 * rounds;
}
