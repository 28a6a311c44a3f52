import type { Config, Participant } from '../config';
import { type Location, sameLocation } from '../lock/document';
import { convergenceWaitUntil } from '../lock/state';
import type { RouteView } from '../lock/view';
import type {
  ActivityInputs,
  ActivityName,
  ActivityOutputs,
  ActivityResult,
  CopyStep,
  HttpResult,
  MigrationInput,
  MigrationSettings,
  MigrationState,
  MigrationStatus,
  RaceResult,
  SeededGrant,
  Step,
  TaskStep,
} from './types';
import { pendingStatus } from './types';

/**
 * The migration, written once (DESIGN §6). A generator over `Step`s: it never reads a clock, draws a
 * random number or does I/O; the runner performs each step and sends its result back. Durable Functions
 * replays it from history; the in-process runner replays it from its journal.
 *
 * 1. pre-lock. Its token and Idempotency-Key derive from the input's random `lock` seed under a key
 *    only the activities hold, so a retried activity replays its own lock and no one else can
 * 2. re-read the route; already at the target → release, NoOp
 * 3. durable timer until max(startsAt, acquiredAt + replication bound) + safety buffer
 * 4. confirm the lock is visible on the read path
 * 5. hard-delete lock; every participant's bulkCopy, renewing the hard-delete lease on a timer
 * 6. write lock; deltaCopy, renewing the write lock; swap. A delta that overruns the write budget:
 *    release the write lock (writes resume), wait, try again; after the last attempt, abort
 * 7. any failure: release with the token; Failed with the reason. Never a partial cutover: the swap is
 *    one conditional write.
 */

export type Workflow = Generator<Step, MigrationStatus, unknown>;

export function migrationSettings(config: Config): MigrationSettings {
  return {
    replicationBoundSeconds: config.timing.replicationBoundSeconds,
    clockSkewSeconds: config.timing.clockSkewSeconds,
    safetyBufferSeconds: config.timing.safetyBufferSeconds,
    hardDeleteLeaseSeconds: config.timing.hardDeleteLeaseSeconds,
    writeLeaseSeconds: config.timing.writeLeaseSeconds,
    writeBudgetSeconds: config.timing.writeBudgetSeconds,
    deltaAttempts: config.migration.deltaAttempts,
    deltaRetryDelaySeconds: config.migration.deltaRetryDelaySeconds,
    inFlightGraceSeconds: config.migration.inFlightGraceSeconds,
    retryAttempts: config.migration.retryAttempts,
    retryIntervalSeconds: config.migration.retryIntervalSeconds,
    participants: config.migration.participants,
  };
}

/** Renew a phase lock a few times per lease, so one lost renewal never lets it lapse. */
export const renewEveryMs = (leaseSeconds: number): number =>
  Math.max(1000, Math.floor((leaseSeconds * 1000) / 3));

class MigrationAbort extends Error {
  constructor(
    readonly state: MigrationState,
    message: string,
  ) {
    super(message);
  }
}

function* step<T>(value: Step): Generator<Step, T, unknown> {
  return (yield value) as T;
}

function* activity<K extends ActivityName>(
  name: K,
  input: ActivityInputs[K],
): Generator<Step, ActivityResult<ActivityOutputs[K]>, unknown> {
  return yield* step<ActivityResult<ActivityOutputs[K]>>({ kind: 'activity', name, input });
}

function* now(): Generator<Step, number, unknown> {
  return yield* step<number>({ kind: 'now' });
}

function* sleepUntil(fireAt: number): Generator<Step, void, unknown> {
  yield* step({ kind: 'timer', fireAt });
}

function* sleep(ms: number): Generator<Step, void, unknown> {
  yield* sleepUntil((yield* now()) + ms);
}

/**
 * An activity whose answer may be `ConvergencePending` (with Retry-After), asked again after that wait,
 * a few times at most: a pre-lock just after a swap, or the first escalation on a clock behind.
 */
function* waitingOutConvergence<K extends ActivityName>(
  name: K,
  input: ActivityInputs[K],
  s: MigrationSettings,
): Generator<Step, ActivityResult<ActivityOutputs[K]>, unknown> {
  let result = yield* activity(name, input);
  for (
    let attempt = 1;
    !result.ok && result.code === 'ConvergencePending' && attempt < s.retryAttempts;
    attempt += 1
  ) {
    yield* sleep((result.retryAfterSeconds ?? s.retryIntervalSeconds) * 1000);
    result = yield* activity(name, input);
  }
  return result;
}

function participantCall(
  input: MigrationInput,
  from: Location,
  participant: Participant,
  copy: CopyStep,
  attempt: number,
): TaskStep {
  return {
    kind: 'http',
    call: {
      method: 'POST',
      url: participant.url,
      // The runner calls with a managed-identity token for it; no credential is in the step itself.
      ...(participant.audience === undefined ? {} : { audience: participant.audience }),
      body: {
        migrationId: input.migrationId,
        resourceId: input.resourceId,
        from,
        to: input.target,
        step: copy,
        attempt,
      },
    },
  };
}

export function* migrationWorkflow(input: MigrationInput): Workflow {
  const s = input.settings;
  const { resourceId, migrationId, lock } = input;
  const status: MigrationStatus = { ...pendingStatus(input), status: 'Running' };
  function* publish(patch: Partial<MigrationStatus> = {}): Generator<Step, MigrationStatus, unknown> {
    Object.assign(status, patch);
    const snapshot = structuredClone(status);
    yield* step({ kind: 'status', status: snapshot });
    return snapshot;
  }
  yield* publish();

  // 1. pre-lock. A swap moments ago (ConvergencePending) is waited out, a few times at most. A store
  // that stays down through every retry fails the migration here, never leaving it unfinished.
  const prelockRequest = { resourceId, migrationId, owner: input.instanceId, target: input.target, lock };
  let pre: ActivityResult<SeededGrant>;
  try {
    pre = yield* waitingOutConvergence('prelock', prelockRequest, s);
  } catch (error) {
    // A timed-out pre-lock may have committed unseen, and would hold the resource for its whole lease.
    // If the write region shows this migration's pre-lock, release it: its token derives from the seed.
    let left = 'no lock is held by this migration';
    try {
      const seen = yield* activity('readRoute', { resourceId, from: 'writeRegion' });
      if (seen.ok && seen.value.lock?.migrationId === migrationId) {
        left = 'its pre-lock committed unseen and could not be released; the lease frees it';
        const released = yield* activity('release', { resourceId, lock });
        if (released.ok) left = 'its pre-lock, committed unseen, was released';
      } else if (!seen.ok) {
        left = 'a pre-lock that committed unseen lapses with its lease';
      }
    } catch {
      left = 'a pre-lock that committed unseen lapses with its lease';
    }
    return yield* publish({
      status: 'Failed',
      error: `prelock: ${error instanceof Error ? error.message : String(error)}; ${left}`,
    });
  }
  if (!pre.ok) {
    const state: MigrationState =
      pre.code === 'Locked' || pre.code === 'ConvergencePending'
        ? 'Conflict'
        : pre.code === 'AlreadyAtTarget'
          ? 'NoOp'
          : 'Failed';
    return yield* publish({ status: state, error: `${pre.code}: ${pre.message}` });
  }
  let etag = pre.value.etag;
  yield* publish({ phase: 'prelock', timeline: { ...status.timeline, prelockAt: pre.value.acquiredAt } });

  /** Requests that resolved the route just before a lock committed land before any copy starts. */
  const inFlightGrace = function* () {
    if (s.inFlightGraceSeconds && s.participants.length > 0) yield* sleep(s.inFlightGraceSeconds * 1000);
  };

  const renewLock = function* (phase: 'hardDelete' | 'write') {
    const renewed = yield* activity('renew', { resourceId, lock, phase, ifMatch: etag });
    if (renewed.ok) etag = renewed.value.etag;
    return renewed;
  };

  /**
   * Run one copy step at every participant at once, in rounds raced against a renewal timer. When the
   * timer wins, the phase lock is renewed and the participants still copying are asked again: the
   * participant contract makes `POST` idempotent per (migration, step, attempt), answering 202 while
   * the job runs. When the lock can be renewed no further (the write budget, the parent's cap), the
   * copy may still finish before the lock's own end; a copy still running then has overrun. 5xx and
   * transport failures are retried with backoff, up to the retry attempts.
   */
  const copyAll = function* (
    copy: CopyStep,
    copyAttempt: number,
    phase: 'hardDelete' | 'write',
    grant: SeededGrant,
    leaseSeconds: number,
    from: Location,
  ): Generator<Step, ActivityResult<null>, unknown> {
    let pending = s.participants.map((p) => ({ ...p, attempt: 1 }));
    // The holder's own end of the phase: its lease less the clock-skew margin, after which the rules
    // refuse the renewal or the swap (another clock may already see the phase over).
    const margin = (s.clockSkewSeconds ?? 0) * 1000;
    let phaseEndsAt = Date.parse(grant.phaseExpiresAt) - margin;
    let renewable = true;
    while (pending.length > 0) {
      const deadline = renewable
        ? Math.min((yield* now()) + renewEveryMs(leaseSeconds), phaseEndsAt)
        : phaseEndsAt;
      const race = yield* step<RaceResult>({
        kind: 'race',
        tasks: pending.map((p) => participantCall(input, from, p, copy, copyAttempt)),
        deadline,
      });
      const next: typeof pending = [];
      let backoffMs = 0;
      for (const [i, participant] of pending.entries()) {
        const result = race.settled[i] as HttpResult | null | undefined;
        if (result == null) {
          next.push(participant); // still copying
        } else if (result.status >= 200 && result.status < 300) {
          continue;
        } else if ((result.status === 0 || result.status >= 500) && participant.attempt < s.retryAttempts) {
          backoffMs = Math.max(backoffMs, s.retryIntervalSeconds * 1000 * 2 ** (participant.attempt - 1));
          next.push({ ...participant, attempt: participant.attempt + 1 });
        } else {
          return {
            ok: false,
            code: 'ParticipantFailed',
            message: `participant ${participant.name} answered ${result.status || 'nothing'} to ${copy} (attempt ${participant.attempt})`,
          };
        }
      }
      pending = next;
      if (race.deadlineFirst && pending.length > 0) {
        if (deadline >= phaseEndsAt) {
          return {
            ok: false,
            code: 'LockExpired',
            message: `the ${phase} lock ran out at ${new Date(phaseEndsAt).toISOString()} with ${copy} still running`,
          };
        }
        const renewed = yield* renewLock(phase);
        if (renewed.ok) phaseEndsAt = Date.parse(renewed.value.phaseExpiresAt) - margin;
        else if (renewed.code === 'FreezeBudgetExceeded' || renewed.code === 'MaxLeaseReached')
          renewable = false;
        else return renewed;
      } else if (backoffMs > 0) {
        yield* sleep(backoffMs);
      }
    }
    return { ok: true, value: null };
  };

  try {
    // 2. re-read the route: a stale location read upstream may have sent us a resource already moved.
    const route = expect(yield* activity('readRoute', { resourceId, from: 'writeRegion' }), 'read the route');
    if (sameLocation(route.location, input.target)) {
      expect(yield* activity('release', { resourceId, lock }), 'release');
      return yield* publish({
        status: 'NoOp',
        phase: 'released',
        error: 'the resource already sits at the target',
      });
    }
    const from = route.location;

    // 3. wait out cache convergence on a durable timer.
    yield* publish({ phase: 'converging' });
    yield* sleepUntil(convergenceWaitUntil(pre.value, s));

    // 4. the lock must be visible where services look before anything is restricted.
    let visible: RouteView | null = null;
    for (let attempt = 1; attempt <= s.retryAttempts; attempt += 1) {
      const seen = expect(yield* activity('readRoute', { resourceId, from: 'readPath' }), 'read the route');
      if (seen.lock?.migrationId === migrationId) {
        visible = seen;
        break;
      }
      yield* sleep(s.retryIntervalSeconds * 1000);
    }
    if (!visible) throw new MigrationAbort('Failed', 'the pre-lock never became visible on the read path');

    // 5. hard-delete lock and the bulk copy.
    // An activity whose clock is behind the runner's may find the lock not yet started on every clock
    // (ConvergencePending, with Retry-After): wait that out, a few times at most.
    const hd = expect(
      yield* waitingOutConvergence('escalate', { resourceId, lock, phase: 'hardDelete', ifMatch: etag }, s),
      'escalate to hardDelete',
    );
    etag = hd.etag;
    yield* publish({
      phase: 'hardDelete',
      timeline: { ...status.timeline, hardDeleteAt: hd.hardDeleteAt ?? null },
    });
    yield* inFlightGrace();
    const bulk = yield* copyAll('bulkCopy', 1, 'hardDelete', hd, s.hardDeleteLeaseSeconds, from);
    if (!bulk.ok) throw new MigrationAbort('Failed', `bulkCopy: ${bulk.code}: ${bulk.message}`);

    // 6. write lock, delta copy, swap, within the write budget.
    let lastOverrun = '';
    for (let attempt = 1; attempt <= s.deltaAttempts; attempt += 1) {
      if (attempt > 1) {
        // The overrun attempts ran on the hard-delete lease; renew it before the next write lock, or a
        // short lease (the dev profile's) lapses between attempts and the copy could never finish.
        const renewed = yield* renewLock('hardDelete');
        if (!renewed.ok && renewed.code !== 'MaxLeaseReached')
          throw new MigrationAbort(
            'Failed',
            `renew the hard-delete lock: ${renewed.code}: ${renewed.message}`,
          );
      }
      const w = expect(
        yield* activity('escalate', { resourceId, lock, phase: 'write', ifMatch: etag }),
        'escalate to write',
      );
      etag = w.etag;
      yield* publish({
        phase: 'write',
        deltaAttempts: attempt,
        timeline: { ...status.timeline, writeAt: w.writeAt ?? null },
      });
      yield* inFlightGrace();
      const delta = yield* copyAll(
        'deltaCopy',
        attempt,
        'write',
        w,
        Math.min(s.writeLeaseSeconds, s.writeBudgetSeconds),
        from,
      );
      if (delta.ok) {
        const swapped = yield* activity('swap', { resourceId, lock, ifMatch: etag, writeAt: w.writeAt });
        if (swapped.ok) {
          return yield* publish({
            status: 'Completed',
            phase: 'swapped',
            timeline: { ...status.timeline, swappedAt: swapped.value.swappedAt },
          });
        }
        if (swapped.code !== 'InvalidTransition')
          throw new MigrationAbort('Failed', `swap: ${swapped.code}: ${swapped.message}`);
        lastOverrun = `swap: ${swapped.message}`; // the write lock lapsed before the swap
      } else if (delta.code === 'LockExpired') {
        lastOverrun = `deltaCopy: ${delta.message}`;
      } else {
        throw new MigrationAbort('Failed', `deltaCopy: ${delta.code}: ${delta.message}`);
      }
      // The delta overran: let writes resume (the hard-delete lock stays), then try again.
      const down = expect(
        yield* activity('release', { resourceId, lock, phase: 'write', ifMatch: etag, writeAt: w.writeAt }),
        'release the write lock',
      );
      etag = down.etag;
      yield* publish({ phase: 'hardDelete' });
      if (attempt < s.deltaAttempts) yield* sleep(s.deltaRetryDelaySeconds * 1000);
    }
    throw new MigrationAbort(
      'Failed',
      `write budget exceeded on all ${s.deltaAttempts} attempts (${lastOverrun})`,
    );
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    const state = error instanceof MigrationAbort ? error.state : 'Failed';
    let released = 'released';
    try {
      const rel = yield* activity('release', { resourceId, lock });
      if (!rel.ok && rel.code !== 'LockExpired')
        released = `release refused (${rel.code}); the lease will free it`;
    } catch (releaseError) {
      released = `release failed (${(releaseError as Error).message}); the lease will free it`;
    }
    return yield* publish({ status: state, phase: 'released', error: `${reason}; lock ${released}` });
  }
}

function expect<T>(result: ActivityResult<T>, what: string): T {
  if (!result.ok) throw new MigrationAbort('Failed', `${what}: ${result.code}: ${result.message}`);
  return result.value;
}
