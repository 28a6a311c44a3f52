import type { JobRequest } from '../../shared/core/participantWire';
import {
  type JobTable,
  abandonMigration,
  emptyJobTable,
  finishRun,
  knowsMigration,
  mayApply,
  postJob,
} from '../../shared/participant/jobTable';

/**
 * The job table's transitions (shared/participant/jobTable.ts, docs/design.md §6.5) as a table: a history
 * of POSTs and run endings, then one POST, and what it decides. Each transition returns the next table;
 * the one before is left as it was.
 */

const LOCK = Date.parse('2026-12-01T10:00:00Z');
const job = (over: Partial<JobRequest> = {}): JobRequest => ({
  migrationId: 'm-1',
  resourceId: 'conv-1',
  from: { region: 'westeurope' },
  to: { region: 'eastus' },
  step: 'bulkCopy',
  migrationAttempt: 1,
  stepAttempt: 1,
  sequence: 1,
  lockAcquiredAt: LOCK,
  ...over,
});
const delta = (stepAttempt: number, over: Partial<JobRequest> = {}) =>
  job({ step: 'deltaCopy', stepAttempt, sequence: 2 * stepAttempt, ...over });

type Event = { post: JobRequest } | { finish: number; ok: boolean };

function replay(events: Event[]): JobTable {
  let t = emptyJobTable;
  for (const e of events) {
    if ('post' in e) t = postJob(t, e.post).table;
    else {
      const id = `j-${e.finish}`;
      const run = t.jobs.get(id)?.run ?? 1;
      t = finishRun(t, id, run, e.ok ? { ok: true } : { ok: false, error: 'boom' });
    }
  }
  return t;
}

test.each<[string, Event[], JobRequest, string, string[]?]>([
  ['a new job starts', [], job(), 'start'],
  ['the same job while it runs: answered for, not started again', [{ post: job() }], job(), 'running'],
  ['the same job once done: done', [{ post: job() }, { finish: 1, ok: true }], job(), 'done'],
  [
    'the same job once failed: started again (run 2)',
    [{ post: job() }, { finish: 1, ok: false }],
    job(),
    'start',
  ],
  [
    'a new stepAttempt is a new job and supersedes the running one',
    [{ post: delta(1) }],
    delta(2),
    'start',
    ['j-1'],
  ],
  [
    'a new job after a done one supersedes nothing',
    [{ post: job() }, { finish: 1, ok: true }],
    delta(1),
    'start',
    [],
  ],
  ['a lower sequence than one seen: older', [{ post: delta(2) }], delta(1), 'older'],
  ['the job seen before, outranked since: older', [{ post: job() }, { post: delta(1) }], job(), 'older'],
  [
    'an earlier migration (lockAcquiredAt) whatever its sequence: older',
    [{ post: delta(1) }],
    job({ migrationId: 'm-0', sequence: 9, lockAcquiredAt: LOCK - 1 }),
    'older',
  ],
  [
    'a later migration whatever its sequence: start, superseding',
    [{ post: delta(3) }],
    job({ migrationId: 'm-2', lockAcquiredAt: LOCK + 1 }),
    'start',
    ['j-1'],
  ],
  [
    'another resource: not ordered against it',
    [{ post: delta(3) }],
    job({ resourceId: 'conv-2', lockAcquiredAt: 0 }),
    'start',
    [],
  ],
  [
    'an old caller (no lockAcquiredAt): newest on arrival',
    [{ post: delta(2) }],
    delta(1, { lockAcquiredAt: undefined }),
    'start',
    ['j-1'],
  ],
  ['a step that is no copy: not implemented', [], job({ step: 'swap' }), 'notImplemented'],
])('%s', (_, history, request, kind, ...rest) => {
  const [superseded] = rest;
  const before = replay(history);
  const snapshot = [...before.jobs.values()];
  const { table, decision } = postJob(before, request);
  expect(decision.kind).toBe(kind);
  if (superseded !== undefined && decision.kind === 'start') {
    expect(decision.superseded.map((j) => j.id)).toEqual(superseded);
    for (const id of superseded)
      expect(table.jobs.get(id)).toMatchObject({ state: 'superseded', supersededBy: decision.job.id });
  }
  // pure: the table it was given is unchanged
  expect([...before.jobs.values()]).toEqual(snapshot);
  if (kind === 'notImplemented' || kind === 'older') expect(table).toBe(before);
});

test('a failed job POSTed again is its next run: the old run may no longer apply, the new one may', () => {
  const t = replay([{ post: job() }, { finish: 1, ok: false }]);
  expect(t.jobs.get('j-1')).toMatchObject({ state: 'failed', error: 'boom', run: 1 });
  const { table } = postJob(t, job());
  expect(table.jobs.get('j-1')).toMatchObject({ state: 'running', run: 2 });
  expect(table.jobs.get('j-1')).not.toHaveProperty('error');
  expect([mayApply(table, 'j-1', 1), mayApply(table, 'j-1', 2)]).toEqual([false, true]);
  // the stale run's ending changes nothing
  expect(finishRun(table, 'j-1', 1, { ok: true })).toBe(table);
});

test('a superseded job ending late stays superseded (its copy must not count)', () => {
  const t = replay([{ post: delta(1) }, { post: delta(2) }]);
  expect(mayApply(t, 'j-1', 1)).toBe(false);
  expect(finishRun(t, 'j-1', 1, { ok: true }).jobs.get('j-1')?.state).toBe('superseded');
});

test.each<[string, number, string[]]>([
  ["the attempt that ended stops its running jobs and its earlier attempts'", 2, ['j-1', 'j-2']],
  ["an earlier attempt's notice leaves a later attempt's job running", 1, ['j-1']],
])('abandonMigration: %s', (_, attempt, stopped) => {
  let t = postJob(emptyJobTable, job()).table;
  t = postJob(t, job({ resourceId: 'conv-1', migrationAttempt: 2, sequence: 5 })).table;
  // j-1 was superseded by j-2; make both running to see the attempt rule alone
  t = { ...t, jobs: new Map([...t.jobs].map(([id, j]) => [id, { ...j, state: 'running' as const }])) };
  const { table, decision } = abandonMigration(t, 'm-1', 'conv-1', attempt);
  expect(decision.map((j) => j.id)).toEqual(stopped);
  for (const id of stopped)
    expect(table.jobs.get(id)).toMatchObject({ state: 'failed', error: 'the migration ended' });
  expect(knowsMigration(table, 'm-1', 'conv-1')).toBe(true);
  expect(knowsMigration(table, 'm-9', 'conv-1')).toBe(false);
});
