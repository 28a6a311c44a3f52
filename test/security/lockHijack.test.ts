import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { ManualClock } from '../../testkit/clock';
import { parseConfig } from '../../shared/config';
import { RouteLockError } from '../../shared/core/errors';
import type { MigrationStatus } from '../../shared/migration/types';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { plantedRules } from '../../testkit/plantedBugs';
import { seamedRouter } from '../../testkit/router';
import { attemptHijack } from '../support/hijack';
import { type ParticipantServer, startParticipant } from '../support/participantServer';
import { poll } from '../support/poll';

/**
 * A lock hijack: start a migration, read everything a caller with an ordinary key can read, and replay
 * the live pre-lock with each of those values as the Idempotency-Key and the owner. None may answer 200
 * with a fresh token: with the migration id as the key (the negative control), one does, and the attacker
 * swaps the resource with nothing copied.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };

let host: LocalHost | undefined;
let participant: ParticipantServer | undefined;
afterEach(async () => {
  participant?.release();
  await host?.close();
  await participant?.close();
  host = undefined;
  participant = undefined;
});

const json = (method: string, body?: unknown, headers: Record<string, string> = {}): RequestInit => ({
  method,
  headers: { 'content-type': 'application/json', ...headers },
  ...(body === undefined ? {} : { body: JSON.stringify(body) }),
});

test('a stranger with every public value gets 423 and the migration completes', async () => {
  participant = await startParticipant();
  participant.behave('bulkCopy', { kind: 'hold' });
  host = await startLocalHost({
    env: {
      PORT: '0',
      ROUTELOCK_PROFILE: 'dev',
      // a pre-lock that lasts a few seconds, so the attack runs while it is replayable
      ROUTELOCK_CACHE_TIERS: 'local=15',
      ROUTELOCK_REPLICATION_BOUND_SECONDS: '0',
      ROUTELOCK_SAFETY_BUFFER_SECONDS: '0',
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'messages', url: participant.url }]),
    },
    store: new SqliteStore(':memory:'),
    log: () => undefined,
  });
  const api = `${host.url}/api`;
  expect((await fetch(`${api}/routes/conv-1`, json('PUT', { location: SOURCE }))).status).toBe(201);

  const startRes = await fetch(`${api}/migrations`, json('POST', { resourceId: 'conv-1', target: TARGET }));
  const started = (await startRes.json()) as { migrationId: string; instanceId: string; statusUrl: string };
  // the migration holds its pre-lock (the route view may still be the cached, unlocked one)
  const status = await poll(
    async () => (await (await fetch(`${host!.url}${started.statusUrl}`)).json()) as MigrationStatus,
    (s) => s.phase === 'prelock' || s.phase === 'converging',
  );
  const view = (await (await fetch(`${api}/routes/conv-1`)).json()) as { etag: string };
  const lock = { migrationId: started.migrationId, target: status.target };

  const publicValues = [
    started.migrationId,
    started.instanceId,
    started.statusUrl,
    view.etag,
    status.resourceId,
    TARGET.region,
    TARGET.account,
  ];
  const { tried, hijacks } = await attemptHijack(publicValues, async (key, owner) => {
    const res = await fetch(
      `${api}/routes/conv-1/prelock`,
      json('POST', { migrationId: lock.migrationId, owner, target: lock.target }, { 'idempotency-key': key }),
    );
    const body = (await res.json()) as { token?: string; code?: string };
    if (res.status === 200 && body.token) return 'token';
    expect({ status: res.status, code: body.code }).toEqual({ status: 423, code: 'Locked' });
    return 'refused';
  });
  expect(tried).toBeGreaterThan(500);
  // and the attack ran while the pre-lock was still replayable (before the convergence wait ended)
  const during = (await (await fetch(`${host.url}${started.statusUrl}`)).json()) as MigrationStatus;
  expect(['prelock', 'converging']).toContain(during.phase);
  expect(hijacks).toEqual([]);

  // the lock is still the migration's own, still in pre-lock or moving on: the attack changed nothing
  const after = (await (await fetch(`${api}/routes/conv-1`)).json()) as { lock: { migrationId: string } };
  expect(after.lock.migrationId).toBe(started.migrationId);
  participant.release();
  const final = await poll(
    async () => (await (await fetch(`${host!.url}${started.statusUrl}`)).json()) as MigrationStatus,
    (s) => !['Pending', 'Running'].includes(s.status),
    30_000,
  );
  expect(final).toMatchObject({ status: 'Completed', phase: 'swapped' });
  const moved = (await (await fetch(`${api}/routes/conv-1`)).json()) as { location: unknown };
  expect(moved.location).toEqual(TARGET);
}, 60_000);

test('negative control: a replay rule that trusts the key alone, keyed by the migration id, is hijacked by the same attack', async () => {
  const config = parseConfig({});
  const clock = new ManualClock();
  const router = seamedRouter({
    store: new SqliteStore(':memory:'),
    timing: config.timing,
    clock: clock.now,
    rules: plantedRules('replayTrustsKeyAlone'),
  });
  await router.createRoute('conv-1', SOURCE);
  // the negative control's keys: Idempotency-Key = migration id, owner = instance id
  await router.prelock('conv-1', {
    migrationId: 'm-1',
    owner: 'migrate-conv-1',
    target: TARGET,
    idempotencyKey: 'm-1',
  });
  const { hijacks } = await attemptHijack(
    ['m-1', 'migrate-conv-1', '/api/migrations/m-1', 'conv-1', TARGET.region, TARGET.account],
    async (key, owner) => {
      try {
        const grant = await router.prelock('conv-1', {
          migrationId: 'm-1',
          owner,
          target: TARGET,
          idempotencyKey: key,
        });
        return grant.token ? 'token' : 'refused';
      } catch (error) {
        if (error instanceof RouteLockError) return 'refused';
        throw error;
      }
    },
  );
  expect(hijacks).toContain('key "m-1", owner "attacker"');
});
