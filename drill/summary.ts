import type { DrillSummary } from './drill';
import { formatMs } from './writeLockHold';

/** The drill's summary as a person reads it (pure: what `npm run drill` prints after its progress bar). */

/** How the holds ended, in words: "12 by a swap, 1 released without a swap (downgrade)". */
export function endedByLine(endedBy: Record<string, number>): string {
  const words: Record<string, (n: number) => string> = {
    swap: (n) => `${n} by a swap`,
    downgrade: (n) => `${n} released without a swap (downgrade)`,
  };
  const parts = Object.entries(endedBy)
    .sort(([a], [b]) => (a === 'swap' ? -1 : b === 'swap' ? 1 : a.localeCompare(b)))
    .map(([op, n]) => (words[op] ?? ((k: number) => `${k} by ${op}`))(n));
  return parts.length === 0 ? 'none ended' : `ended ${parts.join(', ')}`;
}

/** The verification step in one line: its rounds in order, and how the migration ended. */
const stepLine = (s: NonNullable<DrillSummary['verificationStep']>): string =>
  `verification step (${s.resourceId}: its delta dropped ${s.itemsDropped} item): ` +
  (s.rounds
    .map((r) => `delta ${r.deltaAttempt} ${r.outcome}${r.detail ? ` (${r.detail})` : ''}`)
    .join(' → ') || 'no verify round') +
  ` → ${s.status} after ${s.deltaAttempts} delta copies · ${s.nothingLost ? 'nothing lost' : 'DATA LOST'}`;

export function formatSummary(summary: DrillSummary): string {
  const w = summary.writeLockSeconds;
  const h = summary.writeLockHold;
  const f = (n: number | null) => (n === null ? '—' : `${n.toFixed(2)} s`);
  const holds = (n: number) => `${n} write-lock ${n === 1 ? 'hold' : 'holds'}`;
  return [
    '',
    '',
    `migrations: ${summary.migrations.completed} completed, ${summary.migrations.failed} failed, ${summary.migrations.conflict} conflict, ${summary.migrations.noop} no-op, ${summary.migrations.running} still running (of ${summary.migrations.requested})`,
    // Both lines count holds: every time a route entered the write lock, whether a swap or a release ended it.
    `write lock held: p50 ${f(w.p50)} · p75 ${f(w.p75)} · p99 ${f(w.p99)} · max ${f(w.max)} (${holds(w.count)}, lock telemetry)`,
    `  ${holds(h.holdMs.count)} on the routes' commits, ${endedByLine(h.endedBy)}`,
    `  hold − participant work: ${formatMs(h.overheadMs)} · hold ${formatMs(h.holdMs)} · work ${formatMs(h.workMs)}`,
    `  where: before the first work ${formatMs(h.beforeWorkMs)} · between works ${formatMs(h.betweenWorkMs)} · after the last ${formatMs(h.afterWorkMs)}`,
    `user ops: ${summary.operations.reads} reads, ${summary.operations.writes} writes, ${summary.operations.deletes} deletes · ${summary.operations.refusals} refusals (423), ${summary.operations.writesRefusedThenAccepted} writes refused then accepted · ${summary.operations.deletesTombstoned} deletes tombstoned`,
    `verification: ${summary.verification.run} verify calls answered, ${summary.verification.mismatches} mismatches found, ${summary.verification.swapsRefused} swaps refused, ${summary.verification.notVerified} not verified`,
    ...(summary.verificationStep ? [stepLine(summary.verificationStep)] : []),
    `end notices: ${summary.cleanUps.noticesDelivered} delivered · ${summary.cleanUps.sourcesDeleted} sources deleted after their clean-up time, ${summary.cleanUps.targetsDropped} partial targets dropped, ${summary.cleanUps.kept} kept (live) · ${summary.cleanUps.leftToJanitor} left to the janitor`,
    summary.violations.length === 0
      ? 'checks: every acknowledged write present at the target · no write accepted at the source during a write lock · no conversation in both regions after its swap · no partial cutover — 0 violations'
      : `VIOLATIONS (${summary.violations.length}):\n  ${summary.violations.slice(0, 50).join('\n  ')}`,
    '',
  ].join('\n');
}
