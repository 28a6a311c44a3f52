import { type DrillSummary, runDrill } from './drill';
import { formatMs } from './writeLockHold';

/**
 * `npm run drill [-- --resources N --migrations N --rate N --duration S --json --no-verification-step
 * --without-verify --ignore-prefer-wait]`:
 * migrations under user traffic, then the checks. Exit 1 on any violation.
 */

const args = process.argv.slice(2);
const number = (name: string, fallback: number): number => {
  const i = args.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const value = Number(args[i + 1]);
  if (!Number.isFinite(value) || value <= 0) {
    process.stderr.write(`--${name} takes a positive number, got "${args[i + 1] ?? ''}"\n`);
    process.exit(2);
  }
  return value;
};
const json = args.includes('--json');
const port = args.includes('--port') ? number('port', 0) : 0;

const bar = (done: number, total: number, width = 28) => {
  const filled = Math.round((Math.min(done, total) / Math.max(1, total)) * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
};

/** The verification step in one line: its rounds in order, and how the migration ended. */
const stepLine = (s: NonNullable<DrillSummary['verificationStep']>): string =>
  `verification step (${s.resourceId}: its delta dropped ${s.itemsDropped} item): ` +
  (s.rounds
    .map((r) => `delta ${r.deltaAttempt} ${r.outcome}${r.detail ? ` (${r.detail})` : ''}`)
    .join(' → ') || 'no verify round') +
  ` → ${s.status} after ${s.deltaAttempts} delta copies · ${s.nothingLost ? 'nothing lost' : 'DATA LOST'}`;

/** Every write-lock hold (swaps and releases), less the message store's work inside it. */
const holdLine = (h: DrillSummary['writeLockHold']): string =>
  `write lock hold − participant work (${h.holdMs.count} holds: ${Object.entries(h.endedBy)
    .map(([k, v]) => `${v} ${k}`)
    .join(', ')}): ${formatMs(h.overheadMs)} · hold ${formatMs(h.holdMs)} · work ${formatMs(h.workMs)}\n` +
  `  where: before the first work ${formatMs(h.beforeWorkMs)} · between works ${formatMs(h.betweenWorkMs)} · after the last ${formatMs(h.afterWorkMs)}`;

async function main(): Promise<void> {
  const options = {
    resources: number('resources', 40),
    migrations: number('migrations', 12),
    rate: number('rate', 60),
    duration: number('duration', 20),
    ignoreWriteLock: args.includes('--ignore-write-lock'),
    verificationStep: !args.includes('--no-verification-step'),
    withoutVerify: args.includes('--without-verify'),
    honoursPreferWait: !args.includes('--ignore-prefer-wait'),
    ...(port ? { port } : {}),
  };
  const tty = process.stdout.isTTY && !json;
  const summary = await runDrill(
    {
      ...options,
      ...(json
        ? {}
        : {
            onProgress: (p) => {
              const done =
                (p.statuses.Completed ?? 0) +
                (p.statuses.Failed ?? 0) +
                (p.statuses.Conflict ?? 0) +
                (p.statuses.NoOp ?? 0);
              const phases =
                Object.entries(p.phases)
                  .map(([k, v]) => `${k} ${v}`)
                  .join(', ') || 'none in flight';
              const line = `${bar(done, options.migrations)} ${done}/${options.migrations} migrations done · in flight: ${phases} · ${p.operations} user ops · ${p.elapsedSeconds.toFixed(0)}s`;
              process.stdout.write(tty ? `\r${line.padEnd(120)}` : `${line}\n`);
            },
          }),
      log: (line) => process.stderr.write(`${line}\n`),
    },
    {
      onHost: (host) => {
        if (!json)
          process.stdout.write(
            `routelock drill: host ${host.url} (status page ${host.url}/api/status) · ${options.resources} conversations, ${options.migrations} migrations, ${options.rate} ops/s for ${options.duration} s\n`,
          );
      },
    },
  );
  if (json) {
    process.stdout.write(`${JSON.stringify(summary)}\n`);
  } else {
    const w = summary.writeLockSeconds;
    const f = (n: number | null) => (n === null ? '—' : `${n.toFixed(2)} s`);
    process.stdout.write(
      [
        '',
        '',
        `migrations: ${summary.migrations.completed} completed, ${summary.migrations.failed} failed, ${summary.migrations.conflict} conflict, ${summary.migrations.noop} no-op, ${summary.migrations.running} still running (of ${summary.migrations.requested})`,
        `write lock hold: p50 ${f(w.p50)} · p75 ${f(w.p75)} · p99 ${f(w.p99)} · max ${f(w.max)} (${w.count} swaps)`,
        holdLine(summary.writeLockHold),
        `user ops: ${summary.operations.reads} reads, ${summary.operations.writes} writes, ${summary.operations.deletes} deletes · ${summary.operations.refusals} refusals (423), ${summary.operations.writesRefusedThenAccepted} writes refused then accepted · ${summary.operations.deletesTombstoned} deletes tombstoned`,
        `verification: ${summary.verification.run} verify calls answered, ${summary.verification.mismatches} mismatches found, ${summary.verification.swapsRefused} swaps refused, ${summary.verification.notVerified} not verified`,
        ...(summary.verificationStep ? [stepLine(summary.verificationStep)] : []),
        `end notices: ${summary.cleanUps.noticesDelivered} delivered · ${summary.cleanUps.sourcesDeleted} sources deleted after their clean-up time, ${summary.cleanUps.targetsDropped} partial targets dropped, ${summary.cleanUps.kept} kept (live) · ${summary.cleanUps.leftToJanitor} left to the janitor`,
        summary.violations.length === 0
          ? 'checks: every acknowledged write present at the target · no write accepted at the source after its write lock · no conversation in both regions after its swap · no partial cutover — 0 violations'
          : `VIOLATIONS (${summary.violations.length}):\n  ${summary.violations.slice(0, 50).join('\n  ')}`,
        '',
      ].join('\n'),
    );
  }
  process.exit(summary.violations.length === 0 ? 0 : 1);
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
