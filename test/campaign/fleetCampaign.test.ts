import { type FleetOptions, fleet } from '../../verify/fleet';
import { FLEET_TIMEOUT_MS } from '../support/timing';

/**
 * The campaign slice of `npm run verify`: one campaign over the fleet's 16 resources
 * (maxConcurrent 8, startsPerMinute 2) on virtual time, under 20 % store faults on the routing store
 * and on the campaign store, the process dying after a journal step of each migration and at campaign
 * store calls (mid-tick), and a rival deployment. Every oracle of the fleet holds, the limits are never
 * exceeded, every member ends; each planted bug in the start rule is caught.
 */
const options: FleetOptions = {
  migrations: 0,
  concurrency: 0,
  resources: 16,
  faultRate: 0.2,
  seed: 20261201,
  campaign: { maxConcurrent: 8, startsPerMinute: 2 },
};

test(
  'a campaign under 20 % store faults and runner crashes: no violation, its limits held, every member ended',
  async () => {
    const result = await fleet(options);
    expect({ violations: result.violations, counterexample: result.counterexample }).toEqual({
      violations: 0,
      counterexample: undefined,
    });
    const c = result.stats.campaign;
    expect(c).toMatchObject({ status: 'Completed', maxConcurrent: 8, startsPerMinute: 2 });
    // The limits were reached (so the check could have seen them exceeded) and never exceeded.
    expect(c?.peakRunning).toBe(8);
    expect(c?.peakStartsInWindow).toBe(2);
    const members = c?.members ?? {};
    expect(Object.values(members).reduce((a, b) => a + b, 0)).toBe(16);
    expect(members.pending ?? 0).toBe(0);
    expect(members.running ?? 0).toBe(0);
    // It did meet what it claims to survive.
    expect(c?.crashes).toBeGreaterThan(0);
    expect(c?.faults).toBeGreaterThan(0);
    expect(result.stats.crashes).toBeGreaterThan(0);
  },
  FLEET_TIMEOUT_MS,
);

test.each(['campaignIgnoresMaxConcurrent', 'campaignIgnoresStartsPerMinute'] as const)(
  'negative control: a start rule with %s is caught',
  async (control) => {
    const result = await fleet({ ...options, control, stopAtFirstViolation: true });
    expect(result).toMatchObject({ caught: true });
  },
  FLEET_TIMEOUT_MS,
);
