import { worstCaseConfirmActions } from './confirm';
import { type CopyShape, worstCaseCopyActions } from './copy';
import { worstCaseNoticeActions } from './notify';
import { worstCaseWindowActions } from './window';

/**
 * The one home of an attempt's worst-case history (docs/design.md §6.5): the migration's settings
 * (settings.ts) refuse those whose attempt could pass the Durable extension's action cap, and the
 * workflow (attemptActionsBound) leaves room for one more attempt only when a whole one still fits.
 * Plain numbers, so the settings can ask before a Config exists.
 */
export interface AttemptShape extends CopyShape {
  /** Transient answers asked again (ROUTELOCK_RETRY_ATTEMPTS): the confirmation's and notices' rounds. */
  retryAttempts: number;
  /**
   * Announced locks (ROUTELOCK_ANNOUNCED_LOCKS): each write-lock attempt adds an announcement, its wait
   * and the activation's wait-out (ANNOUNCED_ATTEMPT_STEP_ACTIONS, and the waits' rounds in
   * worstCaseWindowActions).
   */
  announcedLocks?: boolean | undefined;
}

/** Steps of an attempt besides its copies: pre-lock, convergence, escalations, swap, release, status. */
export const ATTEMPT_STEP_ACTIONS = 200;

/**
 * What announced locks add per write-lock attempt besides the waits' renewal rounds: the announcement
 * and its status, and the activation's ConvergencePending waited out (a timer and an escalation per
 * retry, at most the retry attempts; counted here as the few the runner's clock needs).
 */
export const ANNOUNCED_ATTEMPT_STEP_ACTIONS = 4;

/** Confirmation and end notices at their worst (workflow/confirm.ts, workflow/notify.ts). */
export const confirmAndNoticeActions = (participants: number, retryAttempts: number): number =>
  worstCaseConfirmActions(retryAttempts) + worstCaseNoticeActions(participants, retryAttempts);

/** Each term is its own phase's: the copies and verify rounds, the window's waits, confirm + notices. */
export function worstCaseAttemptActions(a: AttemptShape): number {
  return (
    ATTEMPT_STEP_ACTIONS +
    (a.announcedLocks ? a.deltaAttempts * ANNOUNCED_ATTEMPT_STEP_ACTIONS : 0) +
    worstCaseCopyActions(a) +
    // waiting for a cutover window (workflow/window.ts)
    worstCaseWindowActions(a) +
    // the swap confirmed on a replica (re-driven at worst), then the end notices
    confirmAndNoticeActions(a.participants, a.retryAttempts)
  );
}
