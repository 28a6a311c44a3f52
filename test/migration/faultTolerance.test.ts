import { RouteLockError } from '../../shared/core/errors';
import type { LocationDocument, StoredDocument } from '../../shared/core/lock/document';
import type { HttpCall } from '../../shared/migration/types';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { FaultyStore } from '../../testkit/faultyStore';
import { copiesOnly, virtualRunner } from '../support/migrationHarness';

/**
 * What the fleet simulation (verify/fleet.ts) found, pinned down one case at a time: a pre-lock that
 * never gets through, a write whose answer was lost, and requests still in flight when a lock commits.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const PARTICIPANTS = JSON.stringify([{ name: 'messages', url: 'https://participant.invalid/migrate' }]);
/** One attempt: these tests are about what a single attempt does (retries: test/migration/attempts.test.ts). */
const ONE_ATTEMPT = { ROUTELOCK_MIGRATION_ATTEMPTS: '1' };

test('a store down through every retry of the pre-lock ends the migration Failed, not unfinished forever', async () => {
  const store = new FaultyStore(new SqliteStore(':memory:'));
  const h = virtualRunner({ store, env: ONE_ATTEMPT });
  await h.router.createRoute('r-down', SOURCE);
  store.down = true;
  const { record } = h.runner.start({ resourceId: 'r-down', target: TARGET });
  await h.settle();
  const status = await h.runner.status(record.migrationId);
  expect(status).toMatchObject({ status: 'Failed' });
  expect(status.error).toMatch(/^prelock: Store throttled/);
  expect(h.state.unfinished()).toEqual([]);
  store.down = false;
  // the clean-up never takes a lock of its own
  expect((await h.store.read('r-down', { from: 'writeRegion' })).doc.lock).toBeNull();
  // and the resource can be migrated once the store is back
  const again = h.runner.start({ resourceId: 'r-down', target: TARGET });
  expect(again.created).toBe(true);
  await h.settle();
  expect(await h.runner.status(again.record.migrationId)).toMatchObject({ status: 'Completed' });
});

/** The pre-lock commits but its answer is lost, then the store fails every retry. */
class OrphaningStore extends SqliteStore {
  private failReads = 0;
  private armed = true;
  override async replace(doc: LocationDocument, ifMatch: string): Promise<StoredDocument> {
    const stored = await super.replace(doc, ifMatch);
    if (this.armed && doc.lock?.phase === 'prelock') {
      this.armed = false;
      this.failReads = 4; // the four retries left of five
      throw new RouteLockError('StoreUnavailable', 'Store request timed out.', { retryAfterSeconds: 1 });
    }
    return stored;
  }
  override async read(id: string, options: { from: 'nearest' | 'writeRegion' }): Promise<StoredDocument> {
    if (this.failReads > 0) {
      this.failReads -= 1;
      throw new RouteLockError('StoreUnavailable', 'Store unavailable (503).', { retryAfterSeconds: 1 });
    }
    return super.read(id, options);
  }
  /** Read-throughs too meet the failures (a full read, so the injected ones apply). */
  override readIfChanged(
    id: string,
    _etag: string,
    options: { from: 'nearest' | 'writeRegion' },
  ): Promise<StoredDocument> {
    return this.read(id, options);
  }
}

test('a pre-lock that committed unseen is not left behind: released with the token its seed derives', async () => {
  const store = new OrphaningStore(':memory:');
  const h = virtualRunner({ store, env: ONE_ATTEMPT });
  await h.router.createRoute('r-orphan', SOURCE);
  const { record } = h.runner.start({ resourceId: 'r-orphan', target: TARGET });
  await h.settle();
  const status = await h.runner.status(record.migrationId);
  expect(status.status).toBe('Failed');
  expect(status.error).toMatch(
    /^prelock: Store unavailable.*; its pre-lock, committed unseen, was released$/,
  );
  const doc = (await h.store.read('r-orphan', { from: 'writeRegion' })).doc;
  // Without the clean-up the pre-lock would hold the resource for its 48 h lease.
  expect(doc.lock).toBeNull();
  expect(doc.lastMigration).toMatchObject({ migrationId: record.migrationId, outcome: 'released' });
});

/** Commits the first replace that matches, then answers as a timed-out request would. */
class LostAnswerStore extends SqliteStore {
  lose: ((doc: LocationDocument) => boolean) | undefined;
  override async replace(doc: LocationDocument, ifMatch: string): Promise<StoredDocument> {
    const stored = await super.replace(doc, ifMatch);
    if (this.lose?.(doc)) {
      this.lose = undefined;
      throw new RouteLockError('StoreUnavailable', 'Store request timed out.', { retryAfterSeconds: 1 });
    }
    return stored;
  }
}

/** A route pre-locked by hand, the clock just past the lock's start. */
async function startedPrelock(resourceId: string) {
  const h = virtualRunner();
  await h.router.createRoute(resourceId, SOURCE);
  const seed = h.keyring.newSeed();
  const taken = await h.activities.prelock({
    resourceId,
    migrationId: `m-${resourceId}`,
    owner: 'test',
    target: TARGET,
    lock: seed,
  });
  if (!taken.ok) throw new Error(`pre-lock refused: ${taken.code}`);
  const grant = taken.value;
  h.clock.set(Date.parse(grant.startsAt) + h.config.timing.clockSkewSeconds * 1000 + 1);
  return { h, grant, seed, token: h.keyring.credentials(seed).token };
}

describe('a write whose answer was lost is retried as the replay it is', () => {
  for (const phase of ['hardDelete', 'write'] as const) {
    test(`escalation to ${phase}: the migration completes`, async () => {
      const store = new LostAnswerStore(':memory:');
      const h = virtualRunner({ store });
      await h.router.createRoute('r-lost', SOURCE);
      store.lose = (doc) => doc.lock?.phase === phase;
      const { record } = h.runner.start({ resourceId: 'r-lost', target: TARGET });
      await h.settle();
      expect(store.lose).toBeUndefined(); // the fault did fire
      expect(await h.runner.status(record.migrationId)).toMatchObject({ status: 'Completed' });
    });
  }

  test('the activity decides again on a 412 of its own If-Match; the router alone answers 412', async () => {
    const { h, grant, seed, token } = await startedPrelock('r-412');
    // The escalation committed, but its caller never heard: it still holds the pre-lock's ETag.
    await h.router.escalate('r-412', { token, phase: 'hardDelete' });
    await expect(
      h.router.escalate('r-412', { token, phase: 'hardDelete' }, { ifMatch: grant.etag }),
    ).rejects.toMatchObject({ code: 'PreconditionFailed' });
    const retried = await h.activities.escalate({
      resourceId: 'r-412',
      lock: seed,
      phase: 'hardDelete',
      ifMatch: grant.etag,
    });
    expect(retried).toMatchObject({ ok: true, value: { phase: 'hardDelete' } });
    // The token stays the fence: the same retry with a wrong token is still refused.
    const wrong = await h.activities.escalate({
      resourceId: 'r-412',
      lock: { ...seed, nonce: `${seed.nonce}x` },
      phase: 'hardDelete',
      ifMatch: grant.etag,
    });
    expect(wrong).toMatchObject({ ok: false, code: 'Locked' });
  });

  test('decided again after a 412, a downgrade stays pinned to its own write-lock attempt', async () => {
    const { h, seed, token } = await startedPrelock('r-late');
    await h.router.escalate('r-late', { token, phase: 'hardDelete' });
    const firstWrite = await h.router.escalate('r-late', { token, phase: 'write' });
    // delta attempt 1 downgraded, attempt 2 holds a new write lock...
    h.clock.advance(60_000);
    await h.router.release('r-late', { token, phase: 'write' });
    h.clock.advance(60_000);
    const secondWrite = await h.router.escalate('r-late', { token, phase: 'write' });
    // ...when attempt 1's downgrade arrives again, with the ETag it carried then
    // (the rule refuses another attempt's write lock: 409, answered as a value, never retried blindly)
    await expect(
      h.activities.release({
        resourceId: 'r-late',
        lock: seed,
        phase: 'write',
        ifMatch: firstWrite.etag,
        writeAt: firstWrite.writeAt,
      }),
    ).resolves.toMatchObject({ ok: false, code: 'InvalidTransition' });
    const doc = (await h.store.read('r-late', { from: 'writeRegion' })).doc;
    expect(doc.lock).toMatchObject({ phase: 'write', writeAt: secondWrite.writeAt });
    // attempt 2's own downgrade, its answer lost and retried with the ETag it had: a replay, 200
    const downgraded = await h.activities.release({
      resourceId: 'r-late',
      lock: seed,
      phase: 'write',
      ifMatch: secondWrite.etag,
      writeAt: secondWrite.writeAt,
    });
    expect(downgraded).toMatchObject({ ok: true, value: { lock: { phase: 'hardDelete' } } });
    const retried = await h.activities.release({
      resourceId: 'r-late',
      lock: seed,
      phase: 'write',
      ifMatch: secondWrite.etag,
      writeAt: secondWrite.writeAt,
    });
    expect(retried).toMatchObject({ ok: true, value: { lock: { phase: 'hardDelete' } } });
  });
});

describe('in-flight grace: each copy starts after requests decided before its lock have landed', () => {
  const copyStarts = async (env: Record<string, string>) => {
    const calls: { step: string; at: number }[] = [];
    const h = virtualRunner({
      env: { ROUTELOCK_PARTICIPANTS: PARTICIPANTS, ...env },
      http: copiesOnly(async (call: HttpCall) => {
        calls.push({ step: call.body.step, at: h.clock.now() });
        return { status: 200, body: {} };
      }),
    });
    await h.router.createRoute('r-grace', SOURCE);
    const { record } = h.runner.start({ resourceId: 'r-grace', target: TARGET });
    await h.settle();
    const status = await h.runner.status(record.migrationId);
    expect(status.status).toBe('Completed');
    const bulk = calls.find((c) => c.step === 'bulkCopy')?.at as number;
    const delta = calls.find((c) => c.step === 'deltaCopy')?.at as number;
    return {
      afterHardDelete: bulk - Date.parse(status.timeline.hardDeleteAt as string),
      afterWrite: delta - Date.parse(status.timeline.writeAt as string),
    };
  };

  test('production: 5 s after the hard-delete lock and after the write lock', async () => {
    expect(await copyStarts({})).toEqual({ afterHardDelete: 5000, afterWrite: 5000 });
  });

  test('ROUTELOCK_INFLIGHT_GRACE_SECONDS=0: at once (the fleet simulation shows writes lost then)', async () => {
    // no grace leaves no room for coalesced reads either (config inequality 5)
    expect(
      await copyStarts({ ROUTELOCK_INFLIGHT_GRACE_SECONDS: '0', ROUTELOCK_COALESCE_JOIN_MS: '0' }),
    ).toEqual({
      afterHardDelete: 0,
      afterWrite: 0,
    });
  });
});
