import { type FleetResult, fleet as runFleet } from '../verify/fleet';
import { report, verify } from '../verify/run';

/**
 * The smaller slice of `npm run verify` inside `npm test`: 1,000 fast-check runs of racing orchestrators
 * with every invariant checked, every interleaving of two whole migrations with two clock jumps, 150
 * migrations of the fleet simulation under 20 % store faults, and the negative controls (a skipped token
 * check, unconditional writes, a swap in two writes; a convergence delay shorter than the edge cache's
 * TTL, a router that does not read through, copies with no in-flight grace, a region-only `decide()`,
 * rules without clock-skew margins on skewed clocks, a route DELETE that ignores the retired-source
 * window, an edge tier that sends a client in series the old headers: full max-age, Age 0; participants
 * cleaning up the source on a `completed` notice sent without the swap's confirmation, under failovers
 * that drop swaps; coalesced reads joined for longer than the in-flight grace) — each caught.
 */
test('the lock protocol holds under racing orchestrators, and every planted bug is caught', async () => {
  const results = await verify({ quick: true, seed: 20261130, soakSeconds: 0 });
  const { text, ok } = report(results);
  expect({ ok, text }).toEqual({ ok: true, text: expect.any(String) });
  expect(results[0]).toMatchObject({ runs: 1000, violations: 0 });
  expect(results[1]).toMatchObject({ runs: 3150, violations: 0 });
  expect(results.filter((r) => r.caught !== undefined).every((r) => r.caught === true)).toBe(true);
  expect(results.find((r) => r.scenario === 'bad input over HTTP (fuzz)')).toMatchObject({
    runs: 500,
    violations: 0,
  });
  const fleet = results.find((r) => r.scenario.startsWith('fleet:'));
  expect(fleet).toMatchObject({ runs: 150, violations: 0 });
  expect(results.filter((r) => r.scenario.startsWith('control (fleet)')).map((r) => r.caught)).toEqual([
    true,
    true,
    true,
    true,
    true,
    true,
    true,
    true,
    true,
    true, // cleanUpAtOnce (issue 19 §4)
    true, // joinLongerThanGrace (issue 20 §3)
  ]);
  // Verification on (issue 19 §1): the participants answer it. A mismatch is possible without a bug (a
  // write lock that lapsed in an outage before its verify: writes resumed), never a refusal without one.
  const verification = (fleet as FleetResult).stats.verification;
  expect(verification).toMatchObject({ itemsDropped: 0 });
  expect(verification.run).toBeGreaterThan(0);
  expect(verification.swapsRefused).toBeLessThanOrEqual(verification.mismatches);
  // Long by design (the whole protocol search): 180–225 s on its own here; run late in one process, on a
  // heap grown by the suites before it, 1,156 s (test/support/sequencer.js runs it first). The bound is
  // for a hang, not a speed check (speed lives in `npm run bench`).
}, 2_400_000);

/**
 * Verification before the swap (issue 19 §1) in the fleet, its two controls alone (a few seconds each):
 * a delta that drops an item now and then. Verified, every such delta is caught before its swap (no
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

  test('verified: caught by verification, no swap without the item, nothing lost', async () => {
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
  }, 300_000);

  test('unverified (404 to verify): the swap goes ahead and the data oracle catches the lost write (or the lost tombstone)', async () => {
    const result = await run('deltaDropsItemUnverified');
    expect(result.stats.verification).toMatchObject({ run: 0, mismatches: 0 });
    expect(result.stats.verification.itemsDropped).toBeGreaterThan(0);
    expect(result.caught).toBe(true);
    expect(result.counterexample).toMatch(/acknowledged write\(s\) missing|deleted item\(s\) back/);
  }, 300_000);
});
