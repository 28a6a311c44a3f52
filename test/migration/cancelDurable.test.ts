import type { OrchestrationContext, OrchestrationHandler } from 'durable-functions';
import { migrationOrchestrator } from '../../functions/migrationOrchestrator';
import { CANCEL_EVENT, type CancelRequest, type MigrationStatus } from '../../shared/migration/types';
import type { RaisedEvent, ReplayResult } from '../../testkit/durableReplay';
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
 * Cancel on Durable Functions (docs/design.md §6.8): the `cancel` external event, through the faithful
 * harness (testkit/durableReplay models EventRaised and WaitForExternalEvent as durable-js 3.5.0 and the
 * extension handle them). A cancel in each phase ends Cancelled with the lock released and the route
 * unchanged.
 */

const request: CancelRequest = { requestedAt: '2026-01-01T00:00:00.000Z', by: 'operator-1' };
const participants = [{ name: 'messages', url: 'https://messages.test/migrate' }];
const HOUR = 3_600_000;

/** Participants whose bulk copy takes an hour and whose delta takes `deltaMs`. */
const jobs = (deltaMs = 1000) =>
  participantJobs({ answers: 'async', durationMs: (job) => (job.step === 'bulkCopy' ? HOUR : deltaMs) });

const phaseOf = (statuses: unknown[]) => (statuses.at(-1) as MigrationStatus | undefined)?.phase;
const scheduled = (result: Pick<ReplayResult, 'actions'>, name: string) =>
  result.actions.filter((a) => a.name === name).length;

type When = RaisedEvent['when'] | { at: number };

async function cancelled(
  when: When,
  options: {
    deltaMs?: number;
    orchestrator?: OrchestrationHandler;
    version?: InputVersion;
    env?: Record<string, string>;
  } = {},
) {
  const h = await durableMigration({
    participants,
    version: options.version ?? V5,
    ...(options.env ? { env: options.env } : {}),
  });
  const { http } = jobs(options.deltaMs);
  // the phase the migration had published when the event was raised
  let raisedIn: string | undefined = 'starting';
  const event: RaisedEvent =
    typeof when === 'function'
      ? {
          name: CANCEL_EVENT,
          input: request,
          when: (s) => {
            const now = when(s);
            if (now) raisedIn = phaseOf(s.statuses);
            return now;
          },
        }
      : { name: CANCEL_EVENT, input: request, ...when };
  const harness = h.make({
    http,
    events: [event],
    ...(options.orchestrator ? { orchestrator: options.orchestrator } : {}),
  });
  const result = await harness.run();
  const doc = (await h.store.read(h.input.resourceId, { from: 'writeRegion' })).doc;
  return { h, result, output: result.output as MigrationStatus, doc, raisedIn, endedAt: harness.now };
}

const duringPrelock: When = (s) => scheduled(s, 'migrationPrelock') > 0;
const converging: When = (s) => phaseOf(s.statuses) === 'converging';
const bulkCopying: When = (s) =>
  phaseOf(s.statuses) === 'hardDelete' && scheduled(s, 'migrationCallParticipant') >= 3;
const deltaCopying: When = (s) =>
  phaseOf(s.statuses) === 'write' &&
  s.actions.some(
    (a) => a.name === 'migrationCallParticipant' && JSON.stringify(a.input).includes('deltaCopy'),
  );

const duringEscalation: When = (s) =>
  scheduled(s, 'migrationEscalate') > 0 && phaseOf(s.statuses) === 'converging';
const duringRenewal: When = (s) => phaseOf(s.statuses) === 'hardDelete' && scheduled(s, 'migrationRenew') > 0;

describe('cancel through the Durable replay harness', () => {
  test.each([
    ['before the pre-lock', { at: START }, 'starting'],
    ['during the pre-lock activity', duringPrelock, 'starting'],
    ['converging (the convergence timer)', converging, 'converging'],
    ['hardDelete, the bulk copy running', bulkCopying, 'hardDelete'],
    ['write, the delta copy running', deltaCopying, 'write'],
    // an event raised while an activity runs goes to the waiter already tracked:
    // the next wait must answer it, not track a fresh waiter for an event already given away
    ['during the hard-delete escalation activity', duringEscalation, 'converging'],
    ['during a renewal between copy rounds', duringRenewal, 'hardDelete'],
  ] as [string, When, string][])(
    '%s: Cancelled, lock released, route unchanged, no swap',
    async (label, when, phase) => {
      // the renewal case: a 15-minute hard-delete lease renews every 5 minutes of the hour-long bulk copy
      const env = label.includes('renewal')
        ? { ROUTELOCK_HARD_DELETE_LEASE_SECONDS: '900', ROUTELOCK_DELTA_ATTEMPTS: '1' }
        : undefined;
      const { result, output, doc, raisedIn, endedAt } = await cancelled(when, {
        deltaMs: HOUR,
        ...(env ? { env } : {}),
      });
      expect(raisedIn).toBe(phase);
      expect(result.error).toBeUndefined();
      expect(result.runtimeStatus).toBe('Completed');
      expect(output).toMatchObject({
        status: 'Cancelled',
        phase: label === 'before the pre-lock' ? 'starting' : 'released',
        cancelRequestedAt: request.requestedAt,
        cancelRequestedBy: 'operator-1',
      });
      expect(scheduled(result, 'migrationSwap')).toBe(0);
      expect(doc.location).toEqual(SOURCE);
      expect(doc.lock).toBeNull();
      // a wait under way ended early: the instance ended before the latest timer it had set was due
      const timers = result.actions.filter((a) => a.kind === 'timer').map((a) => a.fireAt as number);
      // (raised during an activity, it is answered at the next step, no wait under way)
      if (phase !== 'starting' && !label.includes('activity') && !label.includes('renewal'))
        expect(endedAt).toBeLessThan(Math.max(...timers));
      if (label === 'before the pre-lock') {
        expect(scheduled(result, 'migrationPrelock')).toBe(0);
        expect(output.error).toMatch(/before the pre-lock; no lock was taken/);
      } else {
        expect(scheduled(result, 'migrationRelease')).toBe(1);
        expect(output.error).toMatch(/cancelled by operator-1 .*; lock released/);
      }
    },
  );

  test('a cancel that arrives during the swap activity: the swap decides (Completed), the late cancel is recorded', async () => {
    const { output, doc } = await cancelled((s) => scheduled(s, 'migrationSwap') > 0);
    expect(output).toMatchObject({
      status: 'Completed',
      phase: 'swapped',
      cancelRequestedAt: request.requestedAt,
    });
    expect(doc.location).toEqual(TARGET);
  });

  test('a fresh orchestrator process after the event replays it from history and cancels alike', async () => {
    const outcome = async (crashBeforeRun?: number) => {
      const h = await durableMigration({ participants, version: V5 });
      const { http } = jobs(HOUR);
      const events = [{ name: CANCEL_EVENT, input: request, when: bulkCopying }];
      const result = await h.make({ http, events, ...(crashBeforeRun ? { crashBeforeRun } : {}) }).run();
      return { result };
    };
    const straight = await outcome();
    const crashed = await outcome(straight.result.runs - 2);
    expect(crashed.result.runtimeStatus).toBe('Completed');
    expect(crashed.result.output).toEqual(straight.result.output);
    const shape = (r: ReplayResult) => r.actions.map((a) => [a.id, a.kind, a.name, a.fireAt]);
    expect(shape(crashed.result)).toEqual(shape(straight.result));
  });

  test('cancel raised twice: one Cancelled, one release', async () => {
    const h = await durableMigration({ participants, version: V5 });
    const { http } = jobs(HOUR);
    const events: RaisedEvent[] = [
      { name: CANCEL_EVENT, input: request, when: bulkCopying },
      { name: CANCEL_EVENT, input: { ...request, by: 'operator-2' }, when: bulkCopying },
    ];
    const result = await h.make({ http, events }).run();
    expect(result.runtimeStatus).toBe('Completed');
    expect(result.output).toMatchObject({ status: 'Cancelled', cancelRequestedBy: 'operator-1' });
    expect(scheduled(result, 'migrationRelease')).toBe(1);
  });

  test('negative control: a runner deaf to the event swaps anyway, and these checks catch it', async () => {
    const deaf: OrchestrationHandler = function* (context: OrchestrationContext) {
      const df = context.df;
      const listen = df.waitForExternalEvent.bind(df);
      df.waitForExternalEvent = (name: string) => listen(`${name}-ignored`);
      return yield* migrationOrchestrator(context) as Generator<never, unknown, unknown>;
    };
    const control = await cancelled(bulkCopying, { orchestrator: deaf, deltaMs: 1000 });
    const real = await cancelled(bulkCopying, { deltaMs: 1000 });
    expect([control.output.status, control.doc.location]).toEqual(['Completed', TARGET]);
    expect([real.output.status, real.doc.location]).toEqual(['Cancelled', SOURCE]);
  });
});
