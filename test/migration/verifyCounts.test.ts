import { judgeVerifyRound } from '../../shared/migration/workflow/verify';

/**
 * A verify answer that says `match: true` while its own counts differ is not a
 * verification the swap may rest on (a participant's bug, or a lie): it is a mismatch, never a swap.
 */

const key = { migrationAttempt: 1, deltaAttempt: 1, at: '2026-05-01T00:00:00.000Z' };

test.each([
  [{ match: true, sourceCount: 10, targetCount: 9 }, 'mismatch'],
  [{ match: true, sourceCount: 0, targetCount: 1 }, 'mismatch'],
  [{ match: true, sourceCount: 10, targetCount: 10 }, 'verified'],
  [{ match: false, sourceCount: 10, targetCount: 10 }, 'mismatch'],
])('%j → %s', (body, verdict) => {
  const judged = judgeVerifyRound([{ participant: 'p', kind: 'done', body }], key, false);
  expect(judged.kind).toBe(verdict);
  if (judged.kind === 'mismatch') {
    expect(judged.rows[0]!.outcome).toBe('mismatch');
    expect(judged.reason).toMatch(/participant p found a mismatch \(source 10|source 0/);
  }
});
