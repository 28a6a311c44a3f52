import { type TimingConfig, parseConfig } from '../../shared/config';
import { RouteLockError } from '../../shared/core/errors';
import { type LocationDocument, newLocationDocument } from '../../shared/core/lock/document';
import { assertDeletable, escalate, prelock, release, renew, swap } from '../../shared/core/lock/rules';
import { enforcement } from '../../shared/core/lock/view';
import { T0, productionTiming as cfg, seconds } from '../support/timing';

/**
 * Clock-skew margins at the phase boundaries. Two instances whose clocks differ by 4 s
 * (inside the declared 5 s): whatever the lock's holder is allowed to do at its own time, a service
 * at the same real instant must already (or still) enforce the phase that makes it safe. Each property
 * is walked across its boundary in 250 ms steps; the control runs the same walk with the margin at 0.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const OFFSET = seconds(4); // how far the two clocks are apart
const noMargin: TimingConfig = { ...cfg, clockSkewSeconds: 0 };

function ok(run: () => unknown): boolean {
  try {
    run();
    return true;
  } catch (error) {
    if (error instanceof RouteLockError) return false;
    throw error;
  }
}

/** A lock pre-locked at T0, escalated by an accurate holder as early as the rules allow. */
function walked(timing: TimingConfig, to: 'prelock' | 'hardDelete' | 'write') {
  let doc = prelock(
    newLocationDocument('conv-1', SOURCE),
    { migrationId: 'm-1', owner: 'o', target: TARGET, newToken: 'tok' },
    T0,
    timing,
  ).doc;
  const start = Date.parse(doc.lock!.startsAt) + seconds(timing.clockSkewSeconds);
  if (to === 'prelock') return { doc, start };
  doc = escalate(doc, { token: 'tok', phase: 'hardDelete' }, start, timing).doc;
  if (to === 'hardDelete') return { doc, start };
  doc = escalate(doc, { token: 'tok', phase: 'write' }, start + seconds(60), timing).doc;
  return { doc, start };
}

/** Real instants around `at`, 250 ms apart. */
const around = (at: number) => Array.from({ length: 81 }, (_, i) => at - seconds(10) + i * 250);

function violations(timing: TimingConfig): string[] {
  const found: string[] = [];
  // (a) start: a holder whose clock is ahead escalates; a service behind must already tombstone deletes.
  {
    const { doc } = walked(timing, 'prelock');
    for (const t of around(Date.parse(doc.lock!.startsAt))) {
      const holderNow = t + OFFSET;
      const next = ok(() => escalate(doc, { token: 'tok', phase: 'hardDelete' }, holderNow, timing))
        ? escalate(doc, { token: 'tok', phase: 'hardDelete' }, holderNow, timing).doc
        : null;
      if (next && enforcement(next, t, timing).delete !== 'tombstone') {
        found.push('hard-delete granted while another service still deletes physically');
        break;
      }
    }
  }
  // (b) end of the write lock: a holder whose clock is behind swaps; a service ahead must still deny writes.
  {
    const { doc } = walked(timing, 'write');
    for (const t of around(Date.parse(doc.lock!.writeExpiresAt!))) {
      if (
        ok(() => swap(doc, { token: 'tok' }, t - OFFSET, timing)) &&
        enforcement(doc, t, timing).write !== 'deny'
      ) {
        found.push('swap accepted after another service allowed writes again');
        break;
      }
    }
  }
  // (c) a renewal extending the write lock after another service saw it lapse
  {
    const { doc } = walked(timing, 'write');
    for (const t of around(Date.parse(doc.lock!.writeExpiresAt!))) {
      if (
        ok(() => renew(doc, { token: 'tok', phase: 'write' }, t - OFFSET, timing)) &&
        enforcement(doc, t, timing).write !== 'deny'
      ) {
        found.push('write lock renewed after another service allowed writes again');
        break;
      }
    }
  }
  // (d) the end of the hard-delete lock: escalating to write after another service deleted physically
  {
    const { doc } = walked(timing, 'hardDelete');
    for (const t of around(Date.parse(doc.lock!.hardDeleteExpiresAt!))) {
      if (
        ok(() => escalate(doc, { token: 'tok', phase: 'write' }, t - OFFSET, timing)) &&
        enforcement(doc, t, timing).delete !== 'tombstone'
      ) {
        found.push('write lock granted after another service deleted physically');
        break;
      }
    }
  }
  return found;
}

test('with the declared 5 s margin, clocks 4 s apart never disagree in the direction that loses data', () => {
  expect(violations(cfg)).toEqual([]);
});

test('negative control: the same walk without margins finds every one of the four', () => {
  expect(violations(noMargin)).toEqual([
    'hard-delete granted while another service still deletes physically',
    'swap accepted after another service allowed writes again',
    'write lock renewed after another service allowed writes again',
    'write lock granted after another service deleted physically',
  ]);
});

test('escalation waits for startsAt + skew and says how long', () => {
  const { doc } = walked(cfg, 'prelock');
  const startsAt = Date.parse(doc.lock!.startsAt);
  expect(() => escalate(doc, { token: 'tok', phase: 'hardDelete' }, startsAt, cfg)).toThrow(
    expect.objectContaining({ code: 'ConvergencePending', retryAfterSeconds: cfg.clockSkewSeconds }),
  );
  expect(ok(() => escalate(doc, { token: 'tok', phase: 'hardDelete' }, startsAt + seconds(5), cfg))).toBe(
    true,
  );
  // enforcement counts the lock as started from startsAt - skew
  const escalated = escalate(doc, { token: 'tok', phase: 'hardDelete' }, startsAt + seconds(5), cfg).doc;
  expect(enforcement(escalated, startsAt - seconds(5), cfg).delete).toBe('tombstone');
  expect(enforcement(escalated, startsAt - seconds(5) - 1, cfg).delete).toBe('allow');
});

describe('a swap or downgrade names its write-lock attempt', () => {
  /** Attempt 1 downgraded, attempt 2 holds a new write lock. */
  function secondAttempt() {
    const { doc, start } = walked(cfg, 'write');
    const first = doc.lock!.writeAt!;
    const down = release(doc, { token: 'tok', phase: 'write', writeAt: first }, start + seconds(70)).doc;
    const again = escalate(down, { token: 'tok', phase: 'write' }, start + seconds(130), cfg).doc;
    return { doc: again, first, second: again.lock!.writeAt!, at: start + seconds(140) };
  }

  test("attempt 1's late swap or downgrade on attempt 2's lock is 409; attempt 2's own goes through", () => {
    const { doc, first, second, at } = secondAttempt();
    for (const late of [
      () => swap(doc, { token: 'tok', writeAt: first }, at, cfg),
      () => release(doc, { token: 'tok', phase: 'write', writeAt: first }, at),
    ]) {
      expect(late).toThrow(expect.objectContaining({ code: 'InvalidTransition' }));
    }
    expect(swap(doc, { token: 'tok', writeAt: second }, at, cfg).doc.location).toEqual(TARGET);
    // any ISO spelling of that instant names the same attempt (a client that re-serializes it)
    const respelled = second.replace(/\.\d{3}Z$/, '.0000000Z');
    expect(respelled).not.toBe(second);
    expect(swap(doc, { token: 'tok', writeAt: respelled }, at, cfg).doc.location).toEqual(TARGET);
    // the downgrade's replay (its answer lost) still answers, pinned to its own attempt
    const down = release(doc, { token: 'tok', phase: 'write', writeAt: second }, at).doc;
    expect(release(down, { token: 'tok', phase: 'write', writeAt: second }, at + 1).changed).toBe(false);
  });

  test('negative control: without naming the attempt the late swap lands on the second attempt', () => {
    const { doc, at } = secondAttempt();
    expect(swap(doc, { token: 'tok' }, at, cfg).doc.location).toEqual(TARGET);
  });
});

describe('DELETE during the retired-source window', () => {
  function swapped(): { doc: LocationDocument; until: number } {
    const { doc, start } = walked(cfg, 'write');
    const done = swap(doc, { token: 'tok' }, start + seconds(70), cfg).doc;
    return { doc: done, until: Date.parse(done.secondary!.writesBlockedUntil) };
  }

  test('is refused with Retry-After until the window ends, then allowed', () => {
    const { doc, until } = swapped();
    expect(() => assertDeletable(doc, until - seconds(10))).toThrow(
      expect.objectContaining({ code: 'ConvergencePending', retryAfterSeconds: 10 }),
    );
    expect(ok(() => assertDeletable(doc, until))).toBe(true);
  });

  test('negative control: a route deleted and re-created would take a pre-lock back at once', () => {
    const { doc, until } = swapped();
    const back = { migrationId: 'm-back', owner: 'o', target: SOURCE, newToken: 't2' };
    expect(() => prelock(doc, back, until - seconds(10), cfg)).toThrow(
      expect.objectContaining({ code: 'ConvergencePending' }),
    );
    const recreated = newLocationDocument('conv-1', TARGET);
    expect(ok(() => prelock(recreated, back, until - seconds(10), cfg))).toBe(true);
  });
});

test('a skew that leaves no time to renew or swap is refused at start-up, naming the variable', () => {
  expect(() => parseConfig({ ROUTELOCK_CLOCK_SKEW_SECONDS: '300' })).toThrow(
    /ROUTELOCK_CLOCK_SKEW_SECONDS: must be under a third of the write lease and budget \(300 s\), got 300/,
  );
  expect(() => parseConfig({ ROUTELOCK_CLOCK_SKEW_SECONDS: '99' })).not.toThrow(); // the control
});
