import { migrationOrchestrator } from '../../functions/migrationOrchestrator';
import { parseConfig } from '../../shared/config';
import type {
  HttpAnswer,
  MigrationInput,
  MigrationStatus,
  ParticipantCall,
} from '../../shared/migration/types';
import { WORKFLOW_VERSION } from '../../shared/migration/types';
import { DurableReplay, type HttpReply } from '../../testkit/durableReplay';
import { migrationFixture } from '../../testkit/migrationFixture';
import { plantParticipantBug } from '../../testkit/plantedBugs';
import { worstCaseCopyActions } from '../../shared/migration/workflow/copy';
import { profiles } from '../../shared/core/profiles';

/**
 * The participant protocol on the Durable runner, replayed through durable-functions' own executor
 * (testkit/durableReplay.ts, its current API): participants are `callParticipant` activities, polls are
 * durable timers, never `callHttp`. Participants answer at the harness's virtual time.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const START = Date.UTC(2026, 2, 1);
const PARTICIPANTS = [
  { name: 'messages', url: 'https://messages.test/migrate' },
  { name: 'media', url: 'https://media.test/migrate' },
];

type Answer = (call: ParticipantCall, now: number) => HttpAnswer;

async function replay(
  answer: Answer,
  options: {
    version?: number;
    env?: Record<string, string>;
    plant?: boolean;
    http?: () => HttpReply;
    crashBeforeRun?: number;
  } = {},
) {
  const config = parseConfig({
    ROUTELOCK_PROFILE: 'dev',
    ROUTELOCK_PARTICIPANTS: JSON.stringify(PARTICIPANTS),
    // the contract within one attempt (a retry with a fresh lock: test/migration/attempts.test.ts)
    ROUTELOCK_MIGRATION_ATTEMPTS: '1',
    ...options.env,
  });
  const fixture = await migrationFixture({ config, start: START, source: SOURCE, target: TARGET });
  const input: MigrationInput = { ...fixture.input, workflowVersion: options.version ?? WORKFLOW_VERSION };
  const calls: { participant: string; step: string; method: string; at: number; status: number }[] = [];
  fixture.activities.callParticipant = async (call) => {
    const value = answer(call, fixture.clock.now());
    const step =
      call.method === 'POST' ? call.body.step : call.url.includes('/deltaCopy/') ? 'deltaCopy' : 'bulkCopy';
    // the copy contract only: the end notices have their own tests (notices.durable.test.ts)
    if (step !== 'bulkCopy' && step !== 'deltaCopy') return { ok: true, value };
    calls.push({
      participant: call.participant,
      step,
      method: call.method,
      at: fixture.clock.now(),
      status: value.status,
    });
    return { ok: true, value };
  };
  if (options.plant) plantParticipantBug(fixture.activities, 'anyTwoHundredIsDone');
  const harness: DurableReplay = new DurableReplay({
    orchestrator: migrationOrchestrator,
    name: 'migrationOrchestrator',
    instanceId: input.instanceId,
    input,
    start: START,
    activity: (fn, activityInput) => fixture.runActivity(fn, activityInput, harness.now),
    ...(options.http ? { http: options.http } : {}),
    ...(options.crashBeforeRun ? { crashBeforeRun: options.crashBeforeRun } : {}),
  });
  const result = await harness.run();
  const doc = (await fixture.store.read('conv-1', { from: 'writeRegion' })).doc;
  return { result, status: result.output as MigrationStatus, doc, calls };
}

/**
 * Each participant's job takes `lengthMs` of virtual time from its first POST; answered 202 + Location
 * meanwhile. They implement only the copies: verify answers 404 (not implemented).
 */
function jobs(lengthMs: Record<string, number>): Answer {
  const ends = new Map<string, number>();
  return (call, now) => {
    const host = new URL(call.participantUrl).host;
    if (call.method === 'POST' && call.body.step === 'verify') return { status: 404, body: null };
    if (call.method === 'POST') {
      const key = `${host}/${call.body.step}/${call.body.stepAttempt}`;
      if (!ends.has(key)) ends.set(key, now + (lengthMs[`${call.participant}:${call.body.step}`] ?? 0));
      return { status: 202, body: null, location: `https://${key}` };
    }
    const key = call.url.slice('https://'.length);
    return (ends.get(key) ?? Infinity) <= now
      ? { status: 200, body: { done: true } }
      : { status: 202, body: null };
  };
}

const names = (actions: { kind: string; name?: string }[]) =>
  actions.map((a) => (a.kind === 'activity' ? a.name : a.kind));

test('two participants answering 202: POST once, poll on durable timers, renew the hard-delete lock in between, Completed', async () => {
  // dev profile: the hard-delete lease is 120 s, renewed every 40 s; messages copies for 100 s, media 10 s
  const r = await replay(
    jobs({ 'messages:bulkCopy': 100_000, 'media:bulkCopy': 10_000, 'messages:deltaCopy': 2000 }),
  );
  expect(r.result.error).toBeUndefined();
  expect(r.status.status).toBe('Completed');
  expect(r.doc).toMatchObject({ location: TARGET, lock: null });
  const sequence = names(r.result.actions);
  expect(sequence).not.toContain('http'); // never callHttp
  const bulk = r.calls.filter((c) => c.step === 'bulkCopy');
  const by = (p: string, m: string) => bulk.filter((c) => c.participant === p && c.method === m);
  expect([by('messages', 'POST').length, by('media', 'POST').length]).toEqual([1, 1]);
  // polls back off 1, 2, 4, 8, 16, 30, 30 … s: messages' 100 s job takes 8 polls, media's 10 s job 4
  const messages = [...by('messages', 'POST'), ...by('messages', 'GET')];
  expect(messages.slice(1).map((c, i) => (c.at - messages[i]!.at) / 1000)).toEqual([
    1, 2, 4, 8, 16, 30, 30, 30,
  ]);
  expect([by('messages', 'GET').length, by('media', 'GET').length]).toEqual([8, 4]);
  // renewals between the first and the last poll
  const firstPoll = sequence.indexOf('migrationCallParticipant');
  const lastBulk = r.result.actions.findIndex(
    (a) => a.name === 'migrationEscalate' && (a.input as { phase: string }).phase === 'write',
  );
  const renewals = r.result.actions
    .map((a, i) => ({ a, i }))
    .filter(({ a, i }) => a.name === 'migrationRenew' && i > firstPoll && i < lastBulk);
  expect(renewals).toHaveLength(3); // every 40 s over the 121 s copy
  expect({
    actions: r.result.actions.length,
    callParticipant: sequence.filter((n) => n === 'migrationCallParticipant').length,
    timers: sequence.filter((n) => n === 'timer').length,
    renewals: sequence.filter((n) => n === 'migrationRenew').length,
    // besides the copies: the first cancel check's timer (before the pre-lock; docs/design.md §6.8);
    // the verify round, a POST each (404: not implemented) and its race timer; the confirmation's timer
    // and replica read; the two end notices and their race timer; the 1 s in-flight grace after each
    // escalation; no re-read after the pre-lock
  }).toEqual({ actions: 59, callParticipant: 23, timers: 24, renewals: 5 });
});

test('crash mid-copy: a fresh orchestrator process replays the polls from history and finishes the same way', async () => {
  const r = await replay(jobs({ 'messages:bulkCopy': 100_000, 'media:bulkCopy': 10_000 }), {
    crashBeforeRun: 20,
  });
  expect(r.result.runs).toBeGreaterThan(20);
  expect(r.status.status).toBe('Completed');
});

test('a participant answering 503 every time: retried on durable timers, then Failed with the reason', async () => {
  const r = await replay((call) =>
    call.participant === 'media' ? { status: 503, body: null } : { status: 200, body: null },
  );
  expect(r.status).toMatchObject({ status: 'Failed', phase: 'released' });
  expect(r.status.error).toMatch(
    /participant media answered 503 to bulkCopy \(attempt 1\): 5 times in a row/,
  );
  expect(r.calls.filter((c) => c.participant === 'media')).toHaveLength(5); // ROUTELOCK_RETRY_ATTEMPTS
  expect(r.doc).toMatchObject({ location: SOURCE, lock: null });
});

describe('negative control on Durable: a 202 without Location', () => {
  const noLocation: Answer = (call) =>
    call.method === 'POST' && call.body.step === 'verify'
      ? { status: 404, body: null }
      : { status: 202, body: null };
  test('planted "any 2xx is done": Completed, though no participant copied anything', async () => {
    const r = await replay(noLocation, { plant: true });
    expect(r.status.status).toBe('Completed');
    expect(r.doc.location).toEqual(TARGET);
    expect(r.calls.every((c) => c.method === 'POST')).toBe(true); // never polled: nothing waited for
  });
  test('real: Failed with the reason, the route at the source', async () => {
    const r = await replay(noLocation);
    expect(r.status).toMatchObject({ status: 'Failed', phase: 'released' });
    expect(r.status.error).toMatch(
      /answered 202 to bulkCopy \(attempt 1\): protocol error: 202 without a Location/,
    );
    expect(r.doc).toMatchObject({ location: SOURCE, lock: null });
  });
});

test('the history stays bounded: a 1-hour bulk copy polled at the 30 s cap costs about 2 actions per poll', async () => {
  const r = await replay(jobs({ 'messages:bulkCopy': 3600_000 }), {
    env: { ROUTELOCK_PROFILE: 'production', ROUTELOCK_PARTICIPANTS: JSON.stringify([PARTICIPANTS[0]]) },
  });
  expect(r.status.status).toBe('Completed');
  const actions = r.result.actions;
  const first = actions.findIndex((a) => a.name === 'migrationCallParticipant');
  const write = actions.findIndex(
    (a) => a.name === 'migrationEscalate' && (a.input as { phase: string }).phase === 'write',
  );
  const copy = names(actions.slice(first, write));
  const polls = r.calls.filter((c) => c.step === 'bulkCopy' && c.method === 'GET').length;
  // about 2·3600/pollMax actions per hour per participant (plus the first polls' backoff
  // from 1 s: 6 more): one activity and one sleep per poll, the POST with its race timer
  expect(polls).toBeLessThanOrEqual(3600 / 30 + 6);
  expect(copy.length).toBe(2 * polls + 2);
  // the bound config checks settings against (workflow/copy.ts) holds for what the harness recorded
  const bound = worstCaseCopyActions({
    participants: 1,
    prelockMaxSeconds: 3600,
    hardDeleteLeaseSeconds: Number(profiles.production.ROUTELOCK_HARD_DELETE_LEASE_SECONDS),
    writeLeaseSeconds: 1,
    writeBudgetSeconds: 1,
    deltaAttempts: 0,
    pollMinSeconds: 1,
    pollMaxSeconds: 30,
  });
  expect(copy.length).toBeLessThanOrEqual(bound);
  // and tightly: its polls come every 29 s, as the engine may wake each a second early (this harness
  // does not), so the slack is those extra polls' two actions each and no more than 10 besides
  const earlyWakePolls = Math.ceil(3600 / 29) - 3600 / 30;
  expect(bound - copy.length).toBeLessThan(10 + 2 * earlyWakePolls);
  expect({ polls, actions: copy.length, timers: copy.filter((n) => n === 'timer').length }).toEqual({
    polls: 124,
    actions: 250,
    timers: 125,
  });
});
