import { RouteLockError } from '../../shared/core/errors';
import { type LocationDocument, newLocationDocument } from '../../shared/core/lock/document';
import { type RuleResult, escalate, prelock, release, renew, swap } from '../../shared/core/lock/rules';
import { sha256Hex } from '../../shared/core/lock/token';
import { T0, productionTiming as cfg, seconds } from '../support/timing';

/**
 * Every lock rule, walked as a table: operation × phase × time × token (right / wrong / dead).
 * Times are the boundaries that matter: before startsAt, after it, after the phase's own lease,
 * after the parent lease, past maxExpiresAt. A lock in hardDelete or write cannot exist before
 * startsAt (escalation is refused until then), so those rows start after it.
 *
 * Expected outcomes, written out rather than computed:
 *   a code          → the rule throws RouteLockError with that code
 *   unchanged       → success, no write (an idempotent replay)
 *   phase=X         → success, the lock is now in phase X
 *   extended        → success, the named phase's lease moved later
 *   swapped         → success, location = target and the lock is gone, in one document
 *   released        → success, the lock is gone and the location unchanged
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const RIGHT = 'right-token';
const WRONG = 'wrong-token';
const DEAD = 'dead-token'; // the token of an earlier lock whose lease ran out

const delay = seconds(cfg.convergenceDelaySeconds);

/** A resource whose previous lock (token DEAD) expired, then pre-locked at T0 with token RIGHT. */
function prelocked(): LocationDocument {
  const base = newLocationDocument('conv-42', SOURCE);
  const earlier = T0 - seconds(cfg.prelockMaxSeconds) - seconds(60);
  const stale = prelock(
    base,
    { migrationId: 'm-old', owner: 'o-old', target: TARGET, newToken: DEAD },
    earlier,
    cfg,
  ).doc;
  return prelock(stale, { migrationId: 'm-1', owner: 'o-1', target: TARGET, newToken: RIGHT }, T0, cfg).doc;
}

const startsAt = T0 + delay;
const hardDeleteAt = startsAt + seconds(10);
const writeAt = hardDeleteAt + seconds(100);

function inPhase(phase: 'prelock' | 'hardDelete' | 'write'): LocationDocument {
  let doc = prelocked();
  if (phase === 'prelock') return doc;
  doc = escalate(doc, { token: RIGHT, phase: 'hardDelete' }, hardDeleteAt, cfg).doc;
  if (phase === 'hardDelete') return doc;
  return escalate(doc, { token: RIGHT, phase: 'write' }, writeAt, cfg).doc;
}

const parentExpiresAt = (doc: LocationDocument) => Date.parse(doc.lock!.expiresAt);
const times = {
  beforeStart: () => T0 + seconds(100),
  afterStart: (doc: LocationDocument) =>
    doc.lock!.phase === 'write' ? writeAt + seconds(10) : Math.max(startsAt, hardDeleteAt) + seconds(1000),
  afterPhaseLease: (doc: LocationDocument) =>
    Date.parse(doc.lock!.phase === 'write' ? doc.lock!.writeExpiresAt! : doc.lock!.hardDeleteExpiresAt!) +
    1000,
  afterParent: (doc: LocationDocument) => parentExpiresAt(doc) + 1000,
  pastMax: (doc: LocationDocument) => Date.parse(doc.lock!.maxExpiresAt) + 1000,
};
type TimeName = keyof typeof times;

const ops = {
  'escalate:hardDelete': (doc: LocationDocument, token: string, now: number) =>
    escalate(doc, { token, phase: 'hardDelete' }, now, cfg),
  'escalate:write': (doc: LocationDocument, token: string, now: number) =>
    escalate(doc, { token, phase: 'write' }, now, cfg),
  renew: (doc: LocationDocument, token: string, now: number) => renew(doc, { token }, now, cfg),
  swap: (doc: LocationDocument, token: string, now: number) => swap(doc, { token }, now, cfg),
  release: (doc: LocationDocument, token: string, now: number) => release(doc, { token }, now),
  'release:write': (doc: LocationDocument, token: string, now: number) =>
    release(doc, { token, phase: 'write' }, now),
};
type OpName = keyof typeof ops;

type Row = [OpName, 'prelock' | 'hardDelete' | 'write', TimeName, string, string, string];

// prettier-ignore
const table: Row[] = [
  // op                    phase         time               right                 wrong          dead
  ['escalate:hardDelete', 'prelock',    'beforeStart',     'ConvergencePending', 'Locked',      'Locked'],
  ['escalate:hardDelete', 'prelock',    'afterStart',      'phase=hardDelete',   'Locked',      'Locked'],
  ['escalate:hardDelete', 'prelock',    'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['escalate:hardDelete', 'prelock',    'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],
  ['escalate:hardDelete', 'hardDelete', 'afterStart',      'unchanged',          'Locked',      'Locked'],
  ['escalate:hardDelete', 'hardDelete', 'afterPhaseLease', 'LockExpired',        'Locked',      'Locked'],
  ['escalate:hardDelete', 'hardDelete', 'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['escalate:hardDelete', 'hardDelete', 'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],
  ['escalate:hardDelete', 'write',      'afterStart',      'InvalidTransition',  'Locked',      'Locked'],
  ['escalate:hardDelete', 'write',      'afterPhaseLease', 'InvalidTransition',  'Locked',      'Locked'],
  ['escalate:hardDelete', 'write',      'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['escalate:hardDelete', 'write',      'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],

  ['escalate:write',      'prelock',    'beforeStart',     'ConvergencePending', 'Locked',      'Locked'],
  ['escalate:write',      'prelock',    'afterStart',      'InvalidTransition',  'Locked',      'Locked'],
  ['escalate:write',      'prelock',    'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['escalate:write',      'prelock',    'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],
  ['escalate:write',      'hardDelete', 'afterStart',      'phase=write',        'Locked',      'Locked'],
  ['escalate:write',      'hardDelete', 'afterPhaseLease', 'InvalidTransition',  'Locked',      'Locked'],
  ['escalate:write',      'hardDelete', 'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['escalate:write',      'hardDelete', 'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],
  ['escalate:write',      'write',      'afterStart',      'unchanged',          'Locked',      'Locked'],
  ['escalate:write',      'write',      'afterPhaseLease', 'LockExpired',        'Locked',      'Locked'],
  ['escalate:write',      'write',      'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['escalate:write',      'write',      'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],

  ['renew',               'prelock',    'beforeStart',     'unchanged',          'Locked',      'Locked'],
  ['renew',               'prelock',    'afterStart',      'extended',           'Locked',      'Locked'],
  ['renew',               'prelock',    'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['renew',               'prelock',    'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],
  ['renew',               'hardDelete', 'afterStart',      'extended',           'Locked',      'Locked'],
  ['renew',               'hardDelete', 'afterPhaseLease', 'LockExpired',        'Locked',      'Locked'],
  ['renew',               'hardDelete', 'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['renew',               'hardDelete', 'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],
  ['renew',               'write',      'afterStart',      'extended',           'Locked',      'Locked'],
  ['renew',               'write',      'afterPhaseLease', 'LockExpired',        'Locked',      'Locked'],
  ['renew',               'write',      'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['renew',               'write',      'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],

  ['swap',                'prelock',    'beforeStart',     'InvalidTransition',  'Locked',      'Locked'],
  ['swap',                'prelock',    'afterStart',      'InvalidTransition',  'Locked',      'Locked'],
  ['swap',                'prelock',    'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['swap',                'prelock',    'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],
  ['swap',                'hardDelete', 'afterStart',      'InvalidTransition',  'Locked',      'Locked'],
  ['swap',                'hardDelete', 'afterPhaseLease', 'InvalidTransition',  'Locked',      'Locked'],
  ['swap',                'hardDelete', 'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['swap',                'hardDelete', 'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],
  ['swap',                'write',      'afterStart',      'swapped',            'Locked',      'Locked'],
  ['swap',                'write',      'afterPhaseLease', 'InvalidTransition',  'Locked',      'Locked'],
  ['swap',                'write',      'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['swap',                'write',      'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],

  ['release',             'prelock',    'beforeStart',     'released',           'Locked',      'Locked'],
  ['release',             'prelock',    'afterStart',      'released',           'Locked',      'Locked'],
  ['release',             'prelock',    'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['release',             'prelock',    'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],
  ['release',             'hardDelete', 'afterStart',      'released',           'Locked',      'Locked'],
  ['release',             'hardDelete', 'afterPhaseLease', 'released',           'Locked',      'Locked'],
  ['release',             'hardDelete', 'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['release',             'hardDelete', 'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],
  ['release',             'write',      'afterStart',      'released',           'Locked',      'Locked'],
  ['release',             'write',      'afterPhaseLease', 'released',           'Locked',      'Locked'],
  ['release',             'write',      'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['release',             'write',      'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],

  ['release:write',       'prelock',    'beforeStart',     'InvalidTransition',  'Locked',      'Locked'],
  ['release:write',       'prelock',    'afterStart',      'InvalidTransition',  'Locked',      'Locked'],
  ['release:write',       'prelock',    'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['release:write',       'prelock',    'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],
  ['release:write',       'hardDelete', 'afterStart',      'unchanged',          'Locked',      'Locked'],
  ['release:write',       'hardDelete', 'afterPhaseLease', 'InvalidTransition',  'Locked',      'Locked'],
  ['release:write',       'hardDelete', 'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['release:write',       'hardDelete', 'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],
  ['release:write',       'write',      'afterStart',      'phase=hardDelete',   'Locked',      'Locked'],
  ['release:write',       'write',      'afterPhaseLease', 'phase=hardDelete',   'Locked',      'Locked'],
  ['release:write',       'write',      'afterParent',     'LockExpired',        'LockExpired', 'LockExpired'],
  ['release:write',       'write',      'pastMax',         'LockExpired',        'LockExpired', 'LockExpired'],
];

function outcome(run: () => RuleResult): { code: string } | { result: RuleResult } {
  try {
    return { result: run() };
  } catch (error) {
    if (error instanceof RouteLockError) return { code: error.code };
    throw error;
  }
}

function check(expected: string, before: LocationDocument, got: ReturnType<typeof outcome>, op: OpName) {
  if (!expected.match(/^(unchanged|phase=|extended|swapped|released)/)) {
    expect(got).toEqual({ code: expected });
    return;
  }
  if (!('result' in got)) throw new Error(`expected ${expected}, got ${got.code}`);
  const { doc, changed } = got.result;
  if (expected === 'unchanged') {
    expect(changed).toBe(false);
    expect(doc).toBe(before);
  } else if (expected.startsWith('phase=')) {
    expect(changed).toBe(true);
    expect(doc.lock?.phase).toBe(expected.slice('phase='.length));
    expect(doc.lock?.tokenHash).toBe(before.lock?.tokenHash);
    expect(doc.location).toEqual(before.location);
  } else if (expected === 'extended') {
    expect(changed).toBe(true);
    const field =
      op === 'renew'
        ? { prelock: 'expiresAt', hardDelete: 'hardDeleteExpiresAt', write: 'writeExpiresAt' }[
            before.lock!.phase
          ]
        : 'expiresAt';
    const key = field as 'expiresAt' | 'hardDeleteExpiresAt' | 'writeExpiresAt';
    expect(Date.parse(doc.lock![key]!)).toBeGreaterThan(Date.parse(before.lock![key]!));
  } else if (expected === 'swapped') {
    expect(changed).toBe(true);
    expect(doc.location).toEqual(TARGET);
    expect(doc.lock).toBeNull();
    expect(doc.secondary).toMatchObject({ role: 'retiredSource', location: SOURCE });
    expect(doc.lastMigration).toMatchObject({
      outcome: 'swapped',
      from: SOURCE,
      to: TARGET,
      migrationId: 'm-1',
    });
  } else if (expected === 'released') {
    expect(changed).toBe(true);
    expect(doc.location).toEqual(SOURCE);
    expect(doc.lock).toBeNull();
    expect(doc.secondary).toBeNull();
    expect(doc.lastMigration).toMatchObject({ outcome: 'released', swappedAt: null });
  }
}

describe.each(table)('%s in %s, %s', (op, phase, time, right, wrong, dead) => {
  const doc = inPhase(phase);
  const now = times[time](doc);

  test(`right token → ${right}`, () =>
    check(
      right,
      doc,
      outcome(() => ops[op](doc, RIGHT, now)),
      op,
    ));
  test(`wrong token → ${wrong}`, () =>
    check(
      wrong,
      doc,
      outcome(() => ops[op](doc, WRONG, now)),
      op,
    ));
  test(`dead token → ${dead}`, () =>
    check(
      dead,
      doc,
      outcome(() => ops[op](doc, DEAD, now)),
      op,
    ));
});

describe('the table itself', () => {
  test('the fixtures sit where the table says they do', () => {
    const pre = inPhase('prelock');
    expect(pre.lock?.tokenHash).toBe(sha256Hex(RIGHT));
    expect(times.beforeStart()).toBeLessThan(Date.parse(pre.lock!.startsAt));
    const hd = inPhase('hardDelete');
    expect(times.afterPhaseLease(hd)).toBeLessThan(parentExpiresAt(hd));
    const w = inPhase('write');
    expect(times.afterStart(w)).toBeLessThan(Date.parse(w.lock!.writeExpiresAt!));
    expect(times.afterPhaseLease(w)).toBeLessThan(parentExpiresAt(w));
    expect(times.afterParent(pre)).toBeLessThan(Date.parse(pre.lock!.maxExpiresAt));
  });

  test('covers every operation × phase', () => {
    const seen = new Set(table.map(([op, phase]) => `${op}/${phase}`));
    expect(seen.size).toBe(Object.keys(ops).length * 3);
  });
});
