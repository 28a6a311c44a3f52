import { parseConfig } from '../../shared/config';
import {
  type ActivityResult,
  type CutoverWindow,
  type MigrationInput,
  type MigrationSettings,
  type SeededGrant,
  type Step,
  pendingStatus,
} from '../../shared/migration/types';
import { type Moving, attemptActionsBound } from '../../shared/migration/workflow';
import {
  windowPhase,
  windowShutBeforePrelock,
  worstCaseWindowActions,
} from '../../shared/migration/workflow/window';

/**
 * The window phase as a pure generator, its steps answered by a script (the runners' parts are
 * tested in windowInProcess / windowDurable): the cap checks at the write step, a renewal refused, and
 * inputs without a window yielding no step at all.
 */

const T0 = Date.parse('2026-06-01T00:00:00Z');
const MIN = 60_000;
const settings: MigrationSettings = {
  replicationBoundSeconds: 1,
  clockSkewSeconds: 5,
  safetyBufferSeconds: 1,
  hardDeleteLeaseSeconds: 120,
  writeLeaseSeconds: 30,
  writeBudgetSeconds: 60,
  deltaAttempts: 2,
  deltaRetryDelaySeconds: 1,
  inFlightGraceSeconds: 0,
  retryAttempts: 2,
  retryIntervalSeconds: 1,
  participants: [],
  prelockMaxSeconds: 3600,
};
const inputWith = (window: CutoverWindow | undefined): MigrationInput => ({
  migrationId: 'm-1',
  instanceId: 'migrate-r-1',
  resourceId: 'r-1',
  target: { region: 'eastus' },
  settings,
  lock: { keyId: 'k', nonce: 'n' },
  workflowVersion: 5,
  ...(window === undefined ? {} : { window }),
});
const moving = (input: MigrationInput): Moving => ({
  input,
  status: { ...pendingStatus(input), status: 'Running', phase: 'hardDelete' },
  etag: 'e0',
  from: { region: 'westeurope' },
});
const grant = (maxExpiresAt: number): SeededGrant =>
  ({ etag: 'e1', maxExpiresAt: new Date(maxExpiresAt).toISOString() }) as SeededGrant;

/** Drive `gen`, answering each step with `answer(step, clock)`; the clock moves to each timer. */
function drive<T>(
  gen: Generator<Step, T, unknown>,
  answer: (step: Step) => unknown = () => undefined,
  start = T0,
): { result: T; steps: Step[] } {
  let clock = start;
  const steps: Step[] = [];
  let next = gen.next();
  while (!next.done) {
    const step = next.value;
    steps.push(step);
    let value: unknown;
    if (step.kind === 'now') value = clock;
    else if (step.kind === 'timer') {
      clock = Math.max(clock, step.fireAt);
      value = null;
    } else value = answer(step);
    next = gen.next(value);
  }
  return { result: next.value, steps };
}

const renewals = (steps: Step[]) => steps.filter((s) => s.kind === 'activity' && s.name === 'renew').length;

test('no window: no step at all', () => {
  const input = inputWith(undefined);
  expect(drive(windowPhase(moving(input))).steps).toEqual([]);
  expect(drive(windowShutBeforePrelock(input)).steps).toEqual([]);
});

test('waits to the slot in renewal-period steps (40 s for a 120 s lease), then removes waitingForWindow', () => {
  const input = inputWith({ notBefore: '2026-06-01T00:05:00Z' });
  const { result, steps } = drive(windowPhase(moving(input)), () => ({
    ok: true,
    value: grant(T0 + 60 * MIN),
  }));
  expect(result.kind).toBe('next');
  if (result.kind !== 'next') return;
  expect(result.state.status).not.toHaveProperty('waitingForWindow');
  expect(result.state.etag).toBe('e1');
  const timers = steps.filter((s) => s.kind === 'timer').map((s) => (s as { fireAt: number }).fireAt - T0);
  expect(timers).toEqual([40, 80, 120, 160, 200, 240, 280, 300].map((s) => s * 1000));
  expect(steps.every((s) => s.kind !== 'timer' || s.cancellable === true)).toBe(true);
  expect(renewals(steps)).toBe(timers.length);
  const published = steps
    .filter((s) => s.kind === 'status')
    .map((s) => (s as { status: { waitingForWindow?: unknown } }).status);
  expect(published.map((s) => s.waitingForWindow)).toEqual([
    { nextOpening: '2026-06-01T00:05:00.000Z' },
    undefined,
  ]);
  // within its own term of the bound
  expect(
    steps.filter((s) => s.kind !== 'now' && s.kind !== 'status').length + timers.length,
  ).toBeLessThanOrEqual(
    worstCaseWindowActions({ prelockMaxSeconds: 3600, hardDeleteLeaseSeconds: 120, deltaAttempts: 2 }),
  );
});

test("at the write step: a slot past the hard-delete lock's own cap (less the skew) fails WindowUnreachable at once", () => {
  const input = inputWith({ notBefore: '2026-06-01T00:30:00Z' });
  // the cap is 00:31:00; the holder's end 00:30:55; the slot 00:30:00 + 60 s budget = 00:31:00 > 00:30:55
  const { result, steps } = drive(windowPhase(moving(input)), () => ({
    ok: true,
    value: grant(T0 + 31 * MIN),
  }));
  expect(result).toMatchObject({ kind: 'failed', code: 'WindowUnreachable' });
  expect((result as { reason: string }).reason).toBe(
    "WindowUnreachable: the cutover window next opens at 2026-06-01T00:30:00.000Z; the write budget (60 s) from then would end past the hard-delete lock's cap (2026-06-01T00:30:55.000Z)",
  );
  expect(steps.filter((s) => s.kind === 'timer')).toEqual([]);
  // 5 s more of cap and it waits
  const fits = drive(windowPhase(moving(input)), () => ({ ok: true, value: grant(T0 + 31 * MIN + 5000) }));
  expect(fits.result.kind).toBe('next');
});

test('a renewal refused fails the phase naming it; MaxLeaseReached on the first round is WindowUnreachable', () => {
  const input = inputWith({ notBefore: '2026-06-01T00:05:00Z' });
  const refused: ActivityResult<SeededGrant> = { ok: false, code: 'LockExpired', message: 'lapsed' };
  expect(drive(windowPhase(moving(input)), () => refused).result).toMatchObject({
    kind: 'failed',
    code: 'LockExpired',
    reason: 'renew the hard-delete lock: LockExpired: lapsed',
  });
  // refused after a round of waiting: the failure's status no longer shows the wait
  let asked = 0;
  const later = drive(windowPhase(moving(input)), () =>
    (asked += 1) === 1 ? { ok: true, value: grant(T0 + 60 * MIN) } : refused,
  ).result;
  expect(later).toMatchObject({ kind: 'failed', code: 'LockExpired' });
  expect((later as { status: object }).status).not.toHaveProperty('waitingForWindow');
  const capped: ActivityResult<SeededGrant> = { ok: false, code: 'MaxLeaseReached', message: 'at its cap' };
  expect(drive(windowPhase(moving(input)), () => capped).result).toMatchObject({
    kind: 'failed',
    code: 'WindowUnreachable',
  });
});

test('the gate before the pre-lock: closed, beyond a new lock cap, or go on', () => {
  const gate = (window: CutoverWindow) => drive(windowShutBeforePrelock(inputWith(window))).result;
  expect(gate({ notAfter: '2026-06-01T00:00:30Z' })).toMatchObject({ code: 'WindowClosed' });
  // a new lock's cap: now + 3600 s − 5 s skew = 00:59:55
  expect(gate({ notBefore: '2026-06-01T00:58:55Z' })).toBeNull();
  expect(gate({ notBefore: '2026-06-01T00:58:56Z' })).toMatchObject({ code: 'WindowUnreachable' });
});

test("attemptActionsBound has the wait's own term (production: 117 actions, dev: 279)", () => {
  const production = parseConfig({});
  const dev = parseConfig({ ROUTELOCK_PROFILE: 'dev' });
  const term = (c: typeof production) =>
    worstCaseWindowActions({
      prelockMaxSeconds: c.timing.prelockMaxSeconds,
      hardDeleteLeaseSeconds: c.timing.hardDeleteLeaseSeconds,
      deltaAttempts: c.migration.deltaAttempts,
    });
  expect([term(production), term(dev)]).toEqual([117, 279]);
  expect(attemptActionsBound(production)).toBeGreaterThanOrEqual(term(production) + 200);
});
