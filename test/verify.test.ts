import { type FleetResult, fleet as runFleet } from '../verify/fleet';
import { FLEET_TIMEOUT_MS } from './support/timing';

// The protocol search at its quick size (1,000 racing-orchestrator runs, 3,150 interleavings, a
// 150-migration fleet, 500 + 500 HTTP fuzz requests, every negative control caught) runs after jest in
// `npm test` as `npm run verify -- --quick`, which exits non-zero on a violation or a control not caught.

/**
 * Verification before the swap (docs/design.md §6.5) in the fleet, its two controls alone (a few seconds
 * each): a delta that drops an item now and then. Verified, every such delta is caught before its swap (no
 * data violation at all, mismatches found, swaps refused); unverified (404), the data oracle sees the loss.
 */
describe('a participant whose delta drops an item', () => {
  const run = (control: 'deltaDropsItem' | 'deltaDropsItemUnverified') =>
    runFleet({
      migrations: 150,
      concurrency: 20,
      resources: 30,
      faultRate: 0.2,
      seed: 20261130,
      control,
      stopAtFirstViolation: true,
    });

  test(
    'verified: caught by verification, no swap without the item, nothing lost',
    async () => {
      const result: FleetResult = await run('deltaDropsItem');
      const v = result.stats.verification;
      expect({ violations: result.violations, counterexample: result.counterexample }).toEqual({
        violations: 0,
        counterexample: undefined,
      });
      expect(v.itemsDropped).toBeGreaterThan(0);
      expect(v.mismatches).toBeGreaterThan(0);
      expect(v.swapsRefused).toBeGreaterThan(0);
      // a swap refused is a mismatch the participant answered, never one it did not
      expect(v.swapsRefused).toBeLessThanOrEqual(v.mismatches);
      expect(result.caught).toBe(true);
    },
    FLEET_TIMEOUT_MS,
  );

  test(
    'unverified (404 to verify): the swap goes ahead and the data oracle catches the lost write (or the lost tombstone)',
    async () => {
      const result = await run('deltaDropsItemUnverified');
      expect(result.stats.verification).toMatchObject({ run: 0, mismatches: 0 });
      expect(result.stats.verification.itemsDropped).toBeGreaterThan(0);
      expect(result.caught).toBe(true);
      expect(result.counterexample).toMatch(/acknowledged write\(s\) missing|deleted item\(s\) back/);
    },
    FLEET_TIMEOUT_MS,
  );
});
