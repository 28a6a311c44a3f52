import { AuditTrail, AuditedLocationStore } from '../../shared/migration/auditTrail';
import type { AuditRecord } from '../../shared/core/audit';
import { parseConfig } from '../../shared/config';
import { migrationOrchestrator } from '../../functions/migrationOrchestrator';
import { createActivities } from '../../shared/migration/activities';
import { InProcessMigrationService } from '../../shared/migration/inProcessService';
import type { HttpCall, HttpResult, MigrationStatus } from '../../shared/migration/types';
import { SqliteAuditLedger } from '../../shared/core/store/sqlite/audit';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import type { TelemetryEvent } from '../../shared/migration/telemetry/lockTelemetry';
import { type TelemetrySink, nullSink } from '../../shared/migration/telemetry/sink';
import { DurableReplay } from '../../testkit/durableReplay';
import { migrationFixture } from '../../testkit/migrationFixture';
import { virtualRunner } from '../support/migrationHarness';
import { assertNoSecrets } from '../support/secrets';
import { attemptSeed } from '../../shared/migration/activities';

/**
 * Every end of a migration run sends exactly one `MigrationEnded` (keyed
 * `MigrationEnded:<migrationId>:<attempt>`), from the in-process runner and from Durable's
 * `recordOutcome`, with the outcome, the stable code and the phase it had reached; a Failed, Conflict
 * or Cancelled status read back shows the same as `stopped`; a release's audit record carries the
 * workflow's reason and the phases reached.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const ONE_PARTICIPANT = JSON.stringify([{ name: 'orders', url: 'https://orders.test/migrate' }]);
const operator = { id: 'operator-1' };

/** A sink that keeps the events it is sent. */
function recordingSink(): TelemetrySink & { events: TelemetryEvent[]; ended: () => TelemetryEvent[] } {
  const events: TelemetryEvent[] = [];
  return {
    ...nullSink,
    events,
    event: (e) => events.push(e),
    ended: () => events.filter((e) => e.name === 'MigrationEnded'),
  };
}

/** The participant: `fail` answers 400 (a permanent refusal: ParticipantFailed), `hang` never answers. */
const participant =
  (script: { fail?: string; hang?: string } = {}) =>
  (call: HttpCall): Promise<HttpResult> => {
    if (call.body.step === 'verify') return Promise.resolve({ status: 404, body: null });
    if (call.body.step === script.hang) return new Promise(() => undefined);
    if (call.body.step === script.fail)
      return Promise.resolve({ status: 400, body: { title: 'delta copy timed out' } });
    return Promise.resolve({ status: 200, body: null });
  };

async function setup(
  env: Record<string, string> = {},
  script: { fail?: string; hang?: string } = {},
  routeAt = SOURCE,
) {
  const sink = recordingSink();
  const ledger = new SqliteAuditLedger(':memory:');
  // the audit write path, as both hosts build it: every committed version appends its record
  const store = new AuditedLocationStore(new SqliteStore(':memory:'), new AuditTrail({ ledger, sink }));
  const h = virtualRunner({
    env: { ROUTELOCK_MIGRATION_ATTEMPTS: '1', ...env },
    store,
    sink,
    http: participant(script),
  });
  const service = new InProcessMigrationService(h.runner, h.router);
  await h.router.createRoute('r-1', routeAt);
  // every terminal status the runner saved: the end notices publish the final one again
  const terminalSaves: string[] = [];
  const save = h.state.saveStatus.bind(h.state);
  h.state.saveStatus = async (id, status, done) => {
    if (done) terminalSaves.push(status.status);
    await save(id, status, done);
  };
  const audit = async (): Promise<AuditRecord[]> => ledger.list('r-1', 100);
  return { h, sink, service, terminalSaves, audit };
}

type Setup = Awaited<ReturnType<typeof setup>>;

async function migrate(s: Setup): Promise<MigrationStatus> {
  const { migrationId } = await s.service.start({ resourceId: 'r-1', target: TARGET });
  await s.h.settle();
  return s.service.status(migrationId);
}

describe('MigrationEnded and stopped on the in-process runner', () => {
  test('Completed: one event, no code, stopped at the swap; the status shows no `stopped`', async () => {
    const s = await setup({ ROUTELOCK_PARTICIPANTS: ONE_PARTICIPANT });
    const status = await migrate(s);
    expect(status.status).toBe('Completed');
    expect(status.stopped).toBeUndefined();
    expect(s.sink.ended()).toEqual([
      {
        name: 'MigrationEnded',
        properties: {
          eventKey: 'MigrationEnded:m-1:1',
          migrationId: 'm-1',
          resourceId: 'r-1',
          outcome: 'Completed',
          code: '',
          stoppedAt: 'swapped',
          attempt: '1',
          campaignId: '',
        },
        measurements: { attempts: 1, durationSeconds: expect.any(Number) as number },
      },
    ]);
    // the control that makes "once" mean something: the end notices saved the final status again
    expect(s.terminalSaves.length).toBeGreaterThan(1);
  });

  test('Failed in the write lock: code ParticipantFailed; the release audited with the reason and the phases', async () => {
    const s = await setup({ ROUTELOCK_PARTICIPANTS: ONE_PARTICIPANT }, { fail: 'deltaCopy' });
    const status = await migrate(s);
    expect(status.status).toBe('Failed');
    expect(status.stopped).toEqual({
      phase: 'write',
      code: 'ParticipantFailed',
      reason: status.error,
      at: status.attempts?.[0]?.endedAt,
    });
    const ended = s.sink.ended();
    expect(ended.map((e) => [e.properties.outcome, e.properties.code, e.properties.stoppedAt])).toEqual([
      ['Failed', 'ParticipantFailed', 'write'],
    ]);
    const release = (await s.audit()).filter((r) => r.op === 'release');
    expect(release).toHaveLength(1);
    expect(release[0]?.reason).toMatch(/^deltaCopy: ParticipantFailed: /);
    expect(release[0]?.phasesReached).toEqual(['prelock', 'hardDelete', 'write']);
    // none of it carries the lock's credentials
    const record = await s.h.state.get('m-1');
    const { token, idempotencyKey } = s.h.keyring.credentials(
      attemptSeed({ ...record!.input.lock, attempt: 1 }),
    );
    assertNoSecrets([status, ended, release], [token, idempotencyKey]);
  });

  test('Failed after two attempts: one event for the run (attempt 2, attempts 2), one release record per attempt', async () => {
    const s = await setup(
      { ROUTELOCK_PARTICIPANTS: ONE_PARTICIPANT, ROUTELOCK_MIGRATION_ATTEMPTS: '2' },
      { fail: 'bulkCopy' },
    );
    const status = await migrate(s);
    expect([status.status, status.stopped?.phase, status.stopped?.code]).toEqual([
      'Failed',
      'hardDelete',
      'ParticipantFailed',
    ]);
    expect(status.attempts?.map((a) => [a.code, a.stoppedAt])).toEqual([
      ['ParticipantFailed', 'hardDelete'],
      ['ParticipantFailed', 'hardDelete'],
    ]);
    const ended = s.sink.ended();
    expect(ended).toHaveLength(1);
    expect([ended[0]?.properties.eventKey, ended[0]?.measurements?.attempts]).toEqual([
      'MigrationEnded:m-1:2',
      2,
    ]);
    const releases = (await s.audit()).filter((r) => r.op === 'release');
    expect(releases.map((r) => r.phasesReached)).toEqual([
      ['prelock', 'hardDelete'],
      ['prelock', 'hardDelete'],
    ]);
  });

  test('Conflict: a rival lock refuses the pre-lock; code Locked, stopped before it started', async () => {
    const s = await setup();
    await s.h.router.prelock('r-1', { migrationId: 'rival', owner: 'someone', target: TARGET });
    const status = await migrate(s);
    expect(status.status).toBe('Conflict');
    expect([status.stopped?.phase, status.stopped?.code]).toEqual(['starting', 'Locked']);
    expect(
      s.sink.ended().map((e) => [e.properties.outcome, e.properties.code, e.properties.stoppedAt]),
    ).toEqual([['Conflict', 'Locked', 'starting']]);
  });

  test('Cancelled in the hard-delete lock: code Cancelled; the release audited with the cancel', async () => {
    const s = await setup({ ROUTELOCK_PARTICIPANTS: ONE_PARTICIPANT }, { hang: 'bulkCopy' });
    const { migrationId } = await s.service.start({ resourceId: 'r-1', target: TARGET });
    for (let i = 0; i < 1000 && s.h.state.activeFor('r-1')?.status.phase !== 'hardDelete'; i += 1)
      await s.h.scheduler.runUntilIdle({ maxTimers: 1 });
    await s.service.cancel(migrationId, operator);
    await s.h.settle();
    const status = await s.service.status(migrationId);
    expect(status.status).toBe('Cancelled');
    expect([status.stopped?.phase, status.stopped?.code]).toEqual(['hardDelete', 'Cancelled']);
    expect(status.stopped?.reason).toMatch(/^cancelled by operator-1/);
    expect(
      s.sink.ended().map((e) => [e.properties.outcome, e.properties.code, e.properties.stoppedAt]),
    ).toEqual([['Cancelled', 'Cancelled', 'hardDelete']]);
    const release = (await s.audit()).find((r) => r.op === 'release');
    expect(release?.reason).toMatch(/^Cancelled: cancelled by operator-1/);
    expect(release?.phasesReached).toEqual(['prelock', 'hardDelete']);
  });

  test('NoOp: already at the target; one event, no `stopped` on the status', async () => {
    const s = await setup({}, {}, TARGET);
    const status = await migrate(s);
    expect(status.status).toBe('NoOp');
    expect(status.stopped).toBeUndefined();
    expect(
      s.sink.ended().map((e) => [e.properties.outcome, e.properties.code, e.properties.stoppedAt]),
    ).toEqual([['NoOp', 'AlreadyAtTarget', 'starting']]);
  });

  test('the list shows `stopped` too', async () => {
    const s = await setup({ ROUTELOCK_PARTICIPANTS: ONE_PARTICIPANT }, { fail: 'deltaCopy' });
    await migrate(s);
    const { items } = await s.service.list({});
    expect(items.map((i) => i.stopped?.code)).toEqual(['ParticipantFailed']);
  });
});

describe('MigrationEnded on Durable: recordOutcome', () => {
  async function durable(answer: 'ok' | 'fail') {
    const config = parseConfig({
      ROUTELOCK_PROFILE: 'dev',
      ROUTELOCK_MIGRATION_ATTEMPTS: '1',
      ROUTELOCK_PARTICIPANTS: answer === 'ok' ? '[]' : ONE_PARTICIPANT,
    });
    const fixture = await migrationFixture({
      config,
      start: Date.UTC(2026, 2, 1),
      source: SOURCE,
      target: TARGET,
    });
    const sink = recordingSink();
    // the activities as functions/services.ts builds them: with the services' sink
    const withSink = createActivities(fixture.router, config.timing, {
      keyring: fixture.keyring,
      records: fixture.records,
      sink,
    });
    fixture.activities.recordOutcome = withSink.recordOutcome;
    fixture.activities.callParticipant = async (call) => ({
      ok: true,
      value:
        call.method === 'POST' && call.body.step === 'bulkCopy'
          ? { status: 400, body: { title: 'no space left on the target' } }
          : { status: 404, body: null },
    });
    const harness: DurableReplay = new DurableReplay({
      orchestrator: migrationOrchestrator,
      name: 'migrationOrchestrator',
      instanceId: fixture.input.instanceId,
      input: fixture.input,
      start: Date.UTC(2026, 2, 1),
      activity: (fn, activityInput) => fixture.runActivity(fn, activityInput, harness.now),
    });
    const result = await harness.run();
    return { fixture, sink, withSink, status: result.output as MigrationStatus };
  }

  test('Completed: one event from the final record', async () => {
    const { sink, status } = await durable('ok');
    expect(status.status).toBe('Completed');
    expect(
      sink.ended().map((e) => [e.properties.eventKey, e.properties.outcome, e.properties.stoppedAt]),
    ).toEqual([['MigrationEnded:m-1:1', 'Completed', 'swapped']]);
  });

  test('Failed in the bulk copy: code and phase; the record read back shows `stopped`', async () => {
    const { sink, status, fixture } = await durable('fail');
    expect(status.status).toBe('Failed');
    expect(
      sink.ended().map((e) => [e.properties.outcome, e.properties.code, e.properties.stoppedAt]),
    ).toEqual([['Failed', 'ParticipantFailed', 'hardDelete']]);
    const { withStopped } = await import('../../shared/migration/stopped');
    const record = await fixture.records.get('m-1');
    expect(withStopped(record!.status).stopped).toMatchObject({
      phase: 'hardDelete',
      code: 'ParticipantFailed',
    });
  });

  test('recordOutcome run twice (a lost answer, retried): the same key twice, one after deduplication', async () => {
    const { sink, status, withSink } = await durable('fail');
    await withSink.recordOutcome({ status });
    const keys = sink.ended().map((e) => e.properties.eventKey);
    expect(keys).toEqual(['MigrationEnded:m-1:1', 'MigrationEnded:m-1:1']);
    // what the workbook does: arg_max(timestamp, *) by eventKey
    expect(new Set(keys).size).toBe(1);
  });
});
