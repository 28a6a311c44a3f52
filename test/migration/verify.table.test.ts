import { ConfigError, parseConfig } from '../../shared/config';
import { attemptVerdict } from '../../shared/migration/workflow/attempts';
import { jobSequence, worstCaseCopyActions } from '../../shared/migration/workflow/copy';
import { judgeVerifyRound, parseVerifyAnswer } from '../../shared/migration/workflow/verify';
import { migrationSettings } from '../../shared/migration/workflow';
import type { MigrationInput, ParticipantStep } from '../../shared/migration/types';

/** The verify step's pure rules (docs/design.md §6.5), one table each. */

describe('parseVerifyAnswer: a 200 body is a VerifyAnswer or a protocol error', () => {
  test.each([
    [{ match: true, sourceCount: 3, targetCount: 3 }, true],
    [{ match: false, sourceCount: 0, targetCount: 2, digest: 'abc', detail: 'x' }, true],
    [{ match: true, sourceCount: 3, targetCount: 3, extra: 1 }, true],
    [{ done: true }, false],
    [null, false],
    ['{"match":true}', false],
    [[{ match: true, sourceCount: 1, targetCount: 1 }], false],
    [{ match: 'true', sourceCount: 3, targetCount: 3 }, false],
    [{ match: true, sourceCount: 1.5, targetCount: 3 }, false],
    [{ match: true, sourceCount: -1, targetCount: 3 }, false],
    [{ match: true, sourceCount: 3 }, false],
    [{ match: true, sourceCount: 3, targetCount: 3, digest: 1 }, false],
    [{ match: true, sourceCount: 3, targetCount: 3, detail: {} }, false],
  ])('%j → %s', (body, ok) => {
    const parsed = parseVerifyAnswer(body);
    expect(parsed.ok).toBe(ok);
    if (!parsed.ok) expect(parsed.reason).toMatch(/^protocol error: /);
  });
  test('keeps only the answer fields, digest and detail cut', () => {
    const parsed = parseVerifyAnswer({
      match: true,
      sourceCount: 1,
      targetCount: 1,
      digest: 'd'.repeat(200),
      detail: 'x'.repeat(900),
      extra: 'dropped',
    });
    expect(parsed.ok && parsed.answer).toEqual({
      match: true,
      sourceCount: 1,
      targetCount: 1,
      digest: 'd'.repeat(128),
      detail: 'x'.repeat(500),
    });
  });
});

describe('judgeVerifyRound', () => {
  const key = { migrationAttempt: 1, deltaAttempt: 2, at: '2026-01-01T00:00:00.000Z' };
  const match = {
    participant: 'a',
    kind: 'done' as const,
    body: { match: true, sourceCount: 2, targetCount: 2 },
  };
  const mismatch = {
    participant: 'b',
    kind: 'done' as const,
    body: { match: false, sourceCount: 3, targetCount: 2, detail: 'missing x' },
  };
  const missing = { participant: 'c', kind: 'notImplemented' as const };
  test.each([
    ['all match', [match], false, 'verified'],
    ['a 404 allowed', [match, missing], false, 'verified'],
    ['a 404 with requireVerify', [match, missing], true, 'required'],
    ['one mismatch', [match, mismatch], false, 'mismatch'],
    [
      'a bad body',
      [match, { participant: 'd', kind: 'done' as const, body: { done: true } }],
      false,
      'protocolError',
    ],
  ])('%s → %s', (_, answers, requireVerify, kind) => {
    expect(judgeVerifyRound(answers, key, requireVerify).kind).toBe(kind);
  });
  test('one row per participant; a mismatch names the participant, its counts and detail', () => {
    const verdict = judgeVerifyRound([match, mismatch, missing], key, false);
    expect(verdict).toEqual({
      kind: 'mismatch',
      rows: [
        { participant: 'a', ...key, outcome: 'match', sourceCount: 2, targetCount: 2 },
        {
          participant: 'b',
          ...key,
          outcome: 'mismatch',
          sourceCount: 3,
          targetCount: 2,
          detail: 'missing x',
        },
        { participant: 'c', ...key, outcome: 'notImplemented' },
      ],
      reason: 'participant b found a mismatch (source 3, target 2): missing x',
    });
  });
});

describe('jobSequence: every new job of a migration gets a larger number', () => {
  const input = (attempt: number) =>
    ({ settings: { deltaAttempts: 3 }, lock: { attempt } }) as unknown as MigrationInput;
  const steps: [ParticipantStep, number][] = [
    ['bulkCopy', 1],
    ['deltaCopy', 1],
    ['verify', 1],
    ['deltaCopy', 2],
    ['verify', 2],
    ['deltaCopy', 3],
    ['verify', 3],
    ['completed', 1],
  ];
  test('bulk 1, delta n 2n, verify n 2n + 1, the end notice 2 + 2 × deltaAttempts', () => {
    expect(steps.map(([s, n]) => jobSequence(input(1), s, n))).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    // attempt 2 after attempt 1's 8 numbers
    expect(steps.map(([s, n]) => jobSequence(input(2), s, n))).toEqual([9, 10, 11, 12, 13, 14, 15, 16]);
  });
  test('strictly increasing through a migration of three attempts', () => {
    const all = [1, 2, 3].flatMap((a) => steps.map(([s, n]) => jobSequence(input(a), s, n)));
    expect(all.every((n, i) => i === 0 || n > all[i - 1]!)).toBe(true);
  });
});

describe('VerificationFailed and VerifyNotImplemented under the retry policy', () => {
  test.each([
    ['VerificationFailed', 'retry'],
    ['VerifyNotImplemented', 'final'],
  ])('%s → %s', (code, verdict) => expect(attemptVerdict(code)).toBe(verdict));
});

describe('ROUTELOCK_REQUIRE_VERIFY', () => {
  test.each([
    [undefined, false],
    ['false', false],
    ['0', false],
    ['true', true],
    ['1', true],
  ])('%s → settings.requireVerify %s', (value, expected) => {
    const config = parseConfig(value === undefined ? {} : { ROUTELOCK_REQUIRE_VERIFY: value });
    expect(config.migration.requireVerify).toBe(expected);
    expect(migrationSettings(config).requireVerify).toBe(expected);
  });
  test('anything else is refused, naming the variable', () => {
    expect(() => parseConfig({ ROUTELOCK_REQUIRE_VERIFY: 'maybe' })).toThrow(ConfigError);
    expect(() => parseConfig({ ROUTELOCK_REQUIRE_VERIFY: 'maybe' })).toThrow(/ROUTELOCK_REQUIRE_VERIFY/);
  });
});

describe('the verify round in the history bound', () => {
  const t = {
    participants: 2,
    prelockMaxSeconds: 3600,
    hardDeleteLeaseSeconds: 120,
    writeLeaseSeconds: 30,
    writeBudgetSeconds: 60,
    deltaAttempts: 3,
    pollMinSeconds: 1,
    pollMaxSeconds: 30,
  };
  test('per delta attempt: a POST and its timer, the poll ramp again, two renewals (12 n + 4 at a 1–30 s ramp)', () => {
    const noDelta = worstCaseCopyActions({ ...t, deltaAttempts: 0 });
    const oneDelta = worstCaseCopyActions({ ...t, deltaAttempts: 1 });
    const noParticipant = worstCaseCopyActions({ ...t, participants: 0, deltaAttempts: 1 });
    // the delta's own term (2 participants: 2 × (2 × (5 + 3) + 2) + 2 × 6 renewals = 48: its 60 s at the
    // cap is three polls, each woken up to a second early, so 29 s apart) plus verify's 28
    expect(oneDelta - noDelta).toBe(48 + (2 * 12 + 4));
    // without participants no verify round: only the renewals (bulk every 40 s for an hour, delta every 10 s)
    expect(noParticipant).toBe(2 * 90 + 2 * 6);
  });
  test('the production and dev profiles still parse with participants: the refusal holds where it did', () => {
    const participants = (n: number) =>
      JSON.stringify(
        Array.from({ length: n }, (_, i) => ({ name: `p${i}`, url: `https://p${i}.test/migrate` })),
      );
    expect(() =>
      parseConfig({ ROUTELOCK_PROFILE: 'production', ROUTELOCK_PARTICIPANTS: participants(5) }),
    ).not.toThrow();
    expect(() =>
      parseConfig({ ROUTELOCK_PROFILE: 'production', ROUTELOCK_PARTICIPANTS: participants(6) }),
    ).toThrow(/ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS/);
    expect(() =>
      parseConfig({ ROUTELOCK_PROFILE: 'dev', ROUTELOCK_PARTICIPANTS: participants(5) }),
    ).not.toThrow();
  });
});
