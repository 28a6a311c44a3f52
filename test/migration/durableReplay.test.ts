import { migrationOrchestrator } from '../../functions/migrationOrchestrator';
import { parseConfig } from '../../shared/config';
import { migrationFixture } from '../../testkit/migrationFixture';
import type { MigrationStatus } from '../../shared/migration/types';
import { SqliteStore } from '../../shared/store/sqlite/locations';
import { FaultyStore } from '../../testkit/faultyStore';
import { DurableReplay, type HttpReply } from '../../testkit/durableReplay';

/**
 * The Durable orchestrator replayed through durable-functions' own executor (pinned version), with
 * the real activities against a real store on a virtual clock. Proves it is deterministic under replay
 * and uses the API the way the engine expects.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const START = Date.UTC(2026, 2, 1);

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
      const result = await h.make({ http: () => ({ statusCode: 200 }) }).run();
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
      'migrationPrelock',
      'migrationReadRoute',
      'timer',
      'migrationReadRoute',
      'migrationEscalate',
      'migrationEscalate',
      'migrationSwap',
      'migrationRecordOutcome',
    ]);
    // The timer fires at max(startsAt, acquiredAt + replication bound) + safety buffer.
    const timer = result.actions.find((a) => a.kind === 'timer')!;
    expect(timer.fireAt).toBe(START + (7500 + 600) * 1000);
    const doc = (await h.store.read('conv-1', { from: 'writeRegion' })).doc;
    expect(doc).toMatchObject({ location: TARGET, lock: null });
    expect((await h.records.get('m-1'))?.status).toMatchObject({ status: 'Completed' });
    expect((await h.records.get('m-1'))?.done).toBe(true);
    expect(result.statuses.at(-1)).toMatchObject({ status: 'Completed', phase: 'swapped' });
  });

  test('participants: the copy races a renewal timer; the hard-delete lock is renewed while it runs', async () => {
    const participants = [
      { name: 'messages', url: 'https://messages.test/migrate' },
      { name: 'media', url: 'https://media.test/migrate' },
    ];
    const h = await setup({}, participants);
    const calls: string[] = [];
    const jobsEnd = new Map<string, number>();
    const result = await h
      .make({
        // A participant job: the first POST starts it, a repeated POST answers when the same job ends.
        http: ({ url, body, now }) => {
          const step = (body as { step: string }).step;
          const job = `${new URL(url).host}:${step}`;
          calls.push(job);
          const length = job === 'messages.test:bulkCopy' ? 5 * 3600_000 : 1000; // 5 h of virtual time
          if (!jobsEnd.has(job)) jobsEnd.set(job, now + length);
          return { statusCode: 200, durationMs: Math.max(0, (jobsEnd.get(job) as number) - now) };
        },
      })
      .run();
    expect((result.output as MigrationStatus).status).toBe('Completed');
    const sequence = names(result.actions);
    const firstRenew = sequence.indexOf('migrationRenew');
    expect(firstRenew).toBeGreaterThan(sequence.indexOf('http'));
    expect(sequence.filter((n) => n === 'migrationRenew').length).toBeGreaterThanOrEqual(2); // 2 h cadence over 5 h
    // after each renewal the participant still copying is asked again (idempotent POST), never raced twice
    expect(calls.filter((c) => c === 'messages.test:bulkCopy').length).toBeGreaterThanOrEqual(3);
    expect(calls.filter((c) => c === 'media.test:bulkCopy')).toHaveLength(1);
    expect(calls.filter((c) => c.endsWith('deltaCopy'))).toHaveLength(2);
  });

  test('a failing participant: Failed with the reason, and release is called with the token', async () => {
    const h = await setup({}, [{ name: 'messages', url: 'https://messages.test/migrate' }]);
    const result = await h.make({ http: () => ({ statusCode: 400, content: 'bad' }) }).run();
    const status = result.output as MigrationStatus;
    expect(status).toMatchObject({ status: 'Failed', phase: 'released' });
    expect(status.error).toMatch(/participant messages answered 400 to bulkCopy/);
    const release = result.actions.filter((a) => a.name === 'migrationRelease');
    expect(release).toHaveLength(1);
    expect(release[0]!.input).toMatchObject({ resourceId: 'conv-1', lock: { nonce: expect.any(String) } });
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
