import { runDrill } from '../drill/drill';

/**
 * The drill at a small size: migrations under user traffic, zero violations; and its negative control,
 * a message store that ignores the write lock, which the checks must catch.
 */

test('a small drill: every migration completes under traffic with zero violations', async () => {
  const summary = await runDrill({ resources: 8, migrations: 4, rate: 40, duration: 6 });
  expect(summary.violations).toEqual([]);
  expect(summary.migrations).toMatchObject({ requested: 4, completed: 4, failed: 0, running: 0 });
  expect(summary.writeLockSeconds.count).toBe(4);
  expect(summary.operations.writes).toBeGreaterThan(20);
}, 90_000);

test('negative control: a message store that ignores the write lock makes the drill report a violation', async () => {
  // Heavier write traffic on few conversations, so writes land inside the write locks.
  const summary = await runDrill({
    resources: 3,
    migrations: 3,
    rate: 120,
    duration: 6,
    ignoreWriteLock: true,
  });
  expect(
    summary.violations.some(
      (v) => v.startsWith('write accepted at the source after the write lock') || v.startsWith('lost write'),
    ),
  ).toBe(true);
}, 90_000);
