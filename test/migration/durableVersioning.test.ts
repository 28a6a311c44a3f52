import { mkdirSync, readdirSync } from 'node:fs';
import type { OrchestrationContext, OrchestrationHandler } from 'durable-functions';
import { activityFunctionName, retryOptions, runOnDurable } from '../../functions/durable/runOnDurable';
import { migrationOrchestrator } from '../../functions/migrationOrchestrator';
import {
  type MigrationInput,
  type MigrationStatus,
  type ParticipantCall,
  type Step,
  type TaskStep,
  WORKFLOW_VERSION,
} from '../../shared/migration/types';
import { WORKFLOW_FLOOR } from '../../shared/migration/workflow/capabilities';
import { type Workflow, migrationWorkflow } from '../../shared/migration/workflow';
import { DurableReplay, EventType, type WireEvent, firedEarly } from '../../testkit/durableReplay';
import {
  FIXTURE_DIR,
  type RecordedHistory,
  SCENARIOS,
  hasHistory,
  primeParticipant,
  readHistory,
  recordHistory,
  replayActivities,
  scenarioMigration,
  writeHistory,
} from '../support/durableHistories';
import { FIXTURE_KEYRING, FIXTURE_SEED, participantJobs } from '../support/durableMigrations';

/**
 * Deploying while migrations run (docs/design.md §6.7): histories recorded by the orchestrator of each
 * workflow version still replayed (test/fixtures/durable/v<N>-*.json; README.md there) replayed through
 * the orchestrator in the tree, by the faithful harness (testkit/durableReplay.ts). Each must reproduce
 * exactly the recorded orchestrator actions and draw no nondeterminism from the extension's replay; the
 * ones stopped mid-run must then run on to completion. A workflow change that alters the path of a
 * version still deployed fails here, which is the point: old instances keep the old path until they end.
 *
 * The fixtures are reproducible (test/support/durableHistories.ts: virtual clock, a public fixture key
 * ring and seed, numbered ETags, scripted participants).
 *
 * Adding a version N (a change of the steps: WORKFLOW_VERSION = N, the change a named capability in
 * shared/migration/workflow/capabilities.ts): add its `InputVersion` (test/support/durableMigrations.ts),
 * its scenarios `vN-…` to SCENARIOS (test/support/durableHistories.ts) and a row to VERSIONS below, then
 * run `ROUTELOCK_RECORD_FIXTURES=1 npx jest test/migration/durableVersioning.test.ts`: it writes only
 * the fixtures not on disk yet and never overwrites one. Commit them with the code that recorded them;
 * from then on that version's path is frozen (point the planted-change controls below at the newest
 * version's fixture). Never re-record a version still running somewhere.
 *
 * Retiring a version (raising WORKFLOW_FLOOR): its fixtures, scenarios, VERSIONS row, InputVersion and
 * the old side of each capability it retires go together, in one change, and only once no instance
 * started with it can be running anywhere: every deployment's task hub shows no instance Pending,
 * Running or Suspended whose input carries that version. Before that, deleting either the fixtures or
 * the code breaks the replay of those instances.
 */

const recording = process.env.ROUTELOCK_RECORD_FIXTURES === '1';

interface VersionRow {
  prefix: string;
  /** What the recorded input carries. */
  workflowVersion: number;
  /** How the resumed run asks the participant for the bulk copy in flight at the stop. */
  resumes: { method: 'POST' | 'GET'; postsAgain: boolean };
  /** Scenarios of this version besides the three every version has (a wait for a cutover window). */
  extraScenarios?: string[];
}

const VERSIONS: VersionRow[] = [
  // the job's Location is in the history: the redelivered poll asks it, no second POST
  {
    prefix: 'v5',
    workflowVersion: 5,
    resumes: { method: 'GET', postsAgain: false },
    extraScenarios: ['window-wait'],
  },
  // timerFiredIsDue: the same recorded shapes (the harness fires timers on time)
  {
    prefix: 'v6',
    workflowVersion: 6,
    resumes: { method: 'GET', postsAgain: false },
    extraScenarios: ['window-wait'],
  },
  // announcedEscalations, recorded with announced locks on; one more stopped in the announcement's wait
  {
    prefix: 'v7',
    workflowVersion: 7,
    resumes: { method: 'GET', postsAgain: false },
    extraScenarios: ['window-wait', 'announcement-wait'],
  },
];

const scenariosOf = (prefix: string) => SCENARIOS.filter((s) => s.name.startsWith(`${prefix}-`));

/** Replay a finished history with nothing able to run: any new activity or call fails the test. */
function replayFinished(
  recorded: RecordedHistory,
  orchestrator: OrchestrationHandler,
  seen: unknown[][] = [],
) {
  return new DurableReplay({
    orchestrator,
    name: 'migrationOrchestrator',
    instanceId: recorded.input.instanceId,
    input: recorded.input,
    start: Date.parse(recorded.history[0]?.Timestamp as string),
    history: recorded.history,
    observe: (_run, actions) => seen.push(actions),
    activity: (fn) => Promise.reject(new Error(`a finished instance ran ${fn}`)),
    http: () => {
      throw new Error('a finished instance called a participant');
    },
  }).run();
}

/** How a planted change runs one step the workflow yields: the steps it yields instead, and the answer. */
type Plant = (step: Step, afterParticipantRound: boolean) => Generator<Step, unknown, unknown>;

/**
 * The orchestrator with one planted change of the workflow's code path: the real workflow, runner and
 * final activity (as functions/migrationOrchestrator.ts composes them), each step the workflow yields
 * run by `plant` (told whether it follows a round of participant calls). The recorded input is not
 * touched: its settings stay what the workflow reads; the code is what differs.
 */
function plantedOrchestrator(plant: Plant): OrchestrationHandler {
  const isParticipantTask = (t: TaskStep) => t.kind === 'activity' && t.name === 'callParticipant';
  function* planted(workflow: Workflow): Workflow {
    let afterRound = false;
    let next = workflow.next();
    while (!next.done) {
      const step = next.value;
      const answer = yield* plant(step, afterRound);
      if (step.kind === 'race' || step.kind === 'all') afterRound = step.tasks.some(isParticipantTask);
      else if (step.kind === 'timer' || step.kind === 'activity') afterRound = false;
      next = workflow.next(answer);
    }
    return next.value;
  }
  return function* (context: OrchestrationContext) {
    const input = context.df.getInput<MigrationInput>();
    const status = yield* runOnDurable(context, planted(migrationWorkflow(input)), input.settings);
    yield context.df.callActivityWithRetry(
      activityFunctionName('recordOutcome'),
      retryOptions(input.settings),
      { status },
    );
    return status;
  };
}

function* unchanged(step: Step): Generator<Step, unknown, unknown> {
  return yield step;
}

/**
 * pollWaitMs 5 s longer, as copyAll would run it: the wait after a round of participant calls ends
 * 5 s later, and the loop sleeps again while the time is short of it (`due` empty: sleepUntil).
 */
function* pollWaitLonger(step: Step, afterRound: boolean): Generator<Step, unknown, unknown> {
  if (!afterRound || step.kind !== 'timer') return yield step;
  const fireAt = step.fireAt + 5000;
  yield { kind: 'timer', fireAt };
  while (((yield { kind: 'now' }) as number) < fireAt) yield { kind: 'timer', fireAt };
  return undefined;
}

/** The job body with a field dropped (`sequence`), e.g. a refactor of participantJob. */
function* postBodyChanged(step: Step): Generator<Step, unknown, unknown> {
  if (step.kind !== 'race' && step.kind !== 'all') return yield step;
  const tasks = step.tasks.map((t) => {
    if (t.kind !== 'activity' || t.name !== 'callParticipant') return t;
    const call = t.input as ParticipantCall;
    if (call.method !== 'POST') return t;
    const { sequence: _dropped, ...body } = call.body;
    return { ...t, input: { ...call, body } } as TaskStep;
  });
  return yield { ...step, tasks };
}

if (recording)
  test("record the fixtures not on disk yet (a new version's); the others stay as committed", async () => {
    mkdirSync(FIXTURE_DIR, { recursive: true });
    for (const scenario of SCENARIOS.filter((s) => !hasHistory(s.name)))
      writeHistory(await recordHistory(scenario));
  });

if (!recording)
  describe.each(VERSIONS)('recorded $prefix histories replay through the orchestrator in the tree', (row) => {
    const scenarios = scenariosOf(row.prefix);

    test(`${row.prefix}: every fixture carries the version it claims`, () => {
      expect(scenarios.map((s) => s.name).sort()).toEqual(
        ['mid-bulk-copy', 'no-participants', 'one-participant', ...(row.extraScenarios ?? [])]
          .sort()
          .map((n) => `${row.prefix}-${n}`),
      );
      for (const scenario of scenarios) {
        const { input } = readHistory(scenario.name);
        expect(input).toHaveProperty('workflowVersion', row.workflowVersion);
      }
    });

    test.each(scenarios.filter((s) => !s.stopWhen))(
      '$name: the finished history replays to the same actions and output, nothing new scheduled',
      async (scenario) => {
        const recorded = readHistory(scenario.name);
        const seen: unknown[][] = [];
        const result = await replayFinished(recorded, migrationOrchestrator, seen);
        expect(result).toMatchObject({ runtimeStatus: 'Completed', runs: 1, error: undefined });
        expect(seen).toEqual([recorded.orchestratorActions]);
        expect(result.output).toEqual(recorded.result.output);
        expect(result.history).toEqual(recorded.history);
        expect((result.output as MigrationStatus).status).toBe('Completed');
      },
    );

    test(`${row.prefix}-mid-bulk-copy: the stopped history replays to its recorded actions, then runs to completion`, async () => {
      const scenario = SCENARIOS.find((s) => s.name === `${row.prefix}-mid-bulk-copy`);
      if (!scenario) throw new Error('scenario missing');
      const recorded = readHistory(scenario.name);
      expect(recorded.result.runtimeStatus).toBe('Running');
      // the store and record where the old process left them, by its completed activities
      const m = await scenarioMigration(scenario);
      expect(await replayActivities(recorded, (fn, input, now) => m.runActivity(fn, input, now))).toEqual([]);
      const participant = participantJobs({
        answers: scenario.version.answers,
        durationMs: () => scenario.jobMs,
        ...(scenario.verify ? { verify: scenario.verify } : {}),
      });
      // the participant service kept running through the deployment: it has the jobs POSTed before it
      const posted = primeParticipant(recorded, participant.http);
      const resumedCalls = participant.calls.splice(0);
      expect(resumedCalls).toHaveLength(posted.length);
      const seen: unknown[][] = [];
      const result = await m
        .make({
          history: recorded.history,
          observe: (_run, actions) => seen.push(actions),
          http: participant.http,
        })
        .run();
      expect(seen[0]).toEqual(recorded.orchestratorActions);
      expect(result.error).toBeUndefined();
      expect(result.runtimeStatus).toBe('Completed');
      expect(result.output).toMatchObject({ status: 'Completed', phase: 'swapped' });
      // the old events stay as they were (only IsPlayed turns true once a later episode has replayed them)
      const unplayed = (events: typeof recorded.history) => events.map((e) => ({ ...e, IsPlayed: false }));
      expect(unplayed(result.history.slice(0, recorded.history.length))).toEqual(unplayed(recorded.history));
      expect((await m.store.read('conv-1', { from: 'writeRegion' })).doc).toMatchObject({ lock: null });
      // the copy in flight at the stop is asked again by the new process: the same job
      expect(participant.calls[0]?.job).toBe('messages.test:bulkCopy:1');
      expect(participant.calls[0]?.method).toBe(row.resumes.method);
      const bulk = participant.calls.filter((c) => c.job === 'messages.test:bulkCopy:1');
      expect(bulk.some((c) => c.method === 'POST')).toBe(row.resumes.postsAgain);
      if (!row.resumes.postsAgain) {
        // the redelivered poll is the one scheduled before the stop, at its Location; the copy ends
        // when the job the old process POSTed ends (its last poll within one poll wait after), not later
        const scheduledPoll = recorded.history.filter((e) => e.EventType === EventType.TaskScheduled).at(-1);
        expect(bulk[0]?.at).toBe(Date.parse(scheduledPoll?.Timestamp as string));
        expect(JSON.parse(scheduledPoll?.Input as string)).toMatchObject([
          { method: 'GET', url: 'https://messages.test/jobs/messages.test%3AbulkCopy%3A1' },
        ]);
        const jobEnd = (posted[0] as number) + scenario.jobMs;
        const lastPoll = bulk.at(-1)?.at as number;
        expect([posted.length, lastPoll >= jobEnd, lastPoll - jobEnd <= 30_000]).toEqual([1, true, true]);
      }
    });
  });

/** A stopped fixture resumed: replayed to its recorded actions, then run on; answers the final status. */
async function resumeStopped(name: string): Promise<{ output: MigrationStatus; calls: { job: string }[] }> {
  const scenario = SCENARIOS.find((s) => s.name === name);
  if (!scenario) throw new Error('scenario missing');
  const recorded = readHistory(scenario.name);
  expect(recorded.result.runtimeStatus).toBe('Running');
  const m = await scenarioMigration(scenario);
  expect(await replayActivities(recorded, (fn, input, now) => m.runActivity(fn, input, now))).toEqual([]);
  const participant = participantJobs({
    answers: scenario.version.answers,
    durationMs: () => scenario.jobMs,
    ...(scenario.verify ? { verify: scenario.verify } : {}),
  });
  primeParticipant(recorded, participant.http);
  participant.calls.splice(0);
  const seen: unknown[][] = [];
  const result = await m
    .make({
      history: recorded.history,
      observe: (_run, actions) => seen.push(actions),
      http: participant.http,
    })
    .run();
  expect(seen[0]).toEqual(recorded.orchestratorActions);
  expect(result.error).toBeUndefined();
  return { output: result.output as MigrationStatus, calls: participant.calls };
}

if (!recording)
  test('v7-announcement-wait: the history stopped in the announcement wait replays to its actions, then takes the write lock when the window opens', async () => {
    const { output, calls } = await resumeStopped('v7-announcement-wait');
    expect(output).toMatchObject({ status: 'Completed', phase: 'swapped', deltaAttempts: 1 });
    // dev timing: the write lock at the announced window (plus a skew margin of 0)
    expect(output.timeline.writeAt).toBe(output.timeline.writeWindowAt);
    expect(calls.some((c) => c.job.startsWith('messages.test:deltaCopy'))).toBe(true);
    expect(output.verifications?.map((v) => v.outcome)).toEqual(['match']);
  });

if (!recording)
  test.each(['v5-window-wait', 'v7-window-wait'])(
    '%s: the history stopped in a window wait replays to its actions, then takes the write lock when the window opens',
    async (name) => {
      const { output, calls } = await resumeStopped(name);
      expect(output).toMatchObject({ status: 'Completed', phase: 'swapped' });
      expect(output).not.toHaveProperty('waitingForWindow');
      // 06:00 Europe/Berlin on 2026-03-01 is 05:00Z: the write lock not before it
      expect(Date.parse(output.timeline.writeAt as string)).toBeGreaterThanOrEqual(
        Date.parse('2026-03-01T05:00:00Z'),
      );
      expect(Date.parse(output.timeline.writeAt as string)).toBeLessThan(Date.parse('2026-03-01T07:00:00Z'));
      // the delta copied after the wait, then verified
      expect(calls.some((c) => c.job.startsWith('messages.test:deltaCopy'))).toBe(true);
      expect(output.verifications?.map((v) => v.outcome)).toEqual(['match']);
    },
  );

describe('recorded histories, every version', () => {
  if (recording) return;

  test('a recording is reproducible: two recordings of each scenario are identical', async () => {
    // (Compared with each other, not with the committed files: those were recorded by the code of their
    // version, and a later orchestrator may record new inputs, e.g. settings added since.)
    for (const scenario of SCENARIOS)
      expect(await recordHistory(scenario)).toEqual(await recordHistory(scenario));
  });

  test('every fixture is a scenario of a version, and a scenario of a version has its fixture', () => {
    const files = readdirSync(FIXTURE_DIR).filter((f) => f.endsWith('.json'));
    expect(files.sort()).toEqual(SCENARIOS.map((s) => `${s.name}.json`).sort());
    expect(SCENARIOS.every((s) => VERSIONS.some((v) => s.name.startsWith(`${v.prefix}-`)))).toBe(true);
  });

  test('the fixtures hold no credential: neither the fencing token nor the Idempotency-Key of their seed', () => {
    const { token, idempotencyKey } = FIXTURE_KEYRING.credentials(FIXTURE_SEED);
    for (const scenario of SCENARIOS) {
      const text = JSON.stringify(readHistory(scenario.name));
      expect([scenario.name, text.includes(token), text.includes(idempotencyKey)]).toEqual([
        scenario.name,
        false,
        false,
      ]);
    }
  });

  test('the fixtures cover exactly the versions this code replays, WORKFLOW_FLOOR to WORKFLOW_VERSION', () => {
    const replayed = Array.from(
      { length: WORKFLOW_VERSION - WORKFLOW_FLOOR + 1 },
      (_, i) => WORKFLOW_FLOOR + i,
    );
    expect(VERSIONS.map((v) => v.workflowVersion)).toEqual(replayed);
  });

  test.each([
    ['below the floor', WORKFLOW_FLOOR - 1],
    ['none recorded (version 1)', undefined],
    ['newer than this code', WORKFLOW_VERSION + 1],
  ])(
    'an instance of a version this code does not replay (%s) fails at its start, running no step',
    async (_label, workflowVersion) => {
      const recorded = readHistory('v5-one-participant');
      const { workflowVersion: _current, ...rest } = recorded.input;
      const input = workflowVersion === undefined ? rest : { ...rest, workflowVersion };
      const seen: unknown[][] = [];
      const result = await new DurableReplay({
        orchestrator: migrationOrchestrator,
        name: 'migrationOrchestrator',
        instanceId: input.instanceId,
        input,
        start: Date.parse(recorded.history[0]?.Timestamp as string),
        observe: (_run, actions) => seen.push(actions),
        activity: (fn) => Promise.reject(new Error(`an unsupported instance ran ${fn}`)),
      }).run();
      expect(result.runtimeStatus).toBe('Failed');
      expect(result.error).toMatch(
        new RegExp(`workflow version ${workflowVersion ?? 1}.* is not replayed by this deployment`),
      );
      expect(seen.flat()).toEqual([]);
    },
  );

  test('negative control: a history whose activity was renamed since is refused as nondeterministic', async () => {
    const recorded = readHistory('v5-one-participant');
    const history = recorded.history.map((e) =>
      e.EventType === EventType.TaskScheduled && e.Name === 'migrationSwap'
        ? { ...e, Name: 'migrationSwapV0' }
        : e,
    );
    const result = await new DurableReplay({
      orchestrator: migrationOrchestrator,
      name: 'migrationOrchestrator',
      instanceId: recorded.input.instanceId,
      input: recorded.input,
      start: Date.parse(recorded.history[0]?.Timestamp as string),
      history,
      activity: () => Promise.reject(new Error('not expected')),
    }).run();
    expect(result.runtimeStatus).toBe('Failed');
    expect(result.error).toMatch(/Non-Deterministic workflow detected: .*named 'migrationSwapV0'/);
  });

  describe('negative controls: a planted change of the current path is caught by its fixtures', () => {
    const recorded = () => readHistory('v6-one-participant');

    test('the planting itself changes nothing: the unaltered steps replay the fixture', async () => {
      const seen: unknown[][] = [];
      const result = await replayFinished(recorded(), plantedOrchestrator(unchanged), seen);
      expect(result).toMatchObject({ runtimeStatus: 'Completed', error: undefined });
      expect(seen).toEqual([recorded().orchestratorActions]);
    });

    test('poll waits 5 s longer: the replay fails as nondeterministic', async () => {
      const result = await replayFinished(recorded(), plantedOrchestrator(pollWaitLonger));
      expect(result.runtimeStatus).toBe('Failed');
      expect(result.error).toMatch(/Non-Deterministic workflow detected/);
    });

    test('the POST body changed: Durable replays it (it matches names, not inputs), the recorded actions catch it', async () => {
      const seen: unknown[][] = [];
      const result = await replayFinished(recorded(), plantedOrchestrator(postBodyChanged), seen);
      expect(result).toMatchObject({ runtimeStatus: 'Completed', error: undefined });
      expect(seen).toHaveLength(1);
      expect(seen[0]).not.toEqual(recorded().orchestratorActions);
      expect(JSON.stringify(recorded().orchestratorActions)).toContain('"sequence"');
      expect(JSON.stringify(seen[0])).not.toContain('"sequence"');
    });
  });
});

/**
 * The first timer of a copy's poll wait: the first TimerFired after which the history schedules a poll
 * GET (a renewal's deadline timer is followed by migrationRenew, the in-flight grace's by the POST).
 */
function firstPollTimer(history: readonly WireEvent[]): number {
  for (const [i, e] of history.entries()) {
    if (e.EventType !== EventType.TimerFired) continue;
    const next = history.slice(i + 1).find((n) => n.EventType === EventType.TaskScheduled);
    const call = next && (JSON.parse(next.Input as string) as { method?: string }[])[0];
    if (next?.Name === 'migrationCallParticipant' && call?.method === 'GET') return e.TimerId as number;
  }
  throw new Error('no poll timer in this history');
}

/** What the orchestrator does on the early wake of its first poll timer: its last action of that run. */
async function onEarlyWake(name: string, earlyMs: number): Promise<unknown> {
  const recorded = readHistory(name);
  const seen: unknown[][] = [];
  const result = await new DurableReplay({
    orchestrator: migrationOrchestrator,
    name: 'migrationOrchestrator',
    instanceId: recorded.input.instanceId,
    input: recorded.input,
    start: Date.parse(recorded.history[0]?.Timestamp as string),
    history: firedEarly(recorded.history, firstPollTimer(recorded.history), earlyMs),
    observe: (_run, actions) => seen.push(actions),
    stopWhen: () => true,
    activity: (fn) => Promise.reject(new Error(`the wake's first run ran ${fn}`)),
  }).run();
  expect(result).toMatchObject({ runtimeStatus: 'Running', error: undefined });
  expect(seen).toHaveLength(1);
  return seen[0]?.at(-1);
}

describe('a poll timer the engine fires early (queue visibility in whole seconds)', () => {
  if (recording) return;
  const fireAtOf = (name: string) => {
    const { history } = readHistory(name);
    const timer = firstPollTimer(history);
    return history.find((e) => e.EventType === EventType.TimerCreated && e.EventId === timer)?.FireAt;
  };

  test('version 6 (timerFiredIsDue): the wake 970 ms early runs the poll that was due', async () => {
    expect(await onEarlyWake('v6-one-participant', 970)).toMatchObject({
      compoundActions: [
        {
          functionName: 'migrationCallParticipant',
          input: { method: 'GET', url: 'https://messages.test/jobs/messages.test%3AbulkCopy%3A1' },
        },
      ],
    });
  });

  test('negative control, version 5: the same wake sleeps again until the same instant', async () => {
    const fireAt = fireAtOf('v5-one-participant');
    expect(fireAt).toBe(fireAtOf('v6-one-participant'));
    expect(await onEarlyWake('v5-one-participant', 970)).toMatchObject({
      compoundActions: [{ fireAt, actionType: 5 }, { externalEventName: 'cancel' }],
    });
  });
});
