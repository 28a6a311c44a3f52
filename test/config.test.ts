import { ConfigError, parseConfig } from '../shared/config';
import { attemptActionsBound } from '../shared/migration/workflow';
import { ATTEMPT_STEP_ACTIONS, worstCaseAttemptActions } from '../shared/migration/workflow/bound';
import { worstCaseCopyActions } from '../shared/migration/workflow/copy';

function problemsOf(env: Record<string, string>): string[] {
  try {
    parseConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('config', () => {
  test('production defaults follow docs/design.md §3, and the convergence delay is max tier TTL + replication bound', () => {
    const { timing, store } = parseConfig({});
    expect(timing).toMatchObject({
      profile: 'production',
      cacheTiers: [
        { name: 'edge', ttlSeconds: 7200 },
        { name: 'regional', ttlSeconds: 1800 },
        { name: 'local', ttlSeconds: 60 },
      ],
      replicationBoundSeconds: 300,
      safetyBufferSeconds: 600,
      clockSkewSeconds: 5,
      prelockLeaseSeconds: 172800,
      prelockMaxSeconds: 259200,
      hardDeleteLeaseSeconds: 21600,
      writeLeaseSeconds: 300,
      writeBudgetSeconds: 900,
      retryAfterMaxSeconds: 5,
      convergenceDelaySeconds: 7500,
      announceLeadSeconds: 8105, // 7500 + 5 skew + 600 buffer
      localCacheTtlSeconds: 60,
    });
    expect(store).toEqual({ kind: 'sqlite', path: '.routelock/routelock.db' });
  });

  test('the dev profile selects the dev column; an explicit variable overrides the profile', () => {
    const { timing } = parseConfig({ ROUTELOCK_PROFILE: 'dev', ROUTELOCK_WRITE_LEASE_SECONDS: '45' });
    expect(timing).toMatchObject({
      profile: 'dev',
      cacheTiers: [{ name: 'local', ttlSeconds: 2 }],
      replicationBoundSeconds: 1,
      convergenceDelaySeconds: 3,
      announceLeadSeconds: 4, // 3 + 0 skew + 1 buffer
      writeLeaseSeconds: 45,
      writeBudgetSeconds: 60,
      localCacheTtlSeconds: 2,
    });
  });

  test('without a tier named "local", the shortest tier is the local one', () => {
    expect(parseConfig({ ROUTELOCK_CACHE_TIERS: 'edge=600,app=30' }).timing).toMatchObject({
      localCacheTtlSeconds: 30,
      convergenceDelaySeconds: 900,
    });
  });

  test.each([
    [
      { ROUTELOCK_WRITE_LEASE_SECONDS: 'abc' },
      /^ROUTELOCK_WRITE_LEASE_SECONDS: expected a whole number of seconds.*got "abc"/,
    ],
    [{ ROUTELOCK_WRITE_LEASE_SECONDS: '0' }, /^ROUTELOCK_WRITE_LEASE_SECONDS: .*at least 1/],
    [{ ROUTELOCK_SAFETY_BUFFER_SECONDS: '-5' }, /^ROUTELOCK_SAFETY_BUFFER_SECONDS: /],
    [{ ROUTELOCK_CACHE_TIERS: 'edge:7200' }, /^ROUTELOCK_CACHE_TIERS: expected comma-separated name=seconds/],
    [{ ROUTELOCK_CACHE_TIERS: 'edge=10,edge=20' }, /^ROUTELOCK_CACHE_TIERS: tier "edge" is declared twice/],
    [{ ROUTELOCK_PROFILE: 'staging' }, /^ROUTELOCK_PROFILE: expected "production" or "dev"/],
    [{ ROUTELOCK_STORE: 'redis' }, /^ROUTELOCK_STORE: expected "sqlite" or "cosmos"/],
    [{ ROUTELOCK_STORE: 'cosmos' }, /^COSMOS_ENDPOINT: required when ROUTELOCK_STORE=cosmos/],
    [
      { ROUTELOCK_STORE: 'cosmos', COSMOS_ENDPOINT: 'not a url' },
      /^COSMOS_ENDPOINT: expected an https:\/\/ URL/,
    ],
    [
      {
        ROUTELOCK_STORE: 'cosmos',
        COSMOS_ENDPOINT: 'https://acct.documents.azure.com:443/',
        COSMOS_DISABLE_TLS_VERIFY: '1',
      },
      /^COSMOS_DISABLE_TLS_VERIFY: only allowed for a loopback emulator endpoint/,
    ],
    [{ COSMOS_DISABLE_TLS_VERIFY: 'yes' }, /^COSMOS_DISABLE_TLS_VERIFY: expected 1, 0, true or false/],
    [
      { ROUTELOCK_PRELOCK_MAX_SECONDS: '7000' },
      /^ROUTELOCK_PRELOCK_MAX_SECONDS: must exceed the convergence delay plus the safety buffer and the clock skew \(8100 s\)/,
    ],
  ])('%j is refused with a message naming the variable', (env, message) => {
    const problems = problemsOf(env as Record<string, string>);
    expect(problems.some((p) => message.test(p))).toBe(true);
  });

  test('every bad variable is named at once', () => {
    const problems = problemsOf({ ROUTELOCK_WRITE_LEASE_SECONDS: 'x', ROUTELOCK_CLOCK_SKEW_SECONDS: 'y' });
    expect(problems.map((p) => p.split(':')[0]).sort()).toEqual([
      'ROUTELOCK_CLOCK_SKEW_SECONDS',
      'ROUTELOCK_WRITE_LEASE_SECONDS',
    ]);
  });

  test('cosmos with a loopback emulator may skip TLS verification', () => {
    const { store } = parseConfig({
      ROUTELOCK_STORE: 'cosmos',
      COSMOS_ENDPOINT: 'https://127.0.0.1:8081',
      COSMOS_KEY: 'a2V5',
      COSMOS_DISABLE_TLS_VERIFY: 'true',
      REGION_NAME: 'West Europe',
    });
    expect(store).toMatchObject({
      kind: 'cosmos',
      disableTlsVerify: true,
      database: 'routelock',
      container: 'locations',
      campaignsContainer: 'campaigns',
      preferredRegion: 'West Europe',
    });
  });

  test('the parsed config is frozen', () => {
    const config = parseConfig({});
    expect(() => {
      (config.timing as { writeLeaseSeconds: number }).writeLeaseSeconds = 1;
    }).toThrow();
  });
});

test('the *_ATTEMPTS variables are counts, not seconds, and a bad one is named', () => {
  const problems = problemsOf({ ROUTELOCK_DELTA_ATTEMPTS: '0', ROUTELOCK_RETRY_ATTEMPTS: 'x' });
  expect(problems).toEqual([
    'ROUTELOCK_DELTA_ATTEMPTS: expected a whole number of attempts, at least 1 (got "0")',
    'ROUTELOCK_RETRY_ATTEMPTS: expected a whole number of attempts (got "x")',
  ]);
});

describe('the history bound: a whole attempt must fit under the Durable extension’s action cap', () => {
  const participants = (n: number) =>
    JSON.stringify(
      Array.from({ length: n }, (_, i) => ({ name: `p${i}`, url: `https://p${i}.test/migrate` })),
    );

  test('production: five participants polled at the 30 s cap fit, a sixth is refused naming the variables', () => {
    expect(() => parseConfig({ ROUTELOCK_PARTICIPANTS: participants(5) })).not.toThrow();
    expect(problemsOf({ ROUTELOCK_PARTICIPANTS: participants(6) })).toEqual([
      expect.stringMatching(
        /^ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS: 6 participants polled every 30 s through a bulk copy as long as ROUTELOCK_PRELOCK_MAX_SECONDS \(259200 s\), with its cutover-window waits, confirmation and end notices, could record 10\d{4} orchestration actions in one attempt, over the Durable extension's 100000/,
      ),
    ]);
  });

  test('polls at the cap are counted a second early, as the engine wakes them: dev admits 277 participants, not 290', () => {
    const dev = (n: number) => ({ ROUTELOCK_PROFILE: 'dev', ROUTELOCK_PARTICIPANTS: participants(n) });
    expect(() => parseConfig(dev(277))).not.toThrow();
    expect(problemsOf(dev(278))).toEqual([
      expect.stringMatching(/^ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS: 278 participants/),
    ]);
  });

  test('a poll cap of 1 s is refused (an early wake would leave polls at the cap no floor), 2 s accepted', () => {
    expect(problemsOf({ ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS: '1' })).toEqual([
      expect.stringMatching(/^ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS: /),
    ]);
    expect(() => parseConfig({ ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS: '2' })).not.toThrow();
  });

  test('the check counts the whole attempt, not only its copies (the window waits, confirmation, notices)', () => {
    const config = parseConfig({ ROUTELOCK_PARTICIPANTS: participants(5) });
    const shape = {
      participants: 5,
      prelockMaxSeconds: config.timing.prelockMaxSeconds,
      hardDeleteLeaseSeconds: config.timing.hardDeleteLeaseSeconds,
      writeLeaseSeconds: config.timing.writeLeaseSeconds,
      writeBudgetSeconds: config.timing.writeBudgetSeconds,
      deltaAttempts: config.migration.deltaAttempts,
      pollMinSeconds: config.migration.participantPollMinSeconds,
      pollMaxSeconds: config.migration.participantPollMaxSeconds,
      retryAttempts: config.migration.retryAttempts,
    };
    const whole = worstCaseAttemptActions(shape);
    expect(whole).toBeGreaterThan(worstCaseCopyActions(shape) + ATTEMPT_STEP_ACTIONS);
    expect(attemptActionsBound(config)).toBe(whole);
    expect(whole).toBeLessThanOrEqual(100_000);
  });

  test('negative control: a config whose copies fit but whose window waits do not is refused (the copies alone passed it)', () => {
    const env = {
      ROUTELOCK_PROFILE: 'dev',
      ROUTELOCK_PRELOCK_MAX_SECONDS: '1000000',
      ROUTELOCK_HARD_DELETE_LEASE_SECONDS: '120',
    };
    expect(problemsOf(env)).toEqual([
      expect.stringMatching(/could record 1\d{5} orchestration actions in one attempt/),
    ]);
  });

  test('a longer poll cap or a shorter pre-lock cap lets them fit', () => {
    const six = { ROUTELOCK_PARTICIPANTS: participants(6) };
    expect(() => parseConfig({ ...six, ROUTELOCK_PARTICIPANT_POLL_MAX_SECONDS: '60' })).not.toThrow();
    expect(() => parseConfig({ ...six, ROUTELOCK_PRELOCK_MAX_SECONDS: '86400' })).not.toThrow();
  });
});
