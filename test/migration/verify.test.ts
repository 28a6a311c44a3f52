import type { MigrationStatus, ParticipantCall, Verification } from '../../shared/migration/types';
import { virtualRunner } from '../support/migrationHarness';
import {
  type ParticipantOptions,
  type ParticipantServer,
  type StepBehaviour,
  startParticipant,
} from '../support/participantServer';

/**
 * Verify before the swap (workflow version 4) on the in-process runner: real participant
 * servers (test/support/participantServer.ts) called through the real `callParticipant` activity, on
 * virtual time. A participant's `verify` compares its items at the source and the target honestly.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const ITEMS = ['msg-1', 'msg-2', 'msg-3'];
const operator = { id: 'operator-1', name: 'Ops' };

const servers: ParticipantServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

interface Seen {
  step: string;
  method: 'POST' | 'GET';
  status?: number;
  body?: unknown;
  sequence?: number;
  stepAttempt?: number;
}

type Behaviours = Partial<Record<'bulkCopy' | 'deltaCopy' | 'verify', StepBehaviour>>;

/** Virtual time that waits for real requests: no timer fires while one is in flight. */
async function settle(h: ReturnType<typeof virtualRunner>, inFlight: () => number): Promise<void> {
  for (let guard = 0; h.runner.activeCount > 0; guard += 1) {
    if (guard > 200_000) throw new Error('the migration did not settle');
    for (let i = 0; i < 8; i += 1) await new Promise<void>((r) => setImmediate(r));
    if (inFlight() > 0) {
      await new Promise<void>((r) => setTimeout(r, 2));
      continue;
    }
    if (h.runner.activeCount === 0) break;
    await h.scheduler.runUntilIdle({ settleTurns: 0, maxTimers: 1 });
  }
}

/**
 * One migration of r-1 with one participant. `lateWrites`: after each bulk copy a service write lands
 * at the source (a new item, `late-n`), so only the delta copy brings it to the target.
 */
async function migrate(
  behaviours: Behaviours,
  options: {
    env?: Record<string, string>;
    participant?: ParticipantOptions;
    lateWrites?: boolean;
    cancelAtVerify?: boolean;
  } = {},
) {
  const server = await startParticipant(options.participant);
  servers.push(server);
  for (const [step, behaviour] of Object.entries(behaviours))
    server.behave(step as keyof Behaviours, behaviour);
  server.seed(SOURCE, 'r-1', ITEMS);
  const h = virtualRunner({
    http: null,
    env: {
      ROUTELOCK_PROFILE: 'dev',
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p1', url: server.url }]),
      ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: '1',
      ROUTELOCK_MIGRATION_ATTEMPTS: '1',
      ...options.env,
    },
  });
  const seen: Seen[] = [];
  const lockPhases: (string | null)[] = [];
  let inFlight = 0;
  let lateWrites = 0;
  let migrationId = '';
  const stepOf = new Map<string, string>();
  const call = h.activities.callParticipant;
  h.activities.callParticipant = async (input: ParticipantCall) => {
    const step = input.method === 'POST' ? input.body.step : (stepOf.get(input.url) ?? '?');
    const entry: Seen = {
      step,
      method: input.method,
      ...(input.method === 'POST'
        ? { sequence: input.body.sequence, stepAttempt: input.body.stepAttempt }
        : {}),
    };
    seen.push(entry);
    if (step === 'verify' && options.cancelAtVerify && seen.filter((s) => s.step === 'verify').length === 2)
      await h.runner.cancel(migrationId, operator);
    inFlight += 1;
    try {
      const result = await call(input);
      if (result.ok && result.value.location) stepOf.set(result.value.location, step);
      if (result.ok) Object.assign(entry, { status: result.value.status, body: result.value.body });
      if (options.lateWrites && step === 'bulkCopy' && result.ok && result.value.status === 200) {
        lateWrites += 1;
        server.seed(SOURCE, 'r-1', [...server.dataAt(SOURCE, 'r-1'), `late-${lateWrites}`]);
      }
      return result;
    } finally {
      inFlight -= 1;
    }
  };
  // the lock each write-lock release leaves: hard-delete only, so the resource's writes resume
  const release = h.activities.release;
  h.activities.release = async (input) => {
    const answer = await release(input);
    if (input.phase === 'write')
      lockPhases.push((await h.store.read('r-1', { from: 'writeRegion' })).doc.lock?.phase ?? null);
    return answer;
  };
  const swaps: unknown[] = [];
  const swap = h.activities.swap;
  h.activities.swap = async (input) => {
    swaps.push(input);
    return swap(input);
  };
  await h.router.createRoute('r-1', SOURCE);
  const { record } = h.runner.start({ resourceId: 'r-1', target: TARGET });
  migrationId = record.migrationId;
  await settle(h, () => inFlight);
  const status: MigrationStatus = await h.runner.status(record.migrationId);
  const doc = (await h.store.read('r-1', { from: 'writeRegion' })).doc;
  return { h, status, doc, server, seen, swaps, lockPhases };
}

const verifyPosts = (seen: Seen[]) => seen.filter((s) => s.step === 'verify' && s.method === 'POST');
const outcomes = (rows: Verification[] | undefined) =>
  (rows ?? []).map((v) => [v.migrationAttempt, v.deltaAttempt, v.outcome, v.sourceCount, v.targetCount]);

test('match: verified after the delta, then the swap; one Verification with counts and digest', async () => {
  const r = await migrate({ verify: { kind: 'ok' } });
  expect(r.status.status).toBe('Completed');
  expect(r.doc).toMatchObject({ location: TARGET, lock: null });
  expect(r.seen.filter((s) => s.method === 'POST').map((s) => [s.step, s.sequence, s.stepAttempt])).toEqual([
    ['bulkCopy', 1, 1],
    ['deltaCopy', 2, 1],
    ['verify', 3, 1],
    // the end notice (§6.11), last of its attempt
    ['completed', 8, 1],
  ]);
  expect(r.status.verifications).toEqual([
    {
      participant: 'p1',
      migrationAttempt: 1,
      deltaAttempt: 1,
      at: expect.any(String),
      outcome: 'match',
      sourceCount: 3,
      targetCount: 3,
      digest: 'msg-1,msg-2,msg-3',
    },
  ]);
});

test('not implemented (404): counted as not verified, and the swap happens', async () => {
  const r = await migrate({});
  expect(r.status.status).toBe('Completed');
  expect(verifyPosts(r.seen).map((s) => s.status)).toEqual([404]);
  expect(r.status.verifications).toEqual([
    {
      participant: 'p1',
      migrationAttempt: 1,
      deltaAttempt: 1,
      at: expect.any(String),
      outcome: 'notImplemented',
    },
  ]);
});

test('ROUTELOCK_REQUIRE_VERIFY and a 404: Failed with the reason, no swap, no second attempt', async () => {
  const r = await migrate(
    {},
    { env: { ROUTELOCK_REQUIRE_VERIFY: 'true', ROUTELOCK_MIGRATION_ATTEMPTS: '3' } },
  );
  expect(r.status).toMatchObject({ status: 'Failed', phase: 'released' });
  expect(r.status.error).toMatch(
    /p1 answered 404 \(does not implement verify\) and ROUTELOCK_REQUIRE_VERIFY is set/,
  );
  expect(r.status.attempts).toHaveLength(1); // final: another attempt would meet it again
  expect(r.swaps).toHaveLength(0);
  expect(r.doc).toMatchObject({ location: SOURCE, lock: null });
  expect(outcomes(r.status.verifications)).toEqual([[1, 1, 'notImplemented', undefined, undefined]]);
});

test('a mismatch, then a match: the write lock released (writes resume), the delta copied again, verified, swapped', async () => {
  // the delta of write-lock attempt 1 leaves out the late write; attempt 2's copies it
  const r = await migrate(
    { verify: { kind: 'ok' } },
    { lateWrites: true, participant: { deltaDropsLastItem: (stepAttempt) => stepAttempt === 1 } },
  );
  expect(r.status.status).toBe('Completed');
  expect(r.status.deltaAttempts).toBe(2);
  expect(r.lockPhases).toEqual(['hardDelete']); // between the attempts only the hard-delete lock held
  expect(r.seen.filter((s) => s.method === 'POST').map((s) => [s.step, s.sequence, s.stepAttempt])).toEqual([
    ['bulkCopy', 1, 1],
    ['deltaCopy', 2, 1],
    ['verify', 3, 1],
    ['deltaCopy', 4, 2],
    ['verify', 5, 2],
    ['completed', 8, 1],
  ]);
  expect(outcomes(r.status.verifications)).toEqual([
    [1, 1, 'mismatch', 4, 3],
    [1, 2, 'match', 4, 4],
  ]);
  expect(r.status.verifications?.[0]?.detail).toBe('missing at the target: late-1');
  // no item lost: the swap has every item the source has
  expect(r.server.dataAt(TARGET, 'r-1').sort()).toEqual([...ITEMS, 'late-1'].sort());
  expect(r.swaps).toHaveLength(1);
});

test('a mismatch every time: no swap, VerificationFailed with the detail, and the retry policy tries again', async () => {
  const r = await migrate(
    { verify: { kind: 'ok' } },
    {
      lateWrites: true,
      participant: { deltaDropsLastItem: () => true },
      env: { ROUTELOCK_MIGRATION_ATTEMPTS: '2' },
    },
  );
  expect(r.status).toMatchObject({ status: 'Failed', phase: 'released' });
  expect(r.swaps).toHaveLength(0);
  expect(r.doc).toMatchObject({ location: SOURCE, lock: null });
  // VerificationFailed is transient: a second attempt with a fresh lock, which finds a mismatch too
  expect(r.status.attempts?.map((a) => a.outcome)).toEqual(['Failed', 'Failed']);
  for (const [i, a] of (r.status.attempts ?? []).entries())
    expect(a.reason).toMatch(
      new RegExp(
        `^verification failed on write-lock attempt 3 of 3, no swap: participant p1 found a mismatch \\(source ${4 + i}, target ${3 + i}, digest [^)]*\\): missing at the target: late-${i + 1}`,
      ),
    );
  expect(r.status.error).not.toMatch(/write budget/);
  // three write-lock attempts per migration attempt, each verified; the rows kept across attempts
  expect(outcomes(r.status.verifications).map(([m, d, o]) => [m, d, o])).toEqual([
    [1, 1, 'mismatch'],
    [1, 2, 'mismatch'],
    [1, 3, 'mismatch'],
    [2, 1, 'mismatch'],
    [2, 2, 'mismatch'],
    [2, 3, 'mismatch'],
  ]);
  // sequences of attempt 2 come after attempt 1's (2 + 2 × 3 jobs each)
  expect(verifyPosts(r.seen).map((s) => s.sequence)).toEqual([3, 5, 7, 11, 13, 15]);
});

test.each([
  ['not a verify answer', '{"done":true}'],
  ['a negative count', '{"match":true,"sourceCount":-1,"targetCount":3}'],
  ['match as a string', '{"match":"yes","sourceCount":3,"targetCount":3}'],
  ['a digest that is not a string', '{"match":true,"sourceCount":3,"targetCount":3,"digest":7}'],
])('a 200 with %s: protocol error, Failed, no swap', async (_, body) => {
  const r = await migrate({ verify: { kind: 'status', status: 200, body } });
  expect(r.status).toMatchObject({ status: 'Failed', phase: 'released' });
  expect(r.status.error).toMatch(
    /participant p1 answered 200 to verify \(attempt 1\): protocol error: a verify answer is/,
  );
  expect(r.swaps).toHaveLength(0);
  expect(r.doc).toMatchObject({ location: SOURCE, lock: null });
});

// (a body over 4 KB is cut by the activity, so no longer JSON: a protocol error like any other)
test('a long detail and digest are cut to a sane length', async () => {
  const body = JSON.stringify({
    match: true,
    sourceCount: 3,
    targetCount: 3,
    digest: 'd'.repeat(1000),
    detail: 'x'.repeat(2000),
  });
  const r = await migrate({ verify: { kind: 'status', status: 200, body } });
  expect(r.status.status).toBe('Completed');
  expect(r.status.verifications?.[0]?.digest).toHaveLength(128);
  expect(r.status.verifications?.[0]?.detail).toHaveLength(500);
});

test('202 + Location for verify: polled like a copy, then verified and swapped', async () => {
  const r = await migrate({ verify: { kind: 'poll', polls: 2 } });
  expect(r.status.status).toBe('Completed');
  const verify = r.seen.filter((s) => s.step === 'verify');
  expect(verify.map((s) => `${s.method} ${s.status}`)).toEqual(['POST 202', 'GET 202', 'GET 202', 'GET 200']);
  expect(outcomes(r.status.verifications)).toEqual([[1, 1, 'match', 3, 3]]);
});

test('a cancel while verify runs: Cancelled, the lock released, no swap', async () => {
  const r = await migrate({ verify: { kind: 'hold' } }, { cancelAtVerify: true });
  expect(r.status.status).toBe('Cancelled');
  expect(r.swaps).toHaveLength(0);
  expect(r.doc).toMatchObject({ location: SOURCE, lock: null });
  expect(r.status.verifications).toBeUndefined();
});

describe('negative control: a participant whose delta copy drops an item', () => {
  const dropping: ParticipantOptions = { deltaDropsLastItem: () => true };
  test('without verify (404): the swap happens and the late write is lost at the target', async () => {
    const r = await migrate({}, { lateWrites: true, participant: dropping });
    expect(r.status.status).toBe('Completed');
    expect(r.doc.location).toEqual(TARGET);
    expect(r.server.dataAt(SOURCE, 'r-1')).toContain('late-1');
    expect(r.server.dataAt(TARGET, 'r-1')).not.toContain('late-1'); // data loss
  });
  test('with verify: no swap, the route and every item stay at the source', async () => {
    const r = await migrate({ verify: { kind: 'ok' } }, { lateWrites: true, participant: dropping });
    expect(r.status.status).toBe('Failed');
    expect(r.swaps).toHaveLength(0);
    expect(r.doc.location).toEqual(SOURCE);
    expect(r.server.dataAt(SOURCE, 'r-1')).toContain('late-1');
  });
});

test('a delta longer than one write lease (renewed on the way): verify runs on the renewed lock, then the swap', async () => {
  // dev: a 30 s write lease renewed every 10 s within the 60 s budget; the delta's polls take 1+2+4+8+16 s
  const r = await migrate({ deltaCopy: { kind: 'poll', polls: 4 }, verify: { kind: 'ok' } });
  expect(r.status.status).toBe('Completed');
  expect(r.status.deltaAttempts).toBe(1);
  expect(outcomes(r.status.verifications)).toEqual([[1, 1, 'match', 3, 3]]);
});
