import { decide } from '../../shared/core/client';
import { RouteLockError, errorKind } from '../../shared/core/errors';
import {
  type Location,
  type LocationDocument,
  LEGACY_SCHEMA_VERSION,
  SCHEMA_VERSION,
  assertWritableSchema,
  knowsSchemaOf,
  newLocationDocument,
} from '../../shared/core/lock/document';
import * as rules from '../../shared/core/lock/rules';
import { type Operation, cacheHeaders, routeView } from '../../shared/core/lock/view';
import { handleDocumentVersions } from '../../shared/migration/telemetry/changeHandler';
import type { TelemetrySink } from '../../shared/migration/telemetry/sink';
import { announcedCases } from '../fixtures/schema/announcedSteps';
import {
  type AnnouncedCaseName,
  type CaseName,
  type Effect,
  type SchemaCase,
  announcedCaseNames,
  caseNames,
  loadAnnouncedFixture,
  loadFixture,
  lostUnknownFields,
  valueAt,
  withoutPaths,
} from '../fixtures/schema/fixtures';
import { productionTiming as cfg } from '../support/timing';

/**
 * Mixed versions during rollout (docs/design.md §2.8), the pure half: a document of a newer
 * schemaVersion is routed and enforced from the fields this version knows, exactly as its version-1
 * counterpart; the one check refuses to write it; and every rule builds the next document from the stored
 * one, so a write of a known version keeps the fields it does not know. The stores, the router's
 * refusals and the HTTP API: schemaVersion.stores.test.ts.
 */

const v1 = loadFixture('v1');
const v3 = loadFixture('v3');
/** The next version's documents as a known version would carry them: its fields, plus some it does not know. */
const v1WithUnknown = (name: CaseName): LocationDocument => ({
  ...structuredClone(v3.cases[name].doc),
  schemaVersion: SCHEMA_VERSION,
});

describe('the fixtures', () => {
  test.each(caseNames)('%s: the next version is the current one plus fields it does not know', (name) => {
    const next = v3.cases[name];
    expect(next.at).toBe(v1.cases[name].at);
    expect({ ...withoutPaths(next.doc, v3.unknown), schemaVersion: 1 }).toEqual(v1.cases[name].doc);
    for (const path of v3.unknown) {
      if (path.startsWith('lock.') && next.doc.lock === null) continue;
      expect(valueAt(next.doc, path)).toBeDefined();
    }
  });

  test('they cover an unlocked route, each lock phase, and both secondaries', () => {
    const docs = caseNames.map((n) => v1.cases[n].doc);
    expect(docs.map((d) => d.lock?.phase ?? null)).toEqual([null, 'prelock', 'hardDelete', 'write', null]);
    expect(docs.map((d) => d.secondary?.role ?? null)).toEqual([
      null,
      'pendingTarget',
      'pendingTarget',
      'pendingTarget',
      'retiredSource',
    ]);
  });
});

describe('the one check', () => {
  test.each([
    [1, true],
    [2, true],
    [3, false],
    [0, false],
    [1.5, false],
    ['1', false],
    [undefined, false],
    [null, false],
  ])('schemaVersion %p known: %p', (schemaVersion, known) => {
    const doc = { id: 'r', schemaVersion } as unknown as LocationDocument;
    expect(knowsSchemaOf(doc)).toBe(known);
    if (known) expect(() => assertWritableSchema(doc)).not.toThrow();
    else
      expect(() => assertWritableSchema(doc)).toThrow(
        expect.objectContaining({ code: 'UnsupportedSchemaVersion' }),
      );
  });

  test('this library knows version 2, creates routes at 1, and its refusal is a 409 that names the route and no secret', () => {
    expect(SCHEMA_VERSION).toBe(2);
    // a new route carries nothing version 1 would misread: a library without announced locks can change it
    expect(newLocationDocument('r', { region: 'westeurope' }).schemaVersion).toBe(LEGACY_SCHEMA_VERSION);
    expect(LEGACY_SCHEMA_VERSION).toBe(1);
    let refusal: unknown;
    try {
      assertWritableSchema(v3.cases.write.doc);
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(RouteLockError);
    const error = refusal as RouteLockError;
    expect(error).toMatchObject({ code: 'UnsupportedSchemaVersion', resourceId: 'conv-1', retriable: false });
    expect(errorKind(error.code).status).toBe(409);
    expect(error.message).toContain('schemaVersion 3');
    expect(error.message).not.toContain(v3.cases.write.doc.lock!.tokenHash);
  });
});

describe('reads never break: the next version routes and enforces as the current one', () => {
  const operations: Operation[] = ['read', 'write', 'delete'];
  const elsewhere: Location = { region: 'southeastasia' };
  const answers = (c: SchemaCase) => {
    const view = routeView({ doc: c.doc, etag: 'e' }, c.at, cfg);
    const from = (serving: Location) => operations.map((op) => decide(view, op, serving).kind);
    return {
      view,
      headers: cacheHeaders(c.doc, c.at, cfg, 0),
      atSource: from(v1.source),
      atTarget: from(v1.target),
      elsewhere: from(elsewhere),
    };
  };

  // What version 1 answers, pinned: the fixtures mean this, in every version.
  const pinned: Record<CaseName, { atSource: string[]; atTarget: string[] }> = {
    unlocked: { atSource: ['allow', 'allow', 'allow'], atTarget: ['notHere', 'notHere', 'notHere'] },
    prelock: { atSource: ['allow', 'allow', 'allow'], atTarget: ['notHere', 'notHere', 'notHere'] },
    hardDelete: { atSource: ['allow', 'allow', 'tombstone'], atTarget: ['notHere', 'notHere', 'notHere'] },
    write: { atSource: ['allow', 'deny', 'deny'], atTarget: ['notHere', 'notHere', 'notHere'] },
    retiredSource: { atSource: ['notHere', 'notHere', 'notHere'], atTarget: ['allow', 'allow', 'allow'] },
  };

  test.each(caseNames)('%s: same view, headers and decisions as version 1', (name) => {
    const current = answers(v1.cases[name]);
    const next = answers(v3.cases[name]);
    expect(next).toEqual(current);
    expect(current).toMatchObject(pinned[name]);
    expect(current.elsewhere).toEqual(['notHere', 'notHere', 'notHere']);
  });

  test.each(caseNames)('%s: the view shows none of the fields this version does not know', (name) => {
    const text = JSON.stringify(routeView({ doc: v3.cases[name].doc, etag: 'e' }, v3.cases[name].at, cfg));
    for (const path of v3.unknown) expect(text).not.toContain(`"${path.split('.').pop()!}"`);
  });

  test('a field the next version adds inside a location stays out of the view (its Location is closed)', () => {
    const c = v3.cases.prelock;
    const zoned = (l: Location) => ({ ...l, zone: '2' });
    const doc = {
      ...c.doc,
      location: zoned(c.doc.location),
      lock: { ...c.doc.lock!, target: zoned(c.doc.lock!.target) },
      secondary: { ...c.doc.secondary!, location: zoned(c.doc.secondary!.location) },
    };
    const view = routeView({ doc, etag: 'e' }, c.at, cfg);
    expect(JSON.stringify(view)).not.toContain('zone');
    expect(view).toEqual(routeView({ doc: c.doc, etag: 'e' }, c.at, cfg));
  });

  test('the change feed handler takes the next version as it takes the current one', async () => {
    const sink = (): TelemetrySink & { seen: string[] } => {
      const seen: string[] = [];
      return {
        seen,
        event: (e) => void seen.push(`event ${e.name}`),
        metric: (m) => void seen.push(`metric ${m.name}`),
        availability: () => undefined,
        flush: async () => undefined,
      };
    };
    const [a, b] = [sink(), sink()];
    const docs = (f: typeof v1) => caseNames.map((n) => f.cases[n].doc);
    const current = await handleDocumentVersions(docs(v1), {
      sink: a,
      declaredConvergenceDelaySeconds: 7500,
    });
    const next = await handleDocumentVersions(docs(v3), { sink: b, declaredConvergenceDelaySeconds: 7500 });
    expect(next).toEqual(current);
    expect(next.skipped).toBe(0);
    expect(b.seen).toEqual(a.seen);
    expect(a.seen.length).toBeGreaterThan(0);
  });
});

/**
 * Every rule, on a version-1 document that carries fields it does not know: the next document is built
 * from the stored one. Top-level fields always survive; the lock's own survive every write that keeps
 * the lock. (The rules decide; the router refuses a newer version before they are asked.)
 */
const token = v1.token;
const ruleCases: [
  string,
  CaseName,
  Exclude<Effect, 'noWrite' | 'deleted'>,
  (doc: LocationDocument, at: number) => rules.RuleResult,
][] = [
  [
    'prelock',
    'unlocked',
    'newLock',
    (d, at) =>
      rules.prelock(d, { migrationId: 'm-2', owner: 'o', target: v1.target, newToken: 't2' }, at, cfg),
  ],
  [
    'prelock replay',
    'prelock',
    'keepsLock',
    (d, at) =>
      rules.prelock(
        d,
        {
          migrationId: 'm-1',
          owner: 'orchestrator',
          target: v1.target,
          idempotencyKey: 'fixture-key',
          newToken: 't2',
        },
        at,
        cfg,
      ),
  ],
  [
    'escalate hardDelete',
    'prelock',
    'keepsLock',
    (d, at) => rules.escalate(d, { token, phase: 'hardDelete' }, at, cfg),
  ],
  ['renew prelock', 'prelock', 'keepsLock', (d, at) => rules.renew(d, { token }, at, cfg)],
  ['release', 'prelock', 'endsLock', (d, at) => rules.release(d, { token }, at)],
  [
    'forceRelease',
    'prelock',
    'endsLock',
    (d, at) => rules.forceRelease(d, { actor: 'a', reason: 'r', requestId: 'q' }, at),
  ],
  ['reclaim', 'prelock', 'endsLock', (d) => rules.reclaim(d, Date.parse(d.lock!.expiresAt) + 1000)],
  [
    'escalate write',
    'hardDelete',
    'keepsLock',
    (d, at) => rules.escalate(d, { token, phase: 'write' }, at, cfg),
  ],
  [
    'renew hardDelete',
    'hardDelete',
    'keepsLock',
    (d, at) => rules.renew(d, { token, phase: 'hardDelete' }, at, cfg),
  ],
  ['renew write', 'write', 'keepsLock', (d, at) => rules.renew(d, { token, phase: 'write' }, at, cfg)],
  ['downgrade', 'write', 'keepsLock', (d, at) => rules.release(d, { token, phase: 'write' }, at)],
  ['swap', 'write', 'endsLock', (d, at) => rules.swap(d, { token }, at, cfg)],
];

describe('unknown fields survive every write of a known version', () => {
  test.each(ruleCases)('%s', (_name, on, effect, rule) => {
    const before = v1WithUnknown(on);
    const result = rule(structuredClone(before), v1.cases[on].at);
    expect(result.changed).toBe(true);
    expect(result.doc.schemaVersion).toBe(SCHEMA_VERSION);
    expect(lostUnknownFields(before, result.doc, effect, v3.unknown)).toEqual([]);
    expect(result.doc.lock === null).toBe(effect === 'endsLock');
  });

  test('negative control: a rule that rebuilds the document from the fields it knows is caught', () => {
    const rebuilt = (doc: LocationDocument): LocationDocument => ({
      id: doc.id,
      schemaVersion: doc.schemaVersion,
      location: doc.location,
      lock: doc.lock && { ...withoutPaths({ ...doc }, ['lock.quorum']).lock! },
      secondary: doc.secondary,
      lastMigration: doc.lastMigration,
      ...(doc.lastChange ? { lastChange: doc.lastChange } : {}),
    });
    for (const [name, on, effect, rule] of ruleCases) {
      const before = v1WithUnknown(on);
      const after = rebuilt(rule(structuredClone(before), v1.cases[on].at).doc);
      const lost = lostUnknownFields(before, after, effect, v3.unknown);
      expect({ name, lost }).toEqual({
        name,
        lost: effect === 'keepsLock' ? ['placement', 'labels', 'lock.quorum'] : ['placement', 'labels'],
      });
    }
  });
});

/**
 * The schema of announced locks: the documents of announced.json, each written by the real rules. A
 * document carrying one is version 2, and stays 2 when the lock ends; a legacy write keeps the version
 * stored, so a route that never held an announced lock stays writable by a version-1 library.
 */
describe('version 2: announced locks', () => {
  const v2 = loadAnnouncedFixture();

  test('the fixture is what the rules write, and every state is version 2', () => {
    expect(announcedCases(v1, cfg)).toEqual(
      Object.fromEntries(
        announcedCaseNames.map((n) => [
          n,
          { at: new Date(v2.cases[n].at).toISOString(), doc: v2.cases[n].doc },
        ]),
      ),
    );
    for (const name of announcedCaseNames) {
      expect({ name, version: v2.cases[name].doc.schemaVersion }).toEqual({ name, version: 2 });
      expect(knowsSchemaOf(v2.cases[name].doc)).toBe(true);
    }
  });

  // What each state means at its instant: the view's decisions at the source and the target.
  const pinned: Record<AnnouncedCaseName, { atSource: string[]; atTarget: string[]; lock: object | null }> = {
    pending: {
      atSource: ['allow', 'allow', 'allow'],
      atTarget: ['notHere', 'notHere', 'notHere'],
      lock: { phase: 'hardDelete', announced: true },
    },
    hardDelete: {
      atSource: ['allow', 'allow', 'tombstone'],
      atTarget: ['notHere', 'notHere', 'notHere'],
      lock: { phase: 'hardDelete', announced: true },
    },
    writeWindow: {
      atSource: ['allow', 'allow', 'tombstone'],
      atTarget: ['notHere', 'notHere', 'notHere'],
      lock: { phase: 'hardDelete', announced: true, writeWindowAt: expect.any(String) },
    },
    write: {
      atSource: ['allow', 'deny', 'deny'],
      atTarget: ['notHere', 'notHere', 'notHere'],
      lock: { phase: 'write', announced: true, writeWindowAt: expect.any(String) },
    },
    swapped: {
      atSource: ['notHere', 'notHere', 'notHere'],
      atTarget: ['allow', 'allow', 'allow'],
      lock: null,
    },
    released: {
      atSource: ['allow', 'allow', 'allow'],
      atTarget: ['notHere', 'notHere', 'notHere'],
      lock: null,
    },
  };

  test.each(announcedCaseNames)('%s: its view and decisions', (name) => {
    const c = v2.cases[name];
    const view = routeView({ doc: c.doc, etag: 'e' }, c.at, cfg);
    const from = (serving: Location) =>
      (['read', 'write', 'delete'] as const).map((op) => decide(view, op, serving).kind);
    expect({ atSource: from(v2.source), atTarget: from(v2.target), lock: view.lock }).toMatchObject(
      pinned[name],
    );
  });

  test('an ended announced lock keeps its lead in lastMigration, and the document keeps version 2', () => {
    for (const name of ['swapped', 'released'] as const) {
      expect(v2.cases[name].doc.lastMigration).toMatchObject({
        announceLeadSeconds: cfg.announceLeadSeconds,
      });
    }
    // a legacy pre-lock after the announced migration ended: version 2 stays (it never goes back down)
    const c = v2.cases.released;
    const next = rules.prelock(
      c.doc,
      { migrationId: 'm-2', owner: 'o', target: v2.target, newToken: 't2' },
      c.at,
      cfg,
    );
    expect(next.doc.lock).not.toHaveProperty('announceLeadSeconds');
    expect(next.doc.schemaVersion).toBe(2);
  });

  test('a legacy lock on a version-1 route keeps version 1; an announced one raises it to 2', () => {
    const c = v1.cases.unlocked;
    const req = { migrationId: 'm-2', owner: 'o', target: v1.target, newToken: 't2' };
    expect(rules.prelock(c.doc, req, c.at, cfg).doc.schemaVersion).toBe(1);
    expect(rules.prelock(c.doc, { ...req, announced: true }, c.at, cfg).doc.schemaVersion).toBe(2);
  });

  test('negative control: a stamp that keeps the stored version leaves an announced lock writable by version 1', () => {
    const c = v1.cases.unlocked;
    const req = {
      migrationId: 'm-2',
      owner: 'o',
      target: v1.target,
      newToken: 't2',
      announced: true as const,
    };
    const unstamped = { ...rules.prelock(c.doc, req, c.at, cfg).doc, schemaVersion: c.doc.schemaVersion };
    // what a version-1 library asks before it writes: it would take this document for one it knows
    const versionOneKnows = (doc: LocationDocument) => doc.schemaVersion === 1;
    expect(versionOneKnows(unstamped)).toBe(true);
    expect(versionOneKnows(rules.prelock(c.doc, req, c.at, cfg).doc)).toBe(false);
  });
});
