import type { Clock } from '../../shared/core/clock';
import { beforeEnd } from '../../shared/core/lock/state';
import { createActivities } from '../../shared/migration/activities';
import { InProcessRunner } from '../../shared/migration/inProcess';
import type { MigrationRecord } from '../../shared/migration/records';
import type { JournalEntry } from '../../shared/migration/store/ports/migrations';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import { seamedRouter } from '../../testkit/router';
import { killCampaignInstance, startCampaignInstance } from './campaign';
import { InstanceScheduler } from './faults';
import { participantHttp } from './participants';
import { controlActivities, controlRules } from './controls';
import { type Fleet, drawOffset, harnessError, note, truthOrNull, violation } from './state';
import { BOUNDARY_RESTART_SHARE, STALL_SHARE, between, pick } from './world';

/**
 * The orchestrator: its process dies after journal step (i mod 30) of the i-th migration it started,
 * and comes back after an outage; now and then it stalls. Each instance (a process start) has its own
 * clock: its runner and its router.
 */

/** Migration state that tells the harness each journal position written (where the process may die). */
export class CrashingState extends SqliteMigrationState {
  constructor(
    path: string,
    clock: Clock,
    private readonly journaled: (migrationId: string, position: number) => void,
  ) {
    super(path, clock);
  }
  override append(migrationId: string, key: string, entry: JournalEntry): void {
    super.append(migrationId, key, entry);
    this.journaled(migrationId, Number(key));
  }
}

/** After each journal step: the process dies right after the step planned for this migration. */
export function journaled(f: Fleet, migrationId: string, position: number): void {
  f.journalLength.set(migrationId, Math.max(f.journalLength.get(migrationId) ?? 0, position));
  if (f.crashPlan.get(migrationId) === position) {
    f.crashPlan.delete(migrationId);
    f.crashedAt.add(position);
    crash(f);
  }
}

/** A new orchestrator instance over `migrationState`, on a clock offset of its own. */
export function newRunner(f: Fleet, migrationState: SqliteMigrationState, prefix: string): InProcessRunner {
  const offsetMs = drawOffset(f);
  const o = f.stats.clockOffsetsMs.orchestrators;
  o.min = Math.min(o.min, offsetMs);
  o.max = Math.max(o.max, offsetMs);
  o.count += 1;
  const instanceClock = () => f.clock.now() + offsetMs;
  const rules = controlRules(f.control);
  const router = seamedRouter({
    store: f.store,
    timing: f.orchestratorTiming,
    clock: instanceClock,
    ...(rules ? { rules } : {}),
  });
  return new InProcessRunner({
    activities: controlActivities(
      f.control,
      createActivities(router, f.orchestratorTiming, { keyring: f.keyring, records: migrationState }),
    ),
    keyring: f.keyring,
    state: migrationState,
    scheduler: new InstanceScheduler(f.scheduler, offsetMs, () => stallFor(f, migrationState)),
    // Read at each start: the driver draws per migration whether it asks for announced locks.
    get settings() {
      return f.announceNext ? f.announcedSettings : f.settings;
    },
    http: (call) => participantHttp(f, call),
    newId: () => `${prefix}${++f.serial}`,
    log: (message, fields) => {
      if (message === 'migration runner failed')
        violation(f, String(fields.migrationId), `the runner failed: ${String(fields.error)}`, 'harness');
    },
  });
}

/**
 * Now and then an orchestrator instance stalls until around the end of a write lease one of its
 * migrations holds: the renewal due meanwhile lands at the boundary, where clocks that disagree matter.
 */
async function stallFor(f: Fleet, migrationState: SqliteMigrationState): Promise<number | undefined> {
  const { random, timing } = f;
  if (random() >= STALL_SHARE) return undefined;
  const now = f.clock.now();
  const ends: { id: string; end: number }[] = [];
  for (const record of migrationState.unfinished()) {
    const lock = (await truthOrNull(f, record.input.resourceId))?.lock;
    if (lock?.migrationId !== record.migrationId || lock.phase !== 'write' || !lock.writeExpiresAt) continue;
    const end = Date.parse(lock.writeExpiresAt);
    if (
      beforeEnd(lock.writeExpiresAt, now, timing.clockSkewSeconds) &&
      end <= now + timing.writeLeaseSeconds * 1000
    )
      ends.push({ id: record.input.resourceId, end });
  }
  if (ends.length === 0) return undefined;
  f.stats.stallFors += 1;
  const { id, end } = pick(random, ends);
  const until = Math.round(end + between(random, -2 * f.maxOffsetMs, f.maxOffsetMs));
  note(
    f,
    id,
    `the orchestrator stalls until ${new Date(until).toISOString()} (write lease ends ${new Date(end).toISOString()})`,
  );
  return until;
}

/**
 * The process dies (right after journaling the step, or at a campaign store call), then comes back
 * after an outage. A campaign's runner lives in the same process: it dies too.
 */
export function crash(f: Fleet): void {
  if (!f.runner) return;
  // Requests it had in flight still land (a dead process's writes can); its timers never fire.
  f.stopping.push(f.runner.stop());
  f.runner = null;
  killCampaignInstance(f);
  f.stats.crashes += 1;
  for (const record of f.state.unfinished()) {
    const phase = record.status.phase;
    f.stats.crashPhases[phase] = (f.stats.crashPhases[phase] ?? 0) + 1;
    note(f, record.input.resourceId, `orchestrator crashed (${record.migrationId} in ${phase})`);
  }
  const crashedAtMs = f.clock.now();
  const unfinished = f.state.unfinished();
  void restartAfterOutage(f, unfinished, crashedAtMs).catch(harnessError(f, 'fleet'));
}

async function restartAfterOutage(
  f: Fleet,
  unfinished: MigrationRecord[],
  crashedAtMs: number,
): Promise<void> {
  const { random, timing, maxOffsetMs } = f;
  const draw = random();
  // Sometimes the process comes back around the end of a phase lease of a migration in flight (from
  // the skew before it to half the skew after, on the lock's timestamps): where clocks that disagree
  // matter most.
  const boundary =
    draw >= 0.06 && draw < 0.06 + BOUNDARY_RESTART_SHARE
      ? await phaseEndNear(f, unfinished, crashedAtMs)
      : undefined;
  const outageMs =
    draw < 0.01
      ? (timing.hardDeleteLeaseSeconds + 3600) * 1000 // past every phase lease
      : draw < 0.06
        ? between(random, timing.writeLeaseSeconds, 3600) * 1000 // past the write lease
        : boundary !== undefined
          ? boundary - crashedAtMs + between(random, -2 * maxOffsetMs, maxOffsetMs)
          : between(random, 0, 120) * 1000;
  if (boundary !== undefined) f.stats.boundaryRestarts += 1;
  if (outageMs > timing.writeLeaseSeconds * 1000) f.stats.longOutages += 1;
  await f.scheduler.timer(crashedAtMs + Math.round(outageMs)).promise;
  if (f.done) return;
  f.runner = newRunner(f, f.state, 'm');
  f.runner.resumeAll();
  startCampaignInstance(f);
}

/**
 * The end of a write lease held by one of these migrations (else of a hard-delete lease), if within
 * the hour: where a late renewal or swap would land.
 */
async function phaseEndNear(f: Fleet, records: MigrationRecord[], from: number): Promise<number | undefined> {
  const ends: number[] = [];
  const writeEnds: number[] = [];
  for (const record of records) {
    const lock = (await truthOrNull(f, record.input.resourceId))?.lock;
    if (!lock || lock.migrationId !== record.migrationId) continue;
    const end =
      lock.phase === 'write'
        ? lock.writeExpiresAt
        : lock.phase === 'hardDelete'
          ? lock.hardDeleteExpiresAt
          : undefined;
    const endMs = end === undefined ? Number.NaN : Date.parse(end);
    if (end !== undefined && beforeEnd(end, from, f.timing.clockSkewSeconds) && endMs < from + 3600_000)
      (lock.phase === 'write' ? writeEnds : ends).push(endMs);
  }
  if (writeEnds.length > 0) return pick(f.random, writeEnds);
  return ends.length > 0 ? pick(f.random, ends) : undefined;
}
