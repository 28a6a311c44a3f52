import { migrationOrchestrator } from '../../functions/migrationOrchestrator';
import { parseConfig } from '../../shared/config';
import {
  CANCEL_EVENT,
  type HttpAnswer,
  type MigrationStatus,
  type ParticipantCall,
  WORKFLOW_VERSION,
} from '../../shared/migration/types';
import { DurableReplay, type RaisedEvent } from '../../testkit/durableReplay';
import { migrationFixture } from '../../testkit/migrationFixture';

/**
 * Verify before the swap (docs/design.md §6.5) on the Durable runner: the real orchestrator replayed through
 * durable-functions' own executor (testkit/durableReplay.ts), the verify round's requests as
 * `callParticipant` activities and its polls on durable timers, like the copies'. The participant is a
 * tiny data store at the two regions: its jobs answer 202 + Location, finish a second later, and its
 * `verify` compares the items at the source and the target honestly.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const START = Date.UTC(2026, 2, 1);

interface Store {
  source: string[];
  target: string[];
}

/**
 * The participant. `lateWrites`: a service write lands at the source after each bulk copy (only a
 * delta brings it over). `dropInDelta(n)`: delta attempt n leaves the source's last item out (the bug).
 * `verify: false`: it does not implement verify (404).
 */
function participant(options: {
  verify: boolean;
  dropInDelta?: (n: number) => boolean;
  lateWrites?: boolean;
}) {
  const store: Store = { source: ['msg-1', 'msg-2', 'msg-3'], target: [] };
  const jobs = new Map<
    string,
    { call: ParticipantCall & { method: 'POST' }; endsAt: number; answer?: unknown }
  >();
  let late = 0;
  const run = (call: ParticipantCall & { method: 'POST' }): unknown => {
    const { step, stepAttempt = 1 } = call.body;
    if (step === 'verify') {
      const missing = store.source.filter((i) => !store.target.includes(i));
      return {
        match: missing.length === 0 && store.source.length === store.target.length,
        sourceCount: store.source.length,
        targetCount: store.target.length,
        ...(missing.length > 0 ? { detail: `missing at the target: ${missing.join(', ')}` } : {}),
      };
    }
    const items =
      step === 'deltaCopy' && options.dropInDelta?.(stepAttempt) ? store.source.slice(0, -1) : store.source;
    store.target = [...new Set([...store.target, ...items])];
    if (step === 'bulkCopy' && options.lateWrites) store.source = [...store.source, `late-${++late}`];
    return { done: true };
  };
  const answer = (call: ParticipantCall, now: number): HttpAnswer => {
    if (call.method === 'POST') {
      if (call.body.step === 'verify' && !options.verify) return { status: 404, body: null };
      const key = `https://p.test/jobs/${call.body.migrationAttempt}/${call.body.step}/${call.body.stepAttempt}`;
      if (!jobs.has(key)) jobs.set(key, { call, endsAt: now + 1000 });
      return { status: 202, body: null, location: key };
    }
    const job = jobs.get(call.url);
    if (!job) return { status: 404, body: null };
    if (now < job.endsAt) return { status: 202, body: null };
    job.answer ??= run(job.call);
    return { status: 200, body: job.answer };
  };
  return { store, answer };
}

async function replay(
  p: ReturnType<typeof participant>,
  options: { env?: Record<string, string>; events?: RaisedEvent[] } = {},
) {
  const config = parseConfig({
    ROUTELOCK_PROFILE: 'dev',
    ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'messages', url: 'https://p.test/migrate' }]),
    ROUTELOCK_MIGRATION_ATTEMPTS: '1',
    ...options.env,
  });
  const fixture = await migrationFixture({ config, start: START, source: SOURCE, target: TARGET });
  const input = { ...fixture.input, workflowVersion: WORKFLOW_VERSION };
  const posts: { step: string; sequence?: number; stepAttempt?: number }[] = [];
  fixture.activities.callParticipant = async (call) => {
    if (call.method === 'POST')
      posts.push({ step: call.body.step, sequence: call.body.sequence, stepAttempt: call.body.stepAttempt });
    return { ok: true, value: p.answer(call, fixture.clock.now()) };
  };
  const harness: DurableReplay = new DurableReplay({
    orchestrator: migrationOrchestrator,
    name: 'migrationOrchestrator',
    instanceId: input.instanceId,
    input,
    start: START,
    activity: (fn, activityInput) => fixture.runActivity(fn, activityInput, harness.now),
    ...(options.events ? { events: options.events } : {}),
  });
  const result = await harness.run();
  const doc = (await fixture.store.read('conv-1', { from: 'writeRegion' })).doc;
  const swaps = result.actions.filter((a) => a.name === 'migrationSwap').length;
  return { result, status: result.output as MigrationStatus, doc, posts, swaps };
}

const rows = (s: MigrationStatus) =>
  (s.verifications ?? []).map((v) => [v.deltaAttempt, v.outcome, v.sourceCount, v.targetCount]);

test('Durable: a match after the delta, polled on durable timers, then the swap', async () => {
  const r = await replay(participant({ verify: true }));
  expect(r.result.error).toBeUndefined();
  expect(r.status.status).toBe('Completed');
  expect(r.doc).toMatchObject({ location: TARGET, lock: null });
  expect(r.posts).toEqual([
    { step: 'bulkCopy', sequence: 1, stepAttempt: 1 },
    { step: 'deltaCopy', sequence: 2, stepAttempt: 1 },
    { step: 'verify', sequence: 3, stepAttempt: 1 },
    // the end notice (§6.11), last of its attempt
    { step: 'completed', sequence: 8, stepAttempt: 1 },
  ]);
  expect(rows(r.status)).toEqual([[1, 'match', 3, 3]]);
  // the verify round: activities and durable timers only, never callHttp
  expect(r.result.actions.some((a) => a.kind === 'http')).toBe(false);
});

test('Durable: a mismatch, then a match: the write lock released, the delta copied again, verified, swapped', async () => {
  const p = participant({ verify: true, lateWrites: true, dropInDelta: (n) => n === 1 });
  const r = await replay(p);
  expect(r.status.status).toBe('Completed');
  expect(r.status.deltaAttempts).toBe(2);
  expect(rows(r.status)).toEqual([
    [1, 'mismatch', 4, 3],
    [2, 'match', 4, 4],
  ]);
  const writeReleases = r.result.actions.filter(
    (a) => a.name === 'migrationRelease' && (a.input as { phase?: string }).phase === 'write',
  );
  expect(writeReleases).toHaveLength(1); // writes resumed between the two write-lock attempts
  expect(r.posts.map((q) => [q.step, q.sequence])).toEqual([
    ['bulkCopy', 1],
    ['deltaCopy', 2],
    ['verify', 3],
    ['deltaCopy', 4],
    ['verify', 5],
    ['completed', 8],
  ]);
  expect(p.store.target.sort()).toEqual(['late-1', 'msg-1', 'msg-2', 'msg-3']);
});

test('Durable: a mismatch every time: Failed VerificationFailed with the detail, no swap', async () => {
  const p = participant({ verify: true, lateWrites: true, dropInDelta: () => true });
  const r = await replay(p);
  expect(r.status).toMatchObject({ status: 'Failed', phase: 'released' });
  expect(r.status.error).toMatch(
    /^verification failed on write-lock attempt 3 of 3, no swap: participant messages found a mismatch \(source 4, target 3\): missing at the target: late-1/,
  );
  expect(r.swaps).toBe(0);
  expect(r.doc).toMatchObject({ location: SOURCE, lock: null });
  expect(rows(r.status).map(([d, o]) => [d, o])).toEqual([
    [1, 'mismatch'],
    [2, 'mismatch'],
    [3, 'mismatch'],
  ]);
});

test('Durable: ROUTELOCK_REQUIRE_VERIFY and a participant without verify: Failed, no swap', async () => {
  const r = await replay(participant({ verify: false }), { env: { ROUTELOCK_REQUIRE_VERIFY: 'true' } });
  expect(r.status).toMatchObject({ status: 'Failed', phase: 'released' });
  expect(r.status.error).toMatch(/ROUTELOCK_REQUIRE_VERIFY is set/);
  expect(r.swaps).toBe(0);
  expect(rows(r.status)).toEqual([[1, 'notImplemented', undefined, undefined]]);
});

test('Durable: the cancel event during verify ends it: Cancelled, no swap, the route at the source', async () => {
  const verifying: RaisedEvent = {
    name: CANCEL_EVENT,
    input: { requestedAt: new Date(START).toISOString(), by: 'operator-1' },
    when: (s) =>
      s.actions.some(
        (a) =>
          a.name === 'migrationCallParticipant' &&
          (a.input as ParticipantCall).method === 'POST' &&
          (a.input as ParticipantCall & { method: 'POST' }).body.step === 'verify',
      ),
  };
  const r = await replay(participant({ verify: true }), { events: [verifying] });
  expect(r.status.status).toBe('Cancelled');
  expect(r.swaps).toBe(0);
  expect(r.doc).toMatchObject({ location: SOURCE, lock: null });
});

describe('negative control on Durable: a delta copy that drops an item', () => {
  test('without verify (404): swapped, and the late write is lost at the target', async () => {
    const p = participant({ verify: false, lateWrites: true, dropInDelta: () => true });
    const r = await replay(p);
    expect(r.status.status).toBe('Completed');
    expect(r.doc.location).toEqual(TARGET);
    expect(p.store.source).toContain('late-1');
    expect(p.store.target).not.toContain('late-1'); // data loss
  });
  test('with verify: caught, no swap, the route and every item still at the source', async () => {
    const p = participant({ verify: true, lateWrites: true, dropInDelta: () => true });
    const r = await replay(p);
    expect(r.status.status).toBe('Failed');
    expect(r.swaps).toBe(0);
    expect(r.doc.location).toEqual(SOURCE);
  });
});
