import { boundedReleaseReason } from '../core/lock/rules';
import { redactCredentials } from '../core/redact';
import type { TelemetryEvent } from './telemetry/lockTelemetry';
import { type MigrationRecord, claimedAtOf } from './records';
import type { MigrationAttempt, MigrationPhase, MigrationState, MigrationStatus, Stopped } from './types';
import { terminalStates } from './types';

/**
 * How a migration ended, in one place (docs/design.md §6.12): the phase it had reached, the
 * stable code, a human reason and when, derived from what the workflow records (the status's phase,
 * timeline, error and attempts). `GET /api/migrations/{id}` and the list show it as `stopped` on a Failed,
 * Conflict or Cancelled migration; the `MigrationEnded` event carries it for every outcome. Pure: both
 * runners and both hosts call it on the status they hold.
 */

export type { Stopped } from './types';

/** The states whose status shows `stopped`. */
export const stoppedStates: ReadonlySet<MigrationState> = new Set(['Failed', 'Conflict', 'Cancelled']);

/** The lock phases in the order a migration reaches them ('released' is an end, not a step forward). */
const progress: readonly MigrationPhase[] = [
  'starting',
  'prelock',
  'converging',
  'hardDelete',
  'write',
  'swapped',
];

const furthest = (phases: (MigrationPhase | undefined)[]): MigrationPhase => {
  let best = 0;
  for (const phase of phases) {
    const rank = phase === undefined ? -1 : progress.indexOf(phase);
    if (rank > best) best = rank;
  }
  return progress[best] as MigrationPhase;
};

/**
 * The furthest phase a status shows its attempt reached: its phase (unless `released`, which only says
 * the lock went), the phase published before (`earlier`), and the timeline's stamps. A write lock given
 * up after an overrun (the phase back at `hardDelete`) still reached `write`.
 */
export function phaseReached(
  status: Pick<MigrationStatus, 'phase' | 'timeline'>,
  earlier?: MigrationPhase,
): MigrationPhase {
  // a status read back from a store or a task hub may predate a field: never throw on one
  const t: Partial<MigrationStatus['timeline']> = status.timeline ?? {};
  return furthest([
    status.phase,
    earlier,
    t.prelockAt ? 'prelock' : undefined,
    t.hardDeleteAt ? 'hardDelete' : undefined,
    t.writeAt ? 'write' : undefined,
    t.swappedAt ? 'swapped' : undefined,
  ]);
}

/** The code a reason the workflow wrote as `<Code>: <message>` leads with (a refused pre-lock's). */
export function leadingCode(reason: string | undefined): string | undefined {
  return /^([A-Z][A-Za-z]+): /.exec(reason ?? '')?.[1];
}

/** The ended attempt a status's outcome is its: the last one, when it is the status's own attempt. */
function lastAttempt(status: MigrationStatus): MigrationAttempt | undefined {
  const last = status.attempts?.[status.attempts.length - 1];
  return last !== undefined && (status.attempt === undefined || last.attempt === status.attempt)
    ? last
    : undefined;
}

const latest = (times: (string | null | undefined)[]): string | undefined =>
  times
    .filter((t): t is string => typeof t === 'string' && !Number.isNaN(Date.parse(t)))
    .sort((a, b) => Date.parse(a) - Date.parse(b))
    .pop();

/** The code of a failure nothing named (the runner failed before its first step, an orchestration died). */
export const UNNAMED_FAILURE_CODE = 'InternalError';

/** When a migration's record was claimed: the last resort for dating an end its status does not date. */
export type ClaimedRecord = Pick<MigrationRecord, 'claimedAt' | 'createdAt'>;

/**
 * How a terminal status ended (null while it runs): what `stopped` shows, for every outcome. The phase
 * and code come from the attempt's own record when the workflow wrote them (`stoppedAt`, `code`), else
 * from the status (a status written before they existed, or by workflow version 1 or 2); a failure with
 * no code at all is `InternalError`. The time is the attempt's end, a later cancel request's, the
 * timeline's last stamp, else the record's claim (`record`; '' without one).
 */
export function endOf(status: MigrationStatus, record?: ClaimedRecord): Stopped | null {
  if (!terminalStates.has(status.status)) return null;
  const last = lastAttempt(status);
  const cancelled = status.status === 'Cancelled';
  const named = last?.code ?? leadingCode(status.error) ?? leadingCode(last?.reason);
  const code = cancelled
    ? 'Cancelled'
    : status.status === 'Completed'
      ? ''
      : (named ?? (status.status === 'Failed' ? UNNAMED_FAILURE_CODE : ''));
  const t: Partial<MigrationStatus['timeline']> = status.timeline ?? {};
  const at =
    latest([last?.endedAt, cancelled ? status.cancelRequestedAt : undefined]) ??
    latest([t.prelockAt, t.hardDeleteAt, t.writeAt, t.swappedAt, status.cancelRequestedAt]) ??
    latest([record?.claimedAt, record?.createdAt]) ??
    '';
  return {
    phase: phaseReached(status, last?.stoppedAt),
    code,
    reason: boundedReleaseReason(status.error ?? last?.reason ?? status.status),
    at,
  };
}

/**
 * `stopped` for a Failed, Conflict or Cancelled status (undefined otherwise, or when neither it nor
 * `record` dates it).
 */
export function stoppedOf(status: MigrationStatus, record?: ClaimedRecord): Stopped | undefined {
  if (!stoppedStates.has(status.status)) return undefined;
  const end = endOf(status, record);
  return end && end.at !== '' ? end : undefined;
}

/** True when a status should show `stopped` but dates nothing: its record's claim dates it (`withStopped`). */
export const needsRecordToDate = (status: MigrationStatus): boolean =>
  stoppedStates.has(status.status) && stoppedOf(status) === undefined;

/**
 * A status as the API shows it: with `stopped` when it stopped (derived, never stored), and the
 * failure text it carries (`error`, each attempt's `reason`: they may quote a participant's answer)
 * with credential-like runs redacted, as `stopped.reason` is. `record` dates a status that dates
 * nothing itself (a runner that failed before its first step).
 */
export function withStopped(status: MigrationStatus, record?: ClaimedRecord): MigrationStatus {
  const { stopped: _stored, ...rest } = status;
  const shown: MigrationStatus = {
    ...rest,
    ...(rest.error === undefined ? {} : { error: redactCredentials(rest.error) }),
    ...(rest.attempts === undefined
      ? {}
      : {
          attempts: rest.attempts.map((a) =>
            a.reason === undefined ? a : { ...a, reason: redactCredentials(a.reason) },
          ),
        }),
  };
  const stopped = stoppedOf(rest, record);
  return stopped === undefined ? shown : { ...shown, stopped };
}

/** What `migrationEndedEvent` reads of a migration's record. */
export type EndedRecord = Pick<
  MigrationRecord,
  'migrationId' | 'resourceId' | 'createdAt' | 'claimedAt' | 'campaignId'
> & { input: Pick<MigrationRecord['input'], 'earlierAttempts'> };

/** A record's fields for a status whose record cannot be read: its first attempt's start as the claim. */
export function endedRecordOf(status: MigrationStatus): EndedRecord {
  const started = status.attempts?.[0]?.startedAt ?? status.timeline.prelockAt;
  return {
    migrationId: status.migrationId,
    resourceId: status.resourceId,
    createdAt: started ?? endOf(status)?.at ?? '',
    input: {},
  };
}

const secondsBetween = (from: string, to: string): number => {
  const ms = Date.parse(to) - Date.parse(from);
  return Number.isFinite(ms) ? Math.max(0, Math.round(ms / 10) / 100) : 0;
};

/**
 * The `MigrationEnded` event of a run's end (shared/migration/telemetry/names.ts; its key
 * `MigrationEnded:<migrationId>:<attempt>`: a Durable activity that runs twice, or a second write of
 * the final status, sends the same key, and the workbook keeps one per key). `attempt` is the run's
 * last attempt (an operator's retry numbers its attempts after the earlier ones, so its end has its own
 * key); `attempts` the attempts this run made; `durationSeconds` from the run's claim to its end (`now`
 * when the status does not date it). Null for a status still running.
 */
export function migrationEndedEvent(
  record: EndedRecord,
  status: MigrationStatus,
  now: number,
): TelemetryEvent | null {
  const end = endOf(status);
  if (!end) return null;
  const attempt = status.attempt ?? 1;
  const earlier = record.input.earlierAttempts?.length ?? 0;
  const endedAt = end.at !== '' ? end.at : new Date(now).toISOString();
  return {
    name: 'MigrationEnded',
    properties: {
      eventKey: `MigrationEnded:${record.migrationId}:${attempt}`,
      migrationId: record.migrationId,
      resourceId: record.resourceId,
      outcome: status.status,
      code: end.code,
      stoppedAt: end.phase,
      attempt: String(attempt),
      campaignId: record.campaignId ?? '',
    },
    measurements: {
      attempts: Math.max(1, attempt - earlier),
      durationSeconds: secondsBetween(claimedAtOf(record), endedAt),
    },
  };
}
