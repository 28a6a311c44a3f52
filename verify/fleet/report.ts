import type { MigrationRecord } from '../../shared/migration/records';
import { terminalStates } from '../../shared/migration/types';
import { CAUGHT_BY_VERIFICATION, controlCaught, controlCaughtBy } from './controls';
import { type Fleet, violation } from './state';
import type { FleetResult, FleetStats } from './types';
import { CRASH_STEPS } from './world';

/** The end state, before the data is checked: every migration's outcome. */
export function judgeOutcomes(f: Fleet, virtualHours: number): void {
  const { stats } = f;
  stats.virtualHours = virtualHours;
  const records = [...f.state.recent(1_000_000), ...f.rivalState.recent(1_000_000)];
  for (const record of records) {
    const outcome = record.status.status;
    stats.outcomes[outcome] = (stats.outcomes[outcome] ?? 0) + 1;
    if (outcome === 'Failed' || outcome === 'Conflict') {
      const reason = `${record.migrationId.startsWith('x') ? 'rival ' : ''}${outcome}: ${(record.status.error ?? '').replace(/\d[\d:.TZ-]*/g, 'N').slice(0, 90)}`;
      stats.reasons[reason] = (stats.reasons[reason] ?? 0) + 1;
    }
    if (!terminalStates.has(outcome) && !f.options.stopAtFirstViolation)
      violation(f, record.input.resourceId, `${record.migrationId} ended ${outcome}`, 'lifecycle');
    if (!record.migrationId.startsWith('x')) countAttempts(f, record);
  }
  stats.migrations = records.length;
}

/**
 * First-attempt success and success after retry (the paper's figures). A Failed migration must have
 * made all its attempts, unless its last failure was final (attemptVerdict: a route deleted under it):
 * one that stopped early for a transient reason is a lifecycle violation.
 */
function countAttempts(f: Fleet, record: MigrationRecord): void {
  const a = f.stats.attempts;
  const made = record.status.attempts?.length ?? 1;
  const allowed = record.input.settings.migrationAttempts ?? 1;
  a.max = Math.max(a.max, made);
  const outcome = record.status.status;
  if (outcome === 'Completed' || outcome === 'NoOp') {
    if (made > 1) a.afterRetry += 1;
    else a.firstAttempt += 1;
  } else if (outcome === 'Failed') {
    if (made >= allowed) a.failedAfterAll += 1;
    else {
      a.failedEarly += 1;
      const reason = record.status.error ?? '';
      if (/no room in the history|could not see attempt/.test(reason) || !finalFailure(reason))
        violation(
          f,
          record.input.resourceId,
          `${record.migrationId} Failed after ${made} of ${allowed} attempts: ${reason}`,
          'lifecycle',
        );
    }
  }
}

/** A failure no further attempt would change: the route gone, or refused for good. */
const finalFailure = (reason: string): boolean =>
  /NotFound|RegionNotAllowed|UnsafeConfiguration|BadRequest/.test(reason);

/** The counts kept by the stores, the orchestrator, the participants and the client tiers. */
export function countEnd(f: Fleet): void {
  const { stats } = f;
  stats.storeCalls = f.store.calls;
  stats.crashSteps = f.crashedAt.size;
  const lengths = [...f.journalLength.values()].sort((a, b) => a - b);
  stats.journalSteps = { median: lengths[Math.floor(lengths.length / 2)] ?? 0, max: lengths.at(-1) ?? 0 };
  stats.copies = f.participants.copies;
  countVerifications(f);
  for (const service of f.services.values()) {
    stats.clientTier.requests += service.client.requests;
    stats.clientTier.maxAgeSeconds = Math.max(stats.clientTier.maxAgeSeconds, service.client.maxAgeSeconds);
  }
}

/**
 * Verification (docs/design.md §6.5): what the participants answered, and the verify rounds with a mismatch
 * in the migrations' statuses: each one a swap the workflow refused (it swaps only after a round that
 * matched).
 */
function countVerifications(f: Fleet): void {
  const p = f.participants;
  let swapsRefused = 0;
  for (const record of [...f.state.recent(1_000_000), ...f.rivalState.recent(1_000_000)]) {
    const rounds = new Set<string>();
    for (const v of record.status.verifications ?? [])
      if (v.outcome === 'mismatch') rounds.add(`${v.migrationAttempt}/${v.deltaAttempt}`);
    swapsRefused += rounds.size;
  }
  f.stats.verification = {
    run: p.verifications,
    mismatches: p.mismatches,
    swapsRefused,
    itemsDropped: p.itemsDropped,
  };
}

/** The scenario row: a control is caught by the kind of violation its bug must cause, not by any failure. */
export function fleetResult(f: Fleet): FleetResult {
  const { control, options, stats, violations } = f;
  const caught = control === 'none' ? undefined : controlCaught(control, violations, stats);
  const first = violations.find((v) => v.kind === 'harness') ?? violations[0];
  const firstResource = first?.text.split(' ')[0] ?? '';
  return {
    scenario: options.campaign
      ? control === 'none'
        ? `fleet campaign: ${options.faultRate * 100} % store faults, runner crashes`
        : `control (campaign): ${control}`
      : control === 'none'
        ? `fleet: ${options.faultRate * 100} % store faults, orchestrator crashes`
        : `control (fleet): ${control}`,
    runs: stats.migrations,
    violations: violations.length,
    seed: options.seed,
    ...(caught === undefined ? {} : { caught }),
    ...(first
      ? {
          counterexample: `${violations.length} violation(s); first: ${first.text}\n    events of ${firstResource}:\n      ${(f.trail.get(firstResource) ?? []).join('\n      ')}`,
        }
      : {}),
    ...(control === 'none'
      ? { summary: summarize(stats) }
      : controlCaughtBy[control] === CAUGHT_BY_VERIFICATION
        ? { summary: verificationLine(stats) }
        : {}),
    stats,
  };
}

const n = (value: number) => value.toLocaleString('en-US');
const counts = (record: Record<string, number>) =>
  Object.entries(record)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${n(v)}`)
    .join(', ');

const verificationLine = ({ verification: v }: FleetStats): string =>
  `verification: ${n(v.run)} verify calls answered, ${n(v.mismatches)} mismatches found, ` +
  `${n(v.swapsRefused)} swaps refused` +
  (v.itemsDropped > 0 ? `; ${n(v.itemsDropped)} items dropped by a delta` : '');

function summarize(s: FleetStats): string {
  const f = s.faults;
  const injected =
    f.throttled + f.unavailable + f.readTimeout + f.writeTimeoutLost + f.writeTimeoutCommitted + f.conflict;
  const u = s.userOps;
  const lines = [
    `${n(s.migrations)} migrations (${counts(s.outcomes)}) in ${s.virtualHours.toFixed(1)} virtual hours; ${n(s.copies)} participant copies`,
    `attempts (the orchestrator's own migrations): ${n(s.attempts.firstAttempt)} succeeded (Completed or NoOp) on the first attempt, ` +
      `${n(s.attempts.afterRetry)} after a retry with a fresh lock; ${n(s.attempts.failedAfterAll)} Failed after all attempts, ` +
      `${n(s.attempts.failedEarly)} Failed earlier for a final reason; at most ${s.attempts.max} attempts`,
    `store: ${n(s.storeCalls)} calls, ${n(injected)} faults injected (${((100 * injected) / s.storeCalls).toFixed(1)} %): ` +
      `429 ${n(f.throttled)}, 503 ${n(f.unavailable)}, read timeouts ${n(f.readTimeout)}, write timeouts ` +
      `${n(f.writeTimeoutLost + f.writeTimeoutCommitted)} (${n(f.writeTimeoutCommitted)} of them committed), 412 ${n(f.conflict)}`,
    `write-region failovers right after a swap: ${n(s.failovers?.count ?? 0)} (${n(s.failovers?.swapsLost ?? 0)} swaps lost, each noticed on a replica and re-driven)`,
    `orchestrator: ${n(s.crashes)} process crashes, each right after the planned journal position (1–${CRASH_STEPS}) of ` +
      `one migration — ${s.crashSteps} distinct positions hit (a migration journals ${s.journalSteps.median} steps at the ` +
      `median, ${s.journalSteps.max} at most); migrations in flight at a crash, by phase: ` +
      `${counts(s.crashPhases)}; ${n(s.longOutages)} outages longer than the write lease; ${n(s.boundaryRestarts)} restarts ` +
      `timed to around the end of a phase lease, ${n(s.stallFors)} stalls (timers held until around the end of a write lease)`,
    `users: ${n(u.reads)} reads, ${n(u.writes)} writes, ${n(u.deletes)} deletes (${n(u.tombstoned)} tombstoned), ` +
      `${n(u.refused)} refused (423), ${n(u.redirected)} redirected, ${n(u.unavailable)} store-unavailable; ` +
      `every write and delete lands 0.5–4.5 s after its decision: ${n(u.landedUnderLock)} landed under a lock ` +
      `that committed meanwhile; ${n(u.raced)} requests raced a commit while resolving their route; ` +
      `${n(u.noRoute)} found no route (deleted for a moment)`,
    `coalescing (hot resources): ${n(u.bursts)} slow write-region reads with writes arriving during them; ` +
      `${n(u.joined)} requests joined a slow read in flight (judged as it began), ${n(u.gaveUp)} of them ` +
      `gave up, their in-flight budget spent before it answered`,
    verificationLine(s),
    `accounts: ${n(s.accountMoves.started)} migrations between two accounts of one region started, ` +
      `${n(s.accountMoves.swapped)} swapped`,
    `route DELETE after a swap: ${n(s.routeDeletes.attempts)} attempts, ${n(s.routeDeletes.refusedConvergencePending)} ` +
      `refused 409 ConvergencePending, ${n(s.routeDeletes.refusedLocked)} refused 423 Locked, ` +
      `${n(s.routeDeletes.deleted)} deleted and ${n(s.routeDeletes.recreated)} re-created at the same location`,
    `client tier (each service's RoutingClient behind its edge tier, over HTTP): ${n(s.clientTier.decisions)} ` +
      `writes and deletes decided on its views, ${n(s.clientTier.reads)} reads, ${n(s.clientTier.redirects)} ` +
      `redirects; ${n(s.clientTier.requests)} requests reached the edge (the largest Age it sent: ` +
      `${n(s.clientTier.maxAgeSeconds)} s)`,
    `clocks: service offsets ${s.clockOffsetsMs.services.map((o) => `${o >= 0 ? '+' : ''}${o}`).join(', ')} ms; ` +
      `${n(s.clockOffsetsMs.orchestrators.count)} orchestrator instances, offsets ` +
      `${s.clockOffsetsMs.orchestrators.min} … ${s.clockOffsetsMs.orchestrators.max} ms`,
  ];
  const a = s.announced;
  const r = s.writeRegionReads;
  lines.push(
    `announced locks: ${n(a.migrations)} migrations started with them, ${n(a.legacy)} legacy; ` +
      `${n(a.serviceRestarts)} service restarts (every copy forgotten: first sight mid-migration); ` +
      `request-path write-region reads: ${n(r.inWindow)} in a write window, outside it ${n(r.legacyLock)} ` +
      `under legacy locks, ${n(r.oldReader)} by the old-version service, ${n(r.afterWindow)} within R after a ` +
      `lock or window left the write region, ${n(r.deadWindow)} of a dead write lock or window, ` +
      `${n(r.noLock)} of a route with no lock, ${n(r.unexplained)} of an announced lock unexplained`,
  );
  const c = s.campaign;
  if (c)
    lines.push(
      `campaign: ${c.status}, members ${counts(c.members)}; maxConcurrent ${c.maxConcurrent}, at most ${c.peakRunning} ` +
        `of its migrations running at once; startsPerMinute ${c.startsPerMinute ?? 'none'}, at most ` +
        `${c.peakStartsInWindow} starts in a window; ${n(c.starts)} starts, ${n(c.ticks)} ticks, ${n(c.crashes)} ` +
        `process deaths at a campaign store call, ${n(c.faults)} campaign store faults, ${n(c.rivalStarts)} rival starts`,
    );
  if (Object.keys(s.reasons).length > 0) lines.push(`not completed: ${counts(s.reasons)}`);
  return lines.join('\n');
}
