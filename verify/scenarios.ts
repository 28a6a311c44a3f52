import fc from 'fast-check';
import { type Bug } from '../testkit/plantedBugs';
import { ACTORS, type Command, runCommands } from './model';

/** The verification scenarios: random interleavings (fast-check), exhaustive small scope, negative controls. */

const actor = fc.constantFrom(...ACTORS);
const single: fc.Arbitrary<Command> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('prelock' as const), actor, replay: fc.boolean() }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('escalate' as const),
      actor,
      phase: fc.constantFrom('hardDelete' as const, 'write' as const),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('renew' as const),
      actor,
      phase: fc.constantFrom(undefined, 'prelock' as const, 'hardDelete' as const, 'write' as const),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('swap' as const), actor, staleIfMatch: fc.boolean() }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('release' as const), actor, write: fc.boolean() }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('tick' as const),
      boundary: fc.constantFrom(
        'startsAt' as const,
        'hardDelete' as const,
        'write' as const,
        'parent' as const,
        'max' as const,
        'next' as const,
      ),
      offsetMs: fc.constantFrom(-1 as const, 0 as const, 1 as const),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('crash' as const), actor }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'stranger' as const }) },
);
export const commandArbitrary: fc.Arbitrary<Command> = fc.oneof(
  { weight: 5, arbitrary: single },
  {
    weight: 2,
    arbitrary: fc
      .array(
        single.filter((c) => c.kind !== 'tick' && c.kind !== 'stranger'),
        { minLength: 2, maxLength: 3 },
      )
      .map((commands) => ({ kind: 'race' as const, commands })),
  },
);

export interface ScenarioResult {
  scenario: string;
  runs: number;
  violations: number;
  seed: number;
  /** For negative controls: whether the planted bug was caught. */
  caught?: boolean;
  counterexample?: string;
  /** Figures worth printing under the table (the fleet's migrations, faults and crashes). */
  summary?: string;
}

/** fast-check over command sequences, store calls interleaved by its scheduler. */
export async function interleavings(runs: number, seed: number, bug: Bug = 'none'): Promise<ScenarioResult> {
  let last: { violations: string[]; trace: string[] } | undefined;
  const details = await fc.check(
    fc.asyncProperty(
      fc.scheduler(),
      fc.array(commandArbitrary, { minLength: 4, maxLength: 30 }),
      async (scheduler, commands) => {
        const result = await runCommands(commands, { bug, interleaver: scheduler });
        // the last failing run fast-check tries is the shortest it found
        if (result.violations.length > 0) last = result;
        return result.violations.length === 0;
      },
    ),
    { numRuns: runs, seed },
  );
  const scenario = bug === 'none' ? 'interleavings (fast-check, scheduler)' : `control: ${bug}`;
  return {
    scenario,
    runs: details.numRuns,
    violations: details.failed ? 1 : 0,
    seed,
    ...(bug === 'none' ? {} : { caught: details.failed }),
    ...(details.failed && last
      ? { counterexample: `${last.violations.join('; ')}\n    ${last.trace.join('\n    ')}` }
      : {}),
  };
}

/** Every interleaving of two orchestrators' whole migrations and a few clock jumps to the next boundary. */
export async function exhaustive(ticks: number, bug: Bug = 'none'): Promise<ScenarioResult> {
  const sequence = (who: 'A' | 'B'): Command[] => [
    { kind: 'prelock', actor: who, replay: false },
    { kind: 'escalate', actor: who, phase: 'hardDelete' },
    { kind: 'escalate', actor: who, phase: 'write' },
    { kind: 'swap', actor: who, staleIfMatch: false },
  ];
  const a = sequence('A');
  const b = sequence('B');
  const tick: Command = { kind: 'tick', boundary: 'next', offsetMs: 0 };
  let runs = 0;
  let violations = 0;
  let counterexample: string | undefined;
  const walk = async (i: number, j: number, k: number, prefix: Command[]): Promise<void> => {
    if (i === a.length && j === b.length && k === ticks) {
      runs += 1;
      const result = await runCommands(prefix, { bug });
      if (result.violations.length > 0) {
        violations += 1;
        counterexample ??= `${result.violations.join('; ')}\n    ${result.trace.join('\n    ')}`;
      }
      return;
    }
    if (i < a.length) await walk(i + 1, j, k, [...prefix, a[i] as Command]);
    if (j < b.length) await walk(i, j + 1, k, [...prefix, b[j] as Command]);
    if (k < ticks) await walk(i, j, k + 1, [...prefix, tick]);
  };
  await walk(0, 0, 0, []);
  return {
    scenario:
      bug === 'none' ? `exhaustive: 2 orchestrators × ${ticks} clock jumps` : `control (exhaustive): ${bug}`,
    runs,
    violations,
    seed: 0,
    ...(bug === 'none' ? {} : { caught: violations > 0 }),
    ...(counterexample ? { counterexample } : {}),
  };
}
