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
 * that drop swaps) — each caught.
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
  ]);
  // Long by design (the whole protocol search): 105–115 s on a warm run here, 381 s on a fresh clone's cold
  // transform cache on 2 cores; the bound is for a hang, not a speed check (speed lives in `npm run bench`).
}, 1_200_000);
