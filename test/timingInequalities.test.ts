import { type Config, parseConfig, timingInequalities } from '../shared/config';
import { profiles } from '../shared/core/profiles';
import { renewEveryMs } from '../shared/migration/workflow';
import type { HttpCall } from '../shared/migration/types';
import { virtualRunner } from './support/migrationHarness';

/**
 * The timing inequalities (timingInequalities, shared/migration/settings.ts; docs/design.md §3.5, the README's Configuration
 * section) and the migration attempt settings (docs/design.md §6.3).
 */

const numbers = (profile: keyof typeof profiles) => {
  const t = parseConfig({ ...profiles[profile] }).timing;
  const m = parseConfig({ ...profiles[profile] }).migration;
  return {
    ROUTELOCK_CLOCK_SKEW_SECONDS: t.clockSkewSeconds,
    ROUTELOCK_PRELOCK_MAX_SECONDS: t.prelockMaxSeconds,
    ROUTELOCK_HARD_DELETE_LEASE_SECONDS: t.hardDeleteLeaseSeconds,
    ROUTELOCK_WRITE_LEASE_SECONDS: t.writeLeaseSeconds,
    ROUTELOCK_WRITE_BUDGET_SECONDS: t.writeBudgetSeconds,
    ROUTELOCK_DELTA_ATTEMPTS: m.deltaAttempts,
    ROUTELOCK_DELTA_RETRY_DELAY_SECONDS: m.deltaRetryDelaySeconds,
    ROUTELOCK_INFLIGHT_GRACE_SECONDS: m.inFlightGraceSeconds,
    ROUTELOCK_COALESCE_JOIN_MS: t.coalesceJoinMs,
  };
};

test.each(['production', 'dev', 'probe'] as const)(
  'the shipped %s profile satisfies every inequality',
  (p) => {
    expect(timingInequalities(numbers(p), 0)).toEqual([]);
  },
);

test('each inequality broken is refused at start-up, the message naming its variables', () => {
  const refused = (env: Record<string, string>) => {
    try {
      parseConfig({ ROUTELOCK_PROFILE: 'dev', ...env });
      return '';
    } catch (error) {
      return (error as Error).message;
    }
  };
  // dev: two thirds of the 120 s lease (80 s) against 1 + 60 + 1 + 0 s: 19 s more delay breaks it
  expect(refused({ ROUTELOCK_DELTA_RETRY_DELAY_SECONDS: '19' })).toMatch(
    /ROUTELOCK_HARD_DELETE_LEASE_SECONDS: two thirds of it \(80 s.*ROUTELOCK_INFLIGHT_GRACE_SECONDS \+ ROUTELOCK_WRITE_BUDGET_SECONDS \+ ROUTELOCK_DELTA_RETRY_DELAY_SECONDS \+ ROUTELOCK_CLOCK_SKEW_SECONDS \(80 s\)/,
  );
  expect(refused({ ROUTELOCK_DELTA_RETRY_DELAY_SECONDS: '18' })).toBe('');
  // one delta attempt never waits between attempts
  expect(refused({ ROUTELOCK_DELTA_RETRY_DELAY_SECONDS: '20', ROUTELOCK_DELTA_ATTEMPTS: '1' })).toBe('');
  expect(refused({ ROUTELOCK_CLOCK_SKEW_SECONDS: '10' })).toMatch(
    /ROUTELOCK_CLOCK_SKEW_SECONDS: must be under a third of the write lease and budget \(30 s\), got 10/,
  );
  expect(refused({ ROUTELOCK_PRELOCK_MAX_SECONDS: '3' })).toMatch(
    /ROUTELOCK_PRELOCK_MAX_SECONDS: must exceed/,
  );
  expect(refused({ ROUTELOCK_MIGRATION_ATTEMPTS: '0' })).toMatch(
    /ROUTELOCK_MIGRATION_ATTEMPTS: expected a whole number of attempts, at least 1/,
  );
  expect(refused({ ROUTELOCK_MIGRATION_ATTEMPTS: '11' })).toMatch(
    /ROUTELOCK_MIGRATION_ATTEMPTS: expected a whole number of attempts, at most 10/,
  );
  expect(refused({ ROUTELOCK_MIGRATION_RETRY_DELAY_SECONDS: 'soon' })).toMatch(
    /ROUTELOCK_MIGRATION_RETRY_DELAY_SECONDS: expected a whole number of seconds/,
  );
});

test('the coalescing join bound fits in a tenth of the in-flight grace (production: 50 ms of 5 s); a longer one is refused', () => {
  const refused = (env: Record<string, string>) => {
    try {
      parseConfig(env);
      return '';
    } catch (error) {
      return (error as Error).message;
    }
  };
  expect(parseConfig({}).timing.coalesceJoinMs).toBe(50);
  expect(parseConfig({ ROUTELOCK_PROFILE: 'dev' }).timing.coalesceJoinMs).toBe(0);
  // production: 5 s of grace leave the join at most 500 ms, the request its own 4.5 s
  expect(refused({ ROUTELOCK_COALESCE_JOIN_MS: '500' })).toBe('');
  expect(refused({ ROUTELOCK_COALESCE_JOIN_MS: '501' })).toMatch(
    /ROUTELOCK_COALESCE_JOIN_MS: must be at most a tenth of ROUTELOCK_INFLIGHT_GRACE_SECONDS \(500 ms\).*got 501/,
  );
  // the grace shortened under the join bound's tenfold is the same broken inequality
  expect(refused({ ROUTELOCK_INFLIGHT_GRACE_SECONDS: '0' })).toMatch(
    /ROUTELOCK_COALESCE_JOIN_MS: must be at most a tenth of ROUTELOCK_INFLIGHT_GRACE_SECONDS \(0 ms\).*got 50/,
  );
  // dev: a 1 s grace allows joins up to 100 ms
  expect(refused({ ROUTELOCK_PROFILE: 'dev', ROUTELOCK_COALESCE_JOIN_MS: '100' })).toBe('');
  expect(refused({ ROUTELOCK_PROFILE: 'dev', ROUTELOCK_COALESCE_JOIN_MS: '101' })).toMatch(
    /ROUTELOCK_COALESCE_JOIN_MS: .*\(100 ms\).*got 101/,
  );
  expect(refused({ ROUTELOCK_COALESCE_JOIN_MS: '5ms' })).toMatch(
    /ROUTELOCK_COALESCE_JOIN_MS: expected a whole number of milliseconds/,
  );
  expect(timingInequalities({ ...numbers('production'), ROUTELOCK_COALESCE_JOIN_MS: 5001 }, 0)).toHaveLength(
    1,
  );
});

test('the attempt settings: 3 attempts, 300 s in production and 10 s in dev, one for the probe; captured in the input', () => {
  expect(parseConfig({}).migration).toMatchObject({ migrationAttempts: 3, migrationRetryDelaySeconds: 300 });
  expect(parseConfig({ ROUTELOCK_PROFILE: 'dev' }).migration).toMatchObject({
    migrationAttempts: 3,
    migrationRetryDelaySeconds: 10,
  });
  expect(parseConfig({ ...profiles.probe }).migration.migrationAttempts).toBe(1);
});

/**
 * Measured: a delta that overruns every write-lock attempt under the dev profile. Before each attempt
 * after the first, the workflow renews the hard-delete lock (workflow/write.ts); the margin is how much
 * of its lease was left then. With the lease shortened below the inequality's bound the renewal comes
 * too late: the lock lapsed, and attempts 2 and 3 never run.
 */
async function overrun(config: Config) {
  // The worst case: the bulk copy ends just before the hard-delete lock's first renewal was due (a
  // third of its lease after the grant), so the write phase starts on two thirds of the lease.
  const bulkMs = renewEveryMs(config.timing.hardDeleteLeaseSeconds) - 1000;
  const h = virtualRunner({
    config,
    http: (call: HttpCall) =>
      call.body.step === 'bulkCopy'
        ? h.scheduler.timer(h.clock.now() + bulkMs).promise.then(() => ({ status: 200, body: null }))
        : new Promise(() => undefined),
  });
  const margins: number[] = [];
  let wrote = false; // a write-lock attempt has been made: a hard-delete renewal now is between attempts
  const escalate = h.activities.escalate;
  h.activities.escalate = (input) => {
    if (input.phase === 'write') wrote = true;
    return escalate(input);
  };
  const renew = h.activities.renew;
  h.activities.renew = async (input) => {
    if (input.phase === 'hardDelete' && wrote) {
      const { doc } = await h.store.read(input.resourceId, { from: 'writeRegion' });
      const lock = doc.lock as { hardDeleteExpiresAt?: string } | null;
      margins.push(
        lock?.hardDeleteExpiresAt ? (Date.parse(lock.hardDeleteExpiresAt) - h.clock.now()) / 1000 : 0,
      );
    }
    return renew(input);
  };
  await h.router.createRoute('r-over', { region: 'westeurope' });
  const { record } = h.runner.start({ resourceId: 'r-over', target: { region: 'eastus' } });
  await h.settle();
  return { status: await h.runner.status(record.migrationId), margins };
}

const devWith = (patch: (c: Config) => void): Config => {
  const config = structuredClone(
    parseConfig({
      ROUTELOCK_PROFILE: 'dev',
      ROUTELOCK_MIGRATION_ATTEMPTS: '1',
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p', url: 'https://p.test/migrate' }]),
    }),
  );
  patch(config);
  return config;
};

test('measured (dev): an overrunning delta keeps its hard-delete lock to every attempt; below the bound it lapses', async () => {
  const dev = await overrun(devWith(() => undefined));
  expect(dev.status).toMatchObject({ status: 'Failed', deltaAttempts: 3 });
  expect(dev.status.error).toMatch(/^write budget exceeded on all 3 attempts/);
  // the hard-delete lease left at the renewal before attempts 2 and 3 (printed for the docs)
  // 120 s lease: 39 s of bulk copy, 1 s of grace, 60 s of write budget, 1 s of delay leave 19 s at the first renewal
  expect(dev.margins).toEqual([19, 59]);
  process.stdout.write(
    `dev hard-delete lease left at the renewals between delta attempts: ${dev.margins.join(', ')} s\n`,
  );
  // a 90 s lease (two thirds: 60 s, under the 61 s of budget and delay) lapses before the renewal
  const short = await overrun(
    devWith((c) => {
      (c.timing as { hardDeleteLeaseSeconds: number }).hardDeleteLeaseSeconds = 90;
    }),
  );
  expect(short.status).toMatchObject({ status: 'Failed', deltaAttempts: 1 });
  expect(short.status.error).toMatch(/renew the hard-delete lock: LockExpired/);
  expect(timingInequalities({ ...numbers('dev'), ROUTELOCK_HARD_DELETE_LEASE_SECONDS: 90 }, 0)).toHaveLength(
    1,
  );
});
