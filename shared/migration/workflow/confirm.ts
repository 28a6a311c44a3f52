import { sameLocation } from '../../core/lock/document';
import type { RouteView } from '../../core/lock/view';
import type { ActivityResult, MigrationSettings, Step, SwapOutcome } from '../types';
import { lateCancel } from './cancel';
import { type Ending, type Escalated, endJobOf, failed } from './state';
import { activity, now, publish, readRouteOrNull, sleep, sleepUntil } from './steps';

/**
 * The swap confirmed durable (docs/design.md §6.11). Under bounded
 * staleness a write-region failover may drop writes acknowledged within the replication window, the
 * swap among them. So after the swap the status says `swapped` but stays Running; once the replication
 * bound and the safety buffer have passed, a replica must show the swap (the route at the target, this
 * migration's lock gone) before the migration is Completed and anyone is told the source may go.
 *
 * A replica that does not show it: the write region decides. At the target there, replication is
 * behind: ask again, a few times. Not at the target, the swap is gone: while the write region still
 * holds this attempt's write lock, swap again (the same conditional swap, pinned to `writeAt`) and
 * confirm that one; otherwise the attempt fails with `SwapLost` and the retry policy starts over with a
 * fresh lock (workflow/attempts.ts). A cancel now is too late, as after any swap: its waits do not end
 * on one, and the Completed status records it.
 */
export function* confirmSwap(state: Escalated, swapped: SwapOutcome): Generator<Step, Ending, unknown> {
  const s = state.input.settings;
  let current = state;
  let outcome = swapped;
  for (let swaps = 1; ; swaps += 1) {
    const swappedAt = outcome.swappedAt ?? new Date(yield* now()).toISOString();
    current = {
      ...current,
      status: yield* publish(current.status, {
        phase: 'swapped',
        timeline: { ...current.status.timeline, swappedAt },
      }),
    };
    yield* sleepUntil(Date.parse(swappedAt) + confirmDelayMs(s));
    const seen = yield* replicaVerdict(current);
    // After a swap the write region acknowledged, a refused read settles nothing: the gate between
    // attempts decides on the route (SwapUnknown), never a final failure whose notice drops the target.
    if (seen.kind === 'refused') {
      const { code, message } = seen.result;
      return failed(current, `the swap unconfirmed: read the route: ${code}: ${message}`, 'SwapUnknown');
    }
    if (seen.kind === 'confirmed') {
      const status = yield* publish(current.status, {
        status: 'Completed',
        ...(yield* lateCancel()),
      });
      const job = endJobOf(current);
      const cleanUpSourceAfter = retiredSourceEnd(outcome.view, swappedAt);
      return { kind: 'done', status, ...(job ? { job: { ...job, cleanUpSourceAfter } } : {}) };
    }
    if (seen.kind === 'behind') {
      return failed(
        current,
        `the swap is in the write region but no replica showed it after ${s.retryAttempts} reads`,
        // the gate between attempts reads the route before anything else (never a second swap)
        'SwapUnknown',
      );
    }
    // The swap is gone from the write region: swap again while this attempt's write lock is there.
    const lock = seen.writeRegion.lock;
    const ours = lock?.migrationId === current.input.migrationId && lock.phase === 'write';
    if (!ours || swaps > s.retryAttempts) return failed(current, lostReason(seen.writeRegion), 'SwapLost');
    const again = yield* activity('swap', {
      resourceId: current.input.resourceId,
      lock: current.input.lock,
      ifMatch: seen.writeRegion.etag,
      writeAt: current.grant.writeAt,
    });
    if (!again.ok) {
      return failed(
        current,
        `${lostReason(seen.writeRegion)}; swap again: ${again.code}: ${again.message}`,
        'SwapLost',
      );
    }
    outcome = again.value;
  }
}

/** How long after the swap a replica must show it: the replication bound and the safety buffer. */
export const confirmDelayMs = (s: MigrationSettings): number =>
  (s.replicationBoundSeconds + s.safetyBufferSeconds) * 1000;

/** Confirmation's history actions at their worst (attemptActionsBound's `confirm` term). */
export const worstCaseConfirmActions = (retryAttempts: number): number =>
  // each swap: its status's `now`, the timer, per round a replica and a write-region read and a backoff
  // timer; a cancel check at the end; the swaps again (one activity each)
  (1 + retryAttempts) * (2 + 3 * retryAttempts) + 1 + retryAttempts;

/** When the source may be cleaned up: the retired-source window's end the swap set (its own time, else). */
export function retiredSourceEnd(view: RouteView, swappedAt: string): string {
  const secondary = view.secondary;
  return secondary?.role === 'retiredSource' ? secondary.writesBlockedUntil : swappedAt;
}

/** A route view that shows this migration's swap: at the target, its lock gone. */
export const showsSwap = (view: RouteView, state: Escalated): boolean =>
  sameLocation(view.location, state.input.target) && view.lock?.migrationId !== state.input.migrationId;

type ReplicaVerdict =
  | { kind: 'confirmed' }
  /** The write region has the swap; no replica showed it within the reads allowed. */
  | { kind: 'behind' }
  | { kind: 'lost'; writeRegion: RouteView }
  | { kind: 'refused'; result: Extract<ActivityResult<RouteView>, { ok: false }> };

/** Read a replica, and when it does not show the swap the write region; a few rounds at most. */
function* replicaVerdict(state: Escalated): Generator<Step, ReplicaVerdict, unknown> {
  const { resourceId, settings: s } = state.input;
  for (let round = 1; round <= s.retryAttempts; round += 1) {
    if (round > 1) yield* sleep(s.retryIntervalSeconds * 1000 * 2 ** (round - 2));
    const replica = yield* readRouteOrNull(resourceId, 'replica');
    if (replica && !replica.ok) return { kind: 'refused', result: replica };
    if (replica?.ok && showsSwap(replica.value, state)) return { kind: 'confirmed' };
    const writeRegion = yield* readRouteOrNull(resourceId, 'writeRegion');
    if (writeRegion && !writeRegion.ok) return { kind: 'refused', result: writeRegion };
    // the write region has it: replication is behind (or a read failed), ask again
    if (!writeRegion || showsSwap(writeRegion.value, state)) continue;
    return { kind: 'lost', writeRegion: writeRegion.value };
  }
  return { kind: 'behind' };
}

const lostReason = (view: RouteView): string =>
  `the swap is gone (a write-region failover dropped it): the write region shows the route at ${view.location.region}${view.lock ? ` with a ${view.lock.phase} lock` : ''}`;
