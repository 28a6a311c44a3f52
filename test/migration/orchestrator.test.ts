import { TokenKeyring } from '../../shared/security/tokenKeys';
import { migrationOrchestrator } from '../../functions/migrationOrchestrator';
import { ManualClock } from '../../testkit/clock';
import { parseConfig } from '../../shared/config';
import { createActivities } from '../../shared/migration/activities';
import type { ActivityName, MigrationInput, MigrationStatus } from '../../shared/migration/types';
import { migrationSettings } from '../../shared/migration/workflow';
import { Router } from '../../shared/router';
import { SqliteStore } from '../../shared/store/sqlite/locations';

/**
 * The Durable orchestrator driven by hand with a fake `context.df`: every yielded task is inspected
 * and answered by the test, so the exact sequence, the timer's fire time, the race against the copy
 * and the retry options are asserted directly.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const T0 = Date.UTC(2026, 3, 1);

class FakeTask {
  isCompleted = false;
  isFaulted = false;
  isCanceled = false;
  result: unknown;
  constructor(
    readonly kind: 'activity' | 'timer' | 'http' | 'any' | 'all',
    readonly detail: Record<string, unknown>,
    readonly children: FakeTask[] = [],
  ) {}
  cancel() {
    this.isCanceled = true;
  }
  complete(result: unknown) {
    this.isCompleted = true;
    this.result = result;
  }
}

const activityName = (fn: string) =>
  (fn.slice('migration'.length, 'migration'.length + 1).toLowerCase() +
    fn.slice('migration'.length + 1)) as ActivityName;

async function drive(options: {
  participants?: { name: string; url: string }[];
  /** Decide each race: which http tasks complete (and how), and whether the timer wins. */
  race?: (
    round: number,
    https: FakeTask[],
  ) => { deadlineFirst: boolean; replies: ({ statusCode: number } | null)[] };
}) {
  const config = parseConfig({ ROUTELOCK_PARTICIPANTS: JSON.stringify(options.participants ?? []) });
  const clock = new ManualClock(T0);
  const store = new SqliteStore(':memory:');
  const router = new Router({ store, timing: config.timing, clock: clock.now });
  const keyring = TokenKeyring.ephemeral();
  const activities = createActivities(router, config.timing, { keyring });
  await router.createRoute('conv-7', SOURCE);
  const input: MigrationInput = {
    migrationId: 'm-7',
    instanceId: 'migrate-conv-7',
    resourceId: 'conv-7',
    target: TARGET,
    settings: migrationSettings(config),
    lock: keyring.newSeed(),
  };
  const statuses: MigrationStatus[] = [];
  const df = {
    currentUtcDateTime: new Date(T0),
    getInput: () => input,
    setCustomStatus: (s: MigrationStatus) => statuses.push(s),
    callActivityWithRetry: (name: string, retry: unknown, activityInput: unknown) =>
      new FakeTask('activity', { name, retry, input: activityInput }),
    createTimer: (at: Date) => new FakeTask('timer', { fireAt: at.getTime() }),
    callHttp: (o: Record<string, unknown>) => new FakeTask('http', o),
    Task: {
      any: (tasks: FakeTask[]) => new FakeTask('any', {}, tasks),
      all: (tasks: FakeTask[]) => new FakeTask('all', {}, tasks),
    },
  };
  const log: {
    kind: string;
    name?: string;
    input?: unknown;
    fireAt?: number;
    retry?: unknown;
    url?: string;
  }[] = [];
  const generator = migrationOrchestrator({ df } as never) as Generator<FakeTask, MigrationStatus, unknown>;
  let rounds = 0;
  let timerToCancel: FakeTask | undefined;
  let cancelled = 0;
  let next = generator.next();
  while (!next.done) {
    const task = next.value;
    let answer: unknown;
    if (task.kind === 'activity') {
      const name = activityName(task.detail.name as string);
      log.push({ kind: 'activity', name, input: task.detail.input, retry: task.detail.retry });
      clock.set(df.currentUtcDateTime.getTime());
      answer = await (activities[name] as (i: unknown) => Promise<unknown>)(task.detail.input);
      df.currentUtcDateTime = new Date(df.currentUtcDateTime.getTime() + 1000);
    } else if (task.kind === 'timer') {
      log.push({ kind: 'timer', fireAt: task.detail.fireAt as number });
      df.currentUtcDateTime = new Date(task.detail.fireAt as number);
      answer = undefined;
    } else if (task.kind === 'any') {
      const [all, timer] = task.children as [FakeTask, FakeTask];
      const https = all.children;
      rounds += 1;
      log.push({ kind: 'race', fireAt: timer.detail.fireAt as number });
      for (const h of https)
        log.push({ kind: 'http', url: h.detail.url as string, input: JSON.parse(h.detail.body as string) });
      const decision = options.race?.(rounds, https) ?? {
        deadlineFirst: false,
        replies: https.map(() => ({ statusCode: 200 })),
      };
      decision.replies.forEach(
        (reply, i) => reply && https[i]!.complete({ statusCode: reply.statusCode, content: '' }),
      );
      if (decision.deadlineFirst) {
        timer.complete(undefined);
        df.currentUtcDateTime = new Date(timer.detail.fireAt as number);
        answer = timer;
      } else {
        all.complete(https.map((h) => h.result));
        df.currentUtcDateTime = new Date(df.currentUtcDateTime.getTime() + 60_000);
        answer = all;
      }
      if (!decision.deadlineFirst) timerToCancel = timer;
    } else {
      throw new Error(`unexpected yield ${task.kind}`);
    }
    next = generator.next(answer);
    if (timerToCancel) {
      // a race the copies won cancels its renewal timer before anything else happens
      expect(timerToCancel.isCanceled).toBe(true);
      cancelled += 1;
      timerToCancel = undefined;
    }
  }
  const doc = (await store.read('conv-7', { from: 'writeRegion' })).doc;
  return { output: next.value, log, statuses, doc, config, cancelled, input };
}

describe('the Durable orchestrator, driven by hand', () => {
  test('lock-only: exact sequence of activities and the convergence timer', async () => {
    const { output, log, doc, config, input } = await drive({});
    expect(log.map((l) => (l.kind === 'activity' ? l.name : l.kind))).toEqual([
      'prelock',
      'readRoute',
      'timer',
      'readRoute',
      'escalate',
      'escalate',
      'swap',
      'recordOutcome',
    ]);
    const prelockAt = T0; // the first activity runs at T0
    expect(log[2]!.fireAt).toBe(
      prelockAt + (config.timing.convergenceDelaySeconds + config.timing.safetyBufferSeconds) * 1000,
    );
    expect(log[0]!.input).toEqual({
      resourceId: 'conv-7',
      migrationId: 'm-7',
      owner: 'migrate-conv-7',
      target: TARGET,
      // the seed, never a token or an Idempotency-Key: the activities derive those
      lock: input.lock,
    });
    expect(log[3]!.input).toEqual({ resourceId: 'conv-7', from: 'readPath' });
    expect(log[4]!.input).toMatchObject({
      phase: 'hardDelete',
      ifMatch: expect.any(String),
      lock: input.lock,
    });
    expect(output).toMatchObject({ status: 'Completed', phase: 'swapped' });
    expect(doc.location).toEqual(TARGET);
  });

  test('every activity is called with RetryOptions from the settings (interval, attempts, backoff 2)', async () => {
    const { log } = await drive({});
    for (const entry of log.filter((l) => l.kind === 'activity')) {
      expect(entry.retry).toMatchObject({
        firstRetryIntervalInMilliseconds: 5000,
        maxNumberOfAttempts: 5,
        backoffCoefficient: 2,
      });
    }
  });

  test('the renewal timer races the bulk copy; when it wins, the lock is renewed and a fresh race begins', async () => {
    const participants = [{ name: 'messages', url: 'https://messages.test/migrate' }];
    const { log, output, cancelled } = await drive({
      participants,
      race: (round) =>
        round <= 2
          ? { deadlineFirst: true, replies: [null] }
          : { deadlineFirst: false, replies: [{ statusCode: 200 }] },
    });
    const kinds = log.map((l) => (l.kind === 'activity' ? l.name : l.kind));
    const hd = kinds.indexOf('escalate');
    expect(kinds.slice(hd, hd + 9)).toEqual([
      'escalate',
      'timer', // the in-flight grace before the copy
      'race',
      'http',
      'renew',
      'race',
      'http',
      'renew',
      'race',
    ]);
    const races = log.filter((l) => l.kind === 'race');
    const renewEvery = (21600 * 1000) / 3;
    expect(races[1]!.fireAt! - races[0]!.fireAt!).toBeGreaterThanOrEqual(renewEvery);
    const renews = log.filter((l) => l.name === 'renew');
    expect(renews[0]!.input).toMatchObject({ phase: 'hardDelete' });
    const https = log.filter((l) => l.kind === 'http');
    expect(https[0]!.input).toEqual({
      migrationId: 'm-7',
      resourceId: 'conv-7',
      from: SOURCE,
      to: TARGET,
      step: 'bulkCopy',
      attempt: 1,
    });
    expect(output).toMatchObject({ status: 'Completed' });
    expect(cancelled).toBe(2); // the bulk copy's last race and the delta copy's race
  });

  test('failure path: a participant 5xx is retried with backoff, a 4xx fails the migration and release is called with the token', async () => {
    const participants = [{ name: 'messages', url: 'https://messages.test/migrate' }];
    const { log, output, doc, input } = await drive({
      participants,
      race: (round) => ({ deadlineFirst: false, replies: [{ statusCode: round === 1 ? 503 : 400 }] }),
    });
    const kinds = log.map((l) => (l.kind === 'activity' ? l.name : l.kind));
    const firstRace = kinds.indexOf('race');
    expect(kinds.slice(firstRace, firstRace + 6)).toEqual([
      'race',
      'http',
      'timer',
      'race',
      'http',
      'release',
    ]);
    expect(log.find((l) => l.name === 'release')!.input).toEqual({
      resourceId: 'conv-7',
      lock: input.lock,
      reason: 'bulkCopy: ParticipantFailed: participant messages answered 400 to bulkCopy (attempt 2)',
    });
    expect(output).toMatchObject({ status: 'Failed', phase: 'released' });
    expect((output as MigrationStatus).error).toMatch(/answered 400 to bulkCopy \(attempt 2\)/);
    expect(doc).toMatchObject({ location: SOURCE, lock: null });
  });
});
