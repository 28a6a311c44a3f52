import { migrationOrchestrator } from '../../functions/migrationOrchestrator';
import { parseConfig } from '../../shared/config';
import { migrationFixture } from '../../testkit/migrationFixture';
import type { MigrationStatus } from '../../shared/migration/types';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { FaultyStore } from '../../testkit/faultyStore';
import { DurableReplay, type HttpReply } from '../../testkit/durableReplay';
import {
  type InputVersion,
  SOURCE,
  START,
  TARGET,
  V5,
  durableMigration,
  participantJobs,
} from '../support/durableMigrations';

/**
 * The Durable orchestrator replayed through durable-functions' own executor (pinned version), with
 * the real activities against a real store on a virtual clock. Proves it is deterministic under replay
 * and uses the API the way the engine expects.
 */

async function setup(env: Record<string, string> = {}, participants: { name: string; url: string }[] = []) {
  const config = parseConfig({ ...env, ROUTELOCK_PARTICIPANTS: JSON.stringify(participants) });
  const { store, records, keyring, activities, input, runActivity } = await migrationFixture({
    config,
    start: START,
    source: SOURCE,
    target: TARGET,
    store: new FaultyStore(new SqliteStore(':memory:')),
  });
  let replay: DurableReplay;
  const make = (
    options: {
      http?: (r: { url: string; body: unknown; now: number }) => HttpReply;
      crashBeforeRun?: number;
      failNext?: string;
    } = {},
  ) => {
    let failNext = options.failNext;
    // the input is the version new migrations run: its participant calls are callParticipant activities
    if (options.http) V5.connect?.(activities, options.http, () => replay.now);
    replay = new DurableReplay({
      orchestrator: migrationOrchestrator,
      name: 'migrationOrchestrator',
      instanceId: input.instanceId,
      input,
      start: START,
      activity: async (fn, activityInput) => {
        try {
          return await runActivity(fn, activityInput, replay.now, (name) => {
            if (failNext !== name) return;
            failNext = undefined;
            store.down = true;
          });
        } finally {
          store.down = false;
        }
      },
      ...(options.http ? { http: options.http } : {}),
      ...(options.crashBeforeRun ? { crashBeforeRun: options.crashBeforeRun } : {}),
    });
    return replay;
  };
  return { config, store, records, input, make, activities, keyring };
}

/** A participant request: the callParticipant activity. */
const isParticipantCall = (a: { name?: string }) => a.name === 'migrationCallParticipant';

const names = (actions: { kind: string; name?: string }[]) =>
  actions.map((a) => (a.kind === 'activity' ? a.name : a.kind));

describe('Durable orchestrator replayed through the real engine', () => {
  test('no fencing token or Idempotency-Key in the history, the actions or the record (a leaking activity is caught)', async () => {
    for (const leak of [false, true]) {
      const h = await setup({}, [{ name: 'messages', url: 'https://messages.test/migrate' }]);
      if (leak) {
        // the control: the pre-lock activity as it was, handing the token back into orchestration state
        const prelock = h.activities.prelock;
        h.activities.prelock = async (input) => {
          const result = await prelock(input);
          return result.ok
            ? { ok: true, value: { ...result.value, token: h.keyring.credentials(input.lock).token } }
            : result;
        };
      }
      // a participant without verify (an optional step): 404
      const result = await h
        .make({
          http: (r) => ({
            statusCode: (r.body as { step?: string } | undefined)?.step === 'verify' ? 404 : 200,
          }),
        })
        .run();
      expect((result.output as MigrationStatus).status).toBe('Completed');
      const { token, idempotencyKey } = h.keyring.credentials(h.input.lock);
      const stored = JSON.stringify([
        result.history,
        result.actions,
        result.statuses,
        await h.records.get('m-1'),
      ]);
      expect({ leak, token: stored.includes(token), key: stored.includes(idempotencyKey) }).toEqual({
        leak,
        token: leak,
        key: false,
      });
    }
  });

  test('lock-only migration: the exact actions, the convergence timer, Completed, route moved', async () => {
    const h = await setup();
    const result = await h.make().run();
    expect(result.error).toBeUndefined();
    expect((result.output as MigrationStatus).status).toBe('Completed');
    expect(names(result.actions)).toEqual([
      'timer', // the first cancel check, due at once (docs/design.md §6.8)
      'migrationPrelock',
      // no re-read (the pre-lock answers where the route was) and, lock-only, no read-path check
      'timer',
      'migrationEscalate',
      'migrationEscalate',
      'migrationSwap',
      // the swap confirmed on a replica once the replication bound has passed
      'timer',
      'migrationReadRoute',
      'migrationRecordOutcome',
    ]);
    const confirm = result.actions.filter((a) => a.kind === 'timer')[2]!;
    const swappedAt = Date.parse((result.output as MigrationStatus).timeline.swappedAt!);
    const { replicationBoundSeconds, safetyBufferSeconds } = h.input.settings;
    expect(confirm.fireAt).toBe(swappedAt + (replicationBoundSeconds + safetyBufferSeconds) * 1000);
    expect(result.actions.at(-2)).toMatchObject({ input: { from: 'replica' } });
    // The timer fires at max(startsAt, acquiredAt + replication bound) + safety buffer.
    const timer = result.actions.filter((a) => a.kind === 'timer')[1]!;
    expect(timer.fireAt).toBe(START + (7500 + 600) * 1000);
    const doc = (await h.store.read('conv-1', { from: 'writeRegion' })).doc;
    expect(doc).toMatchObject({ location: TARGET, lock: null });
    expect((await h.records.get('m-1'))?.status).toMatchObject({ status: 'Completed' });
    expect((await h.records.get('m-1'))?.done).toBe(true);
    expect(result.statuses.at(-1)).toMatchObject({ status: 'Completed', phase: 'swapped' });
  });

  test('a failing participant: Failed with the reason, and release is called with the token', async () => {
    const h = await setup({}, [{ name: 'messages', url: 'https://messages.test/migrate' }]);
    const result = await h.make({ http: () => ({ statusCode: 400, content: 'bad' }) }).run();
    const status = result.output as MigrationStatus;
    expect(status).toMatchObject({ status: 'Failed', phase: 'released' });
    expect(status.error).toMatch(/participant messages answered 400 to bulkCopy/);
    // a participant's refusal fails its attempt, and each of the 3 attempts takes a fresh lock
    // and releases it with its own token
    const release = result.actions.filter((a) => a.name === 'migrationRelease');
    expect(release.map((a) => (a.input as { lock: { attempt: number } }).lock.attempt)).toEqual([1, 2, 3]);
    expect(release[0]!.input).toMatchObject({ resourceId: 'conv-1', lock: { nonce: expect.any(String) } });
    expect(status.attempts?.map((a) => a.outcome)).toEqual(['Failed', 'Failed', 'Failed']);
    const doc = (await h.store.read('conv-1', { from: 'writeRegion' })).doc;
    expect(doc).toMatchObject({ location: SOURCE, lock: null });
  });

  test('a store outage during an activity is retried by RetryOptions (failure, retry timer, new attempt)', async () => {
    const h = await setup();
    const result = await h.make({ failNext: 'escalate' }).run();
    expect((result.output as MigrationStatus).status).toBe('Completed');
    const escalations = result.actions.filter((a) => a.name === 'migrationEscalate');
    expect(escalations).toHaveLength(3); // hardDelete fails once, succeeds on retry; then write
    const failed = result.history.filter((e) => e.EventType === 6);
    expect(failed).toHaveLength(1);
  });

  test('crash and resume: a fresh orchestrator process replays the history and finishes the same way', async () => {
    const h = await setup();
    const result = await h.make({ crashBeforeRun: 5 }).run();
    expect((result.output as MigrationStatus).status).toBe('Completed');
    expect(result.runs).toBeGreaterThan(5);
  });

  test('negative control: an orchestrator that draws a random number is caught as non-deterministic', async () => {
    const h = await setup();
    const { DurableReplay: Replay } = await import('../../testkit/durableReplay');
    const leaky = function* (context: Parameters<typeof migrationOrchestrator>[0]) {
      // The bug: a delay drawn at random (Date.now() is the same bug, but two replays within one
      // millisecond would hide it; a random draw differs on every replay).
      const start = context.df.currentUtcDateTime.getTime();
      yield context.df.createTimer(new Date(start + 1000 + Math.floor(Math.random() * 1e9)));
      yield context.df.createTimer(new Date(start + 2000));
      return null;
    };
    const replay = new Replay({
      orchestrator: leaky as never,
      name: 'leaky',
      instanceId: 'i',
      input: h.input,
      start: START,
      activity: async () => null,
    });
    await expect(replay.run()).rejects.toThrow(/non-deterministic replay/);
  });
});

describe('why the workflow races fresh tasks only', () => {
  test('negative control: racing one callHttp task twice desynchronizes ids with the extension', async () => {
    // Task.any([copy, t1]) then Task.any([copy, t2]): durable-functions re-sends copy's action with the
    // second race (azure-functions-durable-js#574), so the extension numbers the second timer differently.
    const twice = function* (
      context: Parameters<typeof migrationOrchestrator>[0],
    ): Generator<unknown, string, unknown> {
      const t0 = context.df.currentUtcDateTime.getTime();
      const copy = context.df.callHttp({
        method: 'POST',
        url: 'http://p.test/copy',
        body: '{}',
        enablePolling: true,
      });
      const t1 = context.df.createTimer(new Date(t0 + 1000));
      if ((yield context.df.Task.any([copy, t1])) === t1) {
        const t2 = context.df.createTimer(new Date(t0 + 2000));
        return (yield context.df.Task.any([copy, t2])) === copy ? 'copy' : 'timer';
      }
      return 'copy';
    };
    const replay = new DurableReplay({
      orchestrator: twice as never,
      name: 'twice',
      instanceId: 'i-2',
      input: {},
      start: START,
      maxRuns: 50,
      activity: async () => null,
      http: () => ({ statusCode: 200, durationMs: 1500 }),
    });
    const outcome = await replay.run().then(
      (r) => ({ output: r.output, http: r.actions.filter((a) => a.kind === 'http').length }),
      (e: Error) => ({ error: e.message }),
    );
    // The copy finishes at 1.5 s, before the second timer: a correct run answers 'copy' with one call.
    expect(outcome).not.toEqual({ output: 'copy', http: 1 });
  });
});

/**
 * Scenarios per input version this code runs: each runs today's orchestrator through the faithful
 * harness and must pass (callParticipant, participants answering 202 + Location).
 */
const VERSIONS: InputVersion[] = [V5];
const ONE = [{ name: 'messages', url: 'https://messages.test/migrate' }];
const TWO = [...ONE, { name: 'media', url: 'https://media.test/migrate' }];
/** A 300 s hard-delete and write lease: renewed every 100 s, so a copy of a few minutes races renewals. */
// One delta attempt: a 300 s hard-delete lease cannot outlast a 900 s overrun (timingInequalities, shared/migration/settings.ts).
const SHORT_LEASES = {
  ROUTELOCK_HARD_DELETE_LEASE_SECONDS: '300',
  ROUTELOCK_WRITE_LEASE_SECONDS: '300',
  ROUTELOCK_DELTA_ATTEMPTS: '1',
};

describe.each(VERSIONS)('faithful harness scenarios, input $label', (version) => {
  test('renewals race a long copy: the participant takes 230 s (inside the 240 s client limit)', async () => {
    const m = await durableMigration({ env: SHORT_LEASES, participants: TWO, version });
    const participant = participantJobs({
      answers: version.answers,
      durationMs: (job) => (job.host === 'messages.test' && job.step === 'bulkCopy' ? 230_000 : 5_000),
    });
    const result = await m.make({ http: participant.http }).run();
    expect(result.runtimeStatus).toBe('Completed');
    expect((result.output as MigrationStatus).status).toBe('Completed');
    const sequence = names(result.actions);
    const firstCopy = result.actions.findIndex(isParticipantCall);
    const renewals = sequence.filter((n, i) => n === 'migrationRenew' && i > firstCopy);
    expect(renewals.length).toBeGreaterThanOrEqual(2); // at 100 s and 200 s of the bulk copy
    // one job per participant and step, polled across the renewals
    const jobs = new Set(participant.calls.map((c) => c.job));
    expect([...jobs].filter((j) => j.includes(':bulkCopy:')).sort()).toEqual([
      'media.test:bulkCopy:1',
      'messages.test:bulkCopy:1',
    ]);
    expect(
      participant.calls.filter((c) => c.job === 'messages.test:bulkCopy:1').length,
    ).toBeGreaterThanOrEqual(3);
    const media = participant.calls.filter((c) => c.job === 'media.test:bulkCopy:1' && c.method === 'POST');
    expect(media).toHaveLength(1); // the finished job is not asked again
  });

  test('a crash mid-copy: a new process replays the stored history, the copy is asked again, it finishes the same', async () => {
    const clean = await (async () => {
      const m = await durableMigration({ participants: ONE, version, reproducible: true });
      const participant = participantJobs({ answers: version.answers, durationMs: () => 60_000 });
      return m.make({ http: participant.http }).run();
    })();
    const m = await durableMigration({ participants: ONE, version, reproducible: true });
    const participant = participantJobs({ answers: version.answers, durationMs: () => 60_000 });
    // the process dies right after the episode that sent the bulk copy: its answer is never processed
    const stopped = await m
      .make({ http: participant.http, stopWhen: ({ actions }) => actions.some(isParticipantCall) })
      .run();
    expect(stopped.runtimeStatus).toBe('Running');
    const resumed = await m.make({ history: stopped.history, http: participant.http }).run();
    expect(resumed).toMatchObject({ runtimeStatus: 'Completed', output: clean.output });
    expect(
      participant.calls.filter((c) => c.job === 'messages.test:bulkCopy:1').length,
    ).toBeGreaterThanOrEqual(1);
    expect((await m.store.read('conv-1', { from: 'writeRegion' })).doc).toMatchObject({
      location: TARGET,
      lock: null,
    });
  });
});
