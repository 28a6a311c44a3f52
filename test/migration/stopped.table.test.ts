import {
  UNNAMED_FAILURE_CODE,
  endOf,
  endedRecordOf,
  leadingCode,
  migrationEndedEvent,
  phaseReached,
  stoppedOf,
  withStopped,
} from '../../shared/migration/stopped';
import type { MigrationPhase, MigrationStatus, MigrationTimeline } from '../../shared/migration/types';

/** shared/migration/stopped.ts: where a migration stopped, derived from its status alone. */

const T = (minute: number) => `2026-12-01T22:${String(minute).padStart(2, '0')}:00.000Z`;
const none: MigrationTimeline = { prelockAt: null, hardDeleteAt: null, writeAt: null, swappedAt: null };

const status = (patch: Partial<MigrationStatus>): MigrationStatus => ({
  migrationId: 'm-1',
  resourceId: 'r-1',
  status: 'Failed',
  phase: 'released',
  target: { region: 'eastus' },
  timeline: none,
  ...patch,
});

describe('phaseReached: the furthest phase, released is no step forward', () => {
  const rows: [string, MigrationPhase, MigrationTimeline, MigrationPhase | undefined, MigrationPhase][] = [
    ['nothing yet', 'starting', none, undefined, 'starting'],
    ['released after a pre-lock', 'released', { ...none, prelockAt: T(1) }, undefined, 'prelock'],
    ['converging published before', 'released', { ...none, prelockAt: T(1) }, 'converging', 'converging'],
    [
      'write lock given up (back at hardDelete)',
      'hardDelete',
      { ...none, prelockAt: T(1), hardDeleteAt: T(2), writeAt: T(3) },
      undefined,
      'write',
    ],
    [
      'swapped',
      'swapped',
      { prelockAt: T(1), hardDeleteAt: T(2), writeAt: T(3), swappedAt: T(4) },
      undefined,
      'swapped',
    ],
  ];
  test.each(rows)('%s', (_name, phase, timeline, earlier, expected) => {
    expect(phaseReached({ phase, timeline }, earlier)).toBe(expected);
  });
});

describe('stoppedOf', () => {
  test('an attempt that recorded its code and phase: those, dated at its end', () => {
    const s = status({
      error: 'deltaCopy: ParticipantFailed: 500; lock released',
      attempt: 1,
      attempts: [
        {
          attempt: 1,
          startedAt: T(0),
          endedAt: T(9),
          outcome: 'Failed',
          reason: 'x',
          code: 'ParticipantFailed',
          stoppedAt: 'write',
        },
      ],
    });
    expect(stoppedOf(s)).toEqual({
      phase: 'write',
      code: 'ParticipantFailed',
      reason: 'deltaCopy: ParticipantFailed: 500; lock released',
      at: T(9),
    });
  });

  test('a status recorded before attempts had codes (or by version 1/2): the leading code, the timeline', () => {
    const s = status({
      status: 'Conflict',
      phase: 'starting',
      error: 'Locked: Resource r-1 is locked',
      timeline: { ...none, prelockAt: T(3) },
    });
    expect(stoppedOf(s)).toEqual({
      phase: 'prelock',
      code: 'Locked',
      reason: 'Locked: Resource r-1 is locked',
      at: T(3),
    });
  });

  test('Cancelled: code Cancelled, dated at the later of the attempt end and the request', () => {
    const s = status({
      status: 'Cancelled',
      error: 'cancelled by op (requested at …); no lock was held',
      cancelRequestedAt: T(12),
      attempt: 1,
      attempts: [
        {
          attempt: 1,
          startedAt: T(0),
          endedAt: T(5),
          outcome: 'Failed',
          code: 'StepFailed',
          stoppedAt: 'hardDelete',
        },
      ],
    });
    expect(stoppedOf(s)).toMatchObject({ code: 'Cancelled', phase: 'hardDelete', at: T(12) });
  });

  test('none on Completed, NoOp or a running status; none when nothing dates it', () => {
    expect(stoppedOf(status({ status: 'Completed', phase: 'swapped' }))).toBeUndefined();
    expect(stoppedOf(status({ status: 'NoOp' }))).toBeUndefined();
    expect(stoppedOf(status({ status: 'Running', phase: 'write' }))).toBeUndefined();
    expect(stoppedOf(status({ error: 'the orchestration never started' }))).toBeUndefined();
    expect(endOf(status({ status: 'Running' }))).toBeNull();
  });

  test('the reason is bounded and a credential-like run redacted', () => {
    const secret = 'Ab3' + 'x'.repeat(40);
    const s = status({ error: `${'long '.repeat(200)} ${secret}`, timeline: { ...none, prelockAt: T(1) } });
    const reason = stoppedOf(s)!.reason;
    expect(reason.length).toBeLessThanOrEqual(500);
    expect(
      stoppedOf(status({ error: `leaked ${secret}`, timeline: { ...none, prelockAt: T(1) } }))!.reason,
    ).toBe('leaked [redacted]');
  });

  test('withStopped derives it afresh: a stored copy is replaced, a Completed one dropped', () => {
    const stale = { phase: 'write' as const, code: 'X', reason: 'stale', at: T(0) };
    expect(
      withStopped(status({ status: 'Completed', phase: 'swapped', stopped: stale })).stopped,
    ).toBeUndefined();
    expect(
      withStopped(status({ error: 'Locked: r', stopped: stale, timeline: { ...none, prelockAt: T(2) } }))
        .stopped?.code,
    ).toBe('Locked');
  });

  test('leadingCode reads only a leading `Code: ` (a code is capitalised; a step name is not)', () => {
    expect([leadingCode('Locked: x'), leadingCode('prelock: Locked: x'), leadingCode(undefined)]).toEqual([
      'Locked',
      undefined,
      undefined,
    ]);
  });
});

describe('migrationEndedEvent', () => {
  const record = { migrationId: 'm-1', resourceId: 'r-1', createdAt: T(0), campaignId: 'c-1', input: {} };

  test('keyed on the run’s last attempt; attempts counted after an operator’s earlier ones', () => {
    const s = status({
      status: 'Completed',
      phase: 'swapped',
      attempt: 3,
      attempts: [
        { attempt: 1, startedAt: T(0), endedAt: T(1), outcome: 'Failed' },
        { attempt: 2, startedAt: T(2), endedAt: T(3), outcome: 'Failed' },
        { attempt: 3, startedAt: T(4), endedAt: T(10), outcome: 'Completed' },
      ],
    });
    const retried = {
      ...record,
      claimedAt: T(2),
      input: {
        earlierAttempts: [{ attempt: 1, startedAt: T(0), endedAt: T(1), outcome: 'Failed' as const }],
      },
    };
    expect(migrationEndedEvent(retried, s, 0)).toEqual({
      name: 'MigrationEnded',
      properties: {
        eventKey: 'MigrationEnded:m-1:3',
        migrationId: 'm-1',
        resourceId: 'r-1',
        outcome: 'Completed',
        code: '',
        stoppedAt: 'swapped',
        attempt: '3',
        campaignId: 'c-1',
      },
      measurements: { attempts: 2, durationSeconds: 480 },
    });
  });

  test('none for a running status', () => {
    expect(migrationEndedEvent(record, status({ status: 'Running' }), 0)).toBeNull();
  });
});

describe('an end nothing dates, failure text shown raw', () => {
  // the runner failed before its pre-lock (an orchestration terminated, a start that threw)
  const undated = status({ phase: 'starting', error: 'orchestration terminated', attempt: 1 });
  const record = { createdAt: T(0), claimedAt: T(3) };

  test('dated by its record’s claim, coded InternalError: every Failed status shows `stopped`', () => {
    expect(withStopped(undated, record).stopped).toEqual({
      phase: 'starting',
      code: UNNAMED_FAILURE_CODE,
      reason: 'orchestration terminated',
      at: T(3),
    });
    expect(stoppedOf(undated, { createdAt: T(1) })?.at).toBe(T(1));
    // negative control: without the record nothing dates it
    expect(withStopped(undated).stopped).toBeUndefined();
  });

  test('its MigrationEnded names a code', () => {
    const event = migrationEndedEvent(endedRecordOf(undated), undated, Date.parse(T(9)));
    expect(event?.properties).toMatchObject({
      outcome: 'Failed',
      code: 'InternalError',
      stoppedAt: 'starting',
    });
    // a Conflict or a named failure keeps its own
    expect(endOf(status({ error: 'Locked: r-1 is locked' }))?.code).toBe('Locked');
    expect(endOf(status({ status: 'Conflict', error: 'superseded by m-2' }))?.code).toBe('');
  });

  test('error and every attempt’s reason are redacted in the shown status, as stopped.reason is', () => {
    const jwt =
      'eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c';
    const leaky = status({
      error: `StepFailed: participant answered 400: {"echo":"Bearer ${jwt}"}`,
      timeline: { ...none, prelockAt: T(0) },
      attempt: 1,
      attempts: [
        {
          attempt: 1,
          startedAt: T(0),
          endedAt: T(1),
          outcome: 'Failed',
          reason: `participant 400 Bearer ${jwt}`,
        },
      ],
    });
    const shown = withStopped(leaky);
    expect(JSON.stringify(shown)).not.toContain(jwt.split('.')[2]);
    expect(shown.error).toBe(
      'StepFailed: participant answered 400: {"echo":"Bearer [redacted].[redacted].[redacted]"}',
    );
    expect(shown.attempts?.[0]?.reason).toBe('participant 400 Bearer [redacted].[redacted].[redacted]');
    expect(shown.stopped?.code).toBe('StepFailed');
  });
});
