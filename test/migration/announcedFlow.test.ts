import { virtualRunner } from '../support/migrationHarness';
import type { HttpCall } from '../../shared/migration/types';

/**
 * The migration workflow under announced locks (ROUTELOCK_ANNOUNCED_LOCKS, docs/design.md §6): the
 * pre-lock is the hard-delete lock, each write-lock attempt announces its window a lead ahead. Run
 * through the embedded host's in-process runner on virtual time, against the same migration with the
 * flag off: both complete, the write lock is held as long, and the flag adds the announcement's wait.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const PARTICIPANTS = JSON.stringify([{ name: 'p', url: 'https://p.test/migrate' }]);
const COPY_MS = { bulkCopy: 20_000, deltaCopy: 5_000 } as Record<string, number>;

async function migrate(profile: 'dev' | 'production', announced: boolean, overruns = 0) {
  const calls: { step: string; at: number }[] = [];
  const h = virtualRunner({
    env: {
      ROUTELOCK_PROFILE: profile,
      ROUTELOCK_PARTICIPANTS: PARTICIPANTS,
      ROUTELOCK_ANNOUNCED_LOCKS: String(announced),
    },
    http: (call: HttpCall) => {
      calls.push({ step: call.body.step, at: h.clock.now() });
      if (call.body.step === 'verify') return Promise.resolve({ status: 404, body: null });
      if (call.body.step === 'deltaCopy' && call.body.attempt <= overruns)
        return new Promise(() => undefined);
      const ms = COPY_MS[call.body.step] ?? 0;
      return h.scheduler.timer(h.clock.now() + ms).promise.then(() => ({ status: 200, body: null }));
    },
  });
  await h.router.createRoute('r-1', SOURCE);
  const started = h.clock.now();
  const { record } = h.runner.start({ resourceId: 'r-1', target: TARGET });
  await h.settle();
  const status = await h.runner.status(record.migrationId);
  const doc = (await h.store.read('r-1', { from: 'writeRegion' })).doc;
  return { h, status, doc, calls, started };
}

const at = (iso: string | null | undefined): number => Date.parse(iso as string);

describe.each(['dev', 'production'] as const)('%s profile', (profile) => {
  test('with the flag on a migration completes; the write lock is held as long as with it off', async () => {
    const off = await migrate(profile, false);
    const on = await migrate(profile, true);
    for (const run of [off, on]) {
      expect(run.status).toMatchObject({ status: 'Completed', phase: 'swapped' });
      expect(run.doc).toMatchObject({ location: TARGET, lock: null });
    }
    const hold = (r: typeof on) => at(r.status.timeline.swappedAt) - at(r.status.timeline.writeAt);
    expect(hold(on)).toBe(hold(off));
    expect(off.status.timeline).not.toHaveProperty('writeWindowAt');
    const t = on.h.config.timing;
    const L = t.announceLeadSeconds * 1000;
    const S = t.clockSkewSeconds * 1000;
    const G = on.h.config.migration.inFlightGraceSeconds * 1000;
    // the announced lock: the hard-delete lock from the pre-lock, in force L later; no escalation to it
    expect(at(on.status.timeline.hardDeleteAt) - at(on.status.timeline.prelockAt)).toBe(L);
    expect(on.doc.lastMigration?.announceLeadSeconds).toBe(t.announceLeadSeconds);
    // the bulk copy from startsAt + S + G
    const bulk = on.calls.find((c) => c.step === 'bulkCopy')?.at as number;
    expect(bulk - at(on.status.timeline.hardDeleteAt)).toBe(S + G);
    // the window announced when the bulk copy ended, the write lock taken S after it opens
    const windowAt = at(on.status.timeline.writeWindowAt);
    expect(windowAt - (bulk + COPY_MS.bulkCopy!)).toBe(L);
    expect(at(on.status.timeline.writeAt) - windowAt).toBe(S);
    // the added duration: per escalation (to the bulk copy) and per write-lock attempt
    const offBulk = off.calls.find((c) => c.step === 'bulkCopy')?.at as number;
    const perEscalation = bulk - on.started - (offBulk - off.started);
    const total = at(on.status.timeline.swappedAt) - at(off.status.timeline.swappedAt);
    const perAttempt = total - perEscalation;
    expect({ perEscalation, perAttempt }).toEqual({
      perEscalation: profile === 'production' ? 2 * S : perEscalation,
      perAttempt: L + S,
    });
    process.stdout.write(
      `${profile}: added per escalation ${perEscalation / 1000} s, per write-lock attempt ${perAttempt / 1000} s\n`,
    );
  });

  test('with the flag on a delta that overruns once: the next attempt announces again, the retry delay inside its wait', async () => {
    const off = await migrate(profile, false, 1);
    const on = await migrate(profile, true, 1);
    for (const run of [off, on])
      expect(run.status).toMatchObject({ status: 'Completed', phase: 'swapped', deltaAttempts: 2 });
    const t = on.h.config.timing;
    const L = t.announceLeadSeconds * 1000;
    const S = t.clockSkewSeconds * 1000;
    const delay = on.h.config.migration.deltaRetryDelaySeconds * 1000;
    // the second write lock taken S after its own window opened
    expect(at(on.status.timeline.writeAt) - at(on.status.timeline.writeWindowAt)).toBe(S);
    // each attempt waits its announcement; the retried one's wait holds the retry delay
    const added = at(on.status.timeline.swappedAt) - at(off.status.timeline.swappedAt);
    const perEscalation = profile === 'production' ? 2 * S : 0;
    expect(added).toBe(perEscalation + (L + S) + (L + S - delay));
    process.stdout.write(`${profile}: added by a retried write-lock attempt ${(L + S - delay) / 1000} s\n`);
  });
});
