import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import {
  type ContendedHold,
  HOLD_STEP_CATEGORIES,
  type HoldOverhead,
  type HoldReport,
  type HoldSteps,
  type LockObservation,
  type MsDistribution,
  type TimedStep,
  contentionReport,
  holdOverhead,
  holdReport,
  holdSteps,
  lockObservation,
  msDistribution,
  writeLockHolds,
} from '../drill/writeLockHold';
import { MessageStore } from '../examples/message-store/service';
import { MessageStore as HandWrittenMessageStore } from './handWritten/messageStore';
import { startLocalHost } from '../local/host';
import type { LocationDocument, StoredDocument } from '../shared/core/lock/document';
import type {
  ListOptions,
  ListPage,
  LocationStore,
  PriorityOption,
  ReadOptions,
} from '../shared/core/store/ports/locations';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import { table } from './lib';

/**
 * The write-lock hold minus the participant work inside it (docs/design.md §6.5), on the in-process runner:
 * the embedded host (its InProcessRunner, SQLite routes, real time) migrating conversations of the
 * example message store over HTTP, whose delta copy takes `deltaMs`. The hold runs from the commit
 * escalating to write to the swap's commit (or the write lock's release), seen on the store's change
 * stream; the work is what the message store reports (its copy runs and verify comparisons); the
 * rest is routelock's coordination (drill/writeLockHold.ts). Side by side in one run, alternating: the
 * message store ignoring `Prefer: wait` (202 + Retry-After 1 and a poll, as before) and honouring it
 * (200 as soon as the delta is done), and the message store's participant written by hand
 * (bench/handWritten) beside the same store on `@routelock/participant` (examples/message-store): the SDK
 * must add no poll (the participant's GETs are counted) and no hold. Also where the overhead sits (before the delta starts, between
 * the delta and verify, after verify until the swap commits) and the store operations started inside
 * each hold (a wrapper counting them per route).
 *
 * The control for the tail: the host, the message store and the load generator share one thread on a
 * machine other processes use, so each commit also reads how long that thread has waited for a CPU
 * (Linux schedstat). A hold's wait is the difference between its two commits; holds that waited at most
 * QUIET_WAIT_MS give the coordination's own figure, beside the raw one and the load average.
 */

export interface WriteLockHoldOptions {
  /** Migrations per variant and round. */
  migrations: number;
  rounds: number;
  /** The message store's copy time. */
  deltaMs: number;
  /** Between migration starts (0: all at once). */
  staggerMs: number;
}

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

/** Store operations per route, stamped when they start: which ones ran inside a hold. */
class CountingStore implements LocationStore {
  readonly ops: { resourceId: string; at: number; kind: 'read' | 'write' }[] = [];
  constructor(readonly inner: SqliteStore) {}
  get kind() {
    return this.inner.kind;
  }
  get counters() {
    return this.inner.counters;
  }
  private note(resourceId: string, kind: 'read' | 'write') {
    this.ops.push({ resourceId, at: Date.now(), kind });
  }
  read(id: string, options: ReadOptions): Promise<StoredDocument> {
    this.note(id, 'read');
    return this.inner.read(id, options);
  }
  create(doc: LocationDocument, options?: PriorityOption): Promise<StoredDocument> {
    this.note(doc.id, 'write');
    return (this.inner as LocationStore).create(doc, options);
  }
  replace(doc: LocationDocument, ifMatch: string, options?: PriorityOption): Promise<StoredDocument> {
    this.note(doc.id, 'write');
    return (this.inner as LocationStore).replace(doc, ifMatch, options);
  }
  delete(id: string, ifMatch: string, options?: PriorityOption): Promise<void> {
    this.note(id, 'write');
    return (this.inner as LocationStore).delete(id, ifMatch, options);
  }
  list(options: ListOptions): Promise<ListPage> {
    return this.inner.list(options);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

/**
 * This process's main thread as the kernel's scheduler counts it (ms): on a CPU, and runnable but waiting
 * for one (`/proc/<pid>/task/<pid>/schedstat`, Linux). Null elsewhere. Read at each commit, so a hold's
 * wait for a CPU is the difference between its two commits: the control that says whether a slow hold
 * was the coordination or the machine (docs/design.md §6.5).
 */
function threadCpu(): { onCpuMs: number; waitingMs: number } | null {
  try {
    const [onCpu, waiting] = readFileSync(`/proc/${process.pid}/task/${process.pid}/schedstat`, 'utf8')
      .split(' ')
      .map(Number);
    return onCpu === undefined || waiting === undefined
      ? null
      : { onCpuMs: onCpu / 1e6, waitingMs: waiting / 1e6 };
  } catch {
    return null;
  }
}

/** A hold whose thread waited at most this long for a CPU is "quiet": its overhead is the coordination's. */
const QUIET_WAIT_MS = 5;

/** A participant and a timing to run the migrations with. */
interface Variant {
  label: string;
  honoursPreferWait: boolean;
  env: Record<string, string>;
  /** The participant endpoint: @routelock/participant (the example), or the hand-written baseline. */
  participant: 'sdk' | 'handWritten';
}

/** The drill's timing: renewed every 3 s, a 2 s participant timeout (`Prefer: wait=1`). */
const DRILL_TIMING = { ROUTELOCK_WRITE_LEASE_SECONDS: '9', ROUTELOCK_WRITE_BUDGET_SECONDS: '10' };

const VARIANTS: Variant[] = [
  {
    label: 'ignores Prefer: wait (202 + Retry-After 1, polled)',
    honoursPreferWait: false,
    env: DRILL_TIMING,
    participant: 'sdk',
  },
  {
    label: 'honours Prefer: wait=1 (200 when done)',
    honoursPreferWait: true,
    env: DRILL_TIMING,
    participant: 'sdk',
  },
  {
    // the copy round renews first when a request could outlast the renewal deadline (copy.ts): with
    // the default timeout one second under the cadence, after any millisecond; a 2 s timeout under a
    // 4 s cadence leaves that second free, as production's 30 s under 100 s does
    label: 'honours it, write lease 12 s (no early renewal)',
    honoursPreferWait: true,
    env: {
      ROUTELOCK_WRITE_LEASE_SECONDS: '12',
      ROUTELOCK_WRITE_BUDGET_SECONDS: '12',
      ROUTELOCK_PARTICIPANT_TIMEOUT_SECONDS: '2',
    },
    participant: 'sdk',
  },
  {
    label: 'hand-written participant, honours Prefer: wait=1',
    honoursPreferWait: true,
    env: DRILL_TIMING,
    participant: 'handWritten',
  },
];

interface VariantResult {
  label: string;
  honoursPreferWait: boolean;
  holds: HoldOverhead[];
  contended: ContendedHold[];
  steps: HoldSteps[];
  /** The main thread over the whole variant: seconds on a CPU and waiting for one; load average before / after. */
  threadOnCpuSeconds: number | null;
  threadWaitSeconds: number | null;
  loadAverage: [number, number];
  /** Why each participant request without an answer had none (the journal's status-0 answers). */
  unanswered: string[];
  /** The process's event-loop delay while the migrations ran (ms): what the tail waits on. */
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  readsPerHold: number;
  writesPerHold: number;
  /** GETs of a job's Location the participant answered. */
  polls: number;
  completed: number;
  migrations: number;
}

async function runVariant(
  variant: Variant,
  options: WriteLockHoldOptions,
  round: number,
): Promise<VariantResult> {
  const { honoursPreferWait } = variant;
  const dir = mkdtempSync(join(tmpdir(), 'routelock-hold-'));
  const Store = variant.participant === 'sdk' ? MessageStore : HandWrittenMessageStore;
  const messages = new Store({
    regions: { westeurope: join(dir, 'westeurope.db'), eastus: join(dir, 'eastus.db') },
    copyDelayMs: (job) => (job.step === 'deltaCopy' ? options.deltaMs : 50),
    honoursPreferWait,
  });
  const storeUrl = await messages.listen();
  const routes = new SqliteStore(join(dir, 'routes.db'));
  const store = new CountingStore(routes);
  const observations: LockObservation[] = [];
  const opsAt = new Map<string, number>(); // a commit → how many store operations had started by then
  const cpuAt = new Map<string, ReturnType<typeof threadCpu>>(); // a commit → the thread's CPU counters
  routes.onChange((doc) => {
    const observation = lockObservation(doc, Date.now());
    observations.push(observation);
    opsAt.set(`${doc.id}@${observation.at}`, store.ops.length);
    cpuAt.set(`${doc.id}@${observation.at}`, threadCpu());
  });
  const host = await startLocalHost({
    store,
    statePath: join(dir, 'state.db'),
    env: {
      PORT: '0',
      ROUTELOCK_PROFILE: 'dev',
      ROUTELOCK_SQLITE_PATH: join(dir, 'routes.db'),
      ROUTELOCK_CACHE_TIERS: 'local=1',
      ROUTELOCK_REPLICATION_BOUND_SECONDS: '0',
      ROUTELOCK_SAFETY_BUFFER_SECONDS: '1',
      ROUTELOCK_RETRY_INTERVAL_SECONDS: '1',
      ...variant.env,
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'messages', url: `${storeUrl}/migrate` }]),
    },
    log: () => undefined,
  });
  try {
    messages.useRouting(`${host.url}/api`);
    const ids = Array.from(
      { length: options.migrations },
      (_, i) => `r${round}-${String(i).padStart(3, '0')}`,
    );
    for (const id of ids) {
      await host.services.router.createRoute(id, SOURCE);
      for (let m = 0; m < 3; m += 1)
        messages.stores.get(SOURCE.region)?.put(id, `seed-${m}`, 'hello', Date.now());
    }
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    const loadBefore = loadavg()[0] as number;
    const cpuBefore = threadCpu();
    const migrationIds: string[] = [];
    const resourceOf = new Map<string, string>();
    const steps: TimedStep[] = [];
    host.runner.observeSteps((e) =>
      steps.push({
        resourceId: resourceOf.get(e.migrationId) ?? '',
        label: e.label,
        startedAt: e.startedAt,
        endedAt: e.endedAt,
      }),
    );
    for (const id of ids) {
      const { record } = host.runner.start({ resourceId: id, target: TARGET });
      resourceOf.set(record.migrationId, id);
      migrationIds.push(record.migrationId);
      if (options.staggerMs > 0) await new Promise((r) => setTimeout(r, options.staggerMs));
    }
    await host.runner.idle();
    loop.disable();
    const cpuAfter = threadCpu();
    const loadAfter = loadavg()[0] as number;
    const statuses = await Promise.all(migrationIds.map((m) => host.runner.status(m)));
    // participant requests that got no answer (status 0: a transient, asked again after a backoff)
    const unanswered = migrationIds.flatMap((m) =>
      [...host.state.journal(m).values()].flatMap((entry) =>
        [...JSON.stringify(entry).matchAll(/"status":0,"body":"((?:[^"\\]|\\.)*)"/g)].map(
          (x) => x[1] as string,
        ),
      ),
    );
    const holds = writeLockHolds(observations).map((h) => holdOverhead(h, messages.work));
    // by position in the store's operations: an op started after the escalate's commit and up to
    // the commit that ended the hold (the swap's own write included), whatever the clock's resolution
    const inside = (kind: 'read' | 'write') =>
      holds.reduce((sum, h) => {
        const from = opsAt.get(`${h.resourceId}@${h.from}`) ?? 0;
        const to = opsAt.get(`${h.resourceId}@${h.to}`) ?? 0;
        return (
          sum +
          store.ops.slice(from, to).filter((o) => o.kind === kind && o.resourceId === h.resourceId).length
        );
      }, 0) / Math.max(1, holds.length);
    const contended = holds.map((h): ContendedHold => {
      const from = cpuAt.get(`${h.resourceId}@${h.from}`);
      const to = cpuAt.get(`${h.resourceId}@${h.to}`);
      return { ...h, cpuWaitMs: from && to ? to.waitingMs - from.waitingMs : null };
    });
    return {
      label: variant.label,
      honoursPreferWait,
      holds,
      contended,
      threadOnCpuSeconds: cpuBefore && cpuAfter ? (cpuAfter.onCpuMs - cpuBefore.onCpuMs) / 1000 : null,
      threadWaitSeconds: cpuBefore && cpuAfter ? (cpuAfter.waitingMs - cpuBefore.waitingMs) / 1000 : null,
      loadAverage: [loadBefore, loadAfter],
      steps: holds.map((h) => holdSteps(h, steps, messages.work)),
      readsPerHold: inside('read'),
      writesPerHold: inside('write'),
      polls: messages.counters.polls,
      completed: statuses.filter((s) => s.status === 'Completed').length,
      unanswered,
      loopDelayP99Ms: loop.percentile(99) / 1e6,
      loopDelayMaxMs: loop.max / 1e6,
      migrations: ids.length,
    };
  } finally {
    await host.close();
    await messages.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const ms = (d: MsDistribution) =>
  d.p50 === null ? '—' : `${Math.round(d.p50)} / ${Math.round(d.p99 ?? 0)} / ${Math.round(d.max ?? 0)}`;

export async function runWriteLockHold(
  options: WriteLockHoldOptions,
): Promise<{ table: string; data: unknown }> {
  const results: VariantResult[] = [];
  for (let round = 0; round < options.rounds; round += 1)
    for (const variant of round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse())
      results.push(await runVariant(variant, options, round));
  const rows = VARIANTS.map((variant) => {
    const runs = results.filter((r) => r.label === variant.label);
    const report: HoldReport = holdReport(runs.flatMap((r) => r.holds));
    const per = (pick: (r: VariantResult) => number) => runs.reduce((s, r) => s + pick(r), 0) / runs.length;
    return {
      label: (runs[0] as VariantResult).label,
      report,
      completed: runs.reduce((s, r) => s + r.completed, 0),
      migrations: runs.reduce((s, r) => s + r.migrations, 0),
      readsPerHold: per((r) => r.readsPerHold),
      writesPerHold: per((r) => r.writesPerHold),
      polls: runs.reduce((sum, r) => sum + r.polls, 0),
      steps: runs.flatMap((r) => r.steps),
      unanswered: runs.flatMap((r) => r.unanswered),
      loopDelay: `${Math.round(Math.max(...runs.map((r) => r.loopDelayP99Ms)))} / ${Math.round(Math.max(...runs.map((r) => r.loopDelayMaxMs)))}`,
      contention: contentionReport(
        runs.flatMap((r) => r.contended),
        QUIET_WAIT_MS,
      ),
      threadSeconds: runs.every((r) => r.threadOnCpuSeconds !== null)
        ? `${per((r) => r.threadOnCpuSeconds ?? 0).toFixed(1)} / ${per((r) => r.threadWaitSeconds ?? 0).toFixed(1)}`
        : '—',
      loadAverage: `${Math.min(...runs.flatMap((r) => r.loadAverage)).toFixed(1)}–${Math.max(...runs.flatMap((r) => r.loadAverage)).toFixed(1)}`,
    };
  });
  const [before, after] = rows as [(typeof rows)[number], (typeof rows)[number]];
  const byStep = table(
    ['where the hold less the work went, ms p50 / p99 / max per hold', ...rows.map((r) => r.label)],
    HOLD_STEP_CATEGORIES.map((category) => [
      category,
      ...rows.map((r) => ms(msDistribution(r.steps.map((s) => s[category])))),
    ]),
  );
  const ratio = (pick: (r: (typeof rows)[number]) => number | null) => {
    const b = pick(before);
    const a = pick(after);
    return b === null || a === null || a === 0 ? '—' : `${(b / a).toFixed(1)}×`;
  };
  const text = [
    table(
      [
        `message store (delta ${options.deltaMs} ms)`,
        'holds (ended by)',
        'hold ms p50 / p99 / max',
        'participant work ms p50',
        'hold − work ms p50 / p99 / max',
        'before the delta / between / after verify ms p50 / p99 / max',
        'store reads / writes started inside',
        'requests unanswered (retried)',
        'polls (GETs of a Location)',
        'event-loop delay ms p99 / max (worst round)',
      ],
      rows.map((r) => [
        r.label,
        `${r.report.holdMs.count} (${Object.entries(r.report.endedBy)
          .map(([k, v]) => `${v} ${k}`)
          .join(', ')}); ${r.completed}/${r.migrations} Completed`,
        ms(r.report.holdMs),
        r.report.workMs.p50 === null ? '—' : String(Math.round(r.report.workMs.p50)),
        ms(r.report.overheadMs),
        `${ms(r.report.beforeWorkMs)}; ${ms(r.report.betweenWorkMs)}; ${ms(r.report.afterWorkMs)}`,
        `${r.readsPerHold.toFixed(2)} / ${r.writesPerHold.toFixed(2)}`,
        String(r.unanswered.length),
        String(r.polls),
        r.loopDelay,
      ]),
    ),
    '',
    table(
      [
        'the control: this thread waiting for a CPU (other processes)',
        'CPU wait inside the hold ms p50 / p99 / max',
        `hold − work, quiet holds (CPU wait ≤ ${QUIET_WAIT_MS} ms): n, ms p50 / p99 / max`,
        'hold − work − CPU wait ms p50 / p99 / max (optimistic)',
        'holds over 50 ms: n (of them within 50 ms less their CPU wait)',
        'thread s on a CPU / waiting for one (per round)',
        'load average (1 min)',
      ],
      rows.map((r) => [
        r.label,
        ms(r.contention.cpuWaitMs),
        `${r.contention.quietOverheadMs.count} of ${r.report.holdMs.count}; ${ms(r.contention.quietOverheadMs)}`,
        ms(r.contention.overheadLessWaitMs),
        `${r.contention.overBound.count} (${r.contention.overBound.withinItLessTheWait})`,
        r.threadSeconds,
        r.loadAverage,
      ]),
    ),
    '',
    byStep,
    '',
    `In-process runner, real time, ${options.migrations} migrations per variant and round (${
      options.staggerMs > 0 ? `started ${options.staggerMs} ms apart` : 'started at once'
    }), ${options.rounds} rounds alternating the variants. Overhead p99 ignoring ÷ honouring: ${ratio(
      (r) => r.report.overheadMs.p99,
    )}; hold p50: ${ratio((r) => r.report.holdMs.p50)}. Through the SDK against by hand (both honouring ` +
      `the wait, drill timing): hold − work ms p50 / p99 / max ${ms(after.report.overheadMs)} against ${ms(
        (rows[3] as (typeof rows)[number]).report.overheadMs,
      )}, polls ${after.polls} against ${(rows[3] as (typeof rows)[number]).polls}.`,
  ].join('\n');
  return {
    table: text,
    data: {
      options,
      variants: rows.map((r) => ({ ...r, steps: undefined })),
      holds: results.map((r) => ({ label: r.label, holds: r.contended })),
    },
  };
}
