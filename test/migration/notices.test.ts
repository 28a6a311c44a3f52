import { InProcessMigrationService } from '../../shared/migration/inProcessService';
import type { EndNotice, MigrationStatus, ParticipantCall } from '../../shared/migration/types';
import { virtualRunner } from '../support/migrationHarness';
import { type ParticipantServer, type StepBehaviour, startParticipant } from '../support/participantServer';

/**
 * End notices (workflow version 4) on the in-process runner, over real participant servers
 * and the real `callParticipant` activity: after the swap is confirmed on a replica, after the final
 * Failed and after Cancelled, every participant gets one POST; best effort, never changing the status.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const ITEMS = ['msg-1', 'msg-2'];
const operator = { id: 'operator-1', name: 'Ops' };

const servers: ParticipantServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

type Behaviours = Partial<Record<Parameters<ParticipantServer['behave']>[0], StepBehaviour>>;

/** What happened, in order: reads of the route, published statuses, participant POSTs. */
type Event =
  | { kind: 'read'; from: string; at: number }
  | { kind: 'status'; status: MigrationStatus; at: number }
  | { kind: 'post'; participant: string; step: string; at: number; status?: number };

async function migrate(
  behaviours: Behaviours[],
  options: { env?: Record<string, string>; cancelInPhase?: 'hardDelete' | 'swapped' } = {},
) {
  const parts: ParticipantServer[] = [];
  for (const b of behaviours) {
    const server = await startParticipant();
    servers.push(server);
    parts.push(server);
    for (const [step, behaviour] of Object.entries(b))
      server.behave(step as keyof Behaviours, behaviour as StepBehaviour);
    server.seed(SOURCE, 'r-1', ITEMS);
  }
  const h = virtualRunner({
    http: null,
    env: {
      ROUTELOCK_PROFILE: 'dev',
      ROUTELOCK_PARTICIPANTS: JSON.stringify(parts.map((s, i) => ({ name: `p${i + 1}`, url: s.url }))),
      ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: '1',
      ROUTELOCK_REPLICATION_BOUND_SECONDS: '5',
      ROUTELOCK_SAFETY_BUFFER_SECONDS: '2',
      ROUTELOCK_MIGRATION_ATTEMPTS: '1',
      ...options.env,
    },
  });
  const events: Event[] = [];
  let inFlight = 0;
  const call = h.activities.callParticipant;
  h.activities.callParticipant = async (input: ParticipantCall) => {
    inFlight += 1;
    const event: Event = {
      kind: 'post',
      participant: input.participant,
      step: input.method === 'POST' ? input.body.step : 'poll',
      at: h.clock.now(),
    };
    events.push(event);
    try {
      const result = await call(input);
      if (result.ok) event.status = result.value.status;
      return result;
    } finally {
      inFlight -= 1;
    }
  };
  const readRoute = h.activities.readRoute;
  h.activities.readRoute = (input) => {
    events.push({ kind: 'read', from: input.from, at: h.clock.now() });
    return readRoute(input);
  };
  const save = h.state.saveStatus.bind(h.state);
  h.state.saveStatus = (id, status, done) => {
    events.push({ kind: 'status', status: structuredClone(status), at: h.clock.now() });
    return save(id, status, done);
  };
  await h.router.createRoute('r-1', SOURCE);
  const { record } = h.runner.start({ resourceId: 'r-1', target: TARGET });
  const service = new InProcessMigrationService(h.runner, h.router);
  let cancelled = false;
  let cancelError: unknown;
  // Virtual time that waits for real requests: no timer fires while one is in flight.
  for (let guard = 0; h.runner.activeCount > 0; guard += 1) {
    if (guard > 100_000) throw new Error('the migration did not settle');
    for (let i = 0; i < 8; i += 1) await new Promise<void>((r) => setImmediate(r));
    if (inFlight > 0) {
      await new Promise<void>((r) => setTimeout(r, 2));
      continue;
    }
    if (
      !cancelled &&
      options.cancelInPhase &&
      h.state.activeFor('r-1')?.status.phase === options.cancelInPhase
    ) {
      cancelled = true;
      cancelError = await service.cancel(record.migrationId, operator).then(
        () => undefined,
        (error: unknown) => error,
      );
    }
    if (h.runner.activeCount === 0) break;
    await h.scheduler.runUntilIdle({ settleTurns: 0, maxTimers: 1 });
  }
  const status = await h.runner.status(record.migrationId);
  const doc = (await h.store.read('r-1', { from: 'writeRegion' })).doc;
  const notices = parts.map((p) =>
    p.requests.filter((q) => q.body && ['completed', 'failed', 'cancelled'].includes(String(q.body.step))),
  );
  return { h, status, doc, parts, events, notices, cancelError };
}

const indexOf = (events: Event[], match: (e: Event) => boolean) => events.findIndex(match);

test('Completed: confirmed on a replica after the replication bound, then one completed notice each, with cleanUpSourceAfter', async () => {
  const r = await migrate([{}, {}]);
  expect(r.status.status).toBe('Completed');
  expect(r.doc).toMatchObject({ location: TARGET, lock: null });
  const swappedAt = Date.parse(r.status.timeline.swappedAt as string);
  // swapped but still Running until a replica shows it
  const swapped = indexOf(r.events, (e) => e.kind === 'status' && e.status.phase === 'swapped');
  expect(r.events[swapped]).toMatchObject({ status: { status: 'Running' } });
  // (version 5's read-path check before the copies reads a replica too: the confirmation's is after the swap)
  const replicaRead = r.events.findIndex((e, i) => i > swapped && e.kind === 'read' && e.from === 'replica');
  expect(replicaRead).toBeGreaterThan(0);
  const completed = indexOf(r.events, (e) => e.kind === 'status' && e.status.status === 'Completed');
  const firstNotice = indexOf(r.events, (e) => e.kind === 'post' && e.step === 'completed');
  expect(swapped).toBeLessThan(replicaRead);
  expect(replicaRead).toBeLessThan(completed);
  expect(completed).toBeLessThan(firstNotice);
  // the read came once the replication bound (5 s) and the safety buffer (2 s) had passed
  expect(r.events[replicaRead]!.at - swappedAt).toBeGreaterThanOrEqual(7000);
  // one POST per participant, the copy's job fields, the retired-source window's end, no credential
  for (const [i, notices] of r.notices.entries()) {
    expect(notices).toHaveLength(1);
    const body = notices[0]!.body!;
    expect(body).toMatchObject({
      migrationId: r.status.migrationId,
      resourceId: 'r-1',
      from: SOURCE,
      to: TARGET,
      step: 'completed',
      migrationAttempt: 1,
      stepAttempt: 1,
      attempt: 1,
      lockAcquiredAt: r.status.timeline.prelockAt,
      cleanUpSourceAfter: r.doc.secondary!.writesBlockedUntil,
    });
    expect(Date.parse(String(body.cleanUpSourceAfter))).toBeGreaterThan(swappedAt);
    expect(body).not.toHaveProperty('reason');
    expect(JSON.stringify(body)).not.toMatch(/token|nonce|keyId/i);
    // after every copy job of the attempt
    const sequences = r.parts[i]!.requests.map((q) => Number(q.body?.sequence ?? 0));
    expect(Number(body.sequence)).toBe(Math.max(...sequences));
    expect(r.parts[i]!.dataAt(TARGET, 'r-1')).toEqual(ITEMS);
  }
  expect(r.status.notices).toEqual([
    { participant: 'p1', step: 'completed', outcome: 'delivered', at: expect.any(String) },
    { participant: 'p2', step: 'completed', outcome: 'delivered', at: expect.any(String) },
  ]);
});

test('Failed (no attempt left): one failed notice each, with the reason; nothing after an attempt that is retried', async () => {
  const r = await migrate([{ deltaCopy: { kind: 'status', status: 400 } }]);
  expect(r.status.status).toBe('Failed');
  expect(r.notices[0]).toHaveLength(1);
  expect(r.notices[0]![0]!.body).toMatchObject({ step: 'failed', reason: r.status.error, from: SOURCE });
  expect(r.notices[0]![0]!.body).not.toHaveProperty('cleanUpSourceAfter');
  expect(r.status.notices).toEqual([
    { participant: 'p1', step: 'failed', outcome: 'delivered', at: expect.any(String) },
  ]);
  // the final status came first, and the notices did not change what it says
  const failed = indexOf(r.events, (e) => e.kind === 'status' && e.status.status === 'Failed');
  expect(failed).toBeLessThan(indexOf(r.events, (e) => e.kind === 'post' && e.step === 'failed'));

  // two attempts: the first fails (a 400 to its delta), the second completes: only `completed`
  const retried = await migrate([{ deltaCopy: { kind: 'status', status: 400, times: 1 } }], {
    env: { ROUTELOCK_MIGRATION_ATTEMPTS: '2' },
  });
  expect(retried.status).toMatchObject({ status: 'Completed', attempt: 2 });
  expect(retried.notices[0]!.map((q) => q.body?.step)).toEqual(['completed']);
  expect(retried.notices[0]![0]!.body).toMatchObject({ migrationAttempt: 2 });
});

test('Cancelled: one cancelled notice each, with the reason', async () => {
  const r = await migrate([{ bulkCopy: { kind: 'poll', polls: 1000 } }], { cancelInPhase: 'hardDelete' });
  expect(r.status.status).toBe('Cancelled');
  expect(r.notices[0]).toHaveLength(1);
  expect(r.notices[0]![0]!.body).toMatchObject({ step: 'cancelled', reason: r.status.error });
  expect(String(r.status.error)).toMatch(/cancelled by operator-1/);
  expect(r.status.notices).toMatchObject([{ participant: 'p1', step: 'cancelled', outcome: 'delivered' }]);
});

test('answers: 404 notImplemented, 503 then 200 delivered, 202 accepted (never polled), always 503 undelivered', async () => {
  const r = await migrate([
    { completed: { kind: 'status', status: 404 } },
    { completed: { kind: 'status', status: 503, times: 1 } },
    { completed: { kind: 'poll', polls: 5 } },
    { completed: { kind: 'status', status: 503 } },
  ]);
  // never blocking, never failing the migration
  expect(r.status.status).toBe('Completed');
  const outcome = (n: number) => (r.status.notices as EndNotice[])[n]!.outcome;
  expect([outcome(0), outcome(1), outcome(2), outcome(3)]).toEqual([
    'notImplemented',
    'delivered',
    'delivered',
    'undelivered',
  ]);
  expect(r.notices.map((n) => n.length)).toEqual([1, 2, 1, r.h.config.migration.retryAttempts]);
  // the 202's Location is never polled
  expect(r.parts[2]!.requests.filter((q) => q.method === 'GET')).toHaveLength(0);
  // the always-503 participant backed off as the contract says (1, 2, 4, 8 s)
  const posts = r.events.filter((e) => e.kind === 'post' && e.participant === 'p4' && e.step === 'completed');
  expect(posts.slice(1).map((e, i) => (e.at - posts[i]!.at) / 1000)).toEqual([1, 2, 4, 8]);
});

test('no participants: no notices, nothing published for them; Conflict and NoOp tell no one', async () => {
  const r = await migrate([]);
  expect(r.status.status).toBe('Completed');
  expect(r.status).not.toHaveProperty('notices');

  const noop = await migrate([{}], {});
  const before = noop.parts[0]!.requests.length;
  await noop.h.router.createRoute('r-at-target', TARGET);
  const { record } = noop.h.runner.start({ resourceId: 'r-at-target', target: TARGET });
  await noop.h.scheduler.runWhile(() => noop.h.runner.activeCount > 0);
  const ended = await noop.h.runner.status(record.migrationId);
  expect(['NoOp', 'Conflict']).toContain(ended.status);
  expect(noop.parts[0]!.requests.length).toBe(before);
  expect(ended).not.toHaveProperty('notices');
});

test('a cancel while the swap is confirmed is too late: refused AlreadySwapped, Completed, the completed notice', async () => {
  const r = await migrate([{}], { cancelInPhase: 'swapped' });
  expect(r.cancelError).toMatchObject({ code: 'AlreadySwapped' });
  expect(r.status.status).toBe('Completed');
  expect(r.doc).toMatchObject({ location: TARGET, lock: null });
  expect(r.notices[0]!.map((q) => q.body?.step)).toEqual(['completed']);
});
