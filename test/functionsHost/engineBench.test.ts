import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { scratchDir } from '../support/scratch';

/**
 * Smoke test of `npm run bench:engine` (bench/durableEngine.ts) at its tiny size, so the benchmark cannot
 * rot: one migration counted per case from the real engine's History table, one timed on each host, a
 * burst of three on each. Speed is measured by the benchmark, never asserted here; what is asserted is
 * that it ran, every migration ended Completed, and that the engine's own count of a lock-only migration
 * is the replay harness's (bench/durableWorkItems.ts, the source of the sizing table), which holds there
 * because every step of a lock-only migration waits for the one before.
 */

interface Count {
  workItems: number;
  episodes: number;
  activities: number;
  timers: number;
  historyEvents: number;
}

interface Result {
  table: string;
  data: {
    counts: Record<
      'lockOnly' | 'twoParticipants',
      { engine: { statuses: string[]; counts: Count[] }; replay: Count & { status: string } }
    >;
    timing: { engine: number[]; embedded: number[]; statuses: string[] };
    bursts: { host: string; migrations: number; statuses: Record<string, number>; perSecond: number }[];
  };
}

test('the real-engine benchmark runs at its tiny size and counts what the engine recorded', async () => {
  const out = scratchDir('engine-bench-');
  const root = join(__dirname, '../..');
  const began = Date.now();
  await new Promise<void>((resolve, reject) =>
    execFile(
      process.execPath,
      [
        '-r',
        join(root, 'scripts/ts-register.js'),
        join(root, 'bench/durableEngine.ts'),
        '--tiny',
        '--out',
        out,
      ],
      { cwd: root, timeout: 400_000 },
      (error, _stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve()),
    ),
  );
  process.stdout.write(`functionsHost/engineBench: the tiny bench ran in ${Date.now() - began} ms\n`);
  const result = JSON.parse(readFileSync(join(out, 'durable-engine.json'), 'utf8')) as Result;
  const { lockOnly, twoParticipants } = result.data.counts;
  expect(lockOnly.engine.statuses).toEqual(['Completed']);
  expect(twoParticipants.engine.statuses).toEqual(['Completed']);
  const [engineCount] = lockOnly.engine.counts;
  expect({
    workItems: engineCount?.workItems,
    episodes: engineCount?.episodes,
    activities: engineCount?.activities,
    timers: engineCount?.timers,
  }).toEqual({
    workItems: lockOnly.replay.workItems,
    episodes: lockOnly.replay.episodes,
    activities: lockOnly.replay.activities,
    timers: lockOnly.replay.timers,
  });
  expect(engineCount?.historyEvents).toBeGreaterThan(engineCount?.workItems ?? 0);
  expect(twoParticipants.engine.counts[0]?.workItems).toBeGreaterThan(engineCount?.workItems ?? 0);
  expect(result.data.timing.statuses).toEqual(['Completed', 'Completed']);
  expect(result.data.bursts.map((b) => [b.host, b.statuses])).toEqual([
    ['engine', { Completed: 3 }],
    ['embedded', { Completed: 3 }],
  ]);
  expect(result.table).toContain('timers re-armed');
}, 420_000);
