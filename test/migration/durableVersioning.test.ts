import { mkdirSync } from 'node:fs';
import { migrationOrchestrator } from '../../functions/migrationOrchestrator';
import type { MigrationStatus } from '../../shared/migration/types';
import { DurableReplay, EventType } from '../../testkit/durableReplay';
import {
  FIXTURE_DIR,
  SCENARIOS,
  readHistory,
  recordHistory,
  replayActivities,
  scenarioMigration,
  writeHistory,
} from '../support/durableHistories';
import { FIXTURE_KEYRING, FIXTURE_SEED, participantJobs } from '../support/durableMigrations';

/**
 * Deploying while migrations run (issue 17 §5): histories recorded by an earlier orchestrator
 * (test/fixtures/durable/v1-*.json, inputs without `workflowVersion`) replayed through the orchestrator
 * in the tree, by the faithful harness (testkit/durableReplay.ts). Each must reproduce exactly the
 * recorded orchestrator actions and draw no nondeterminism from the extension's replay; the one
 * stopped mid-bulk-copy must then run on to completion. A workflow change that alters the version-1
 * path fails here, which is the point: old instances keep the old path until they end.
 *
 * The fixtures are reproducible: `ROUTELOCK_RECORD_FIXTURES=1 npx jest test/migration/durableVersioning.test.ts`
 * rewrites them from the code of the day (test/support/durableHistories.ts: virtual clock, a public
 * fixture key ring and seed, numbered ETags, scripted participants). Record only when adding a
 * version's fixtures; never re-record a version still running somewhere.
 */

const recording = process.env.ROUTELOCK_RECORD_FIXTURES === '1';

describe('recorded version-1 histories replay through the orchestrator in the tree', () => {
  if (recording) {
    test.each(SCENARIOS)('record $name', async (scenario) => {
      mkdirSync(FIXTURE_DIR, { recursive: true });
      writeHistory(await recordHistory(scenario));
    });
    return;
  }

  test.each(SCENARIOS.filter((s) => !s.stopWhen))(
    '$name: the finished history replays to the same actions and output, nothing new scheduled',
    async (scenario) => {
      const recorded = readHistory(scenario.name);
      expect(recorded.input).not.toHaveProperty('workflowVersion');
      const seen: unknown[][] = [];
      const result = await new DurableReplay({
        orchestrator: migrationOrchestrator,
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
      expect(result).toMatchObject({ runtimeStatus: 'Completed', runs: 1, error: undefined });
      expect(seen).toEqual([recorded.orchestratorActions]);
      expect(result.output).toEqual(recorded.result.output);
      expect(result.history).toEqual(recorded.history);
      expect((result.output as MigrationStatus).status).toBe('Completed');
    },
  );

  test('v1-mid-bulk-copy: the stopped history replays to its recorded actions, then runs to completion', async () => {
    const scenario = SCENARIOS.find((s) => s.name === 'v1-mid-bulk-copy');
    if (!scenario) throw new Error('scenario missing');
    const recorded = readHistory(scenario.name);
    expect(recorded.result.runtimeStatus).toBe('Running');
    // the store and record where the old process left them, by its completed activities
    const m = await scenarioMigration(scenario);
    expect(await replayActivities(recorded, (fn, input, now) => m.runActivity(fn, input, now))).toEqual([]);
    const participant = participantJobs({ answers: 'sync', durationMs: () => scenario.jobMs });
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
  });

  test('a recording is reproducible: two recordings of each scenario are identical', async () => {
    // (Compared with each other, not with the committed files: those were recorded by version-1 code,
    // and a later orchestrator records new inputs, e.g. settings that version 1 did not have.)
    for (const scenario of SCENARIOS)
      expect(await recordHistory(scenario)).toEqual(await recordHistory(scenario));
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

  test('negative control: a history whose activity was renamed since is refused as nondeterministic', async () => {
    const recorded = readHistory('v1-one-participant');
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
});
