import { RouteLockError } from '../../shared/core/errors';
import { type LocationDocument, newLocationDocument } from '../../shared/core/lock/document';
import {
  assertDeletable,
  escalate,
  forceRelease,
  prelock,
  reclaim,
  release,
  renew,
  swap,
} from '../../shared/core/lock/rules';
import { sha256Hex, tokenMatches } from '../../shared/core/lock/token';
import { cacheControl, enforcement, lockGrant, routeView } from '../../shared/core/lock/view';
import { T0, productionTiming as cfg, seconds } from '../support/timing';
import { assertNoSecrets } from '../support/secrets';

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const delay = seconds(cfg.convergenceDelaySeconds);
/** Escalation waits out the clock-skew margin too: the first instant the holder may escalate. */
const started = delay + seconds(cfg.clockSkewSeconds);
const base = () => newLocationDocument('conv-42', SOURCE);
const req = (over: Partial<Parameters<typeof prelock>[1]> = {}) => ({
  migrationId: 'm-1',
  owner: 'orch-1',
  target: TARGET,
  newToken: 'tok-1',
  ...over,
});

function codeOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    if (error instanceof RouteLockError) return error.code;
    throw error;
  }
  return 'ok';
}

function errorOf(run: () => unknown): RouteLockError {
  try {
    run();
  } catch (error) {
    if (error instanceof RouteLockError) return error;
    throw error;
  }
  throw new Error('expected a RouteLockError');
}

/** Walk one resource to the named phase with token tok-1. */
function walk(to: 'prelock' | 'hardDelete' | 'write', doc: LocationDocument = base()) {
  let d = prelock(doc, req(), T0, cfg).doc;
  const hd = T0 + started + seconds(1);
  if (to !== 'prelock') d = escalate(d, { token: 'tok-1', phase: 'hardDelete' }, hd, cfg).doc;
  const w = hd + seconds(60);
  if (to === 'write') d = escalate(d, { token: 'tok-1', phase: 'write' }, w, cfg).doc;
  return { doc: d, hd, w };
}

describe('pre-lock', () => {
  test('grants a lock whose start waits out the convergence delay and whose parent lease is capped', () => {
    const { doc, changed } = prelock(base(), req(), T0, cfg);
    expect(changed).toBe(true);
    const lock = doc.lock!;
    expect(lock.acquiredAt).toBe(new Date(T0).toISOString());
    expect(Date.parse(lock.startsAt) - T0).toBe(seconds(7200 + 300)); // max tier TTL + replication bound
    expect(Date.parse(lock.expiresAt)).toBe(Date.parse(lock.startsAt) + seconds(cfg.prelockLeaseSeconds));
    expect(Date.parse(lock.maxExpiresAt)).toBe(T0 + seconds(cfg.prelockMaxSeconds));
    expect(lock.convergenceDelaySeconds).toBe(7500);
    expect(lock.tokenHash).toBe(sha256Hex('tok-1'));
    expect(JSON.stringify(doc)).not.toContain('tok-1');
    expect(doc.secondary).toEqual({
      location: TARGET,
      role: 'pendingTarget',
      writesBlockedUntil: lock.maxExpiresAt,
    });
  });

  test('the parent lease never starts past maxExpiresAt', () => {
    const tight = { ...cfg, prelockMaxSeconds: cfg.convergenceDelaySeconds + 100 };
    const lock = prelock(base(), req(), T0, tight).doc.lock!;
    expect(lock.expiresAt).toBe(lock.maxExpiresAt);
  });

  test('a live lock under another migration is Locked, with Retry-After until its lease ends', () => {
    const { doc } = prelock(base(), req(), T0, cfg);
    const error = errorOf(() => prelock(doc, req({ migrationId: 'm-2', newToken: 'tok-2' }), T0 + 5000, cfg));
    expect(error.code).toBe('Locked');
    expect(error.retryAfterSeconds).toBe(Math.ceil((Date.parse(doc.lock!.expiresAt) - T0 - 5000) / 1000));
  });

  test('an expired lock is replaced, and its token dies with it', () => {
    const { doc } = prelock(base(), req(), T0, cfg);
    const later = Date.parse(doc.lock!.expiresAt) + 1;
    const next = prelock(doc, req({ migrationId: 'm-2', newToken: 'tok-2' }), later, cfg).doc;
    expect(next.lock?.migrationId).toBe('m-2');
    expect(codeOf(() => renew(next, { token: 'tok-1' }, later + 1, cfg))).toBe('Locked');
    expect(codeOf(() => renew(next, { token: 'tok-2' }, later + 1, cfg))).toBe('ok');
  });

  test('already at the target: AlreadyAtTarget, nothing written', () => {
    expect(codeOf(() => prelock(base(), req({ target: SOURCE }), T0, cfg))).toBe('AlreadyAtTarget');
  });

  test('a target differing only by account is a real move', () => {
    expect(
      codeOf(() => prelock(base(), req({ target: { region: 'westeurope', account: 'chatweu02' } }), T0, cfg)),
    ).toBe('ok');
  });

  describe('Idempotency-Key replay', () => {
    const first = () => prelock(base(), req({ idempotencyKey: 'key-1' }), T0, cfg).doc;

    test('while still in pre-lock: 200 with a fresh token that replaces the old one, timing untouched', () => {
      const doc = first();
      const replay = prelock(
        doc,
        req({ idempotencyKey: 'key-1', newToken: 'tok-fresh' }),
        T0 + 30_000,
        cfg,
      ).doc;
      expect(replay.lock).toEqual({ ...doc.lock, tokenHash: sha256Hex('tok-fresh') });
      expect(codeOf(() => renew(replay, { token: 'tok-1' }, T0 + 40_000, cfg))).toBe('Locked');
      expect(codeOf(() => release(replay, { token: 'tok-fresh' }, T0 + 40_000))).toBe('ok');
    });

    test('after escalation: 423 (the old grant is in use; a fresh token would fence out its holder)', () => {
      const doc = escalate(first(), { token: 'tok-1', phase: 'hardDelete' }, T0 + started, cfg).doc;
      expect(
        codeOf(() => prelock(doc, req({ idempotencyKey: 'key-1', newToken: 'x' }), T0 + started + 1, cfg)),
      ).toBe('Locked');
    });

    test('a different key, or the same key with another body, is a competing request: 423', () => {
      const doc = first();
      expect(codeOf(() => prelock(doc, req({ idempotencyKey: 'key-2' }), T0 + 1, cfg))).toBe('Locked');
      expect(
        codeOf(() => prelock(doc, req({ idempotencyKey: 'key-1', migrationId: 'm-9' }), T0 + 1, cfg)),
      ).toBe('Locked');
      expect(
        codeOf(() =>
          prelock(doc, req({ idempotencyKey: 'key-1', target: { region: 'northeurope' } }), T0 + 1, cfg),
        ),
      ).toBe('Locked');
    });

    test('the key is stored only as a hash', () => {
      const doc = first();
      expect(doc.lock?.idempotencyKeyHash).toBe(sha256Hex('key-1'));
      expect(JSON.stringify(doc)).not.toContain('key-1');
    });

    test('the same key from another owner or another principal is a stranger: 423, lock untouched', () => {
      const doc = first();
      for (const over of [
        { owner: 'attacker' },
        { owner: 'migrate-conv-42' },
        { principal: 'oid-attacker' },
      ]) {
        expect(codeOf(() => prelock(doc, req({ idempotencyKey: 'key-1', ...over }), T0 + 1, cfg))).toBe(
          'Locked',
        );
      }
      // a lock taken by a principal is replayed only by that principal
      const owned = prelock(base(), req({ idempotencyKey: 'key-1', principal: 'oid-1' }), T0, cfg).doc;
      expect(owned.lock?.principalHash).toBe(sha256Hex('oid-1'));
      expect(codeOf(() => prelock(owned, req({ idempotencyKey: 'key-1' }), T0 + 1, cfg))).toBe('Locked');
      expect(
        codeOf(() => prelock(owned, req({ idempotencyKey: 'key-1', principal: 'oid-2' }), T0 + 1, cfg)),
      ).toBe('Locked');
      expect(
        codeOf(() => prelock(owned, req({ idempotencyKey: 'key-1', principal: 'oid-1' }), T0 + 1, cfg)),
      ).toBe('ok');
    });

    test('a lock taken without a key is never replayed, whatever key a caller presents', () => {
      const doc = prelock(base(), req(), T0, cfg).doc;
      expect(codeOf(() => prelock(doc, req({ idempotencyKey: 'key-1' }), T0 + 1, cfg))).toBe('Locked');
    });

    test('a replay presenting the token the lock already has (a derived one) writes nothing', () => {
      const doc = first();
      const replay = prelock(doc, req({ idempotencyKey: 'key-1', newToken: 'tok-1' }), T0 + 30_000, cfg);
      expect(replay.changed).toBe(false);
      expect(replay.doc).toBe(doc);
    });
  });

  test('refused while a retired source is still write-blocked after a recent swap', () => {
    const { doc, w } = walk('write');
    const swapped = swap(doc, { token: 'tok-1' }, w + 1000, cfg).doc;
    const blockedUntil = Date.parse(swapped.secondary!.writesBlockedUntil);
    const error = errorOf(() =>
      prelock(swapped, req({ target: SOURCE, migrationId: 'm-back' }), w + 2000, cfg),
    );
    expect(error.code).toBe('ConvergencePending');
    expect(error.retryAfterSeconds).toBe(Math.ceil((blockedUntil - w - 2000) / 1000));
    expect(
      codeOf(() => prelock(swapped, req({ target: SOURCE, migrationId: 'm-back' }), blockedUntil, cfg)),
    ).toBe('ok');
  });
});

describe('escalate', () => {
  test('ConvergencePending before startsAt carries Retry-After until the start', () => {
    const { doc } = walk('prelock');
    const error = errorOf(() =>
      escalate(doc, { token: 'tok-1', phase: 'hardDelete' }, T0 + started - 2500, cfg),
    );
    expect(error).toMatchObject({ code: 'ConvergencePending', retryAfterSeconds: 3 });
  });

  test('hard-delete lease is clamped to the parent lease', () => {
    const tight = { ...cfg, prelockMaxSeconds: cfg.convergenceDelaySeconds + 60 };
    const doc = prelock(base(), req(), T0, tight).doc;
    const lock = escalate(doc, { token: 'tok-1', phase: 'hardDelete' }, T0 + started, tight).doc.lock!;
    expect(lock.hardDeleteExpiresAt).toBe(lock.expiresAt);
    expect(lock.expiresAt).toBe(lock.maxExpiresAt);
  });

  test('the write lock keeps the hard-delete lock at least as long', () => {
    const { doc } = walk('write');
    const lock = doc.lock!;
    expect(Date.parse(lock.hardDeleteExpiresAt!)).toBeGreaterThanOrEqual(Date.parse(lock.writeExpiresAt!));
    expect(Date.parse(lock.writeExpiresAt!) - Date.parse(lock.writeAt!)).toBe(seconds(cfg.writeLeaseSeconds));
  });
});

describe('renew clamps', () => {
  test('hard-delete renewal extends the parent when it must, never past maxExpiresAt', () => {
    const { doc } = walk('hardDelete');
    const max = Date.parse(doc.lock!.maxExpiresAt);
    // Renew every hour, as the orchestrator's timer would, until the cap stops it.
    let d = doc;
    let t = Date.parse(d.lock!.hardDeleteAt!);
    let renewals = 0;
    for (;;) {
      t += seconds(3600);
      const code = codeOf(() => (d = renew(d, { token: 'tok-1', phase: 'hardDelete' }, t, cfg).doc));
      if (code !== 'ok') {
        expect(code).toBe('MaxLeaseReached');
        break;
      }
      renewals += 1;
      expect(Date.parse(d.lock!.expiresAt)).toBeLessThanOrEqual(max);
    }
    expect(renewals).toBeGreaterThan(40); // the parent was extended past its first lease
    expect(d.lock!.expiresAt).toBe(d.lock!.maxExpiresAt);
    expect(d.lock!.hardDeleteExpiresAt).toBe(d.lock!.maxExpiresAt);
    const late = t;
    expect(errorOf(() => renew(d, { token: 'tok-1', phase: 'hardDelete' }, late + 1000, cfg)).code).toBe(
      'MaxLeaseReached',
    );
    expect(errorOf(() => renew(d, { token: 'tok-1', phase: 'prelock' }, late + 1000, cfg)).code).toBe(
      'MaxLeaseReached',
    );
  });

  test('renewing prelock extends the parent itself (clamped to the cap)', () => {
    const { doc } = walk('prelock');
    const at = Date.parse(doc.lock!.expiresAt) - seconds(10);
    const next = renew(doc, { token: 'tok-1', phase: 'prelock' }, at, cfg).doc.lock!;
    expect(Date.parse(next.expiresAt)).toBe(
      Math.min(at + seconds(cfg.prelockLeaseSeconds), Date.parse(next.maxExpiresAt)),
    );
  });

  test('no phase lease ever outlives the parent, and the parent never passes its cap', () => {
    let { doc } = walk('write');
    let now = Date.parse(doc.lock!.writeAt!);
    for (let i = 0; i < 40; i += 1) {
      now += seconds(97);
      for (const phase of ['prelock', 'hardDelete', 'write'] as const) {
        try {
          doc = renew(doc, { token: 'tok-1', phase }, now, cfg).doc;
        } catch (error) {
          if (!(error instanceof RouteLockError)) throw error;
        }
      }
      const lock = doc.lock!;
      const parent = Date.parse(lock.expiresAt);
      expect(parent).toBeLessThanOrEqual(Date.parse(lock.maxExpiresAt));
      expect(Date.parse(lock.hardDeleteExpiresAt!)).toBeLessThanOrEqual(parent);
      expect(Date.parse(lock.writeExpiresAt!)).toBeLessThanOrEqual(parent);
    }
  });

  test('the write lock stops at writeAt + budget: clamped, then FreezeBudgetExceeded', () => {
    const { doc, w } = walk('write');
    const cap = w + seconds(cfg.writeBudgetSeconds);
    let d = renew(doc, { token: 'tok-1' }, w + seconds(250), cfg).doc;
    expect(Date.parse(d.lock!.writeExpiresAt!)).toBe(w + seconds(550));
    d = renew(d, { token: 'tok-1' }, w + seconds(500), cfg).doc;
    d = renew(d, { token: 'tok-1' }, w + seconds(700), cfg).doc; // wants 1000, clamped to 900
    expect(Date.parse(d.lock!.writeExpiresAt!)).toBe(cap);
    const error = errorOf(() => renew(d, { token: 'tok-1' }, w + seconds(850), cfg));
    expect(error.code).toBe('FreezeBudgetExceeded');
  });

  test('renewing a phase not held is an InvalidTransition', () => {
    const { doc } = walk('hardDelete');
    expect(
      codeOf(() =>
        renew(doc, { token: 'tok-1', phase: 'write' }, Date.parse(doc.lock!.hardDeleteAt!) + 1, cfg),
      ),
    ).toBe('InvalidTransition');
    const pre = walk('prelock').doc;
    expect(codeOf(() => renew(pre, { token: 'tok-1', phase: 'hardDelete' }, T0 + 1, cfg))).toBe(
      'InvalidTransition',
    );
  });
});

describe('write downgrade and re-escalation', () => {
  test('release {phase: write} lets writes resume, keeps the hard-delete lock, and a new write lock gets a new budget', () => {
    const { doc, w } = walk('write');
    const down = release(doc, { token: 'tok-1', phase: 'write' }, w + seconds(100)).doc;
    expect(down.lock).toMatchObject({ phase: 'hardDelete' });
    expect(down.lock?.writeAt).toBeUndefined();
    const now = w + seconds(200);
    expect(enforcement(down, now, cfg)).toEqual({ read: 'allow', write: 'allow', delete: 'tombstone' });
    const again = escalate(down, { token: 'tok-1', phase: 'write' }, now, cfg).doc;
    expect(again.lock?.writeAt).toBe(new Date(now).toISOString());
    expect(enforcement(again, now + 1, cfg)).toMatchObject({ write: 'deny', delete: 'deny' });
  });
});

describe('swap and release', () => {
  test('swap writes one document: location moves, lock clears, the source is retired for the convergence delay', () => {
    const { doc, w } = walk('write');
    const at = w + seconds(13);
    const next = swap(doc, { token: 'tok-1' }, at, cfg).doc;
    expect(next).toEqual({
      id: 'conv-42',
      schemaVersion: 1,
      lastChange: { op: 'swap', at: new Date(at).toISOString() },
      location: TARGET,
      lock: null,
      secondary: {
        location: SOURCE,
        role: 'retiredSource',
        writesBlockedUntil: new Date(at + delay).toISOString(),
      },
      lastMigration: {
        migrationId: 'm-1',
        from: SOURCE,
        to: TARGET,
        outcome: 'swapped',
        acquiredAt: doc.lock!.acquiredAt,
        startsAt: doc.lock!.startsAt,
        hardDeleteAt: doc.lock!.hardDeleteAt,
        writeAt: doc.lock!.writeAt,
        swappedAt: new Date(at).toISOString(),
        releasedAt: null,
        tokenHash: sha256Hex('tok-1'),
        convergenceDelaySeconds: 7500,
      },
    });
  });

  test('a swap retried with the token that completed it: unchanged, and so is a release', () => {
    const { doc, w } = walk('write');
    const swapped = swap(doc, { token: 'tok-1' }, w + 1, cfg).doc;
    expect(swap(swapped, { token: 'tok-1' }, w + 2, cfg)).toEqual({ doc: swapped, changed: false });
    expect(release(swapped, { token: 'tok-1' }, w + 2)).toEqual({ doc: swapped, changed: false });
    expect(codeOf(() => swap(swapped, { token: 'tok-other' }, w + 2, cfg))).toBe('LockExpired');
  });

  test('a release retried with its token: unchanged; a swap with that token is not a replay (410)', () => {
    const { doc } = walk('hardDelete');
    const now = Date.parse(doc.lock!.hardDeleteAt!) + 1;
    const released = release(doc, { token: 'tok-1' }, now).doc;
    expect(release(released, { token: 'tok-1' }, now + 1)).toEqual({ doc: released, changed: false });
    expect(codeOf(() => swap(released, { token: 'tok-1' }, now + 1, cfg))).toBe('LockExpired');
  });

  test('replay still answers after a new migration has locked the resource', () => {
    const { doc, w } = walk('write');
    const swapped = swap(doc, { token: 'tok-1' }, w + 1, cfg).doc;
    const later = Date.parse(swapped.secondary!.writesBlockedUntil);
    const relocked = prelock(
      swapped,
      req({ target: SOURCE, migrationId: 'm-2', newToken: 'tok-2' }),
      later,
      cfg,
    ).doc;
    expect(swap(relocked, { token: 'tok-1' }, later + 1, cfg).changed).toBe(false);
    expect(codeOf(() => escalate(relocked, { token: 'tok-1', phase: 'hardDelete' }, later + 1, cfg))).toBe(
      'Locked',
    );
  });

  test('delete of a route is refused while a live lock holds it, allowed once the lease is over', () => {
    const { doc } = walk('prelock');
    expect(codeOf(() => assertDeletable(doc, T0 + 1))).toBe('Locked');
    expect(codeOf(() => assertDeletable(doc, Date.parse(doc.lock!.expiresAt)))).toBe('ok');
  });
});

describe('every write says what it did (lastChange)', () => {
  test.each([
    ['prelock', () => walk('prelock').doc],
    ['escalate', () => walk('hardDelete').doc],
    ['renew', () => renew(walk('write').doc, { token: 'tok-1' }, walk('write').w + seconds(100), cfg).doc],
    [
      'downgrade',
      () => release(walk('write').doc, { token: 'tok-1', phase: 'write' }, walk('write').w + 1).doc,
    ],
    ['swap', () => swap(walk('write').doc, { token: 'tok-1' }, walk('write').w + 1, cfg).doc],
    ['release', () => release(walk('prelock').doc, { token: 'tok-1' }, T0 + 1).doc],
  ] as const)('%s', (op, make) => {
    expect(make().lastChange?.op).toBe(op);
  });

  test('a no-op write changes nothing, lastChange included', () => {
    const { doc } = walk('hardDelete');
    const replay = escalate(doc, { token: 'tok-1', phase: 'hardDelete' }, T0 + started + seconds(5), cfg);
    expect(replay).toEqual({ doc, changed: false });
  });
});

describe('force-release and reclaim', () => {
  test('force-release clears a live lock without its token, keeps the location, and records who and why', () => {
    const { doc } = walk('write');
    const now = Date.parse(doc.lock!.writeAt!) + 1000;
    const next = forceRelease(doc, { actor: 'ops-a', reason: 'stuck', requestId: 'fr-1' }, now).doc;
    expect(next).toMatchObject({
      location: SOURCE,
      lock: null,
      secondary: null,
      lastMigration: { outcome: 'forceReleased' },
    });
    expect(next.lastChange).toEqual({
      op: 'forceRelease',
      at: new Date(now).toISOString(),
      actor: 'ops-a',
      reason: 'stuck',
      requestId: 'fr-1',
      // the write attempt it ended, for the telemetry's hold (shared/migration/telemetry/lockTelemetry.ts)
      writeAt: doc.lock!.writeAt,
      writeExpiresAt: (doc.lock as { writeExpiresAt: string }).writeExpiresAt,
    });
    expect(codeOf(() => forceRelease(next, { actor: 'x', reason: 'y', requestId: 'z' }, now))).toBe(
      'NotLocked',
    );
  });

  test('reclaim clears an expired lock with its age, refuses a live one, and leaves a lockless document alone', () => {
    const { doc } = walk('prelock');
    const expired = Date.parse(doc.lock!.expiresAt) + seconds(90);
    const next = reclaim(doc, expired).doc;
    expect(next).toMatchObject({
      lock: null,
      secondary: null,
      lastChange: { op: 'reclaim', ageSeconds: 90 },
      lastMigration: { outcome: 'reclaimed' },
    });
    expect(codeOf(() => reclaim(doc, T0 + 1))).toBe('Locked');
    expect(reclaim(next, expired)).toEqual({ doc: next, changed: false });
  });
});

describe('route view and enforcement', () => {
  const etag = 'etag-1';

  test.each([
    ['no lock', 'none', 0, { read: 'allow', write: 'allow', delete: 'allow' }],
    ['pre-lock before startsAt', 'prelock', 100, { read: 'allow', write: 'allow', delete: 'allow' }],
    ['pre-lock after startsAt', 'prelock', 8000, { read: 'allow', write: 'allow', delete: 'allow' }],
    ['hard-delete lock', 'hardDelete', 0, { read: 'allow', write: 'allow', delete: 'tombstone' }],
    ['write lock', 'write', 0, { read: 'allow', write: 'deny', delete: 'deny', retryAfterSeconds: 5 }],
    [
      'write lock near its end',
      'write',
      298,
      { read: 'allow', write: 'deny', delete: 'deny', retryAfterSeconds: 2 },
    ],
    [
      'write lock lapsed, hard-delete holds',
      'write',
      301,
      { read: 'allow', write: 'allow', delete: 'tombstone' },
    ],
  ] as const)('%s', (_name, phase, offset, expected) => {
    let doc: LocationDocument;
    let now: number;
    if (phase === 'none') {
      doc = base();
      now = T0;
    } else if (phase === 'prelock') {
      doc = walk('prelock').doc;
      now = T0 + seconds(offset);
    } else {
      const walked = walk(phase);
      doc = walked.doc;
      now = (phase === 'write' ? walked.w : walked.hd) + seconds(offset);
    }
    expect(enforcement(doc, now, cfg)).toEqual(expected);
    expect(routeView({ doc, etag }, now, cfg).enforcement).toEqual(expected);
  });

  test('an expired lock restricts nothing and does not appear in the view', () => {
    const { doc } = walk('write');
    const after = Date.parse(doc.lock!.expiresAt);
    const view = routeView({ doc, etag }, after, cfg);
    expect(view.lock).toBeNull();
    expect(view.secondary).toBeNull(); // a pending target lives with its lock
    expect(view.enforcement).toEqual({ read: 'allow', write: 'allow', delete: 'allow' });
  });

  test('a retired source shows in the view until writesBlockedUntil', () => {
    const { doc, w } = walk('write');
    const swapped = swap(doc, { token: 'tok-1' }, w + 1, cfg).doc;
    expect(routeView({ doc: swapped, etag }, w + 2, cfg).secondary?.role).toBe('retiredSource');
    expect(
      routeView({ doc: swapped, etag }, Date.parse(swapped.secondary!.writesBlockedUntil), cfg).secondary,
    ).toBeNull();
  });

  describe('Cache-Control', () => {
    test('no lock: the local tier TTL', () => {
      expect(cacheControl(base(), T0, cfg)).toBe('private, max-age=60');
    });
    test('pending lock far from its start: the local tier TTL', () => {
      expect(cacheControl(walk('prelock').doc, T0 + seconds(100), cfg)).toBe('private, max-age=60');
    });
    test('pending lock near its start: clamped to the seconds left before startsAt − skew', () => {
      const doc = walk('prelock').doc;
      const startsAt = Date.parse(doc.lock!.startsAt);
      expect(cacheControl(doc, startsAt - seconds(25), cfg)).toBe('private, max-age=20'); // skew 5 s
      expect(cacheControl(doc, startsAt - seconds(5), cfg)).toBe('no-store');
    });
    test('started lock: no-store in every phase', () => {
      const { doc, w } = walk('write');
      expect(cacheControl(doc, w + 1, cfg)).toBe('no-store');
      expect(cacheControl(walk('hardDelete').doc, T0 + started + seconds(2), cfg)).toBe('no-store');
    });
    test('expired lock: cacheable again', () => {
      const doc = walk('prelock').doc;
      expect(cacheControl(doc, Date.parse(doc.lock!.expiresAt), cfg)).toBe('private, max-age=60');
    });
  });

  test('no view, grant or error ever carries the token, its hash or the idempotency key hash', () => {
    const token = 'tok-secret-abc';
    const key = 'idem-key-xyz';
    let doc = prelock(base(), req({ newToken: token, idempotencyKey: key }), T0, cfg).doc;
    const outputs: unknown[] = [];
    const record = (now: number) => {
      outputs.push(routeView({ doc, etag }, now, cfg), doc.lock ? lockGrant({ doc, etag }) : null);
    };
    const attempt = (run: () => void) => {
      try {
        run();
      } catch (error) {
        outputs.push(error, (error as Error).message, { ...(error as object) });
      }
    };
    record(T0);
    attempt(() => prelock(doc, req({ migrationId: 'm-2', newToken: 'other' }), T0 + 1, cfg));
    attempt(() => escalate(doc, { token, phase: 'hardDelete' }, T0 + 1, cfg));
    doc = escalate(doc, { token, phase: 'hardDelete' }, T0 + started, cfg).doc;
    record(T0 + started + 1);
    doc = escalate(doc, { token, phase: 'write' }, T0 + started + 10, cfg).doc;
    record(T0 + started + 11);
    attempt(() => swap(doc, { token: 'wrong' }, T0 + started + 12, cfg));
    doc = swap(doc, { token }, T0 + started + 12, cfg).doc;
    record(T0 + started + 13);
    attempt(() => renew(doc, { token }, T0 + started + 14, cfg));
    const secrets = [token, sha256Hex(token), sha256Hex(key), key];
    for (const output of outputs) assertNoSecrets(output, secrets);
    expect(outputs.length).toBeGreaterThan(8);
  });

  test('negative control: the secret check catches a view that leaks the hash', () => {
    const doc = prelock(base(), req({ newToken: 'tok-leak' }), T0, cfg).doc;
    const leaky = { ...routeView({ doc, etag }, T0, cfg), lock: doc.lock };
    expect(() => assertNoSecrets(leaky, [sha256Hex('tok-leak')])).toThrow(/secret/);
    expect(() => assertNoSecrets({ tokenHash: 'x' }, ['nothing'])).toThrow(/tokenHash/);
  });
});

describe('tokens', () => {
  test('a token matches only its own hash', () => {
    expect(tokenMatches('a', sha256Hex('a'))).toBe(true);
    expect(tokenMatches('b', sha256Hex('a'))).toBe(false);
    expect(tokenMatches('a', 'not-hex')).toBe(false);
  });
});
