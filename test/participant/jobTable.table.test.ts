import type { JobRequest } from '../../shared/core/participantWire';
import {
  type ResourceJobs,
  MAX_OLDER_JOBS,
  abandonMigration,
  findJob,
  finishRun,
  knowsMigration,
  mayApply,
  postJob,
} from '../../shared/participant/jobTable';

/**
 * The job rules' transitions (shared/participant/jobTable.ts, docs/design.md §6.5) as a table: a history
 * of POSTs and run endings, then one POST, and what it decides. Each transition takes one resource's
 * record and returns its next record; the one before is left as it was.
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

const HOUR = 3600_000;
/** The context of a POST at `now`: the next id, minted as the handler's shell (JobBook) mints it. */
const at = (n: number, now = LOCK) => ({ newId: `j-${n}`, now, retainOlderMs: HOUR });

/** A history replayed as the shell applies it: the records by resource, ids minted in order. */
interface Book {
  records: Map<string, ResourceJobs>;
  minted: number;
}

function replay(events: Event[]): Book {
  const book: Book = { records: new Map(), minted: 0 };
  for (const e of events) {
    if ('post' in e) post(book, e.post);
    else {
      const id = `j-${e.finish}`;
      const [resourceId, r] = [...book.records].find(([, rec]) => findJob(rec, id)) ?? [];
      const run = findJob(r, id)?.run ?? 1;
      const next = finishRun(r, id, run, e.ok ? { ok: true } : { ok: false, error: 'boom' }, LOCK);
      if (resourceId !== undefined && next) book.records.set(resourceId, next);
    }
  }
  return book;
}

function post(book: Book, request: JobRequest) {
  const step = postJob(book.records.get(request.resourceId), request, at(book.minted + 1));
  if (step.decision.kind === 'start' && step.decision.job.id === `j-${book.minted + 1}`) book.minted += 1;
  if (step.record) book.records.set(request.resourceId, step.record);
  return step;
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
  const book = replay(history);
  const before = book.records.get(request.resourceId);
  const snapshot = structuredClone(before);
  const { record, decision } = postJob(before, request, at(book.minted + 1));
  expect(decision.kind).toBe(kind);
  if (superseded !== undefined && decision.kind === 'start') {
    expect(decision.superseded.map((j) => j.id)).toEqual(superseded);
    for (const id of superseded)
      expect(findJob(record, id)).toMatchObject({ state: 'superseded', supersededBy: decision.job.id });
  }
  // pure: the record it was given is unchanged
  expect(before).toEqual(snapshot);
  if (kind === 'notImplemented' || kind === 'older') expect(record).toBe(before);
});

test('a failed job POSTed again is its next run: the old run may no longer apply, the new one may', () => {
  const t = replay([{ post: job() }, { finish: 1, ok: false }]).records.get('conv-1');
  expect(findJob(t, 'j-1')).toMatchObject({ state: 'failed', error: 'boom', run: 1 });
  const { record } = postJob(t, job(), at(2));
  expect(findJob(record, 'j-1')).toMatchObject({ state: 'running', run: 2 });
  expect(findJob(record, 'j-1')).not.toHaveProperty('error');
  expect([mayApply(record, 'j-1', 1), mayApply(record, 'j-1', 2)]).toEqual([false, true]);
  // the stale run's ending changes nothing
  expect(finishRun(record, 'j-1', 1, { ok: true }, LOCK)).toBe(record);
});

test('a superseded job ending late stays superseded (its copy must not count)', () => {
  const t = replay([{ post: delta(1) }, { post: delta(2) }]).records.get('conv-1');
  expect(mayApply(t, 'j-1', 1)).toBe(false);
  expect(findJob(finishRun(t, 'j-1', 1, { ok: true }, LOCK), 'j-1')?.state).toBe('superseded');
});

test.each<[string, number, string[]]>([
  ["the attempt that ended stops its running jobs and its earlier attempts'", 2, ['j-1', 'j-2']],
  ["an earlier attempt's notice leaves a later attempt's job running", 1, ['j-1']],
])('abandonMigration: %s', (_, attempt, stopped) => {
  const book = replay([{ post: job() }, { post: job({ migrationAttempt: 2, sequence: 5 }) }]);
  let t = book.records.get('conv-1') as ResourceJobs;
  // j-1 was superseded by j-2; make both running to see the attempt rule alone
  t = { ...t, older: t.older.map((j) => ({ ...j, state: 'running' as const })) };
  const { record, decision } = abandonMigration(t, 'm-1', attempt, LOCK);
  expect(decision.map((j) => j.id)).toEqual(stopped);
  for (const id of stopped)
    expect(findJob(record, id)).toMatchObject({ state: 'failed', error: 'the migration ended' });
  expect(knowsMigration(record, 'm-1')).toBe(true);
  expect(knowsMigration(record, 'm-9')).toBe(false);
});

/*
 * The record's size: what the contract needs of a resource's history, and no more (docs/participants.md,
 * "Memory").
 */

test('an outranked job is answered for its retention, then dropped; the newest is always kept', () => {
  const book = replay([{ post: delta(1) }]);
  const r1 = post(book, delta(2)).record;
  expect(findJob(r1, 'j-1')).toMatchObject({ state: 'superseded', supersededBy: 'j-2', outrankedAt: LOCK });
  // within the retention a third job keeps it; past it the third job's record drops it
  const within = postJob(r1, delta(3), at(3, LOCK + HOUR - 1)).record;
  expect(within?.older.map((j) => j.id)).toEqual(['j-2', 'j-1']);
  const past = postJob(r1, delta(3), at(3, LOCK + HOUR)).record;
  expect(past?.older.map((j) => j.id)).toEqual(['j-2']);
  // a dropped job POSTed again is still older than the newest: the same 409 as before
  expect(postJob(past, delta(1), at(4, LOCK + HOUR)).decision.kind).toBe('older');
});

test(`a record keeps at most ${MAX_OLDER_JOBS} outranked jobs, whatever the history's length`, () => {
  const book = replay([]);
  for (let n = 1; n <= 50; n += 1) post(book, delta(n));
  const r = book.records.get('conv-1') as ResourceJobs;
  expect(r.newest.id).toBe('j-50');
  expect(r.older).toHaveLength(MAX_OLDER_JOBS);
  expect(postJob(r, delta(7), at(51)).decision.kind).toBe('older');
  expect(knowsMigration(r, 'm-1')).toBe(true);
});
