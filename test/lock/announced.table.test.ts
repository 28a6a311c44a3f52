import { RouteLockError } from '../../shared/core/errors';
import { type Lock, type LocationDocument, newLocationDocument } from '../../shared/core/lock/document';
import {
  type RuleResult,
  announce,
  escalate,
  prelock,
  release,
  renew,
  swap,
} from '../../shared/core/lock/rules';
import { enforcement } from '../../shared/core/lock/view';
import { T0, productionTiming as cfg, seconds } from '../support/timing';

/**
 * The announced lock's rules (design §3.7), walked as a table: each rule × {legacy, announced} × the
 * boundaries that matter (startsAt + S, W + S, writeWindowUntil − S, an end less the lead L), each at
 * −1 / 0 / +1 ms. Every row also checks that the route's enforcement, before and after, is exactly what
 * the same phase fields give without the announced ones (`enforcement` does not read them: a reader
 * without announced locks enforces the same). Expected outcomes are written out:
 *   a code (with its Retry-After)  → the rule throws RouteLockError
 *   unchanged                      → success, no write (a replay)
 *   an object                      → success, the next lock matches it
 * Negative controls: the same boundary rows on the legacy twin (the marker dropped) grant what the
 * announced rule refuses, so a rule that ignored the marker would fail these rows.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const RIGHT = 'right-token';
const S = seconds(cfg.clockSkewSeconds);
const L = seconds(cfg.announceLeadSeconds);
const A = S + seconds(Math.min(cfg.writeLeaseSeconds, cfg.writeBudgetSeconds));
const iso = (ms: number) => new Date(ms).toISOString();
const ms = (text: string) => Date.parse(text);
const KEY = 'key-1';

const request = (announced: boolean) => ({
  migrationId: 'm-1',
  owner: 'o',
  target: TARGET,
  idempotencyKey: KEY,
  newToken: RIGHT,
  ...(announced ? { announced: true as const } : {}),
});

// The walk, announced: pre-locked at T0, window announced an hour after startsAt, activated at W + S.
const pending = prelock(newLocationDocument('r', SOURCE), request(true), T0, cfg).doc;
const startsAt = T0 + L;
const announcedAt = startsAt + seconds(3600);
const windowed = announce(pending, { token: RIGHT, phase: 'write' }, announcedAt, cfg).doc;
const W = announcedAt + L;
const UNTIL = W + A;
const written = escalate(windowed, { token: RIGHT, phase: 'write' }, W + S, cfg).doc;
const H = ms(pending.lock!.hardDeleteExpiresAt!);
const P = ms(pending.lock!.expiresAt);

// The same, legacy: pre-locked at T0, escalated at startsAt + S.
const legacyPrelock = prelock(newLocationDocument('r', SOURCE), request(false), T0, cfg).doc;
const legacyStartsAt = T0 + seconds(cfg.convergenceDelaySeconds);
const legacyHardDelete = escalate(
  legacyPrelock,
  { token: RIGHT, phase: 'hardDelete' },
  legacyStartsAt + S,
  cfg,
).doc;
const legacyH = ms(legacyHardDelete.lock!.hardDeleteExpiresAt!);

/** The document as a lock without the announced fields: what a legacy reader's enforcement sees. */
function legacyTwin(doc: LocationDocument): LocationDocument {
  if (!doc.lock) return doc;
  const { announceLeadSeconds: _l, writeWindowAt: _w, writeWindowUntil: _u, ...lock } = doc.lock;
  return { ...doc, lock: lock as Lock };
}

type Expected = string | 'unchanged' | Record<string, unknown>;
type Row = [
  name: string,
  doc: LocationDocument,
  now: number,
  run: (d: LocationDocument, now: number) => RuleResult,
  expected: Expected,
];

const escalateTo = (phase: 'hardDelete' | 'write') => (d: LocationDocument, now: number) =>
  escalate(d, { token: RIGHT, phase }, now, cfg);
const announceAt = (at?: number) => (d: LocationDocument, now: number) =>
  announce(d, { token: RIGHT, phase: 'write', ...(at === undefined ? {} : { at: iso(at) }) }, now, cfg);
const renewPhase = (phase?: 'prelock' | 'hardDelete' | 'write') => (d: LocationDocument, now: number) =>
  renew(d, { token: RIGHT, ...(phase ? { phase } : {}) }, now, cfg);
const downgrade = (writeAt?: string) => (d: LocationDocument, now: number) =>
  release(d, { token: RIGHT, phase: 'write', ...(writeAt ? { writeAt } : {}) }, now);
const replay =
  (announced: boolean, token = RIGHT) =>
  (d: LocationDocument, now: number) =>
    prelock(d, { ...request(announced), newToken: token }, now, cfg);

const rows: Row[] = [
  // prelock: the announced grant, and its replay span (nothing in force yet, no window)
  [
    'prelock announced: the hard-delete lock, in force a lead ahead',
    newLocationDocument('r', SOURCE),
    T0,
    (d, n) => prelock(d, request(true), n, cfg),
    {
      phase: 'hardDelete',
      startsAt: iso(T0 + L),
      hardDeleteAt: iso(T0 + L),
      announceLeadSeconds: cfg.announceLeadSeconds,
      hardDeleteExpiresAt: iso(Math.min(T0 + L + seconds(cfg.hardDeleteLeaseSeconds), P)),
      expiresAt: iso(P),
    },
  ],
  [
    'prelock legacy: today’s grant',
    newLocationDocument('r', SOURCE),
    T0,
    (d, n) => prelock(d, request(false), n, cfg),
    { phase: 'prelock', startsAt: iso(legacyStartsAt), announceLeadSeconds: undefined },
  ],
  ['replay announced at startsAt − 1', pending, startsAt - 1, replay(true), 'unchanged'],
  [
    'replay announced at startsAt − 1, fresh token',
    pending,
    startsAt - 1,
    replay(true, 'fresh'),
    { phase: 'hardDelete' },
  ],
  ['replay announced at startsAt (in force)', pending, startsAt, replay(true), 'Locked'],
  [
    'replay announced after a window was announced',
    announce(pending, { token: RIGHT, phase: 'write' }, T0 + 1, cfg).doc,
    startsAt - 1,
    replay(true),
    'Locked',
  ],
  ['replay of a legacy lock asking announced', legacyPrelock, T0 + 1, replay(true), 'Locked'],
  [
    'replay legacy, any time before the escalation',
    legacyPrelock,
    legacyStartsAt + S,
    replay(false),
    'unchanged',
  ],

  // escalate hardDelete: already held, after the holder's wait
  [
    'escalate hardDelete announced at startsAt + S − 1',
    pending,
    startsAt + S - 1,
    escalateTo('hardDelete'),
    'ConvergencePending 1',
  ],
  [
    'escalate hardDelete announced at startsAt + S',
    pending,
    startsAt + S,
    escalateTo('hardDelete'),
    'unchanged',
  ],
  ['escalate hardDelete announced at H − 1', pending, H - 1, escalateTo('hardDelete'), 'unchanged'],
  ['escalate hardDelete announced at H (lapsed)', pending, H, escalateTo('hardDelete'), 'LockExpired'],
  [
    'escalate hardDelete legacy at startsAt + S − 1',
    legacyPrelock,
    legacyStartsAt + S - 1,
    escalateTo('hardDelete'),
    'ConvergencePending 1',
  ],
  [
    'escalate hardDelete legacy at startsAt + S',
    legacyPrelock,
    legacyStartsAt + S,
    escalateTo('hardDelete'),
    { phase: 'hardDelete', hardDeleteAt: iso(legacyStartsAt + S) },
  ],

  // announce
  ['announce on a legacy lock', legacyHardDelete, legacyStartsAt + S, announceAt(), 'InvalidTransition'],
  [
    'announce: W = now + L',
    pending,
    announcedAt,
    announceAt(),
    { writeWindowAt: iso(W), writeWindowUntil: iso(UNTIL), phase: 'hardDelete' },
  ],
  [
    'announce at now + L − 1 ms: W moves to now + L',
    pending,
    announcedAt,
    announceAt(announcedAt + L - 1),
    { writeWindowAt: iso(W) },
  ],
  [
    'announce at now + L + 1 ms: W = at',
    pending,
    announcedAt,
    announceAt(announcedAt + L + 1),
    { writeWindowAt: iso(W + 1) },
  ],
  ['announce again at writeWindowUntil − S (replay)', windowed, UNTIL - S, announceAt(), 'unchanged'],
  [
    'announce again at writeWindowUntil − S + 1 (a new window)',
    windowed,
    UNTIL - S + 1,
    announceAt(),
    { writeWindowAt: iso(UNTIL - S + 1 + L) },
  ],
  ['announce under the write lock (replay)', written, W + S + 1, announceAt(), 'unchanged'],
  [
    'announce: the window closes at the cap − S',
    pending,
    announcedAt,
    announceAt(ms(pending.lock!.maxExpiresAt) - S - A),
    { writeWindowUntil: iso(ms(pending.lock!.maxExpiresAt) - S) },
  ],
  [
    'announce: the window would close past the cap − S',
    pending,
    announcedAt,
    announceAt(ms(pending.lock!.maxExpiresAt) - S - A + 1),
    'InvalidTransition',
  ],
  [
    'announce with an at that is not an instant',
    pending,
    announcedAt,
    (d, n) => announce(d, { token: RIGHT, phase: 'write', at: 'soon' }, n, cfg),
    'BadRequest',
  ],
  [
    'announce with another token',
    pending,
    announcedAt,
    (d, n) => announce(d, { token: 'other', phase: 'write' }, n, cfg),
    'Locked',
  ],

  // escalate write: the activation, only inside the window
  ['activation without a window', pending, announcedAt, escalateTo('write'), 'InvalidTransition'],
  ['activation at W + S − 1', windowed, W + S - 1, escalateTo('write'), 'ConvergencePending 1'],
  [
    'activation at W + S',
    windowed,
    W + S,
    escalateTo('write'),
    {
      phase: 'write',
      writeAt: iso(W + S),
      writeExpiresAt: iso(W + S + seconds(cfg.writeLeaseSeconds)),
      writeWindowAt: iso(W),
    },
  ],
  [
    'activation at writeWindowUntil − S',
    windowed,
    UNTIL - S,
    escalateTo('write'),
    { phase: 'write', writeAt: iso(UNTIL - S) },
  ],
  [
    'activation at writeWindowUntil − S + 1',
    windowed,
    UNTIL - S + 1,
    escalateTo('write'),
    'InvalidTransition',
  ],
  ['activation replayed', written, W + S + 1, escalateTo('write'), 'unchanged'],
  [
    'escalate write legacy, at once',
    legacyHardDelete,
    legacyStartsAt + S,
    escalateTo('write'),
    { phase: 'write', writeAt: iso(legacyStartsAt + S) },
  ],

  // renew: the lead outside the write phase
  [
    'renew hardDelete announced at H − L − 1',
    pending,
    H - L - 1,
    renewPhase('hardDelete'),
    { hardDeleteExpiresAt: iso(H - L - 1 + seconds(cfg.hardDeleteLeaseSeconds)) },
  ],
  [
    'renew hardDelete announced at H − L (L left)',
    pending,
    H - L,
    renewPhase('hardDelete'),
    { hardDeleteExpiresAt: iso(H - L + seconds(cfg.hardDeleteLeaseSeconds)) },
  ],
  [
    'renew hardDelete announced at H − L + 1 (L − 1 ms left)',
    pending,
    H - L + 1,
    renewPhase('hardDelete'),
    'LockExpired',
  ],
  [
    'renew hardDelete legacy at H − L + 1',
    legacyHardDelete,
    legacyH - L + 1,
    renewPhase('hardDelete'),
    { hardDeleteExpiresAt: iso(legacyH - L + 1 + seconds(cfg.hardDeleteLeaseSeconds)) },
  ],
  [
    'renew prelock announced at P − L',
    pending,
    P - L,
    renewPhase('prelock'),
    { expiresAt: iso(Math.min(P - L + seconds(cfg.prelockLeaseSeconds), ms(pending.lock!.maxExpiresAt))) },
  ],
  ['renew prelock announced at P − L + 1', pending, P - L + 1, renewPhase('prelock'), 'LockExpired'],
  [
    'renew announced with nothing to extend (unchanged, no lead asked)',
    pending,
    startsAt,
    renewPhase('hardDelete'),
    'unchanged',
  ],
  [
    'renew write announced near its end (exempt)',
    written,
    W + S + seconds(cfg.writeLeaseSeconds) - S - 1,
    renewPhase('write'),
    { phase: 'write' },
  ],
  [
    'renew write announced at its end − S (today’s lapse)',
    written,
    W + S + seconds(cfg.writeLeaseSeconds) - S,
    renewPhase('write'),
    'LockExpired',
  ],

  // release: the write phase and the window
  [
    'downgrade clears the window',
    written,
    W + S + 1,
    downgrade(),
    { phase: 'hardDelete', writeWindowAt: undefined, writeWindowUntil: undefined, writeAt: undefined },
  ],
  [
    'cancel a window alone',
    windowed,
    W,
    downgrade(),
    { phase: 'hardDelete', writeWindowAt: undefined, writeWindowUntil: undefined },
  ],
  [
    'a retried downgrade leaves a later window alone',
    windowed,
    W,
    downgrade(iso(W - seconds(60))),
    'unchanged',
  ],
  [
    'downgrade legacy with no write lock (retried)',
    legacyHardDelete,
    legacyStartsAt + S + 1,
    downgrade(),
    'unchanged',
  ],
  [
    'release announced: the lead kept in lastMigration',
    windowed,
    W,
    (d, n) => release(d, { token: RIGHT }, n),
    { released: cfg.announceLeadSeconds },
  ],
  [
    'swap announced: the lead kept in lastMigration',
    written,
    W + S + 1,
    (d, n) => swap(d, { token: RIGHT }, n, cfg),
    { released: cfg.announceLeadSeconds },
  ],
];

function outcome(run: () => RuleResult): { error?: RouteLockError; result?: RuleResult } {
  try {
    return { result: run() };
  } catch (error) {
    if (error instanceof RouteLockError) return { error };
    throw error;
  }
}

function check(row: Row): void {
  const [, doc, now, run, expected] = row;
  const { error, result } = outcome(() => run(structuredClone(doc), now));
  if (typeof expected === 'string' && expected !== 'unchanged') {
    const [code, retry] = expected.split(' ');
    expect(error?.code ?? result).toBe(code);
    if (retry !== undefined) expect(error!.retryAfterSeconds).toBe(Number(retry));
    return;
  }
  expect(error).toBeUndefined();
  if (expected === 'unchanged') {
    expect(result!.changed).toBe(false);
    return;
  }
  expect(result!.changed).toBe(true);
  const next = result!.doc;
  if ('released' in expected) {
    expect(next.lock).toBeNull();
    expect(next.lastMigration?.announceLeadSeconds).toBe(expected.released);
    expect(next.schemaVersion).toBe(2);
    return;
  }
  const lock = next.lock as unknown as Record<string, unknown>;
  for (const [field, value] of Object.entries(expected))
    expect({ [field]: lock[field] }).toEqual({ [field]: value });
  expect(next.schemaVersion).toBe(next.lock?.announceLeadSeconds === undefined ? 1 : 2);
}

/** Enforcement, before and after the row, as a reader without announced locks would compute it. */
function enforcementUnchanged(row: Row): void {
  const [, doc, now, run] = row;
  const { result } = outcome(() => run(structuredClone(doc), now));
  for (const d of result ? [doc, result.doc] : [doc]) {
    for (const t of [now - 1, now, now + 1])
      expect(enforcement(d, t, cfg)).toEqual(enforcement(legacyTwin(d), t, cfg));
  }
}

describe('announced rules at their boundaries', () => {
  test.each(rows)('%s', (...row) => {
    check(row);
    enforcementUnchanged(row);
  });
});

describe('negative controls', () => {
  test('an announcement with less than the lead is impossible: W never lands before now + L', () => {
    for (const early of [announcedAt - seconds(1), announcedAt, announcedAt + L - 1]) {
      const next = announce(pending, { token: RIGHT, phase: 'write', at: iso(early) }, announcedAt, cfg).doc;
      expect(ms(next.lock!.writeWindowAt!) - announcedAt).toBe(L);
    }
  });

  test('a renewal with L − 1 ms left is refused, with L left it is granted', () => {
    expect(() => renew(pending, { token: RIGHT, phase: 'hardDelete' }, H - L + 1, cfg)).toThrow(
      expect.objectContaining({ code: 'LockExpired', message: expect.stringContaining('announcement lead') }),
    );
    expect(renew(pending, { token: RIGHT, phase: 'hardDelete' }, H - L, cfg).changed).toBe(true);
  });

  // A rule that ignored the marker treats the announced lock as its legacy twin: these rows then grant
  // what the announced rule refuses, so they fail.
  const refusedOnlyWhenAnnounced = [
    'escalate hardDelete announced at startsAt + S − 1',
    'activation without a window',
    'activation at W + S − 1',
    'activation at writeWindowUntil − S + 1',
    'renew hardDelete announced at H − L + 1 (L − 1 ms left)',
    'renew prelock announced at P − L + 1',
  ];
  test.each(refusedOnlyWhenAnnounced)('the legacy twin fails the row: %s', (name) => {
    const [, doc, now, run, expected] = rows.find((r) => r[0] === name)!;
    const twin = legacyTwin(doc);
    const asLegacy = outcome(() => run(structuredClone(twin), now));
    expect(asLegacy.error?.code).not.toBe(String(expected).split(' ')[0]);
  });

  test('the enforcement check catches an enforcement that read the announced fields', () => {
    // a variant that denied writes from the window's start would differ from the legacy twin's
    const variant = (d: LocationDocument, t: number) =>
      d.lock?.writeWindowAt !== undefined && t >= ms(d.lock.writeWindowAt)
        ? 'deny'
        : enforcement(d, t, cfg).write;
    expect(variant(windowed, W)).not.toEqual(variant(legacyTwin(windowed), W));
  });
});
