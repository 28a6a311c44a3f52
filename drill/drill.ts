import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type AcceptedWrite, MessageStore } from '../examples/message-store/service';
import { type LocalHost, startLocalHost } from '../local/host';
import type { MigrationStatus } from '../shared/migration/types';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import type { Distribution, MetricsSnapshot } from '../shared/migration/telemetry/sink';
import {
  type HoldReport,
  type WriteLockHold,
  type LockObservation,
  holdOverhead,
  holdReport,
  lockObservation,
  writeLockHolds,
} from './writeLockHold';

/**
 * The migration drill: the embedded host and a two-region message store, user traffic (reads, writes,
 * deletes; refused writes retried after Retry-After), and migrations of a set of conversations from one
 * region to the other through POST /api/migrations. At the end it checks that nothing was lost:
 *  - every acknowledged write is present at the conversation's final location;
 *  - no write was accepted at the source after its write lock began (beyond the in-flight bound);
 *  - no conversation has messages in both regions after its swap;
 *  - no partial cutover (Completed ⇔ at the target and unlocked; otherwise at the source, unlocked).
 * And verification at work (docs/design.md §6.5): the first conversation migrated has a delta that loses an
 * item (the example's seam): `verify` must find the mismatch, the swap be refused, the delta copied again,
 * verified and swapped, and nothing lost. It reports verifications run, mismatches and swaps refused. And the
 * cost of the write lock (docs/design.md §6.5): each hold, from the commit escalating to write to the swap's
 * (or the release's) commit, less the work the message store reports inside it (drill/writeLockHold.ts).
 */

export interface DrillOptions {
  resources: number;
  migrations: number;
  /** User operations per second. */
  rate: number;
  /** Seconds of traffic (migrations start in the first half). */
  duration: number;
  /** The negative control: a message store that accepts writes during the write lock. */
  ignoreWriteLock?: boolean;
  /** The verification step (default on): the first migrated conversation's delta drops an item once. */
  verificationStep?: boolean;
  /** Its negative control: a message store without `verify` (404), so nothing stops that swap. */
  withoutVerify?: boolean;
  /** The message store's delta copy time (default 150 ms, as every copy; 1.5 s with `ignoreWriteLock`). */
  deltaCopyMs?: number;
  /** Whether the message store honours `Prefer: wait` (default true; false: 202 + polling, as before). */
  honoursPreferWait?: boolean;
  /** Called about twice a second with progress. */
  onProgress?: (progress: DrillProgress) => void;
  /** A port for the host (0: any free one). */
  port?: number;
  log?: (line: string) => void;
}

export interface DrillProgress {
  elapsedSeconds: number;
  duration: number;
  operations: number;
  phases: Record<string, number>;
  statuses: Record<string, number>;
}

export interface DrillSummary {
  migrations: {
    requested: number;
    completed: number;
    failed: number;
    conflict: number;
    noop: number;
    running: number;
  };
  writeLockSeconds: Distribution;
  /** Every write-lock hold, less the message store's work inside it: the coordination overhead. */
  writeLockHold: HoldReport;
  operations: {
    reads: number;
    writes: number;
    deletes: number;
    writesRefusedThenAccepted: number;
    refusals: number;
    deletesTombstoned: number;
    misdirected: number;
  };
  /**
   * Verification before the swap: `verify` answered by the message store, mismatches it found, verify
   * rounds with a mismatch in the statuses (swaps refused), and participants that did not verify.
   */
  verification: { run: number; mismatches: number; swapsRefused: number; notVerified: number };
  /**
   * The end notices' clean-ups at the message store: sources deleted after `completed`, targets'
   * partial copies dropped after `failed` / `cancelled`, copies kept (the route there), and what the
   * janitor still had to purge afterwards.
   */
  cleanUps: {
    noticesDelivered: number;
    sourcesDeleted: number;
    targetsDropped: number;
    kept: number;
    leftToJanitor: number;
  };
  /** The verification step: the conversation whose delta dropped an item, and what became of it. */
  verificationStep?: VerificationStep;
  violations: string[];
  url: string;
}

export interface VerificationStep {
  resourceId: string;
  itemsDropped: number;
  /** Its verify rounds in order: match or mismatch, with the write-lock (delta) attempt. */
  rounds: { deltaAttempt: number; outcome: string; detail?: string }[];
  status: string;
  /** Write-lock attempts its delta took. */
  deltaAttempts: number;
  /** Whether each of the drill's checks held for it (nothing lost). */
  nothingLost: boolean;
}

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
/** A write decided just before the write lock may still commit right after it: the in-flight bound. */
export const IN_FLIGHT_GRACE_MS = 250;

/**
 * The delta copy's time. The lock-ignoring store's writes can only be told apart from in-flight ones
 * when they land past the in-flight bound, so its control holds the write lock for 1.5 s by default; a
 * 150 ms delta answered at once (`Prefer: wait`) ends every hold inside the bound, and the control would
 * pass unseen.
 */
export const deltaCopyMs = (options: Pick<DrillOptions, 'deltaCopyMs' | 'ignoreWriteLock'>): number =>
  options.deltaCopyMs ?? (options.ignoreWriteLock ? 1500 : 150);

/** Writes accepted at `region` inside a write-lock hold on their resource, later than the in-flight bound. */
export function writesInsideHolds(
  holds: readonly WriteLockHold[],
  accepted: readonly AcceptedWrite[],
  region: string,
): string[] {
  const violations: string[] = [];
  for (const hold of holds)
    for (const a of accepted)
      if (
        a.conversationId === hold.resourceId &&
        a.region === region &&
        a.kind === 'write' &&
        a.at > hold.from + IN_FLIGHT_GRACE_MS &&
        a.at < hold.to
      )
        violations.push(
          `write accepted at the source during the write lock: ${a.conversationId}/${a.messageId} ${a.at - hold.from} ms into a ${hold.to - hold.from} ms hold (ended by ${hold.endedBy})`,
        );
  return violations;
}

export async function runDrill(
  options: DrillOptions,
  hooks: { onHost?: (host: LocalHost) => void } = {},
): Promise<DrillSummary> {
  const dir = mkdtempSync(join(tmpdir(), 'routelock-drill-'));
  const log = options.log ?? (() => undefined);
  let host: LocalHost | undefined;
  let messages: MessageStore | undefined;
  try {
    // The message store needs the host's URL, the host needs the store's: start the store's server first.
    messages = new MessageStore({
      regions: { westeurope: join(dir, 'westeurope.db'), eastus: join(dir, 'eastus.db') },
      ignoreWriteLock: options.ignoreWriteLock ?? false,
      copyDelayMs: (job) => (job.step === 'deltaCopy' ? deltaCopyMs(options) : 150),
      implementsVerify: !options.withoutVerify,
      honoursPreferWait: options.honoursPreferWait ?? true,
    });
    const verificationStep = options.verificationStep ?? true;
    const storeUrl = await messages.listen();
    // The routes' store, opened here as the host would (same file, same state path) to watch its
    // change stream: every committed route version, stamped as it commits (the write-lock holds' ends).
    const routes = new SqliteStore(join(dir, 'routes.db'));
    const observations: LockObservation[] = [];
    routes.onChange((doc) => observations.push(lockObservation(doc, Date.now())));
    host = await startLocalHost({
      store: routes,
      statePath: join(dir, 'routes.db'),
      env: {
        PORT: String(options.port ?? 0),
        ROUTELOCK_SQLITE_PATH: join(dir, 'routes.db'),
        ROUTELOCK_PROFILE: 'dev',
        ROUTELOCK_CACHE_TIERS: 'local=1',
        ROUTELOCK_REPLICATION_BOUND_SECONDS: '0',
        ROUTELOCK_SAFETY_BUFFER_SECONDS: '1',
        // 9 s: renewed every 3 s, so the participant timeout is 2 s (config: a second under the
        // renewal cadence) and a request can carry `Prefer: wait=1`; 5 s allowed a 1 s timeout, no wait
        ROUTELOCK_WRITE_LEASE_SECONDS: '9',
        ROUTELOCK_WRITE_BUDGET_SECONDS: '10',
        ROUTELOCK_RETRY_INTERVAL_SECONDS: '1',
        ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'messages', url: `${storeUrl}/migrate` }]),
      },
      log: (level, message) => {
        if (level === 'error' || level === 'warning') log(`${level}: ${message}`);
      },
    });
    hooks.onHost?.(host);
    const api = `${host.url}/api`;
    messages.useRouting(api);

    // Seed conversations in the source region.
    const ids = Array.from({ length: options.resources }, (_, i) => `conv-${String(i).padStart(4, '0')}`);
    const json = { 'content-type': 'application/json' };
    for (const id of ids) {
      await fetch(`${api}/routes/${id}`, {
        method: 'PUT',
        headers: json,
        body: JSON.stringify({ location: SOURCE }),
      });
      for (let m = 0; m < 3; m += 1) await messages.write(SOURCE.region, id, `seed-${m}`, 'hello');
    }

    // Bookkeeping for the checks.
    const acked = new Map<string, Map<string, 'present' | 'deleted'>>(ids.map((id) => [id, new Map()]));
    for (const id of ids) for (let m = 0; m < 3; m += 1) acked.get(id)?.set(`seed-${m}`, 'present');
    const ops = { reads: 0, writes: 0, deletes: 0, writesRefusedThenAccepted: 0, refusals: 0 };
    const pending: Promise<unknown>[] = [];
    let sequence = 0;

    /** One user operation, retried after Retry-After when refused, and re-resolved when misdirected. */
    const operate = async (id: string, kind: 'read' | 'write' | 'delete') => {
      const messageId =
        kind === 'write'
          ? `m-${++sequence}`
          : [...(acked.get(id)?.entries() ?? [])].find(([, s]) => s === 'present')?.[0];
      if (kind === 'delete' && !messageId) return;
      let refused = false;
      for (let attempt = 0; attempt < 60; attempt += 1) {
        const view = await (messages as MessageStore).resolve(id);
        const region = view.location.region;
        const outcome =
          kind === 'read'
            ? await (messages as MessageStore).read(region, id)
            : kind === 'write'
              ? await (messages as MessageStore).write(region, id, messageId as string, 'payload')
              : await (messages as MessageStore).remove(region, id, messageId as string);
        if (outcome.status === 'locked') {
          refused = true;
          ops.refusals += 1;
          await new Promise((r) => setTimeout(r, outcome.retryAfterSeconds * 1000));
          (messages as MessageStore).forget(id);
          continue;
        }
        if (outcome.status === 'notHere') {
          (messages as MessageStore).forget(id);
          await new Promise((r) => setTimeout(r, 50));
          continue;
        }
        if (kind === 'read') ops.reads += 1;
        if (kind === 'write') {
          ops.writes += 1;
          if (refused) ops.writesRefusedThenAccepted += 1;
          acked.get(id)?.set(messageId as string, 'present');
        }
        if (kind === 'delete') {
          ops.deletes += 1;
          acked.get(id)?.set(messageId as string, 'deleted');
        }
        return;
      }
      throw new Error(`operation ${kind} on ${id} never went through`);
    };

    // Start migrations during the first half of the traffic.
    const toMigrate = ids.slice(0, Math.min(options.migrations, ids.length));
    // The verification step: the first conversation's delta loses an item, once.
    const dropped = verificationStep ? toMigrate[0] : undefined;
    if (dropped) messages.dropItemFromNextDelta(dropped);
    const migrationIds = new Map<string, string>();
    const started = Date.now();
    const startMigrations = (async () => {
      const spread = (options.duration * 1000) / 2 / Math.max(1, toMigrate.length);
      for (const id of toMigrate) {
        const res = await fetch(`${api}/migrations`, {
          method: 'POST',
          headers: json,
          body: JSON.stringify({ resourceId: id, target: TARGET }),
        });
        const body = (await res.json()) as { migrationId: string };
        migrationIds.set(id, body.migrationId);
        await new Promise((r) => setTimeout(r, spread));
      }
    })();

    // User traffic at the requested rate, for the requested duration.
    let random = 12345;
    const next = () => (random = (random * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const interval = 1000 / options.rate;
    let lastProgress = 0;
    let operations = 0;
    while (Date.now() - started < options.duration * 1000) {
      const id = ids[Math.floor(next() * ids.length)] as string;
      const roll = next();
      pending.push(operate(id, roll < 0.5 ? 'read' : roll < 0.85 ? 'write' : 'delete'));
      operations += 1;
      if (Date.now() - lastProgress > 500 && options.onProgress) {
        lastProgress = Date.now();
        options.onProgress(await progress(host, options, started, operations));
      }
      await new Promise((r) => setTimeout(r, interval));
    }
    await startMigrations;
    await Promise.all(pending);

    // Wait for every migration to end.
    const deadline = Date.now() + 60_000;
    let statuses: MigrationStatus[] = [];
    for (;;) {
      statuses = await Promise.all(
        [...migrationIds.values()].map(
          async (m) => (await (await fetch(`${api}/migrations/${m}`)).json()) as MigrationStatus,
        ),
      );
      if (options.onProgress) options.onProgress(await progress(host, options, started, operations));
      if (statuses.every((s) => !['Pending', 'Running'].includes(s.status)) || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    // The end notices (docs/design.md §6.11): the store cleans up on them; the janitor purges the rest.
    statuses = await awaitNotices(api, statuses);
    await settleCleanUps(messages);
    const cleanUps = countCleanUps(messages, statuses);
    cleanUps.leftToJanitor = await messages.janitor();
    const early = [...messages.cleanUps.values()].filter(
      (c) => c.state === 'deleted' && (c.at ?? 0) < c.notBefore,
    );

    // The checks.
    const violations: string[] = [];
    for (const id of ids) {
      const route = (await (await fetch(`${api}/routes/${id}`)).json()) as {
        location: { region: string };
        lock: unknown;
      };
      const status = statuses.find((s) => s.resourceId === id);
      if (status) {
        const atTarget = route.location.region === TARGET.region;
        if (status.status === 'Completed' && (!atTarget || route.lock !== null))
          violations.push(
            `partial cutover: ${id} Completed but route at ${route.location.region}, lock ${route.lock ? 'held' : 'none'}`,
          );
        if (status.status !== 'Completed' && status.status !== 'Running' && (atTarget || route.lock !== null))
          violations.push(`partial cutover: ${id} ${status.status} but route at ${route.location.region}`);
      }
      // every acknowledged write is present at the final location; acknowledged deletes are gone
      const here = new Map(
        messages.stores
          .get(route.location.region)
          ?.list(id)
          .map((m) => [m.messageId, m]) ?? [],
      );
      for (const [messageId, state] of acked.get(id) ?? []) {
        const row = here.get(messageId);
        if (state === 'present' && (!row || row.deleted))
          violations.push(`lost write: ${id}/${messageId} missing at ${route.location.region}`);
        if (state === 'deleted' && row && !row.deleted)
          violations.push(`lost delete: ${id}/${messageId} back at ${route.location.region}`);
      }
      // no conversation in both regions after its swap
      const elsewhere = [...messages.stores.entries()].filter(
        ([region, store]) => region !== route.location.region && store.list(id).length > 0,
      );
      if (status?.status === 'Completed' && elsewhere.length > 0)
        violations.push(`${id} has messages in both regions after its swap`);
    }

    // No write accepted at the source inside any write-lock hold (past the in-flight bound), whatever the
    // hold ended in: a swap, or a release after verification refused the swap. Judged on the route's own
    // commits, not the migrations' statuses, so a hold whose migration later failed counts too.
    violations.push(...writesInsideHolds(writeLockHolds(observations), messages.accepted, SOURCE.region));
    for (const c of early)
      violations.push(
        `clean-up before its time: ${c.resourceId} at ${c.region}, ${c.notBefore - (c.at ?? 0)} ms early`,
      );
    const step = dropped ? verificationStepOf(dropped, statuses, messages, violations) : undefined;
    if (step) violations.push(...verificationStepProblems(step));

    const metrics = (await (await fetch(`${api}/metrics`)).json()) as MetricsSnapshot;
    const count = (s: string) => statuses.filter((x) => x.status === s).length;
    return {
      migrations: {
        requested: toMigrate.length,
        completed: count('Completed'),
        failed: count('Failed'),
        conflict: count('Conflict'),
        noop: count('NoOp'),
        running: count('Running') + count('Pending'),
      },
      writeLockSeconds: metrics.writeLockSeconds,
      writeLockHold: holdReport(
        writeLockHolds(observations).map((h) => holdOverhead(h, (messages as MessageStore).work)),
      ),
      operations: {
        ...ops,
        deletesTombstoned: messages.counters.deletesTombstoned,
        misdirected: messages.counters.misdirected,
      },
      verification: {
        run: messages.counters.verifications,
        mismatches: messages.counters.mismatches,
        swapsRefused: statuses.reduce((sum, s) => sum + mismatchRounds(s), 0),
        notVerified: statuses.reduce(
          (sum, s) => sum + (s.verifications ?? []).filter((v) => v.outcome === 'notImplemented').length,
          0,
        ),
      },
      ...(step ? { verificationStep: step } : {}),
      cleanUps,
      violations,
      url: host.url,
    };
  } finally {
    await host?.close();
    await messages?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The notices are sent after the final status (best effort): wait until each ended migration's status
 * lists them (a workflow before version 4 never does: 10 s at most).
 */
async function awaitNotices(api: string, statuses: MigrationStatus[]): Promise<MigrationStatus[]> {
  const deadline = Date.now() + 10_000;
  let current = statuses;
  const ended = (s: MigrationStatus) => ['Completed', 'Failed', 'Cancelled'].includes(s.status);
  while (current.some((s) => ended(s) && s.notices === undefined) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    current = await Promise.all(
      current.map(
        async (s) => (await (await fetch(`${api}/migrations/${s.migrationId}`)).json()) as MigrationStatus,
      ),
    );
  }
  return current;
}

/** Let the scheduled clean-ups run: each at its `cleanUpSourceAfter` (the retired-source window's end). */
async function settleCleanUps(messages: MessageStore): Promise<void> {
  const scheduled = () => [...messages.cleanUps.values()].filter((c) => c.state === 'scheduled');
  const latest = Math.max(0, ...scheduled().map((c) => c.notBefore));
  const deadline = Math.max(Date.now(), latest) + 5_000;
  while (scheduled().length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
}

function countCleanUps(messages: MessageStore, statuses: MigrationStatus[]): DrillSummary['cleanUps'] {
  const all = [...messages.cleanUps.values()];
  return {
    noticesDelivered: statuses.reduce(
      (sum, s) => sum + (s.notices ?? []).filter((n) => n.outcome === 'delivered').length,
      0,
    ),
    sourcesDeleted: all.filter((c) => c.step === 'completed' && c.state === 'deleted').length,
    targetsDropped: all.filter((c) => c.step !== 'completed' && c.state === 'deleted').length,
    kept: all.filter((c) => c.state === 'kept').length,
    leftToJanitor: 0,
  };
}

/** Verify rounds with a mismatch (each a swap the workflow refused). */
const mismatchRounds = (s: MigrationStatus): number =>
  new Set(
    (s.verifications ?? [])
      .filter((v) => v.outcome === 'mismatch')
      .map((v) => `${v.migrationAttempt}/${v.deltaAttempt}`),
  ).size;

function verificationStepOf(
  resourceId: string,
  statuses: MigrationStatus[],
  messages: MessageStore,
  violations: string[],
): VerificationStep {
  const status = statuses.find((s) => s.resourceId === resourceId);
  return {
    resourceId,
    itemsDropped: messages.counters.deltaItemsDropped,
    rounds: (status?.verifications ?? []).map((v) => ({
      deltaAttempt: v.deltaAttempt,
      outcome: v.outcome,
      ...(v.detail ? { detail: v.detail } : {}),
    })),
    status: status?.status ?? 'not started',
    deltaAttempts: status?.deltaAttempts ?? 0,
    nothingLost: !violations.some((v) => v.includes(resourceId)),
  };
}

/** What the step must show: the item dropped, the mismatch found, the swap refused, then verified and swapped. */
function verificationStepProblems(step: VerificationStep): string[] {
  const problems: string[] = [];
  const firstMismatch = step.rounds.findIndex((r) => r.outcome === 'mismatch');
  if (step.itemsDropped !== 1) problems.push(`${step.itemsDropped} items dropped (expected 1)`);
  if (firstMismatch < 0) problems.push('no verify round found the dropped item');
  else if (step.rounds.slice(firstMismatch).every((r) => r.outcome !== 'match'))
    problems.push('no verify round matched after the mismatch');
  else if (step.rounds.at(-1)?.outcome !== 'match') problems.push('the last verify round did not match');
  if (step.status !== 'Completed') problems.push(`the migration ended ${step.status}, not Completed`);
  if (step.deltaAttempts < 2) problems.push(`the delta was copied ${step.deltaAttempts} time(s), not again`);
  return problems.map((p) => `verification step (${step.resourceId}): ${p}`);
}

async function progress(
  host: LocalHost,
  options: DrillOptions,
  started: number,
  operations: number,
): Promise<DrillProgress> {
  const recent = host.state.recent(Math.max(1, options.migrations));
  const phases: Record<string, number> = {};
  const statuses: Record<string, number> = {};
  for (const record of recent) {
    statuses[record.status.status] = (statuses[record.status.status] ?? 0) + 1;
    if (record.status.status === 'Running')
      phases[record.status.phase] = (phases[record.status.phase] ?? 0) + 1;
  }
  return {
    elapsedSeconds: (Date.now() - started) / 1000,
    duration: options.duration,
    operations,
    phases,
    statuses,
  };
}
