import { RouteLockError, errorKind } from '../../shared/core/errors';
import {
  LEGACY_SCHEMA_VERSION,
  type LocationDocument,
  SCHEMA_VERSION,
  type StoredDocument,
} from '../../shared/core/lock/document';
import * as rules from '../../shared/core/lock/rules';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { sweepOrphans } from '../../shared/migration/sweeper';
import { ManualClock } from '../../testkit/clock';
import { type SeamedRouterOptions, seamedRouter } from '../../testkit/router';
import {
  type CaseName,
  type Mutation,
  type SchemaFixture,
  caseNames,
  loadFixture,
  lostUnknownFields,
  mutations,
  withoutPaths,
} from '../fixtures/schema/fixtures';
import { useCosmosServers } from '../support/cosmosServers';
import { virtualRunner } from '../support/migrationHarness';
import { type Called, call, handlerServices } from '../support/handlers';
import { productionTiming as timing } from '../support/timing';

/**
 * Mixed versions during rollout (docs/design.md §2.8), through the router on both stores —
 * SQLite and the Cosmos stand-in (as it ships, and quoting ETags as Cosmos DB does) — and through the
 * HTTP API: a newer document is read whole and routed as its version-1 counterpart; every mutation of it
 * is refused with 409 UnsupportedSchemaVersion and leaves document and ETag as they were; every mutation
 * of a version-1 document works and keeps the fields version 1 does not know.
 */

const v1 = loadFixture('v1');
const v3 = loadFixture('v3');
const servers = useCosmosServers();

/** The fixture's document under another id, as a version `schemaVersion` writer stored it. */
function seedDoc(f: SchemaFixture, name: CaseName, id: string, schemaVersion?: number): LocationDocument {
  const doc = structuredClone(f.cases[name].doc);
  return { ...doc, id, ...(schemaVersion === undefined ? {} : { schemaVersion }) };
}

/** What changed between two readings of one document (empty: nothing; the ETag compared as given). */
function changes(before: StoredDocument, after: StoredDocument | undefined): string[] {
  if (!after) return ['deleted'];
  const found: string[] = [];
  if (after.etag !== before.etag) found.push('etag');
  for (const path of v3.unknown) {
    const at = (d: unknown) =>
      JSON.stringify(path.split('.').reduce<unknown>((o, k) => (o as never)?.[k], d));
    if (at(after.doc) !== at(before.doc)) found.push(`${path} changed`);
  }
  if (JSON.stringify(after.doc) !== JSON.stringify(before.doc)) found.push('document');
  return found;
}

async function readOrUndefined(store: LocationStore, id: string): Promise<StoredDocument | undefined> {
  try {
    return await store.read(id, { from: 'writeRegion' });
  } catch (error) {
    if (error instanceof RouteLockError && error.code === 'NotFound') return undefined;
    throw error;
  }
}

const adapters: [string, () => Promise<LocationStore>][] = [
  ['sqlite', async () => new SqliteStore(':memory:')],
  ['cosmos (@vercel/cosmosdb-server)', async () => servers.stock.connect()],
  ['cosmos (@vercel/cosmosdb-server, quoted ETags)', async () => servers.quoted.connect()],
];

let unique = 0;
const nextId = (label: string) => `${label.replace(/[^a-z0-9]+/gi, '-')}-${(unique += 1)}`;

describe.each(adapters)('%s', (_name, open) => {
  let store: LocationStore;
  let clock: ManualClock;
  const router = (options: Partial<SeamedRouterOptions> = {}) =>
    seamedRouter({ store, timing, clock: clock.now, ...options });
  beforeEach(async () => {
    store = await open();
    clock = new ManualClock();
  });
  afterEach(async () => {
    await store.close();
  });

  test.each(caseNames)('%s: the next version is read whole and routed as the current one', async (name) => {
    const [idNext, idCurrent] = [nextId(`read-${name}-v3`), nextId(`read-${name}-v1`)];
    await store.create(seedDoc(v3, name, idNext));
    await store.create(seedDoc(v1, name, idCurrent));
    clock.set(v3.cases[name].at);
    const r = router();
    const same = (doc: LocationDocument) => ({ ...doc, id: 'x' });
    // every read path returns the document as stored: nothing validated away, nothing stripped
    for (const stored of [
      await r.resolve(idNext),
      await r.readAuthoritative(idNext),
      await r.readReplica(idNext),
      (await r.listRoutes({ lockedOnly: false, limit: 100 })).items.find((i) => i.doc.id === idNext)!,
    ]) {
      expect(stored.doc).toEqual(seedDoc(v3, name, idNext));
    }
    const [next, current] = [await r.view(idNext), await r.view(idCurrent)];
    const known = (v: typeof next) => ({ ...v, view: { ...v.view, resourceId: 'x', etag: 'e' } });
    expect(known(next)).toEqual(known(current));
    expect(same(withoutPaths((await r.resolve(idNext)).doc, v3.unknown))).toEqual({
      ...same(v1.cases[name].doc),
      schemaVersion: 3,
    });
  });

  const byCase = (m: Mutation) => [`${m.name} on ${m.on}`, m] as const;

  // Every known version: a write that takes no announced lock keeps the version the route was stored at.
  const known = [LEGACY_SCHEMA_VERSION, SCHEMA_VERSION] as const;
  const byKnownVersion = known.flatMap((version) => mutations.map((m) => [version, ...byCase(m)] as const));

  test.each(byKnownVersion)('version %p: %s works and keeps the unknown fields', async (version, _n, m) => {
    const id = nextId(`v${version}-${m.name}`);
    const before = seedDoc(v3, m.on, id, version); // a known version, carrying fields it does not know
    await store.create(before);
    clock.set(m.at ? m.at(v1.cases[m.on]) : v1.cases[m.on].at);
    await m.run(router(), id, v1);
    const after = await readOrUndefined(store, id);
    if (m.effect === 'deleted') {
      expect(after).toBeUndefined();
      return;
    }
    expect(after!.doc.schemaVersion).toBe(version);
    expect(lostUnknownFields(before, after!.doc, m.effect, v3.unknown)).toEqual([]);
    expect(after!.doc.lock === null).toBe(
      m.effect === 'endsLock' || (m.effect === 'noWrite' && !before.lock),
    );
  });

  test.each(mutations.map(byCase))('version 3: %s is refused, nothing written', async (_n, m) => {
    const id = nextId(`v3-${m.name}`);
    await store.create(seedDoc(v3, m.on, id));
    const before = await store.read(id, { from: 'writeRegion' });
    const { replaces, deletes } = store.counters;
    clock.set(m.at ? m.at(v3.cases[m.on]) : v3.cases[m.on].at);
    await expect(m.run(router(), id, v3)).rejects.toMatchObject({
      code: 'UnsupportedSchemaVersion',
      resourceId: id,
    });
    expect(changes(before, await readOrUndefined(store, id))).toEqual([]);
    expect(store.counters).toMatchObject({ replaces, deletes });
  });

  test('a rule planted through the rules seam cannot write a newer document either', async () => {
    const id = nextId('planted');
    await store.create(seedDoc(v3, 'write', id));
    const before = await store.read(id, { from: 'writeRegion' });
    clock.set(v3.cases.write.at);
    // a release that ignores everything, the version included: it would clear the lock and its quorum
    const planted = router({ rules: { release: (doc) => ({ doc: { ...doc, lock: null }, changed: true }) } });
    await expect(planted.release(id, { token: v3.token })).rejects.toMatchObject({
      code: 'UnsupportedSchemaVersion',
    });
    expect(changes(before, await readOrUndefined(store, id))).toEqual([]);
  });

  test('negative control: a library that ignores the version drops the next version’s fields, and is caught', async () => {
    // What the check guards against: the real rules, their result written as a version-blind library would.
    for (const [name, rule] of [
      ['release', (d: LocationDocument, at: number) => rules.release(d, { token: v3.token }, at)],
      ['swap', (d: LocationDocument, at: number) => rules.swap(d, { token: v3.token }, at, timing)],
    ] as const) {
      const id = nextId(`blind-${name}`);
      await store.create(seedDoc(v3, 'write', id));
      const before = await store.read(id, { from: 'writeRegion' });
      await store.replace(rule(before.doc, v3.cases.write.at).doc, before.etag);
      // the same oracle the refusals pass: here it reports the write, and the lock's quorum gone with it
      expect(changes(before, await readOrUndefined(store, id))).toEqual([
        'etag',
        'lock.quorum changed',
        'document',
      ]);
    }
    // and a new lock written by version 2 on a version-3 route lacks the field version 3 puts in every lock
    const id = nextId('blind-prelock');
    await store.create(seedDoc(v3, 'unlocked', id));
    const before = await store.read(id, { from: 'writeRegion' });
    const locked = rules.prelock(
      before.doc,
      { migrationId: 'm-2', owner: 'o', target: v3.target, newToken: 't' },
      v3.cases.unlocked.at,
      timing,
    ).doc;
    await store.replace(locked, before.etag);
    const after = await store.read(id, { from: 'writeRegion' });
    expect(after.doc.schemaVersion).toBe(3);
    expect(after.doc.lock).not.toHaveProperty('quorum');
    expect(changes(before, after)).toContain('etag');
  });

  test('the sweeper reclaims a version-1 orphan and leaves a newer one to a library that knows it', async () => {
    const [old, next] = [nextId('orphan-v1'), nextId('orphan-v3')];
    await store.create(seedDoc(v1, 'prelock', old));
    await store.create(seedDoc(v3, 'prelock', next));
    const before = await store.read(next, { from: 'writeRegion' });
    clock.set(Date.parse(v1.cases.prelock.doc.lock!.expiresAt) + 1000);
    const swept = await sweepOrphans({ router: router(), clock: clock.now });
    expect(swept.reclaimed.map((r) => r.resourceId)).toContain(old);
    expect(swept.reclaimed.map((r) => r.resourceId)).not.toContain(next);
    expect(changes(before, await readOrUndefined(store, next))).toEqual([]);
  });
});

describe('the HTTP API', () => {
  let store: SqliteStore;
  let clock: ManualClock;
  beforeEach(async () => {
    store = new SqliteStore(':memory:');
    ({ clock } = await handlerServices({}, store));
  });

  const requests: [string, CaseName, (id: string) => Promise<Called>][] = [
    [
      'PUT (the identical route)',
      'unlocked',
      (id) => call('putRoute', { params: { id }, body: { location: v3.source } }),
    ],
    ['DELETE', 'unlocked', (id) => call('deleteRoute', { params: { id } })],
    [
      'prelock',
      'unlocked',
      (id) =>
        call('prelock', { params: { id }, body: { migrationId: 'm-2', owner: 'o', target: v3.target } }),
    ],
    [
      'escalate',
      'prelock',
      (id) => call('escalate', { params: { id }, body: { token: v3.token, phase: 'hardDelete' } }),
    ],
    ['renew', 'hardDelete', (id) => call('renew', { params: { id }, body: { token: v3.token } })],
    [
      'swap',
      'write',
      (id) =>
        call('swap', {
          params: { id },
          body: { token: v3.token, writeAt: v3.cases.write.doc.lock!.writeAt },
        }),
    ],
    ['release', 'write', (id) => call('release', { params: { id }, body: { token: v3.token } })],
  ];

  test.each(requests)(
    '%s of a version-3 route: a 409 problem with the code, nothing written',
    async (_n, on, send) => {
      const id = nextId(`http-${on}`);
      await store.create(seedDoc(v3, on, id));
      const before = await store.read(id, { from: 'writeRegion' });
      clock.set(v3.cases[on].at);
      const res = await send(id);
      expect(res.status).toBe(errorKind('UnsupportedSchemaVersion').status);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(res.body).toMatchObject({
        status: 409,
        code: 'UnsupportedSchemaVersion',
        type: 'urn:routelock:problem:UnsupportedSchemaVersion',
      });
      expect(res.text).not.toContain(v3.token);
      expect(changes(before, await readOrUndefined(store, id))).toEqual([]);
    },
  );

  test('GET of a version-3 route answers as for version 1; a known version’s write keeps unknown fields', async () => {
    const [next, current] = [nextId('http-get-v3'), nextId('http-get-v1')];
    await store.create(seedDoc(v3, 'write', next));
    await store.create(seedDoc(v1, 'write', current));
    clock.set(v3.cases.write.at);
    const [a, b] = [
      await call('getRoute', { params: { id: next } }),
      await call('getRoute', { params: { id: current } }),
    ];
    expect(a.status).toBe(200);
    const known = (res: Called) => ({ ...(res.body as object), resourceId: 'x', etag: 'e' });
    expect(known(a)).toEqual(known(b));
    expect(a.headers.get('cache-control')).toBe(b.headers.get('cache-control'));

    const id = nextId('http-v1-escalate');
    await store.create(seedDoc(v3, 'prelock', id, SCHEMA_VERSION));
    clock.set(v1.cases.prelock.at);
    const escalated = await call('escalate', {
      params: { id },
      body: { token: v1.token, phase: 'hardDelete' },
    });
    expect(escalated.status).toBe(200);
    const after = await store.read(id, { from: 'writeRegion' });
    expect(after.doc.lock?.phase).toBe('hardDelete');
    expect(lostUnknownFields(seedDoc(v3, 'prelock', id), after.doc, 'keepsLock', v3.unknown)).toEqual([]);
  });
});

test('a migration of a version-3 route fails its pre-lock, once (final), and writes nothing', async () => {
  const h = virtualRunner({
    env: {
      ROUTELOCK_PROFILE: 'dev',
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p', url: 'https://p.test/m' }]),
    },
  });
  const id = nextId('migrate-v3');
  await h.store.create(seedDoc(v3, 'unlocked', id));
  const before = await h.store.read(id, { from: 'writeRegion' });
  const { record } = h.runner.start({ resourceId: id, target: v3.target });
  await h.settle();
  const status = await h.runner.status(record.migrationId);
  expect(status).toMatchObject({
    status: 'Failed',
    error: expect.stringMatching(/^prelock: UnsupportedSchemaVersion: /),
  });
  expect(status.attempts ?? [{}]).toHaveLength(1);
  expect(changes(before, await readOrUndefined(h.store, id))).toEqual([]);
});
