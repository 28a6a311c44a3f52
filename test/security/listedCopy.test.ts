import { createHash } from 'node:crypto';
import { startMigrationBody } from '../../functions/http/validation';
import { handleMigrationMessage } from '../../functions/migrationQueue';
import type { MigrationService } from '../../shared/migration/service';
import { type StoredDocument, carriedVersion, newLocationDocument } from '../../shared/core/lock/document';
import { Router } from '../../shared/core/router';
import { SOURCE, TARGET, campaignHarness, operator } from '../campaign/harness';

/**
 * A campaign's listed copy of a route travels with its member's start into the migration's input and
 * record: the task hub's history and status, the in-process runner's journal (docs/design.md §6.7,
 * §9.3). It carries no credential, no digest of a caller's Idempotency-Key or identity, and no record of
 * who last wrote the route; what the pre-lock decides on it is what it would decide on the stored copy.
 */

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

test('carriedVersion keeps the document and ETag a pre-lock decides on, without lastChange or the lock key and principal digests', () => {
  const base = newLocationDocument('r-1', SOURCE, Date.parse('2026-01-01T00:00:00Z'));
  const lock = {
    tokenHash: sha256('token'),
    idempotencyKeyHash: sha256('caller-key'),
    principalHash: sha256('principal-oid'),
    migrationId: 'api-lock',
    owner: 'api',
    target: TARGET,
    phase: 'prelock' as const,
    acquiredAt: '2026-01-01T00:00:00.000Z',
    startsAt: '2026-01-01T00:01:00.000Z',
    expiresAt: '2026-01-01T00:11:00.000Z',
    maxExpiresAt: '2026-01-01T01:00:00.000Z',
    convergenceDelaySeconds: 60,
  };
  const stored: StoredDocument = {
    doc: { ...base, lock, lastChange: { op: 'forceRelease', at: lock.acquiredAt, actor: 'operator-oid' } },
    etag: '"v1"',
    storedAt: 1,
  };
  const { idempotencyKeyHash: _k, principalHash: _p, ...keptLock } = lock;
  const { lastChange: _c, ...keptDoc } = stored.doc;
  expect(carriedVersion(stored)).toEqual({ doc: { ...keptDoc, lock: keptLock }, etag: '"v1"' });
  const unlocked = { doc: base, etag: '"v2"' };
  const { lastChange: _d, ...unlockedDoc } = base;
  expect(carriedVersion(unlocked)).toEqual({ doc: unlockedDoc, etag: '"v2"' });
});

test("a from campaign over a route an HTTP caller locked (lease over): the migration's input holds the listed copy without the caller's key or principal digest; Completed", async () => {
  const h = campaignHarness();
  try {
    const caller = new Router({ store: h.store, timing: h.parts.config.timing, clock: h.clock.now });
    await caller.createRoute('r-0', SOURCE);
    const grant = await caller.prelock('r-0', {
      migrationId: 'api-lock',
      owner: 'api',
      target: TARGET,
      idempotencyKey: 'caller-key-1',
      principal: 'principal-oid-1',
    });
    // the caller's lock lapses unreleased: the listed copy still shows it, with its digests
    h.clock.advance(Date.parse(grant.maxExpiresAt) - h.clock.now() + 1000);
    const { campaignId } = await h.campaigns.create(
      { target: TARGET, from: { region: SOURCE.region } },
      operator,
    );
    await h.settle();
    const [record] = await h.migrationRecords(campaignId);
    expect(record?.status).toMatchObject({ status: 'Completed' });
    const listed = record?.input.listed;
    expect(listed?.doc.lock).toMatchObject({ migrationId: 'api-lock' });
    expect(listed?.doc.lock).not.toHaveProperty('idempotencyKeyHash');
    expect(listed?.doc.lock).not.toHaveProperty('principalHash');
    expect(listed?.doc).not.toHaveProperty('lastChange');
    // the token's digest may stay (a SHA-256 of 32 random bytes, as `lastMigration` keeps one); the
    // token, the caller's key and principal do not, nor digests of those two guessable values
    const text = JSON.stringify(record);
    for (const secret of ['caller-key-1', 'principal-oid-1', grant.token as string])
      expect(text).not.toContain(secret);
    for (const guessable of ['caller-key-1', 'principal-oid-1'])
      expect(text).not.toContain(sha256(guessable));
    // a started member no longer carries its listed copy
    const [member] = await h.members(campaignId, 'completed');
    expect(member).toMatchObject({ resourceId: 'r-0' });
    expect(member).not.toHaveProperty('listed');
  } finally {
    h.cleanup();
  }
});

test("a listed copy comes from the campaign's own list only: a queue message or POST /migrations body carrying one is refused", async () => {
  const started: unknown[] = [];
  const migrations = {
    start: async (request: unknown) => {
      started.push(request);
      return { migrationId: 'm-1', instanceId: 'migrate-r-1', created: true };
    },
  } as unknown as MigrationService;
  const forged = { doc: newLocationDocument('r-1', TARGET), etag: '"current"' };
  const message = { resourceId: 'r-1', target: TARGET, listed: forged };
  expect(await handleMigrationMessage(message, migrations)).toMatchObject({
    kind: 'poison',
    reason: expect.stringContaining('listed'),
  });
  expect(started).toEqual([]);
  expect(startMigrationBody.safeParse(message).success).toBe(false);
});
