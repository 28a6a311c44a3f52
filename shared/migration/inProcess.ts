import type { Actor } from '../core/audit';
import { RouteLockError } from '../core/errors';
import type { Location, StoredDocument } from '../core/lock/document';
import type { TokenKeyring } from '../core/security/tokenKeys';
import type { Activities } from './activities';
import { instanceIdFor } from './instanceId';
import type { JournalEntry, MigrationRecordPage, MigrationRecordQuery } from './store/ports/migrations';
import type { SqliteMigrationState } from './store/sqlite/migrations';
import { type MigrationRecord, newMigrationInput, newMigrationRecord } from './records';
import { checkedWindow } from './window';
import { retryRecord, settingsFor } from './service';
import type { Scheduler } from './scheduler';
import { resolveLocation } from './participantContract';
import { cancelAnswer, withCancelRequest } from './service';
import {
  type ActivityResult,
  type CutoverWindow,
  type CancelRequest,
  type HttpAnswer,
  type HttpCall,
  type HttpResult,
  type ParticipantCall,
  participantCallFailed,
  type MigrationInput,
  type MigrationSettings,
  type MigrationStatus,
  type Step,
  type TaskStep,
  terminalStates,
} from './types';
import { migrationWorkflow } from './workflow';
import type { TelemetrySink } from './telemetry/sink';
import { migrationEndedEvent } from './stopped';

/** A step's kind with what tells its instances apart: an activity's name, a status's phase. */
function stepLabel(step: Step): string {
  if (step.kind === 'activity') return `activity:${step.name}`;
  if (step.kind === 'status') return `status:${step.status.phase}`;
  if (step.kind === 'race' || step.kind === 'all')
    return `${step.kind}:${step.tasks.map((t) => (t.kind === 'activity' ? t.name : t.kind)).join(',')}`;
  return step.kind;
}

/**
 * The embedded host's runner: the same workflow as Durable Functions, on real (or virtual) timers.
 *
 * Like Durable, it is event-sourced: each step's result is appended to a journal in SQLite, and a
 * migration interrupted by a crash is resumed on start by replaying the workflow from the beginning,
 * feeding journaled results back until the journal runs out. Statuses are written as they change, so
 * `GET /migrations/{id}` answers across restarts.
 */

export interface StartRequest {
  resourceId: string;
  target: Location;
  migrationId?: string | undefined;
  campaignId?: string | undefined;
  migrationAttempts?: number | undefined;
  /** The cutover window (docs/design.md §6.10). */
  window?: CutoverWindow | undefined;
  /** A campaign's listed copy of the route, for the first pre-lock (`MigrationRequest.listed`). */
  listed?: StoredDocument | undefined;
}

export interface StartResult {
  record: MigrationRecord;
  /** False when the resource already had an unfinished migration (returned instead), or the id existed. */
  created: boolean;
}

export interface InProcessRunnerOptions {
  activities: Activities;
  state: SqliteMigrationState;
  scheduler: Scheduler;
  settings: MigrationSettings;
  /** Makes each migration's lock seed at start (the activities derive its credentials with it). */
  keyring: TokenKeyring;
  /**
   * A seam (tests and verify answer participants in process): the job POSTs, one request each (the
   * polls of a Location it answers go over HTTP, through the activity). Without it, the
   * `callParticipant` activity makes every request.
   */
  http?: (call: HttpCall) => Promise<HttpResult>;
  /** Migration ids; defaults to `m-<uuid>`. A seam: tests and verify pin them for readable traces. */
  newId?: () => string;
  log?: (message: string, fields: Record<string, unknown>) => void;
  /** Where a migration's end goes as `MigrationEnded` (docs/design.md §6.12): the host's sink. */
  sink?: TelemetrySink;
}

/** One step the runner performed: which, and when (epoch ms). */
export interface StepTiming {
  migrationId: string;
  seq: number;
  /** The step's kind, and an activity's name (`activity:swap`), a status's phase (`status:write`). */
  label: string;
  startedAt: number;
  endedAt: number;
}

type Outcome = JournalEntry;

class RunnerStopped extends Error {}

/**
 * The journal key of a migration's cancel request, beside its numbered steps: written when the request
 * arrives, so a runner that restarts before the workflow saw it still cancels.
 */
const CANCEL_KEY = 'cancel';

/** A migration's cancel request, and the waits it ends. */
interface CancelSignal {
  request: CancelRequest | undefined;
  arrived: Promise<CancelRequest>;
  raise: (request: CancelRequest) => void;
}

export class InProcessRunner {
  private readonly running = new Map<string, Promise<MigrationStatus | null>>();
  private readonly liveTimers = new Set<() => void>();
  private readonly cancels = new Map<string, CancelSignal>();
  private stopped = false;
  private readonly stepListeners = new Set<(event: StepTiming) => void>();
  /** The runs whose end was reported (`MigrationEnded`): once per run, however many final statuses follow. */
  private readonly endsReported = new Set<string>();

  constructor(private readonly options: InProcessRunnerOptions) {}

  /**
   * Be told of every step performed live (not replayed), with when it began and ended on the wall
   * clock: a seam for bench/writeLockHold.ts, which attributes the write-lock hold to the steps in it.
   */
  observeSteps(listener: (event: StepTiming) => void): () => void {
    this.stepListeners.add(listener);
    return () => this.stepListeners.delete(listener);
  }

  /** Start a migration, or return the one this resource already runs (never a duplicate). */
  start(request: StartRequest): StartResult {
    const migrationId = request.migrationId ?? this.options.newId?.() ?? `m-${crypto.randomUUID()}`;
    const instanceId = instanceIdFor(request.resourceId);
    const input = newMigrationInput({
      migrationId,
      instanceId,
      resourceId: request.resourceId,
      target: request.target,
      settings: settingsFor(this.options.settings, request),
      lock: this.options.keyring.newSeed(),
      window: checkedWindow(request.window, this.options.scheduler.now()),
      listed: { copy: request.listed, keyring: this.options.keyring },
    });
    const result = this.options.state.createUnlessActive(
      newMigrationRecord(input, new Date(this.options.scheduler.now()).toISOString(), request.campaignId),
    );
    if (result.created) this.launch(result.record.input);
    return result;
  }

  /** The migration's record (null when unknown). */
  record(migrationId: string): Promise<MigrationRecord | null> {
    return this.options.state.get(migrationId);
  }

  /**
   * An operator's retry of an ended, Failed migration (MigrationService.retry checks it first): its record
   * reopened under the resource's claim, one transaction, and run again with a fresh seed.
   */
  retry(failed: MigrationRecord): StartResult {
    // the retry keeps its window: one already over could only fail it again (WindowClosed)
    checkedWindow(failed.input.window, this.options.scheduler.now());
    const now = new Date(this.options.scheduler.now()).toISOString();
    const record = retryRecord(failed, this.options.settings, this.options.keyring.newSeed(), now);
    const result = this.options.state.reopenUnlessActive(record);
    if (result.created) this.launch(result.record.input);
    return result;
  }

  /** Resume every migration a previous process left unfinished. */
  resumeAll(): number {
    let resumed = 0;
    for (const record of this.options.state.unfinished()) {
      if (this.running.has(record.migrationId)) continue;
      this.launch(record.input);
      resumed += 1;
    }
    return resumed;
  }

  async status(migrationId: string): Promise<MigrationStatus> {
    const record = await this.options.state.get(migrationId);
    if (!record) throw new RouteLockError('NotFound', `No migration ${migrationId}.`);
    return this.withRequest(migrationId, record.status);
  }

  /**
   * Ask a migration to cancel (docs/design.md §6.8): journaled at once, then every cancellable wait of the
   * workflow ends and its next check finds it. Answers the status as it stands, `cancelRequestedAt` set;
   * an ended migration answers its status unchanged, a swapped one AlreadySwapped (`cancelAnswer`).
   */
  async cancel(migrationId: string, actor: Actor): Promise<MigrationStatus> {
    const record = await this.options.state.get(migrationId);
    if (!record) throw new RouteLockError('NotFound', `No migration ${migrationId}.`);
    const standing = this.withRequest(migrationId, record.status);
    const answered = cancelAnswer(standing, record.input);
    if (answered) return answered;
    const request = { requestedAt: new Date(this.options.scheduler.now()).toISOString(), by: actor.id };
    // journaled only if it has not ended meanwhile (the await above let the workflow run)
    if (!this.options.state.appendIfUnfinished(migrationId, CANCEL_KEY, { value: request })) {
      const ended = await this.options.state.get(migrationId);
      return cancelAnswer(ended?.status ?? standing, record.input) ?? ended?.status ?? standing;
    }
    this.signal(migrationId).raise(request);
    return withCancelRequest(standing, request);
  }

  private signal(migrationId: string): CancelSignal {
    let signal = this.cancels.get(migrationId);
    if (!signal) {
      let raise: (request: CancelRequest) => void = () => undefined;
      const arrived = new Promise<CancelRequest>((resolve) => {
        raise = resolve;
      });
      const created: CancelSignal = {
        request: undefined,
        arrived,
        raise: (request) => {
          if (created.request) return; // the first request stands
          created.request = request;
          raise(request);
        },
      };
      signal = created;
      this.cancels.set(migrationId, signal);
    }
    return signal;
  }

  /** A status with the cancel request the workflow may not have published yet. */
  private withRequest(migrationId: string, status: MigrationStatus): MigrationStatus {
    const request = this.cancels.get(migrationId)?.request;
    return request && status.cancelRequestedAt === undefined ? withCancelRequest(status, request) : status;
  }

  /** A page of this runner's records, newest first (GET /migrations). */
  list(query: MigrationRecordQuery): Promise<MigrationRecordPage> {
    return this.options.state.list(query);
  }

  /** Wait until every running migration has finished (tests, drills). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running.values()]);
  }

  get activeCount(): number {
    return this.running.size;
  }

  /**
   * Stop driving migrations (host shutdown): the journal keeps what happened. A run waiting on a timer
   * ends at once; one inside a step (a store or participant call) ends when that returns, journaling
   * nothing more. Resolves when every run has ended: only then may the caller close the state they read.
   */
  stop(): Promise<void> {
    this.stopped = true;
    for (const interrupt of this.liveTimers) interrupt();
    this.liveTimers.clear();
    return this.idle();
  }

  private launch(input: MigrationInput): void {
    const run = this.execute(input)
      .catch(async (error: unknown) => {
        if (error instanceof RunnerStopped || this.stopped) return null;
        const message = (error as Error).message;
        this.options.log?.('migration runner failed', { migrationId: input.migrationId, error: message });
        // The workflow handles every failure it knows of, so this is a bug; even so, a migration left
        // unfinished would block its resource forever (and fail again on every resume): end it. A run
        // never rejects: nobody awaits it but `idle()` and `stop()`.
        try {
          const record = await this.options.state.get(input.migrationId);
          if (record && !terminalStates.has(record.status.status) && !this.stopped) {
            const status = {
              ...record.status,
              status: 'Failed' as const,
              error: `runner failed: ${message}`,
            };
            await this.options.state.saveStatus(input.migrationId, status, true);
            if (!this.endsReported.has(input.migrationId)) await this.reportEnd(input.migrationId, status);
          }
        } catch (failed) {
          this.options.log?.('migration runner failed to end the migration', {
            migrationId: input.migrationId,
            error: (failed as Error).message,
          });
        }
        return null;
      })
      .finally(() => {
        this.running.delete(input.migrationId);
        this.cancels.delete(input.migrationId);
        this.endsReported.delete(input.migrationId);
      });
    this.running.set(input.migrationId, run);
  }

  private async execute(input: MigrationInput): Promise<MigrationStatus> {
    const id = input.migrationId;
    const journal = this.options.state.journal(id);
    const steps = [...journal.keys()].filter((key) => key !== CANCEL_KEY);
    const replayUntil = Math.max(-1, ...steps.map(Number));
    const cancel = journal.get(CANCEL_KEY);
    if (cancel && 'value' in cancel) this.signal(id).raise(cancel.value as CancelRequest);
    const workflow = migrationWorkflow(input);
    let seq = 0;
    let next = workflow.next();
    while (!next.done) {
      if (this.stopped) throw new RunnerStopped();
      const current = seq;
      seq += 1;
      const replaying = current <= replayUntil;
      const startedAt = Date.now();
      const outcome = await this.perform(id, current, next.value, journal, replaying);
      if (this.stepListeners.size > 0 && !replaying) {
        const event = {
          migrationId: id,
          seq: current,
          label: stepLabel(next.value),
          startedAt,
          endedAt: Date.now(),
        };
        for (const listener of this.stepListeners) listener(event);
      }
      // The first terminal status saved live is the end (the end notices publish it again after).
      // A replayed one was saved by the process before, which reported it.
      const step = next.value;
      if (step.kind === 'status' && !replaying && terminalStates.has(step.status.status)) {
        if (!this.endsReported.has(id)) await this.reportEnd(id, step.status);
      }
      next =
        'error' in outcome ? workflow.throw(new Error(outcome.error.message)) : workflow.next(outcome.value);
    }
    return next.value;
  }

  /** `MigrationEnded` of a run's end, with its record's campaign and claim; never fails the run. */
  private async reportEnd(id: string, status: MigrationStatus): Promise<void> {
    this.endsReported.add(id);
    const sink = this.options.sink;
    if (!sink) return;
    try {
      const record = await this.options.state.get(id);
      const event = record && migrationEndedEvent(record, status, this.options.scheduler.now());
      if (event) sink.event(event);
    } catch (error) {
      this.options.log?.('MigrationEnded not reported', { migrationId: id, error: (error as Error).message });
    }
  }

  /** Perform one step, or answer it from the journal when a resumed migration replays it. */
  private async perform(
    id: string,
    seq: number,
    step: Step,
    journal: Map<string, JournalEntry>,
    replaying: boolean,
  ): Promise<Outcome> {
    const key = String(seq);
    const recorded = journal.get(key);
    const record = (outcome: Outcome): Outcome => {
      if (!this.stopped) this.options.state.append(id, key, outcome);
      return outcome;
    };
    switch (step.kind) {
      case 'status': {
        // A replay re-publishes old statuses; only the live part of the run is written.
        if (!replaying) {
          const done = terminalStates.has(step.status.status);
          // a request the workflow has not seen yet is kept on every status, a late one on the last
          await this.options.state.saveStatus(id, this.withRequest(id, step.status), done);
          this.options.log?.(`migration ${step.status.status} (${step.status.phase})`, { migrationId: id });
        }
        return { value: undefined };
      }
      case 'now':
        return recorded ?? record({ value: this.options.scheduler.now() });
      case 'cancelRequested':
        return recorded ?? record({ value: this.cancels.get(id)?.request ?? null });
      case 'timer':
        if (step.cancellable) {
          if (recorded) return recorded;
          const timer = this.timer(step.fireAt);
          const request = await Promise.race([timer.promise.then(() => null), this.signal(id).arrived]);
          timer.cancel();
          return record({ value: request });
        }
        return recorded ?? record(await this.task(step));
      case 'activity':
        return recorded ?? record(await this.task(step));
      case 'all':
      case 'race': {
        if (recorded) return recorded;
        const settled: unknown[] = step.tasks.map(() => null);
        const all = Promise.all(
          step.tasks.map((task, i) =>
            this.task(task).then((outcome) => {
              if ('value' in outcome) settled[i] = outcome.value;
            }),
          ),
        );
        if (step.kind === 'all') {
          await all;
          return record({ value: { deadlineFirst: false, settled: [...settled] } });
        }
        const timer = this.timer(step.deadline);
        const cancelled = step.cancellable ? this.signal(id).arrived : new Promise<never>(() => undefined);
        const ended = await Promise.race([
          all.then(() => 'tasks' as const),
          timer.promise.then(() => 'deadline' as const),
          cancelled,
        ]);
        timer.cancel();
        if (typeof ended === 'object')
          return record({ value: { deadlineFirst: false, settled: [...settled], cancelled: ended } });
        return record({ value: { deadlineFirst: ended === 'deadline', settled: [...settled] } });
      }
    }
  }

  /** A scheduler timer that `stop()` interrupts: its wait ends in RunnerStopped, so the run ends too. */
  private timer(fireAt: number): { promise: Promise<void>; cancel: () => void } {
    const timer = this.options.scheduler.timer(fireAt);
    let interrupt = () => timer.cancel();
    const promise = new Promise<void>((resolve, reject) => {
      interrupt = () => {
        timer.cancel();
        reject(new RunnerStopped());
      };
      void timer.promise.then(() => {
        this.liveTimers.delete(interrupt);
        resolve();
      });
    });
    // (every wait is awaited or raced; this only keeps one left behind by a race from going unhandled)
    promise.catch(() => undefined);
    // A wait begun after stop() (a step that was under way returned) ends at once, or idle() would hang.
    if (this.stopped) interrupt();
    else this.liveTimers.add(interrupt);
    return {
      promise,
      cancel: () => {
        timer.cancel();
        this.liveTimers.delete(interrupt);
      },
    };
  }

  private async task(task: TaskStep): Promise<Outcome> {
    if (task.kind === 'timer') {
      await this.timer(task.fireAt).promise;
      return { value: null };
    }
    if (
      task.name === 'callParticipant' &&
      this.options.http &&
      (task.input as ParticipantCall).method === 'POST'
    )
      return { value: await this.seamRequest(task.input as ParticipantCall, this.options.http) };
    // Activities: transient failures (store outage) are retried with backoff, as Durable's RetryOptions do.
    const { retryAttempts, retryIntervalSeconds } = this.options.settings;
    const run = this.options.activities[task.name] as (input: unknown) => Promise<unknown>;
    for (let attempt = 1; ; attempt += 1) {
      try {
        return { value: await run(task.input) };
      } catch (error) {
        if (attempt >= retryAttempts || this.stopped) {
          if (task.name === 'callParticipant') return { value: participantCallFailed(error) };
          const code = (error as { code?: unknown }).code;
          return {
            error: { message: (error as Error).message, ...(typeof code === 'string' ? { code } : {}) },
          };
        }
        await this.timer(this.options.scheduler.now() + retryIntervalSeconds * 1000 * 2 ** (attempt - 1))
          .promise;
      }
    }
  }

  /** A job's POST answered by the `http` seam: what the activity would make of its answer. */
  private async seamRequest(
    call: ParticipantCall,
    http: (call: HttpCall) => Promise<HttpResult>,
  ): Promise<ActivityResult<HttpAnswer>> {
    const url = call.participantUrl;
    const audience = call.audience === undefined ? {} : { audience: call.audience };
    try {
      const {
        status,
        body: answered,
        location,
        retryAfterSeconds,
      } = await http({
        method: 'POST',
        url,
        body: (call as Extract<ParticipantCall, { method: 'POST' }>).body,
        ...audience,
      });
      return {
        ok: true,
        value: {
          status,
          body: answered,
          ...(status === 202 ? resolveLocation(location, url) : {}),
          ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
        },
      };
    } catch (error) {
      return participantCallFailed(error);
    }
  }
}
