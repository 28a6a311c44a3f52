import type { OrchestrationContext } from 'durable-functions';
import { activityFunctionName, runOnDurable } from '../../functions/durable/runOnDurable';
import { activityNames } from '../../functions/migrationOrchestrator';
import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import {
  type ActivityName,
  type ActivityResult,
  type MigrationInput,
  type MigrationSettings,
  type SeededGrant,
  type Step,
  pendingStatus,
} from '../../shared/migration/types';
import {
  type Escalated,
  type Moving,
  type Prelocked,
  type Workflow,
  convergencePhase,
  hardDeletePhase,
  releaseUnseenPrelock,
  swapPhase,
  tryPrelock,
} from '../../shared/migration/workflow';
import { releaseAfterFailure } from '../../shared/migration/workflow/cleanUp';
import { visibilityRead } from '../../shared/migration/workflow/converge';
import { DurableReplay, type HttpReply } from '../../testkit/durableReplay';

/**
 * Each phase of the migration workflow driven alone, on the state the phase before would hand it,
 * through durable-functions' own executor (test/support/durableReplay) with scripted activity answers
 * and participant replies: what it asks for, in order, and what it answers (the next state or how the
 * migration ends), including a failure path of each.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const START = Date.UTC(2026, 4, 1);
const iso = (offsetMs: number) => new Date(START + offsetMs).toISOString();

const settings: MigrationSettings = {
  replicationBoundSeconds: 1,
  clockSkewSeconds: 0,
  safetyBufferSeconds: 1,
  hardDeleteLeaseSeconds: 120,
  writeLeaseSeconds: 30,
  writeBudgetSeconds: 60,
  deltaAttempts: 2,
  deltaRetryDelaySeconds: 1,
  inFlightGraceSeconds: 0,
  retryAttempts: 2,
  retryIntervalSeconds: 1,
  participants: [{ name: 'messages', url: 'https://messages.test/migrate' }],
};

const input: MigrationInput = {
  migrationId: 'm-1',
  instanceId: 'migrate-conv-1',
  resourceId: 'conv-1',
  target: TARGET,
  settings,
  lock: TokenKeyring.ephemeral().newSeed(),
  workflowVersion: 5,
};

const running = { ...pendingStatus(input), status: 'Running' as const };

const grant = (extra: Partial<SeededGrant> = {}): SeededGrant => ({
  migrationId: 'm-1',
  phase: 'prelock',
  startsAt: iso(0),
  expiresAt: iso(600_000),
  maxExpiresAt: iso(3_600_000),
  phaseExpiresAt: iso(600_000),
  convergenceDelaySeconds: 2,
  acquiredAt: iso(0),
  etag: 'e-grant',
  ...extra,
});

const ok = <T>(value: T): ActivityResult<T> => ({ ok: true, value });
const no = (code: string, message = `${code} here`): ActivityResult<never> => ({ ok: false, code, message });
/** The store down through every retry: the runner throws its error into the workflow. */
const down = { throws: 'the store is down' } as const;
type Answer = ActivityResult<unknown> | typeof down;

const route = (location = SOURCE, lockedBy: string | null = 'm-1') => ({
  resourceId: 'conv-1',
  location,
  secondary: null,
  lock: lockedBy === null ? null : { migrationId: lockedBy },
  enforcement: { read: 'allow', write: 'allow', delete: 'allow' },
  etag: 'e-route',
});

const prelocked: Prelocked = {
  input,
  status: { ...running, phase: 'prelock', timeline: { ...running.timeline, prelockAt: iso(0) } },
  etag: 'e-pre',
  grant: grant(),
};
const moving: Moving = {
  input,
  status: { ...prelocked.status, phase: 'converging' },
  etag: 'e-pre',
  from: SOURCE,
};
const writing: Escalated = {
  ...moving,
  status: { ...moving.status, phase: 'write', deltaAttempts: 1 },
  etag: 'e-write',
  grant: grant({ phase: 'write', writeAt: iso(5000) }),
};

const byFunction = new Map(activityNames.map((n) => [activityFunctionName(n), n] as [string, ActivityName]));

/**
 * Run one phase as a Durable orchestration of its own. `script` answers each activity call in turn;
 * `http` answers the participant calls.
 */
async function drive<T>(
  phase: () => Generator<Step, T, unknown>,
  script: Partial<Record<ActivityName, ActivityResult<unknown>[]>>,
  http?: (request: { body: unknown; now: number }) => HttpReply,
) {
  const queues = new Map(Object.entries(script).map(([name, answers]) => [name, [...answers]]));
  const calls: { name: ActivityName; input: unknown }[] = [];
  const orchestrator = function* (context: OrchestrationContext) {
    // runOnDurable runs a whole workflow; a phase answers its own result instead of a status.
    return yield* runOnDurable(context, phase() as unknown as Workflow, settings);
  };
  const result = await new DurableReplay({
    orchestrator,
    name: 'phase',
    instanceId: 'phase-1',
    input: {},
    start: START,
    activity: async (fn, activityInput) => {
      const name = byFunction.get(fn) as ActivityName;
      calls.push({ name, input: activityInput });
      const answer = queues.get(name)?.shift();
      if (answer === undefined) throw new Error(`the script has no answer left for ${name}`);
      return answer;
    },
    ...(http ? { http } : {}),
  }).run();
  expect(result.error).toBeUndefined();
  for (const [name, left] of queues) expect([name, left]).toEqual([name, []]);
  const steps = result.actions.map((a) =>
    a.kind === 'activity'
      ? byFunction.get(a.name as string)
      : a.kind === 'timer'
        ? `timer@${(a.fireAt as number) - START}`
        : a.kind,
  );
  return { output: result.output as T, calls, steps };
}

/**
 * An activity the runner gave up on, as the in-process runner hands it over after its retries: thrown
 * into the workflow at that step. (DurableReplay cannot play an activity failing on every attempt: the
 * SDK then waits on one more retry timer that the harness never fires.) The rest is answered at once.
 */
function driveGivingUp<T>(
  phase: Generator<Step, T, unknown>,
  script: Partial<Record<ActivityName, Answer[]>>,
) {
  const steps: string[] = [];
  let now = START;
  let next = phase.next();
  while (!next.done) {
    const step = next.value;
    steps.push(step.kind === 'activity' ? step.name : step.kind);
    if (step.kind === 'timer') now = step.fireAt;
    const answer = step.kind === 'activity' ? script[step.name]?.shift() : undefined;
    if (step.kind === 'activity' && answer === undefined) throw new Error(`no answer left for ${step.name}`);
    next =
      answer !== undefined && 'throws' in answer
        ? phase.throw(new Error(answer.throws))
        : phase.next(step.kind === 'now' ? now : (answer ?? null));
  }
  return { output: next.value, steps };
}

describe('tryPrelock', () => {
  test('granted: the next state carries its ETag and grant, the status its timeline', async () => {
    const { output, calls } = await drive(() => tryPrelock(input, running), {
      prelock: [ok(grant({ etag: 'e-pre' }))],
    });
    expect(calls).toEqual([
      {
        name: 'prelock',
        input: {
          resourceId: 'conv-1',
          migrationId: 'm-1',
          owner: 'migrate-conv-1',
          target: TARGET,
          lock: input.lock,
          withLocation: true,
        },
      },
    ]);
    expect(output).toEqual({
      kind: 'next',
      state: { ...prelocked, etag: 'e-pre', grant: grant({ etag: 'e-pre' }) },
    });
  });

  test('a swap moments ago is waited out on its Retry-After; another lock is refused', async () => {
    const { output, steps } = await drive(() => tryPrelock(input, running), {
      prelock: [
        { ok: false, code: 'ConvergencePending', message: 'just swapped', retryAfterSeconds: 7 },
        no('Locked'),
      ],
    });
    expect(steps).toEqual(['prelock', 'timer@7000', 'prelock']);
    expect(output).toEqual({ kind: 'refused', result: no('Locked') });
  });

  test('failure: a store down through every retry, releasing a pre-lock that committed unseen', () => {
    const { output, steps } = driveGivingUp(tryPrelock(input, running), {
      prelock: [down],
      readRoute: [ok(route())],
      release: [ok(route(SOURCE, null))],
    });
    expect(steps).toEqual(['prelock', 'readRoute', 'release']);
    expect(output).toEqual({
      kind: 'unanswered',
      message: 'the store is down',
      left: 'its pre-lock, committed unseen, was released',
    });
  });
});

describe('releaseUnseenPrelock (the pre-lock clean-up)', () => {
  test.each([
    [
      'another migration holds the route',
      [ok(route(SOURCE, 'm-0'))],
      [],
      'no lock is held by this migration',
    ],
    [
      'the route could not be read',
      [no('StoreUnavailable')],
      [],
      'a pre-lock that committed unseen lapses with its lease',
    ],
    [
      'the release was refused',
      [ok(route())],
      [no('Locked')],
      'its pre-lock committed unseen and could not be released; the lease frees it',
    ],
  ])('%s', async (_what, readRoute, release, left) => {
    const { output } = await drive(() => releaseUnseenPrelock(input), { readRoute, release });
    expect(output).toBe(left);
  });

  test('failure: the read (or the release) given up on: the lease frees it', () => {
    const read = driveGivingUp(releaseUnseenPrelock(input), { readRoute: [down] });
    const release = driveGivingUp(releaseUnseenPrelock(input), { readRoute: [ok(route())], release: [down] });
    for (const { output } of [read, release])
      expect(output).toBe('a pre-lock that committed unseen lapses with its lease');
  });
});

describe('convergencePhase: no re-read; the read-path check on a replica, none lock-only', () => {
  const waitUntil = START + 30_000;
  const v5 = (participants: MigrationSettings['participants']): Prelocked => {
    const i = { ...input, workflowVersion: 5, settings: { ...settings, participants } };
    return { ...prelocked, input: i, grant: { ...grant(), location: SOURCE } };
  };

  const none: MigrationSettings['participants'] = [];
  test.each([
    [settings.participants, 'replica'],
    [none, null],
  ])('participants %j: the check reads %s', (participants, expected) => {
    expect(visibilityRead({ ...input, settings: { ...settings, participants } })).toBe(expected);
  });

  test("with a participant: where the route was comes from the pre-lock's answer; the wait, then a replica", async () => {
    const state = v5(settings.participants);
    const { output, calls, steps } = await drive(() => convergencePhase(state, waitUntil), {
      readRoute: [ok(route(SOURCE, null)), ok(route())],
    });
    // (timer@0: the cancel check before the phase)
    expect(steps).toEqual(['timer@0', 'timer@30000', 'readRoute', 'timer@31000', 'readRoute']);
    expect(calls.map((c) => (c.input as { from: string }).from)).toEqual(['replica', 'replica']);
    expect(output).toEqual({ kind: 'next', state: { ...moving, input: state.input } });
  });

  test('lock-only: the convergence wait and nothing read', async () => {
    const state = v5([]);
    const { output, calls, steps } = await drive(() => convergencePhase(state, waitUntil), {});
    expect(steps).toEqual(['timer@0', 'timer@30000']);
    expect(calls).toEqual([]);
    expect(output).toEqual({ kind: 'next', state: { ...moving, input: state.input } });
  });

  test('a grant without a location (never answered so): the route is read', async () => {
    const state = { ...v5([]), grant: grant() };
    const { calls } = await drive(() => convergencePhase(state, waitUntil), {
      readRoute: [ok(route())],
    });
    expect(calls.map((c) => (c.input as { from: string }).from)).toEqual(['writeRegion']);
  });
});

describe('convergencePhase', () => {
  const waitUntil = START + 30_000;

  test('already at the target: released, NoOp', async () => {
    const { output } = await drive(() => convergencePhase(prelocked, waitUntil), {
      readRoute: [ok(route(TARGET))],
      release: [ok(route(TARGET, null))],
    });
    expect(output).toEqual({
      kind: 'done',
      status: {
        ...prelocked.status,
        status: 'NoOp',
        phase: 'released',
        error: 'the resource already sits at the target',
      },
    });
  });
});

describe('hardDeletePhase', () => {
  test('failure: an escalation refused fails it at the status it was given', async () => {
    const { output } = await drive(() => hardDeletePhase(moving), { escalate: [no('Locked')] });
    expect(output).toEqual({
      kind: 'failed',
      status: moving.status,
      reason: 'escalate to hardDelete: Locked: Locked here',
      code: 'Locked',
      job: { from: SOURCE, migrationAttempt: 1 },
    });
  });
});

describe('swapPhase', () => {
  test('a write lock that lapsed before the swap is an overrun, tried again', async () => {
    const { output } = await drive(() => swapPhase(writing), { swap: [no('InvalidTransition', 'lapsed')] });
    expect(output).toEqual({ kind: 'lapsed', overrun: 'swap: lapsed' });
  });

  test('failure: any other refusal fails the migration', async () => {
    const { output } = await drive(() => swapPhase(writing), { swap: [no('Locked')] });
    expect(output).toEqual({
      kind: 'failed',
      status: writing.status,
      reason: 'swap: Locked: Locked here',
      code: 'Locked',
      job: { from: SOURCE, migrationAttempt: 1, lockAcquiredAt: writing.grant.acquiredAt },
    });
  });
});

describe('releaseAfterFailure (the release after a failed attempt)', () => {
  test.each([
    ['released', [ok(route(SOURCE, null))], 'released'],
    ['a lock that lapsed already', [no('LockExpired')], 'released'],
    ['failure: the release refused', [no('Locked')], 'release refused (Locked); the lease will free it'],
  ])('%s', async (_what, release, released) => {
    const { output, calls } = await drive(() => releaseAfterFailure(input, 'deltaCopy: boom'), { release });
    // the release says why: the failure's reason, for the audit ledger
    expect(calls).toEqual([
      { name: 'release', input: { resourceId: 'conv-1', lock: input.lock, reason: 'deltaCopy: boom' } },
    ]);
    expect(output).toBe(released);
  });

  test('failure: a release the runner gave up on: the lease frees the lock', () => {
    const { output } = driveGivingUp(releaseAfterFailure(input, 'deltaCopy: boom'), { release: [down] });
    expect(output).toBe('release failed (the store is down); the lease will free it');
  });
});
