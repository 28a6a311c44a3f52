import { percentileOf } from '../bench/lib';
import type { LocationDocument } from '../shared/core/lock/document';

/**
 * The write-lock hold minus the participant work inside it (docs/design.md §6.5), for the drill and
 * bench/writeLockHold.ts. Pure: the lock's commits and the participant's work intervals in, the
 * coordination overhead out. The hold is from the commit that escalates to write to the commit that
 * ends it (the swap, or the release of the write lock); the work is what the participant reports
 * (its copy runs and verify comparisons), clipped to the hold; what is left is routelock's
 * coordination: the activities, the participant calls' round trips, polling, the swap.
 */

/** One committed version of a route, as the store's change stream saw it. */
export interface LockObservation {
  resourceId: string;
  /** When the write committed (epoch ms). */
  at: number;
  /** Whether the route is under the write lock in this version. */
  writeLocked: boolean;
  /** The change that wrote it (escalate, renew, swap, downgrade, …). */
  op: string;
}

/** A route's version as an observation, stamped with its commit time. */
export function lockObservation(doc: LocationDocument, at: number): LockObservation {
  return {
    resourceId: doc.id,
    at,
    writeLocked: doc.lock?.phase === 'write',
    op: doc.lastChange?.op ?? 'unknown',
  };
}

export interface WriteLockHold {
  resourceId: string;
  from: number;
  to: number;
  /** The change that ended it: `swap`, `downgrade` (a release of the write lock), … */
  endedBy: string;
}

/** Each resource's write-lock holds, in the order they ended; one still held is left out. */
export function writeLockHolds(observations: readonly LockObservation[]): WriteLockHold[] {
  const open = new Map<string, number>();
  const holds: WriteLockHold[] = [];
  for (const o of observations) {
    const from = open.get(o.resourceId);
    if (o.writeLocked && from === undefined) open.set(o.resourceId, o.at);
    if (!o.writeLocked && from !== undefined) {
      open.delete(o.resourceId);
      holds.push({ resourceId: o.resourceId, from, to: o.at, endedBy: o.op });
    }
  }
  return holds;
}

/** A stretch of a participant's own work on a resource (epoch ms). */
export interface WorkInterval {
  resourceId: string;
  startedAt: number;
  endedAt: number;
}

export interface HoldOverhead extends WriteLockHold {
  holdMs: number;
  /** The participant's work inside the hold (overlapping work counted once). */
  workMs: number;
  /** holdMs − workMs: routelock's coordination. */
  overheadMs: number;
  /** Where the overhead sits: before the first work, between works, after the last. */
  beforeWorkMs: number;
  betweenWorkMs: number;
  afterWorkMs: number;
}

/** One hold's overhead: its work intervals clipped to it and merged. */
export function holdOverhead(hold: WriteLockHold, work: readonly WorkInterval[]): HoldOverhead {
  const clipped = work
    .filter((w) => w.resourceId === hold.resourceId)
    .map((w) => [Math.max(w.startedAt, hold.from), Math.min(w.endedAt, hold.to)] as const)
    .filter(([start, end]) => end > start || (end === start && start > hold.from && start < hold.to))
    .sort((a, b) => a[0] - b[0]);
  const merged: [number, number][] = [];
  for (const [start, end] of clipped) {
    const last = merged.at(-1);
    if (last && start <= last[1]) last[1] = Math.max(last[1], end);
    else merged.push([start, end]);
  }
  const holdMs = hold.to - hold.from;
  const workMs = merged.reduce((sum, [start, end]) => sum + (end - start), 0);
  const first = merged[0];
  const last = merged.at(-1);
  const beforeWorkMs = first ? first[0] - hold.from : holdMs;
  const afterWorkMs = last ? hold.to - last[1] : 0;
  return {
    ...hold,
    holdMs,
    workMs,
    overheadMs: holdMs - workMs,
    beforeWorkMs,
    betweenWorkMs: holdMs - workMs - beforeWorkMs - afterWorkMs,
    afterWorkMs,
  };
}

/** p50 / p99 / max (nearest rank) of a set of milliseconds; null figures when there are none. */
export interface MsDistribution {
  count: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}

export function msDistribution(values: readonly number[]): MsDistribution {
  if (values.length === 0) return { count: 0, p50: null, p99: null, max: null };
  const sorted = [...values].sort((a, b) => a - b);
  return {
    count: sorted.length,
    p50: percentileOf(sorted, 50),
    p99: percentileOf(sorted, 99),
    max: sorted.at(-1) as number,
  };
}

/** The figures a report shows: the hold, the work, the overhead and where it sits. */
export interface HoldReport {
  holdMs: MsDistribution;
  workMs: MsDistribution;
  overheadMs: MsDistribution;
  beforeWorkMs: MsDistribution;
  betweenWorkMs: MsDistribution;
  afterWorkMs: MsDistribution;
  /** How the holds ended (`swap`, `downgrade` …) and how many of each. */
  endedBy: Record<string, number>;
}

export function holdReport(holds: readonly HoldOverhead[]): HoldReport {
  const of = (pick: (h: HoldOverhead) => number) => msDistribution(holds.map(pick));
  const endedBy: Record<string, number> = {};
  for (const h of holds) endedBy[h.endedBy] = (endedBy[h.endedBy] ?? 0) + 1;
  return {
    holdMs: of((h) => h.holdMs),
    workMs: of((h) => h.workMs),
    overheadMs: of((h) => h.overheadMs),
    beforeWorkMs: of((h) => h.beforeWorkMs),
    betweenWorkMs: of((h) => h.betweenWorkMs),
    afterWorkMs: of((h) => h.afterWorkMs),
    endedBy,
  };
}

/** "p50 12 · p99 30 · max 31 ms" */
export function formatMs(d: MsDistribution): string {
  const f = (n: number | null) => (n === null ? '—' : String(Math.round(n)));
  return `p50 ${f(d.p50)} · p99 ${f(d.p99)} · max ${f(d.max)} ms`;
}

/** A step the runner performed for the resource (InProcessRunner.observeSteps), epoch ms. */
export interface TimedStep {
  resourceId: string;
  label: string;
  startedAt: number;
  endedAt: number;
}

/** Where a hold's time went, by step category (ms); the participant's work is taken out of the calls. */
export type HoldSteps = Record<HoldStepCategory, number>;

export const HOLD_STEP_CATEGORIES = [
  'escalate (after its commit)',
  'status writes',
  'lock renewals',
  'participant calls less work',
  'poll timers',
  'swap (to its commit)',
  'other steps',
  'between steps',
] as const;
export type HoldStepCategory = (typeof HOLD_STEP_CATEGORIES)[number];

function categoryOf(label: string): HoldStepCategory {
  if (label === 'activity:escalate') return 'escalate (after its commit)';
  if (label.startsWith('status:')) return 'status writes';
  if (label === 'activity:renew') return 'lock renewals';
  if (label.startsWith('race:') || label.startsWith('all:') || label === 'activity:callParticipant')
    return 'participant calls less work';
  if (label === 'timer') return 'poll timers';
  if (label === 'activity:swap') return 'swap (to its commit)';
  return 'other steps';
}

/**
 * A hold's time by the steps inside it (each clipped to the hold), less the participant's work that
 * ran meanwhile (in a call, or during a poll's timer: that timer's rest is the wait after the work
 * ended); the rest of the hold less the work is the runner's own time between steps (journal writes,
 * the workflow's generator). The categories add up to the hold less the work.
 */
export function holdSteps(
  hold: WriteLockHold,
  steps: readonly TimedStep[],
  work: readonly WorkInterval[],
): HoldSteps {
  const spent = Object.fromEntries(HOLD_STEP_CATEGORIES.map((c) => [c, 0])) as HoldSteps;
  const mine = work.filter((w) => w.resourceId === hold.resourceId);
  /** The work inside [start, end], overlaps counted once. */
  const workIn = (start: number, end: number) => holdOverhead({ ...hold, from: start, to: end }, mine).workMs;
  let stepsLessWork = 0;
  for (const step of steps) {
    if (step.resourceId !== hold.resourceId) continue;
    const start = Math.max(step.startedAt, hold.from);
    const end = Math.min(step.endedAt, hold.to);
    if (end <= start) continue;
    const ms = end - start - workIn(start, end);
    spent[categoryOf(step.label)] += ms;
    stepsLessWork += ms;
  }
  spent['between steps'] = hold.to - hold.from - workIn(hold.from, hold.to) - stepsLessWork;
  return spent;
}

/**
 * The control for the hold's tail (docs/design.md §6.5): the runner, the participant and the load all share
 * one thread, so a hold is as long as that thread's waits for a CPU inside it, on a machine others use too.
 * `cpuWaitMs`: how long the thread was runnable but not running between the hold's two commits (Linux
 * schedstat, read at each commit); null where the platform does not say.
 */
export interface ContendedHold extends HoldOverhead {
  cpuWaitMs: number | null;
}

export interface ContentionReport {
  /** The thread's wait for a CPU inside each hold. */
  cpuWaitMs: MsDistribution;
  /** Hold − work of the holds whose thread waited at most `quietWaitMs` for a CPU: the coordination's own. */
  quietOverheadMs: MsDistribution;
  quietWaitMs: number;
  /**
   * Hold − work − the CPU wait inside the hold, per hold: optimistic (a wait during the work is taken off
   * too), so only read beside the raw figure.
   */
  overheadLessWaitMs: MsDistribution;
  /** Holds whose hold − work passed `boundMs` (50), and how many waited for a CPU longer than the excess. */
  overBound: { boundMs: number; count: number; withinItLessTheWait: number };
}

export function contentionReport(
  holds: readonly ContendedHold[],
  quietWaitMs: number,
  boundMs = 50,
): ContentionReport {
  const known = holds.filter((h): h is ContendedHold & { cpuWaitMs: number } => h.cpuWaitMs !== null);
  const over = known.filter((h) => h.overheadMs > boundMs);
  return {
    overBound: {
      boundMs,
      count: over.length,
      withinItLessTheWait: over.filter((h) => h.overheadMs - h.cpuWaitMs <= boundMs).length,
    },
    cpuWaitMs: msDistribution(known.map((h) => h.cpuWaitMs)),
    quietOverheadMs: msDistribution(known.filter((h) => h.cpuWaitMs <= quietWaitMs).map((h) => h.overheadMs)),
    quietWaitMs,
    overheadLessWaitMs: msDistribution(known.map((h) => Math.max(0, h.overheadMs - h.cpuWaitMs))),
  };
}
