import type { Step, Verification, VerifyAnswer } from '../types';
import { type ParticipantAnswer, copyAll } from './copy';
import { type Escalated, type Failure, failed } from './state';
import { now, publish } from './steps';

/**
 * The verify round (docs/design.md §6.5): under the write lock, after the delta
 * copy and before the swap, every participant is asked whether the target holds what the source holds.
 * A mismatch refuses the swap; the write phase releases the write lock and copies the delta again.
 */

/** The longest digest and detail kept from an answer: they go into the status and the history. */
export const VERIFY_DIGEST_MAX = 128;
export const VERIFY_DETAIL_MAX = 500;

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** A 200 body as a VerifyAnswer, or why it is not one (a protocol error). Pure. */
export function parseVerifyAnswer(
  body: unknown,
): { ok: true; answer: VerifyAnswer } | { ok: false; reason: string } {
  const b = body as Partial<Record<keyof VerifyAnswer, unknown>> | null;
  if (
    typeof b !== 'object' ||
    b === null ||
    Array.isArray(b) ||
    typeof b.match !== 'boolean' ||
    !isCount(b.sourceCount) ||
    !isCount(b.targetCount) ||
    (b.digest !== undefined && typeof b.digest !== 'string') ||
    (b.detail !== undefined && typeof b.detail !== 'string')
  )
    return {
      ok: false,
      reason:
        'protocol error: a verify answer is {"match": boolean, "sourceCount": n, "targetCount": n} (counts non-negative integers; "digest" and "detail" strings)',
    };
  return {
    ok: true,
    answer: {
      match: b.match,
      sourceCount: b.sourceCount,
      targetCount: b.targetCount,
      ...(b.digest === undefined ? {} : { digest: b.digest.slice(0, VERIFY_DIGEST_MAX) }),
      ...(b.detail === undefined ? {} : { detail: b.detail.slice(0, VERIFY_DETAIL_MAX) }),
    },
  };
}

/** Which attempt a round verified, and when it ended. */
export interface RoundKey {
  migrationAttempt: number;
  deltaAttempt: number;
  at: string;
}

/** How a verify round's answers judge the swap. Pure. */
export type RoundVerdict =
  | { kind: 'verified'; rows: Verification[] }
  | { kind: 'mismatch'; rows: Verification[]; reason: string }
  /** ROUTELOCK_REQUIRE_VERIFY and a participant answered 404: every attempt would meet it again. */
  | { kind: 'required'; rows: Verification[]; reason: string }
  /** A 200 body that is not a VerifyAnswer. */
  | { kind: 'protocolError'; reason: string };

export function judgeVerifyRound(
  answers: readonly ParticipantAnswer[],
  key: RoundKey,
  requireVerify: boolean,
): RoundVerdict {
  const rows: Verification[] = [];
  for (const a of answers) {
    if (a.kind === 'notImplemented') {
      rows.push({ participant: a.participant, ...key, outcome: 'notImplemented' });
      continue;
    }
    const parsed = parseVerifyAnswer(a.body);
    if (!parsed.ok)
      return {
        kind: 'protocolError',
        reason: `participant ${a.participant} answered 200 to verify (attempt ${key.deltaAttempt}): ${parsed.reason}`,
      };
    const { match, ...rest } = parsed.answer;
    // a match whose own counts differ is no match (a participant's bug, or a lie): never a swap on it
    const matched = match && rest.sourceCount === rest.targetCount;
    rows.push({ participant: a.participant, ...key, outcome: matched ? 'match' : 'mismatch', ...rest });
  }
  const unverified = rows.filter((r) => r.outcome === 'notImplemented');
  if (requireVerify && unverified.length > 0)
    return {
      kind: 'required',
      rows,
      reason: `verify: ${unverified.map((r) => r.participant).join(', ')} answered 404 (does not implement verify) and ROUTELOCK_REQUIRE_VERIFY is set`,
    };
  const mismatched = rows.filter((r) => r.outcome === 'mismatch');
  if (mismatched.length > 0)
    return { kind: 'mismatch', rows, reason: mismatched.map(describeMismatch).join('; ') };
  return { kind: 'verified', rows };
}

const describeMismatch = (r: Verification): string =>
  `participant ${r.participant} found a mismatch (source ${r.sourceCount}, target ${r.targetCount}${
    r.digest === undefined ? '' : `, digest ${r.digest}`
  })${r.detail === undefined ? '' : `: ${r.detail}`}`;

/** How the round went: verified (swap), a mismatch (copy the delta again), overran (likewise), failed. */
export type VerifyOutcome =
  | { kind: 'verified'; state: Escalated }
  | { kind: 'mismatch'; state: Escalated; reason: string }
  | { kind: 'overran'; state: Escalated; overrun: string }
  | Failure;

/**
 * Ask every participant `verify` for this write-lock attempt, on the copies' engine (copyAll: 202 +
 * Location polling, transient retries, the write lock renewed within its budget, a cancel ending it),
 * and record one Verification per participant in the status.
 */
export function* verifyRound(
  state: Escalated,
  deltaAttempt: number,
): Generator<Step, VerifyOutcome, unknown> {
  const s = state.input.settings;
  const asked = yield* copyAll(state, {
    copy: 'verify',
    attempt: deltaAttempt,
    phase: 'write',
    leaseSeconds: Math.min(s.writeLeaseSeconds, s.writeBudgetSeconds),
    need: 'optional',
  });
  const after: Escalated = { ...state, etag: asked.etag };
  if (!asked.result.ok) {
    const { code, message } = asked.result;
    if (code === 'LockExpired') return { kind: 'overran', state: after, overrun: `verify: ${message}` };
    return failed(after, `verify: ${code}: ${message}`, code);
  }
  const key: RoundKey = {
    migrationAttempt: state.input.lock?.attempt ?? 1,
    deltaAttempt,
    at: new Date(yield* now()).toISOString(),
  };
  const verdict = judgeVerifyRound(asked.answers ?? [], key, s.requireVerify ?? false);
  if (verdict.kind === 'protocolError') return failed(after, verdict.reason, 'ParticipantFailed');
  const recorded: Escalated = {
    ...after,
    status: yield* publish(after.status, {
      verifications: [...(after.status.verifications ?? []), ...verdict.rows],
    }),
  };
  switch (verdict.kind) {
    case 'verified':
      return { kind: 'verified', state: recorded };
    case 'mismatch':
      return { kind: 'mismatch', state: recorded, reason: verdict.reason };
    case 'required':
      return failed(recorded, verdict.reason, 'VerifyNotImplemented');
  }
}
