import { fleet } from '../verify/fleet';
import { FLEET_TIMEOUT_MS } from './support/timing';

/**
 * Coalescing in the fleet simulation (docs/design.md §5.8), a small run of each: every
 * service router shares its reads with the configured join bound (production: 50 ms) while hot resources
 * being migrated get slow write-region reads with writes arriving during them. The negative control, a
 * join bound of twice the in-flight grace (which config refuses), must lose acknowledged writes.
 */
const small = { migrations: 20, concurrency: 10, resources: 15, faultRate: 0.2, seed: 20261201 };

test(
  'with the configured join bound: requests join slow reads, and nothing is violated',
  async () => {
    const result = await fleet(small);
    expect(result).toMatchObject({ runs: 20, violations: 0 });
    const u = result.stats.userOps;
    expect(u.bursts).toBeGreaterThan(0);
    // joined within 50 ms: some land (the read answered within their budget), some give up
    expect(u.joined).toBeGreaterThan(u.gaveUp);
    expect(u.gaveUp).toBeGreaterThan(0);
  },
  FLEET_TIMEOUT_MS,
);

test(
  'negative control: a join bound longer than the grace loses acknowledged writes (the data oracle)',
  async () => {
    const result = await fleet({ ...small, control: 'joinLongerThanGrace', stopAtFirstViolation: true });
    expect(result.caught).toBe(true);
    expect(result.counterexample).toMatch(/acknowledged write\(s\) missing|accepted during the write lock/);
  },
  FLEET_TIMEOUT_MS,
);
