import { type StoredDocument, carriedVersion } from '../../shared/core/lock/document';
import { Router } from '../../shared/core/router';
import { resetCounters } from '../../shared/core/store/ports/locations';
import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import type { UnsealedCopy } from '../../shared/migration/activities';
import { createActivities } from '../../shared/migration/activities';
import { canonicalJson, sealListedCopy, unsealedListedCopy } from '../../shared/migration/listedSeal';
import { newMigrationInput } from '../../shared/migration/records';
import type { ActivityInputs } from '../../shared/migration/types';
import { migrationSettings } from '../../shared/migration/workflow';
import { virtualRunner } from '../support/migrationHarness';

/**
 * A listed copy crosses the task hub and the embedded runner's journal before the pre-lock decides on
 * it, and the route's ETag is public (GET /routes): whoever can write those stores could pair a forged
 * document with the real ETag. The starter seals the copy; the pre-lock decides on it only when the seal
 * holds, else reads the route as a start without one does (docs/design.md §6.7, §9.3).
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const ELSEWHERE = { region: 'attacker-region' };

/** A route written by another process (so this router holds no version of it), and its listed copy. */
async function routeListed() {
  const unsealed: UnsealedCopy[] = [];
  const h = virtualRunner();
  const activities = createActivities(h.router, h.config.timing, {
    keyring: h.keyring,
    onUnsealedCopy: (about) => unsealed.push(about),
  });
  const elsewhere = new Router({ store: h.store, timing: h.config.timing, clock: h.clock.now });
  const { stored } = await elsewhere.createRoute('r-1', SOURCE);
  return { h, activities, elsewhere, listed: carriedVersion(stored), unsealed };
}

/** The pre-lock activity's input as the workflow builds it from a migration input (workflow/prelock.ts). */
function prelockOf(input: ReturnType<typeof newMigrationInput>): ActivityInputs['prelock'] {
  return {
    resourceId: input.resourceId,
    migrationId: input.migrationId,
    owner: input.instanceId,
    target: input.target,
    lock: input.lock,
    withLocation: true,
    ...(input.listed === undefined ? {} : { known: input.listed }),
    ...(input.listedSeal === undefined ? {} : { knownSeal: input.listedSeal }),
  };
}

function inputWith(h: ReturnType<typeof virtualRunner>, listed: StoredDocument) {
  return newMigrationInput({
    migrationId: 'm-1',
    instanceId: 'migrate-r-1',
    resourceId: 'r-1',
    target: TARGET,
    settings: migrationSettings(h.config),
    lock: h.keyring.newSeed(),
    listed: { copy: listed, keyring: h.keyring },
  });
}

/** The real current ETag with another document: a different location, and no lock. */
const forgedOf = (real: StoredDocument): StoredDocument => ({
  doc: { ...real.doc, location: ELSEWHERE, lock: null },
  etag: real.etag,
});

describe('the seal', () => {
  test('holds for the copy and migration it was made for, and for nothing else', () => {
    const keyring = TokenKeyring.ephemeral();
    const listed = { doc: { id: 'r-1', location: SOURCE, lock: null } as never, etag: '"v1"' };
    const binding = { resourceId: 'r-1', migrationId: 'm-1', nonce: 'n-1' };
    const seal = sealListedCopy(keyring, binding, listed);
    expect(unsealedListedCopy(keyring, binding, listed, seal)).toBe(listed);
    // the same values re-serialised in another key order (as a store may): still the copy it sealed
    const reordered = JSON.parse(JSON.stringify({ etag: listed.etag, doc: listed.doc })) as StoredDocument;
    expect(unsealedListedCopy(keyring, binding, reordered, seal)).toBe(reordered);
    expect(unsealedListedCopy(keyring, binding, forgedOf(listed), seal)).toBeUndefined();
    expect(unsealedListedCopy(keyring, { ...binding, migrationId: 'm-2' }, listed, seal)).toBeUndefined();
    expect(unsealedListedCopy(keyring, { ...binding, nonce: 'n-2' }, listed, seal)).toBeUndefined();
    expect(unsealedListedCopy(keyring, binding, listed, undefined)).toBeUndefined();
    expect(unsealedListedCopy(TokenKeyring.ephemeral(), binding, listed, seal)).toBeUndefined();
    expect(canonicalJson({ b: 1, a: { d: undefined, c: [2] } })).toBe('{"a":{"c":[2]},"b":1}');
  });

  test('a rotated key ring still verifies a copy sealed under its previous current key', () => {
    const listed = { doc: { id: 'r-1', location: SOURCE, lock: null } as never, etag: '"v1"' };
    const binding = { resourceId: 'r-1', migrationId: 'm-1', nonce: 'n-1' };
    const keys = { current: 'k1', keys: { k1: Buffer.alloc(32, 1).toString('base64url') } };
    const old = new TokenKeyring(keys);
    const seal = sealListedCopy(old, binding, listed);
    const rotated = new TokenKeyring({
      current: 'k2',
      keys: { ...keys.keys, k2: Buffer.alloc(32, 2).toString('base64url') },
    });
    expect(seal.keyId).toBe('k1');
    expect(unsealedListedCopy(rotated, binding, listed, seal)).toBe(listed);
  });
});

describe('a forged listed copy in the migration input (a task hub or journal writer), with the real ETag', () => {
  test('with the genuine seal: not decided on; the pre-lock reads the route, and the location stays', async () => {
    const { h, activities, listed, unsealed } = await routeListed();
    const input = inputWith(h, listed);
    const tampered = { ...input, listed: forgedOf(listed) };
    resetCounters(h.store.counters);
    const answer = await activities.prelock(prelockOf(tampered));
    expect(answer).toMatchObject({ ok: true, value: { location: SOURCE } });
    // one read, exactly as an input without a listed copy
    expect(h.store.counters.writeRegionReads + h.store.counters.nearestReads).toBe(1);
    const stored = await h.router.readAuthoritative('r-1');
    expect(stored.doc.location).toEqual(SOURCE);
    expect(stored.doc.lock).toMatchObject({ migrationId: 'm-1', phase: 'prelock' });
    expect(unsealed).toEqual([{ resourceId: 'r-1', migrationId: 'm-1', seal: 'bad' }]);
    expect(JSON.stringify(unsealed)).not.toContain(input.listedSeal?.mac as string);
  });

  test('without a seal: not decided on; a rival lock the forged copy hides holds (Locked), nothing written', async () => {
    const { h, activities, elsewhere, unsealed } = await routeListed();
    const rival = await elsewhere.prelock('r-1', {
      migrationId: 'rival',
      owner: 'rival',
      target: TARGET,
      idempotencyKey: 'rival-key',
    });
    const current = carriedVersion(await h.router.readAuthoritative('r-1'));
    const { listedSeal: _seal, ...input } = { ...inputWith(h, current), listed: forgedOf(current) };
    const answer = await activities.prelock(prelockOf(input));
    expect(answer).toMatchObject({ ok: false, code: 'Locked' });
    const stored = await h.router.readAuthoritative('r-1');
    expect(stored.etag).toBe(current.etag);
    expect(stored.doc.location).toEqual(SOURCE);
    expect(stored.doc.lock).toMatchObject({ migrationId: rival.migrationId });
    expect(unsealed).toEqual([{ resourceId: 'r-1', migrationId: 'm-1', seal: 'missing' }]);
  });

  test('negative control: the genuine copy, sealed, is decided on without a read', async () => {
    const { h, activities, listed, unsealed } = await routeListed();
    resetCounters(h.store.counters);
    const answer = await activities.prelock(prelockOf(inputWith(h, listed)));
    expect(answer).toMatchObject({ ok: true, value: { location: SOURCE } });
    expect(h.store.counters).toMatchObject({ nearestReads: 0, writeRegionReads: 0 });
    expect(unsealed).toEqual([]);
  });

  test('negative control: the router given the forged copy as `known` (the seal not checked) writes it', async () => {
    const { h, elsewhere } = await routeListed();
    await elsewhere.prelock('r-1', {
      migrationId: 'rival',
      owner: 'rival',
      target: TARGET,
      idempotencyKey: 'rival-key',
    });
    const forged = forgedOf(carriedVersion(await h.router.readAuthoritative('r-1')));
    await h.router.prelockRoute(
      'r-1',
      { migrationId: 'm-1', owner: 'migrate-r-1', target: TARGET, idempotencyKey: 'k' },
      { ifMatch: forged.etag, known: forged },
    );
    const stored = await h.router.readAuthoritative('r-1');
    expect(stored.doc.location).toEqual(ELSEWHERE);
    expect(stored.doc.lock).toMatchObject({ migrationId: 'm-1' });
  });

  test('end to end: the runner, its journal copy rewritten before the pre-lock: Completed at the target, the forged location never stored', async () => {
    const { h, listed } = await routeListed();
    const prelock = h.activities.prelock;
    const seen: unknown[] = [];
    h.activities.prelock = async (request) => {
      seen.push(request.known);
      return prelock(request.known ? { ...request, known: forgedOf(request.known) } : request);
    };
    const { record } = h.runner.start({ resourceId: 'r-1', target: TARGET, listed });
    expect(record.input.listedSeal).toMatchObject({ keyId: h.keyring.currentKeyId });
    await h.settle();
    expect(seen).toEqual([listed]);
    expect(await h.runner.status(record.migrationId)).toMatchObject({ status: 'Completed' });
    const stored = await h.router.readAuthoritative('r-1');
    expect(stored.doc.location).toEqual(TARGET);
    expect(JSON.stringify(stored.doc)).not.toContain(ELSEWHERE.region);
  });
});
