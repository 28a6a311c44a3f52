import { migrationOrchestrator } from '../../functions/migrationOrchestrator';
import { parseConfig } from '../../shared/config';
import type { HttpAnswer, MigrationStatus, ParticipantCall } from '../../shared/migration/types';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import type { ManualClock } from '../../testkit/clock';
import { DurableReplay } from '../../testkit/durableReplay';
import { FailoverStore } from '../../testkit/failoverStore';
import { migrationFixture } from '../../testkit/migrationFixture';
import { plantUnconfirmedSwap } from '../../testkit/plantedBugs';

/**
 * Confirmation and end notices (docs/design.md §6.11) on the Durable runner, replayed through
 * durable-functions' own executor (testkit/durableReplay.ts) with the real orchestrator: the confirmation's
 * wait is a durable timer, the notices `callParticipant` activities raced against a timer, after the final
 * status.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const START = Date.UTC(2026, 2, 1);
const PARTICIPANTS = [
  { name: 'messages', url: 'https://messages.test/migrate' },
  { name: 'media', url: 'https://media.test/migrate' },
];

type Answer = (call: ParticipantCall) => HttpAnswer;

async function replay(answer: Answer, options: { failover?: boolean; plant?: boolean } = {}) {
  const config = parseConfig({
    ROUTELOCK_PROFILE: 'dev',
    ROUTELOCK_PARTICIPANTS: JSON.stringify(PARTICIPANTS),
    ROUTELOCK_REPLICATION_BOUND_SECONDS: '5',
    ROUTELOCK_SAFETY_BUFFER_SECONDS: '2',
  });
  // the fixture's clock once it exists (the route is created before)
  const time: { clock?: ManualClock } = {};
  const store = new FailoverStore(
    new SqliteStore(':memory:'),
    () => time.clock?.now() ?? START,
    1000,
    options.failover ? 1 : 0,
  );
  const fixture = await migrationFixture({ config, start: START, source: SOURCE, target: TARGET, store });
  time.clock = fixture.clock;
  if (options.plant) plantUnconfirmedSwap(fixture.activities);
  const posts: { participant: string; step: string; at: number; body: unknown }[] = [];
  fixture.activities.callParticipant = async (call) => {
    if (call.method === 'POST')
      posts.push({
        participant: call.participant,
        step: call.body.step,
        at: fixture.clock.now(),
        body: call.body,
      });
    // verify (an optional step) not implemented: the copies are all these tests need
    const verify = call.method === 'POST' && call.body.step === 'verify';
    return { ok: true, value: verify ? { status: 404, body: null } : answer(call) };
  };
  const harness: DurableReplay = new DurableReplay({
    orchestrator: migrationOrchestrator,
    name: 'migrationOrchestrator',
    instanceId: fixture.input.instanceId,
    input: fixture.input,
    start: START,
    activity: (fn, activityInput) => fixture.runActivity(fn, activityInput, harness.now),
  });
  const result = await harness.run();
  const doc = (await store.read('conv-1', { from: 'writeRegion' })).doc;
  return { result, status: result.output as MigrationStatus, doc, posts, store };
}

const ends = <P extends { step: string }>(posts: P[]) =>
  posts.filter((p) => !['bulkCopy', 'deltaCopy', 'verify'].includes(p.step));

test('Completed after the replica read; then the notices: 503 then 200 delivered, always 503 undelivered', async () => {
  let mediaCalls = 0;
  const r = await replay((call) => {
    if (call.method !== 'POST' || !['completed'].includes(call.body.step)) return { status: 200, body: null };
    if (call.participant === 'media') return { status: 503, body: 'busy' };
    return { status: mediaCalls++ === 0 ? 503 : 200, body: null };
  });
  expect(r.result.error).toBeUndefined();
  expect(r.status.status).toBe('Completed');
  expect(r.doc).toMatchObject({ location: TARGET, lock: null });
  const names = r.result.actions.map((a) => a.name ?? a.kind);
  // (the read-path check reads a replica too, before the copies: the confirmation's is after the swap)
  const swapAt = names.indexOf('migrationSwap');
  const replicaRead = r.result.actions.findIndex(
    (a, i) =>
      i > swapAt && a.name === 'migrationReadRoute' && (a.input as { from: string }).from === 'replica',
  );
  const firstNotice = r.result.actions.findIndex(
    (a) =>
      a.name === 'migrationCallParticipant' &&
      (a.input as ParticipantCall & { method: 'POST' }).body?.step === 'completed',
  );
  expect(replicaRead).toBeGreaterThan(names.indexOf('migrationSwap'));
  expect(firstNotice).toBeGreaterThan(replicaRead);
  // the confirmation's durable timer: swappedAt + replication bound + safety buffer
  const swappedAt = Date.parse(r.status.timeline.swappedAt!);
  expect(r.result.actions.filter((a) => a.kind === 'timer').map((a) => a.fireAt)).toContain(swappedAt + 7000);
  // Completed was published before the notices, which only add `notices`
  const statuses = r.result.statuses as MigrationStatus[];
  const completedAt = statuses.findIndex((s) => s.status === 'Completed');
  expect(statuses[completedAt]).not.toHaveProperty('notices');
  expect(statuses.at(-1)).toMatchObject({ status: 'Completed', notices: expect.any(Array) });
  expect(r.status.notices).toEqual([
    { participant: 'messages', step: 'completed', outcome: 'delivered', at: expect.any(String) },
    { participant: 'media', step: 'completed', outcome: 'undelivered', at: expect.any(String) },
  ]);
  expect(ends(r.posts).filter((p) => p.participant === 'messages')).toHaveLength(2);
  expect(ends(r.posts).filter((p) => p.participant === 'media')).toHaveLength(5); // ROUTELOCK_RETRY_ATTEMPTS
  expect(ends(r.posts)[0]!.body).toMatchObject({
    step: 'completed',
    from: SOURCE,
    to: TARGET,
    cleanUpSourceAfter: r.doc.secondary!.writesBlockedUntil,
  });
});

test('a failover drops the swap: swapped again, Completed at the target, the notice after; negative control without confirmation', async () => {
  const ok: Answer = () => ({ status: 200, body: null });
  const r = await replay(ok, { failover: true });
  expect(r.result.error).toBeUndefined();
  expect(r.store.dropped).toHaveLength(1);
  expect(r.status.status).toBe('Completed');
  expect(r.doc).toMatchObject({ location: TARGET, lock: null });
  const swaps = r.result.actions.filter((a) => a.name === 'migrationSwap');
  expect(swaps).toHaveLength(2);
  const completed = ends(r.posts);
  expect(completed.map((p) => p.step)).toEqual(['completed', 'completed']);
  expect(completed[0]!.at).toBeGreaterThanOrEqual(Date.parse(r.status.timeline.swappedAt!) + 7000);

  const control = await replay(ok, { failover: true, plant: true });
  expect(control.store.dropped).toHaveLength(1);
  expect(control.status.status).toBe('Completed');
  expect(control.doc.location).toEqual(SOURCE);
});
