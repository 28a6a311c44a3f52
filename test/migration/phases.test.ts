import type { OrchestrationContext } from 'durable-functions';
import { activityFunctionName, runOnDurable } from '../../functions/durable/runOnDurable';
import { activityNames } from '../../functions/migrationOrchestrator';
import { TokenKeyring } from '../../shared/security/tokenKeys';
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
  cleanUp,
  convergencePhase,
  hardDeletePhase,
  prelockPhase,
  releaseUnseenPrelock,
  swapPhase,
  writePhase,
} from '../../shared/migration/workflow';
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

describe('prelockPhase', () => {
  test('granted: the next state carries its ETag and grant, the status its timeline', async () => {
    const { output, calls } = await drive(() => prelockPhase(input, running), {
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
        },
      },
    ]);
    expect(output).toEqual({
      kind: 'next',
      state: { ...prelocked, etag: 'e-pre', grant: grant({ etag: 'e-pre' }) },
    });
  });

  test('a swap moments ago is waited out on its Retry-After; another lock is a Conflict', async () => {
    const { output, steps } = await drive(() => prelockPhase(input, running), {
      prelock: [
        { ok: false, code: 'ConvergencePending', message: 'just swapped', retryAfterSeconds: 7 },
        no('Locked'),
      ],
    });
    expect(steps).toEqual(['prelock', 'timer@7000', 'prelock']);
    expect(output).toEqual({
      kind: 'done',
      status: { ...running, status: 'Conflict', error: 'Locked: Locked here' },
    });
  });

  test('failure: a store down through every retry fails it, releasing a pre-lock that committed unseen', () => {
    const { output, steps } = driveGivingUp(prelockPhase(input, running), {
      prelock: [down],
      readRoute: [ok(route())],
      release: [ok(route(SOURCE, null))],
    });
    expect(steps).toEqual(['prelock', 'readRoute', 'release', 'status']);
    expect(output).toEqual({
      kind: 'done',
      status: {
        ...running,
        status: 'Failed',
        error: 'prelock: the store is down; its pre-lock, committed unseen, was released',
      },
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

describe('convergencePhase, version 5: no re-read; the read-path check on a replica, none lock-only', () => {
  const waitUntil = START + 30_000;
  const v5 = (participants: MigrationSettings['participants']): Prelocked => {
    const i = { ...input, workflowVersion: 5, settings: { ...settings, participants } };
    return { ...prelocked, input: i, grant: { ...grant(), location: SOURCE } };
  };

  const none: MigrationSettings['participants'] = [];
  test.each([
    [1, none, 'readPath'],
    [4, none, 'readPath'],
    [4, settings.participants, 'readPath'],
    [5, settings.participants, 'replica'],
    [5, none, null],
  ])('version %i, participants %j: the check reads %s', (version, participants, expected) => {
    expect(
      visibilityRead({ ...input, workflowVersion: version, settings: { ...settings, participants } }),
    ).toBe(expected);
  });

  test("with a participant: where the route was comes from the pre-lock's answer; the wait, then a replica", async () => {
    const state = v5(settings.participants);
    const { output, calls, steps } = await drive(() => convergencePhase(state, waitUntil), {
      readRoute: [ok(route(SOURCE, null)), ok(route())],
    });
    // (timer@0: version 3's cancel check before the phase)
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

  test('a version-5 grant without a location (never answered so): the route is read, as before', async () => {
    const state = { ...v5([]), grant: grant() };
    const { calls } = await drive(() => convergencePhase(state, waitUntil), {
      readRoute: [ok(route())],
    });
    expect(calls.map((c) => (c.input as { from: string }).from)).toEqual(['writeRegion']);
  });
});

describe('convergencePhase', () => {
  const waitUntil = START + 30_000;

  test('re-reads the route, waits until the given instant, then sees its lock on the read path', async () => {
    const { output, calls, steps } = await drive(() => convergencePhase(prelocked, waitUntil), {
      readRoute: [ok(route(SOURCE, null)), ok(route(SOURCE, null)), ok(route())],
    });
    expect(steps).toEqual(['readRoute', 'timer@30000', 'readRoute', 'timer@31000', 'readRoute']);
    expect(calls.map((c) => (c.input as { from: string }).from)).toEqual([
      'writeRegion',
      'readPath',
      'readPath',
    ]);
    expect(output).toEqual({ kind: 'next', state: moving });
  });

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

  test('failure: never visible on the read path, failed at the converging status', async () => {
    const { output, steps } = await drive(() => convergencePhase(prelocked, waitUntil), {
      readRoute: [ok(route(SOURCE, null)), ok(route(SOURCE, null)), ok(route(SOURCE, null))],
    });
    expect(steps).toEqual([
      'readRoute',
      'timer@30000',
      'readRoute',
      'timer@31000',
      'readRoute',
      'timer@32000',
    ]);
    expect(output).toEqual({
      kind: 'failed',
      status: moving.status,
      reason: 'the pre-lock never became visible on the read path',
      code: 'NotVisible',
      // version 4's end notices: the source the attempt read (workflow/state.ts EndJob)
      job: { from: SOURCE, migrationAttempt: 1 },
    });
  });

  test('failure: a read the runner gave up on fails it at the last status published', () => {
    const { output, steps } = driveGivingUp(convergencePhase(prelocked, waitUntil), {
      readRoute: [ok(route(SOURCE, null)), down],
    });
    expect(steps).toEqual(['readRoute', 'status', 'timer', 'readRoute']);
    expect(output).toEqual({
      kind: 'failed',
      status: moving.status,
      reason: 'the store is down',
      code: 'StepFailed',
      job: { from: SOURCE, migrationAttempt: 1 },
    });
  });
});

describe('hardDeletePhase', () => {
  const hd = grant({ phase: 'hardDelete', hardDeleteAt: iso(40_000), etag: 'e-hd' });

  test('escalates on the ETag it was given, bulk-copies at every participant, hands on the ETag', async () => {
    const { output, calls, steps } = await drive(
      () => hardDeletePhase(moving),
      { escalate: [ok(hd)] },
      () => ({ statusCode: 200 }),
    );
    expect(steps).toEqual(['escalate', 'http', 'timer@40000']);
    expect(calls[0]?.input).toEqual({
      resourceId: 'conv-1',
      lock: input.lock,
      phase: 'hardDelete',
      ifMatch: 'e-pre',
    });
    expect(output).toEqual({
      kind: 'next',
      state: {
        ...moving,
        etag: 'e-hd',
        status: {
          ...moving.status,
          phase: 'hardDelete',
          timeline: { ...moving.status.timeline, hardDeleteAt: iso(40_000) },
        },
      },
    });
  });

  test('failure: a participant refusing the bulk copy fails it at the hardDelete status', async () => {
    const { output } = await drive(
      () => hardDeletePhase(moving),
      { escalate: [ok(hd)] },
      () => ({ statusCode: 400 }),
    );
    expect(output).toMatchObject({
      kind: 'failed',
      status: { phase: 'hardDelete', timeline: { hardDeleteAt: iso(40_000) } },
      reason: 'bulkCopy: ParticipantFailed: participant messages answered 400 to bulkCopy (attempt 1)',
    });
  });

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

describe('writePhase', () => {
  // A write lock that ends before the copy could: the delta overruns (its deadline is the lock's end).
  const short = (etag: string) => grant({ phase: 'write', writeAt: iso(0), phaseExpiresAt: iso(2000), etag });
  const long = (etag: string) =>
    grant({ phase: 'write', writeAt: iso(9000), phaseExpiresAt: iso(600_000), etag });
  const overrunThenCopy = (request: { body: unknown }) =>
    (request.body as { attempt: number }).attempt === 1
      ? { statusCode: 200, durationMs: 3_600_000 }
      : { statusCode: 200 };

  test('an overrun: writes resume, the hard-delete lock is renewed, and the second attempt swaps', async () => {
    const { output, calls, steps } = await drive(
      () => writePhase(moving),
      {
        escalate: [ok(short('e-w1')), ok(long('e-w2'))],
        release: [ok({ ...route(), etag: 'e-down' })],
        renew: [ok(grant({ phase: 'hardDelete', etag: 'e-renewed' }))],
        swap: [ok({ view: route(TARGET, null), swappedAt: iso(99_000) })],
      },
      overrunThenCopy,
    );
    // the first race's deadline is the write lock's end; the second's a renewal a third of the lease on
    expect(steps).toEqual([
      'escalate',
      'http',
      'timer@2000',
      'release',
      'timer@3000',
      'renew',
      'escalate',
      'http',
      'timer@13000',
      'swap',
    ]);
    expect(calls.map((c) => [c.name, (c.input as { ifMatch?: string }).ifMatch])).toEqual([
      ['escalate', 'e-pre'],
      ['release', 'e-w1'],
      ['renew', 'e-down'],
      ['escalate', 'e-renewed'],
      ['swap', 'e-w2'],
    ]);
    expect(calls[1]?.input).toMatchObject({ phase: 'write', writeAt: iso(0) });
    expect(calls[4]?.input).toMatchObject({ writeAt: iso(9000) });
    expect(output).toEqual({
      kind: 'done',
      status: {
        ...moving.status,
        status: 'Completed',
        phase: 'swapped',
        deltaAttempts: 2,
        timeline: { ...moving.status.timeline, writeAt: iso(9000), swappedAt: iso(99_000) },
      },
    });
  });

  test('failure: every attempt overruns, the write budget is exceeded', async () => {
    const { output } = await drive(
      () => writePhase(moving),
      {
        escalate: [ok(short('e-w1')), ok(short('e-w2'))],
        release: [ok({ ...route(), etag: 'e-down1' }), ok({ ...route(), etag: 'e-down2' })],
        renew: [no('MaxLeaseReached')],
      },
      () => ({ statusCode: 200, durationMs: 3_600_000 }),
    );
    expect(output).toMatchObject({
      kind: 'failed',
      status: { phase: 'hardDelete', deltaAttempts: 2 },
      reason: `write budget exceeded on all 2 attempts (deltaCopy: the write lock ran out at ${iso(2000)} with deltaCopy still running)`,
    });
  });

  test('failure: a hard-delete renewal refused between attempts', async () => {
    const { output } = await drive(
      () => writePhase(moving),
      { escalate: [ok(short('e-w1'))], release: [ok({ ...route(), etag: 'e-down' })], renew: [no('Locked')] },
      overrunThenCopy,
    );
    expect(output).toMatchObject({
      kind: 'failed',
      status: { phase: 'hardDelete', deltaAttempts: 1 },
      reason: 'renew the hard-delete lock: Locked: Locked here',
    });
  });
});

describe('swapPhase', () => {
  test('swaps pinned to the write-lock attempt: Completed', async () => {
    const { output, calls } = await drive(() => swapPhase(writing), {
      swap: [ok({ view: route(TARGET, null), swappedAt: iso(70_000) })],
    });
    expect(calls).toEqual([
      {
        name: 'swap',
        input: { resourceId: 'conv-1', lock: input.lock, ifMatch: 'e-write', writeAt: iso(5000) },
      },
    ]);
    expect(output).toEqual({
      kind: 'done',
      status: {
        ...writing.status,
        status: 'Completed',
        phase: 'swapped',
        timeline: { ...writing.status.timeline, swappedAt: iso(70_000) },
      },
    });
  });

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

describe('cleanUp', () => {
  const failure = { kind: 'failed' as const, status: writing.status, reason: 'deltaCopy: boom' };

  test.each([
    ['released', [ok(route(SOURCE, null))], 'released'],
    ['a lock that lapsed already', [no('LockExpired')], 'released'],
    ['failure: the release refused', [no('Locked')], 'release refused (Locked); the lease will free it'],
  ])('%s', async (_what, release, released) => {
    const { output, calls } = await drive(() => cleanUp(input, failure), { release });
    // the release says why (docs/design.md §6.12): the failure's reason, for the audit ledger
    expect(calls).toEqual([
      { name: 'release', input: { resourceId: 'conv-1', lock: input.lock, reason: 'deltaCopy: boom' } },
    ]);
    expect(output).toEqual({
      ...writing.status,
      status: 'Failed',
      phase: 'released',
      error: `deltaCopy: boom; lock ${released}`,
    });
  });

  test('failure: a release the runner gave up on: the lease frees the lock', () => {
    const { output } = driveGivingUp(cleanUp(input, failure), { release: [down] });
    expect(output).toEqual({
      ...writing.status,
      status: 'Failed',
      phase: 'released',
      error: 'deltaCopy: boom; lock release failed (the store is down); the lease will free it',
    });
  });
});
