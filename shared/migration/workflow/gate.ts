import { type Location, sameLocation } from '../../core/lock/document';
import type { RouteView } from '../../core/lock/view';
import type { MigrationInput, MigrationSettings, Step } from '../types';
import { lockGone, releaseReason } from './cleanUp';
import { confirmDelayMs } from './confirm';
import { activity, now, readRouteOrNull, sleep, sleepUntil } from './steps';

/**
 * The gate between attempts (docs/design.md §6.3): before attempt n+1, or before a cancel is called
 * done, the write region must show no live lock of this migration (attempt n's, whose release failed
 * or went unanswered). Released again with attempt n's seed, or waited out to the end of its lease; a
 * route already at the target ends the migration (after a swap whose answer was lost, Completed: never
 * a second attempt after a swap). Its waits do not end on a cancel: the lease bounds them.
 */

/** The gate's verdict. */
export type Gate =
  /** `sawSwap`: the write region showed the swap, gone since (a failover dropped it). */
  | { kind: 'free'; sawSwap?: true }
  | {
      kind: 'ended';
      outcome: 'Completed' | 'NoOp' | 'Failed';
      reason: string;
      /** Completed: the retired-source window's end, while the route shows one (the completed notice). */
      cleanUpSourceAfter?: string;
      /** Completed in the write region, never shown on a replica: no end notice. */
      unconfirmed?: true;
    };

/** What one round of the gate asks: the attempt's failure, the round, and what earlier rounds saw. */
interface GateAsk {
  /** The attempt's swap answer was lost: the swap may have landed. */
  readonly swapUnknown: boolean;
  /** Why the attempt ended: its lock, released again here, records it. */
  readonly failure: string;
  readonly round: number;
  readonly rounds: number;
  /** An earlier round saw the swap in the write region. */
  readonly sawSwap: boolean;
}

/** One round: the gate's verdict, or look again (and whether the write region showed the swap). */
type GateRound = Gate | { kind: 'again'; sawSwap: boolean };

const again = (sawSwap: boolean): GateRound => ({ kind: 'again', sawSwap });

const backoffMs = (s: MigrationSettings, round: number): number =>
  s.retryIntervalSeconds * 1000 * 2 ** (round - 1);

const atTarget = (location: Location, target: Location): boolean => sameLocation(location, target);

export function* previousLockGone(
  input: MigrationInput,
  swapUnknown: boolean,
  failure: string,
): Generator<Step, Gate, unknown> {
  // The last round only looks: the one before it waited out the lease.
  const rounds = Math.max(2, input.settings.retryAttempts);
  let turn: GateRound = again(false);
  for (let round = 1; round <= rounds && turn.kind === 'again'; round += 1)
    turn = yield* gateRound(input, { swapUnknown, failure, round, rounds, sawSwap: turn.sawSwap });
  return turn.kind === 'again' ? lockNotSeenGone(input, turn.sawSwap) : turn;
}

function* gateRound(input: MigrationInput, ask: GateAsk): Generator<Step, GateRound, unknown> {
  const { resourceId, migrationId, target, settings: s } = input;
  const seen = yield* readRouteOrNull(resourceId, 'writeRegion');
  if (seen === null) {
    yield* sleep(backoffMs(s, ask.round));
    return again(ask.sawSwap);
  }
  if (!seen.ok)
    return { kind: 'ended', outcome: 'Failed', reason: `read the route: ${seen.code}: ${seen.message}` };
  if (atTarget(seen.value.location, target)) return yield* routeAtTarget(input, seen.value, ask);
  const lock = seen.value.lock;
  if (!lock || lock.migrationId !== migrationId)
    return { kind: 'free', ...(ask.sawSwap ? { sawSwap: true as const } : {}) };
  if (yield* releasedAgain(input, ask.failure)) return again(ask.sawSwap);
  // the store is still out, or the release refused: try again after a backoff, at last wait out the lease
  if (ask.round < ask.rounds - 1) yield* sleep(backoffMs(s, ask.round));
  else yield* sleepUntil(Date.parse(lock.expiresAt) + ((s.clockSkewSeconds ?? 0) + 1) * 1000);
  return again(ask.sawSwap);
}

/**
 * The write region shows the route at the target. After a swap whose answer was lost it is Completed
 * (and its source cleaned up on the notice) only once a replica shows it after the replication bound,
 * as confirmSwap asks of any swap: the write region's copy alone may be one a failover drops. Not
 * shown yet: look again next round. Otherwise the resource was already there: NoOp.
 */
function* routeAtTarget(
  input: MigrationInput,
  view: RouteView,
  ask: GateAsk,
): Generator<Step, GateRound, unknown> {
  if (!ask.swapUnknown)
    return { kind: 'ended', outcome: 'NoOp', reason: 'the resource already sits at the target' };
  const { resourceId, migrationId, target, settings: s } = input;
  yield* sleepUntil((yield* now()) + confirmDelayMs(s));
  const replica = yield* readRouteOrNull(resourceId, 'replica');
  const shown =
    replica?.ok === true &&
    atTarget(replica.value.location, target) &&
    replica.value.lock?.migrationId !== migrationId;
  if (!shown) return again(true);
  return {
    kind: 'ended',
    outcome: 'Completed',
    reason: `attempt ${input.lock.attempt ?? 1}'s swap landed; its answer was lost`,
    ...(view.secondary?.role === 'retiredSource'
      ? { cleanUpSourceAfter: view.secondary.writesBlockedUntil }
      : {}),
  };
}

/** Release attempt n's lock left behind, with its seed: whether it is gone now. */
function* releasedAgain(input: MigrationInput, failure: string): Generator<Step, boolean, unknown> {
  const attempt = input.lock.attempt ?? 1;
  try {
    const released = yield* activity('release', {
      resourceId: input.resourceId,
      lock: input.lock,
      reason: releaseReason(`attempt ${attempt} ended, its lock left behind: ${failure}`),
    });
    return lockGone(released);
  } catch {
    return false;
  }
}

/**
 * Every round done without seeing the lock gone. The write region showed the swap but no replica
 * confirmed it: never Failed (its notice would have the live target dropped), and no completed notice
 * either (the source must stay).
 */
function lockNotSeenGone(input: MigrationInput, sawSwap: boolean): Gate {
  const attempt = input.lock.attempt ?? 1;
  if (sawSwap)
    return {
      kind: 'ended',
      outcome: 'Completed',
      reason: `attempt ${attempt}'s swap landed in the write region; its answer was lost and no replica showed it: no completed notice`,
      unconfirmed: true,
    };
  return {
    kind: 'ended',
    outcome: 'Failed',
    reason: `could not see attempt ${attempt}'s lock gone from the write region; no further attempt`,
  };
}
