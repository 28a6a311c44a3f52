import type { TimingConfig } from '../core/settings';
import { RouteLockError, isRouteLockError } from '../core/errors';
import type { LockSeed, TokenKeyring } from '../core/security/tokenKeys';
import type { StoredDocument } from '../core/lock/document';
import { unsealedListedCopy } from './listedSeal';
import { routeView } from '../core/lock/view';
import type { Router } from '../core/router';
import type { MigrationRecords } from './store/ports/migrations';
import type { TelemetrySink } from './telemetry/sink';
import { type ParticipantHttpOptions, requestParticipant } from './participantHttp';
import { endedRecordOf, migrationEndedEvent } from './stopped';
import type {
  ActivityInputs,
  ActivityName,
  ActivityOutputs,
  ActivityResult,
  AttemptLockSeed,
  MigrationStatus,
} from './types';

/**
 * The seed of one attempt's lock (workflow version 3): attempt 1 (and every version-1/2 input) uses the
 * migration's seed as it is; attempt n > 1 a nonce derived from it and n, so each attempt takes a fresh
 * lock with its own token and Idempotency-Key, and a replayed activity of attempt n still finds its own.
 * Derived here, where the key ring is: the workflow's state holds only the seed and the attempt number.
 */
export function attemptSeed(seed: AttemptLockSeed): LockSeed {
  const attempt = seed.attempt ?? 1;
  return attempt <= 1
    ? { keyId: seed.keyId, nonce: seed.nonce }
    : { keyId: seed.keyId, nonce: `${seed.nonce}.attempt-${attempt}` };
}

/**
 * The workflow's activities, over the routing library. Both runners call these: the Durable activity
 * functions and the in-process runner. A lock error is returned as a value; a store outage or write
 * contention (412 with no If-Match of the caller's left to blame) is thrown, so that only transient
 * failures meet a retry policy.
 */
export type Activities = {
  [K in ActivityName]: (input: ActivityInputs[K]) => Promise<ActivityResult<ActivityOutputs[K]>>;
};

export interface ActivityDependencies {
  /** Derives each migration's token and Idempotency-Key from its seed; nothing else holds it. */
  keyring: TokenKeyring;
  records?: MigrationRecords | undefined;
  /** How `callParticipant` reaches participants (default: fetch, DefaultAzureCredential). A seam for tests. */
  participantHttp?: ParticipantHttpOptions | undefined;
  /** Where `recordOutcome` sends `MigrationEnded` (docs/design.md §6.12): the services' sink. */
  sink?: TelemetrySink | undefined;
  /**
   * Told of each listed copy the pre-lock would not decide on (its seal missing or not holding). Default:
   * a process warning naming the route and migration, never the seal.
   */
  onUnsealedCopy?: ((about: UnsealedCopy) => void) | undefined;
}

export interface UnsealedCopy {
  resourceId: string;
  migrationId: string;
  seal: 'missing' | 'bad';
}

function warnUnsealed({ resourceId, migrationId, seal }: UnsealedCopy): void {
  process.emitWarning(
    `the listed copy of ${resourceId} in migration ${migrationId} has a ${seal} seal: the pre-lock reads the route instead`,
    { code: 'ROUTELOCK_LISTED_COPY_UNSEALED' },
  );
}

/**
 * The campaign's listed copy when its seal holds for this migration, else nothing: the pre-lock then
 * decides on the version the router holds, as for a start without one. A copy from the task hub or the
 * journal is never decided on unsealed: its ETag is public, and the write checks only the ETag.
 */
function trustedKnown(
  keyring: TokenKeyring,
  request: ActivityInputs['prelock'],
  onUnsealed: (about: UnsealedCopy) => void,
): StoredDocument | undefined {
  const { resourceId, migrationId, lock, known, knownSeal } = request;
  if (known === undefined) return undefined;
  const binding = { resourceId, migrationId, nonce: lock.nonce };
  const trusted = unsealedListedCopy(keyring, binding, known, knownSeal);
  if (!trusted) onUnsealed({ resourceId, migrationId, seal: knownSeal === undefined ? 'missing' : 'bad' });
  return trusted;
}

/**
 * `MigrationEnded` for the final status just recorded. The activity may run twice (a retry after a
 * lost answer): both send the same `eventKey`, which the workbook deduplicates. Telemetry never fails
 * the activity: a record it cannot read is described from the status alone.
 */
async function reportEnd(
  router: Router,
  { records, sink }: ActivityDependencies,
  status: MigrationStatus,
): Promise<void> {
  if (!sink) return;
  const record = await records?.get(status.migrationId).catch(() => null);
  const event = migrationEndedEvent(record ?? endedRecordOf(status), status, router.now());
  if (event) sink.event(event);
}

async function run<T>(work: () => Promise<T>): Promise<ActivityResult<T>> {
  try {
    return { ok: true, value: await work() };
  } catch (error) {
    // A retriable code (a store outage, write contention) goes to the retry policy; any other is the answer.
    if (isRouteLockError(error) && !error.retriable) {
      return {
        ok: false,
        code: error.code,
        message: error.message,
        ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds }),
      };
    }
    throw error;
  }
}

/**
 * The orchestrator's If-Match only saves a read; the token is the fence. So a 412 on it means the copy
 * it remembered is stale, not that the step is wrong: decide again on the write region's copy. That is
 * what lets a retried write whose first answer was lost (a timeout after the commit) land as the replay
 * it is, and a step outlast another writer's unrelated change. A swap or downgrade decided again names
 * its own write-lock attempt (`writeAt`), and the rule refuses another attempt's lock (409).
 */
function conditional<T>(
  ifMatch: string | undefined,
  work: (ifMatch: string | undefined) => Promise<T>,
): Promise<ActivityResult<T>> {
  return run(async () => {
    try {
      return await work(ifMatch);
    } catch (error) {
      if (ifMatch === undefined || !isRouteLockError(error, 'PreconditionFailed')) throw error;
      return work(undefined);
    }
  });
}

const opts = (ifMatch: string | undefined) => ({ ifMatch });

/** A key missing from the ring is an answer (the migration fails), not a transient fault to retry. */
function credentials(keyring: TokenKeyring, seed: AttemptLockSeed) {
  try {
    return keyring.credentials(attemptSeed(seed));
  } catch (error) {
    throw new RouteLockError('UnsafeConfiguration', (error as Error).message);
  }
}

/**
 * `known` (a campaign's listed copy), else with `withLocation` the version of the route the router
 * holds, is decided on under its ETag as If-Match: the read saved when it is current, a 412 decided
 * again on the write region's copy when not (as for every conditional step), a refusal confirmed
 * there (Router.mutate). It answers where the route was from the copy the pre-lock committed on, so
 * the workflow does not read it again.
 */
function prelockActivity(
  router: Router,
  keyring: TokenKeyring,
  onUnsealed: (about: UnsealedCopy) => void,
): Activities['prelock'] {
  return (request) => {
    const known = trustedKnown(keyring, request, onUnsealed);
    const { resourceId, lock, withLocation, known: _listed, knownSeal: _seal, ...req } = request;
    return conditional(
      known?.etag ?? (withLocation ? router.heldEtag(resourceId) : undefined),
      async (ifMatch) => {
        const { token, idempotencyKey } = credentials(keyring, lock);
        const { grant, location } = await router.prelockRoute(
          resourceId,
          { ...req, idempotencyKey },
          { token, ifMatch, known },
        );
        // The grant goes into orchestration state: it must not carry the token.
        const { token: _token, ...seeded } = grant;
        return withLocation ? { ...seeded, location } : seeded;
      },
    );
  };
}

/** Answers the route from the path the workflow names: the read path, a replica, or the write region. */
function readRouteActivity(router: Router, timing: TimingConfig): Activities['readRoute'] {
  return ({ resourceId, from }) =>
    run(async () => {
      if (from === 'readPath') return (await router.backgroundView(resourceId)).view;
      const stored =
        from === 'replica'
          ? await router.readReplica(resourceId)
          : await router.readAuthoritative(resourceId);
      return routeView(stored, router.now(), timing);
    });
}

/** Each activity's closure over the router; the steps with logic of their own are built above. */
export function createActivities(
  router: Router,
  timing: TimingConfig,
  dependencies: ActivityDependencies,
): Activities {
  const { keyring, records, participantHttp } = dependencies;
  const tokenOf = (seed: AttemptLockSeed) => credentials(keyring, seed).token;
  return {
    prelock: prelockActivity(router, keyring, dependencies.onUnsealedCopy ?? warnUnsealed),
    escalate: ({ resourceId, ifMatch, lock, ...req }) =>
      conditional(ifMatch, (m) => router.escalate(resourceId, { ...req, token: tokenOf(lock) }, opts(m))),
    announce: ({ resourceId, ifMatch, lock, at }) =>
      conditional(ifMatch, (m) =>
        router.announce(resourceId, { token: tokenOf(lock), phase: 'write', at }, opts(m)),
      ),
    renew: ({ resourceId, ifMatch, lock, ...req }) =>
      conditional(ifMatch, (m) => router.renew(resourceId, { ...req, token: tokenOf(lock) }, opts(m))),
    swap: ({ resourceId, ifMatch, lock, writeAt }) =>
      conditional(ifMatch, (m) =>
        router.swapWithTime(resourceId, { token: tokenOf(lock), writeAt }, opts(m)),
      ),
    release: ({ resourceId, ifMatch, writeAt, lock, ...req }) =>
      conditional(ifMatch, (m) =>
        router.release(resourceId, { ...req, writeAt, token: tokenOf(lock) }, opts(m)),
      ),
    readRoute: readRouteActivity(router, timing),
    // Never throws: what a participant answers (or that it did not) is the workflow's to judge.
    callParticipant: async (call) => ({ ok: true, value: await requestParticipant(call, participantHttp) }),
    recordOutcome: ({ status }) =>
      run(async () => {
        await records?.saveStatus(status.migrationId, status, true);
        await reportEnd(router, dependencies, status);
        return null;
      }),
  };
}
