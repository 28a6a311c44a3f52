import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type Decision,
  type RouteResolver,
  RoutingClient,
  RoutingServiceError,
  decide,
} from '../../shared/core/client';
import type { Location } from '../../shared/core/lock/document';
import type { Operation } from '../../shared/core/lock/view';
import { parsePreferWait } from '../../shared/migration/participantContract';
import { recordDecision } from '../../shared/migration/telemetry/decisions';
import type { TelemetrySink } from '../../shared/migration/telemetry/sink';
import type { VerifyAnswer } from '../../shared/migration/types';
import { type CopyJob, type CopyJobRequest, CopyJobs, parseJobRequest } from './copyJobs';
import { type EndNoticeRequest, isEndStep, mayDeleteCopy, parseEndNotice } from './notices';
import { RegionStore } from '../../examples/message-store/regionStore';
import { compareRegions } from '../../examples/message-store/verification';

/**
 * The baseline of bench/writeLockHold.ts: the message store's participant written by hand, without
 * `@routelock/participant` (the job rules in ./copyJobs.ts, the notices in ./notices.ts, HTTP here), so
 * the bench measures a delta's write-lock hold through the SDK (examples/message-store) and through this
 * side by side in one run: the SDK must add no poll. Not an example to copy; examples/message-store is.
 *
 * A sample participant: a message store that owns conversation messages in two regions (one SQLite file
 * each), resolves routes through RoutingClient and obeys the decisions:
 *  - writes refused with 423 + Retry-After during the write lock;
 *  - deletes turned into tombstones during the hard-delete lock;
 *  - anything sent through a region that is not the route's location (a pending target before the swap,
 *    a retired source after it) refused with 421 and the location to use.
 * It implements every rule of the participant contract (docs/design.md §6.5; the job rules in copyJobs.ts):
 *  - POST /migrate → 202 + an absolute Location and Retry-After while the copy runs, 200 only once it is
 *    done; a repeated POST answers for the same job, a failed job POSTed again runs again;
 *  - `Prefer: wait=N` (RFC 7240) on the POST or a poll: the answer waits until the job ends or N seconds
 *    pass, so a copy that ends within N answers 200 with no poll at all (a short delta under the write
 *    lock); `honoursPreferWait: false` is a build that ignores the header, polled as before;
 *  - a newer job of a resource supersedes an older one (whose copy is then never applied; its poll
 *    answers 409), and a POST of an older job than one seen answers 409;
 *  - `preflight` (a dry run's optional step): 200 with each region's reachability and counts;
 *  - `verify` (under the write lock, after the delta): 200 with both regions' counts and digests of the
 *    resource's items, a match only if they are equal (verification.ts), at once (no job, nothing copied);
 *  - the end notices (`completed`, `failed`, `cancelled`; notices.ts): after `completed` the source's copy
 *    is deleted once `cleanUpSourceAfter` has passed, after `failed` or `cancelled` the target's partial
 *    copy at once; either only if the route, resolved afresh, is not there (never live data). A notice of
 *    a migration it never copied for is a 200 no-op;
 *  - 404 to a step it does not implement (anything else), 404 to a poll of an unknown job, 400 to a
 *    malformed body.
 * Tombstones are carried over and applied at the target.
 *
 * Negative controls: `ignoreWriteLock`, a build that accepts writes during the write lock; and
 * `ignoreSupersede`, one that lets a superseded job's copy land late. Seams for the drill and the tests:
 * `dropItemFromNextDelta`, a delta copy that loses an item (what `verify` must catch); `failNextCopies`
 * and `failCopy`, copies that fail.
 */

export type Outcome =
  | { status: 'ok' }
  | { status: 'tombstoned' }
  | { status: 'locked'; retryAfterSeconds: number }
  | { status: 'notHere'; location: Location }
  /** A write or delete decided on a stale view during a routelock outage (`serveStaleReads`): 503. */
  | { status: 'unavailable'; retryAfterSeconds: number }
  | { status: 'missing' };

export interface AcceptedWrite {
  conversationId: string;
  messageId: string;
  region: string;
  at: number;
  kind: 'write' | 'delete' | 'tombstone';
}

export interface MessageStoreOptions {
  regions: Record<string, string>; // region → SQLite path
  /** The routing API (`…/api`); may also be given later with `useRouting`. */
  routingUrl?: string;
  /**
   * The routing client, instead of one for `routingUrl`: a unit test passes `TestRoutingClient`
   * (`@routelock/client/testing`) to put a conversation into any route state without a server.
   */
  routing?: RouteResolver;
  ignoreWriteLock?: boolean;
  /** How long a copy job takes (fixed, or per job), so the phases can be watched. */
  copyDelayMs?: number | ((job: CopyJobRequest) => number);
  /** The Retry-After (seconds) of a 202 while a copy runs (default 1). */
  retryAfterSeconds?: number;
  /** The service's public origin for the poll Location (default the address it listens on). */
  publicUrl?: string;
  /** Negative control: a superseded job still applies its copy when it finishes late. */
  ignoreSupersede?: boolean;
  /**
   * Fault injection per job, for a store that serves other resources meanwhile (`failNextCopies` counts
   * every resource's copies): a copy this answers true for throws, so its job fails and its poll answers 500.
   */
  failCopy?: (job: CopyJobRequest) => boolean;
  /** A build without `verify` (default: with): it answers 404, "not implemented". */
  implementsVerify?: boolean;
  /** Whether `Prefer: wait=N` holds the answer until the job ends (default true; false: 202 at once). */
  honoursPreferWait?: boolean;
  clock?: () => number;
  /** Where the request-path counters go (refusals, tombstones, misdirected; shared/migration/telemetry/decisions.ts). */
  telemetry?: Pick<TelemetrySink, 'metric'>;
}

/** One clean-up an end notice asked for, and what became of it. */
export interface CleanUp {
  migrationId: string;
  resourceId: string;
  step: 'completed' | 'failed' | 'cancelled';
  /** The region whose copy it is about: the source after `completed`, the target otherwise. */
  region: string;
  /** When it may run (epoch ms): `cleanUpSourceAfter`, or the notice's arrival. */
  notBefore: number;
  state: 'scheduled' | 'deleted' | 'kept';
  /** Why a copy was kept (the route there, a lock bringing it there, no route). */
  why?: string;
  at?: number;
}

/**
 * The participant's own work, as it reports it: a copy run from its start to its end, a verify's
 * comparison. What the drill and bench/writeLockHold.ts subtract from the write-lock hold.
 */
export interface ParticipantWork {
  resourceId: string;
  migrationId: string;
  migrationAttempt: number;
  step: string;
  stepAttempt: number;
  startedAt: number;
  endedAt: number;
}

/** setTimeout's longest delay (a longer one fires at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class MessageStore {
  readonly stores: Map<string, RegionStore>;
  readonly accepted: AcceptedWrite[] = [];
  readonly counters = {
    writesRefused: 0,
    deletesTombstoned: 0,
    misdirected: 0,
    verifications: 0,
    mismatches: 0,
    deltaItemsDropped: 0,
    /** GETs of a job's Location (a participant call that `Prefer: wait` answered needs none). */
    polls: 0,
  };
  /** Every clean-up an end notice asked for, by (migrationId, migrationAttempt, resourceId). */
  readonly cleanUps = new Map<string, CleanUp>();
  private readonly cleanUpTimers = new Map<string, NodeJS.Timeout>();
  /** The seam's armed resources (dropItemFromNextDelta). */
  private readonly deltaDrops = new Set<string>();
  private routing: RouteResolver;
  readonly jobs = new CopyJobs();
  /** Every copy applied at a target, in order (what a test checks the supersede rule against). */
  readonly copies: { jobId: string; migrationId: string; step: string; stepAttempt: number }[] = [];
  /** The work of every copy run that ended and every verify, in the order they ended. */
  readonly work: ParticipantWork[] = [];
  /** Answers held by `Prefer: wait`, by job id: released when the job's run ends or stops. */
  private readonly waiting = new Map<string, Set<() => void>>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private copyFailures = 0;
  private readonly clock: () => number;
  private server: Server | undefined;
  private closed = false;
  url = '';

  constructor(private readonly options: MessageStoreOptions) {
    this.stores = new Map(
      Object.entries(options.regions).map(([region, path]) => [region, new RegionStore(region, path)]),
    );
    this.clock = options.clock ?? Date.now;
    // A short client-side skew margin: the drill runs everything on one clock.
    this.routing =
      options.routing ??
      new RoutingClient({ baseUrl: options.routingUrl ?? 'http://127.0.0.1:1/api', clockSkewSeconds: 0 });
  }

  /** Point the store at the routing API (when it starts after the store). */
  useRouting(routingUrl: string): void {
    this.routing = new RoutingClient({ baseUrl: routingUrl, clockSkewSeconds: 0 });
  }

  private store(region: string): RegionStore {
    const store = this.stores.get(region);
    if (!store) throw new Error(`no region ${region}`);
    return store;
  }

  /** The route view, through the client's cache (what every request of this service does first). */
  async resolve(conversationId: string) {
    return this.routing.resolve(conversationId);
  }

  /** The decision as a request-path counter (the workbook's refusals panel); a build that ignores the lock did not refuse. */
  private count(decision: Decision, operation: Operation, region: string): void {
    if (!this.options.telemetry || (decision.kind === 'deny' && this.options.ignoreWriteLock)) return;
    recordDecision(this.options.telemetry, decision, { service: 'message-store', operation, region });
  }

  /** Resolve and decide a mutation; a refusal comes back as the outcome to answer with. */
  private async gate(region: string, conversationId: string, operation: 'write' | 'delete') {
    const decision = decide(await this.resolve(conversationId), operation, region);
    this.count(decision, operation, region);
    if (decision.kind === 'notHere') {
      this.counters.misdirected += 1;
      return { refused: { status: 'notHere', location: decision.location } as Outcome, decision };
    }
    if (decision.kind === 'unavailable')
      return {
        refused: { status: 'unavailable', retryAfterSeconds: decision.retryAfterSeconds } as Outcome,
        decision,
      };
    if (decision.kind === 'deny' && !this.options.ignoreWriteLock) {
      this.counters.writesRefused += 1;
      return {
        refused: { status: 'locked', retryAfterSeconds: decision.retryAfterSeconds } as Outcome,
        decision,
      };
    }
    return { decision };
  }

  async write(region: string, conversationId: string, messageId: string, text: string): Promise<Outcome> {
    const { refused } = await this.gate(region, conversationId, 'write');
    if (refused) return refused;
    this.store(region).put(conversationId, messageId, text, this.clock());
    this.accepted.push({ conversationId, messageId, region, at: this.clock(), kind: 'write' });
    return { status: 'ok' };
  }

  async remove(region: string, conversationId: string, messageId: string): Promise<Outcome> {
    const { refused, decision } = await this.gate(region, conversationId, 'delete');
    if (refused) return refused;
    const store = this.store(region);
    if (decision.kind === 'tombstone') {
      store.tombstone(conversationId, messageId, this.clock());
      this.counters.deletesTombstoned += 1;
      this.accepted.push({ conversationId, messageId, region, at: this.clock(), kind: 'tombstone' });
      return { status: 'tombstoned' };
    }
    store.remove(conversationId, messageId);
    this.accepted.push({ conversationId, messageId, region, at: this.clock(), kind: 'delete' });
    return { status: 'ok' };
  }

  async read(region: string, conversationId: string): Promise<Outcome & { messages?: string[] }> {
    const decision = decide(await this.resolve(conversationId), 'read', region);
    this.count(decision, 'read', region);
    if (decision.kind === 'notHere') return { status: 'notHere', location: decision.location };
    return {
      status: 'ok',
      messages: this.store(region)
        .list(conversationId)
        .filter((m) => !m.deleted)
        .map((m) => m.messageId),
    };
  }

  /** Forget a cached route (after a refusal, the next attempt resolves afresh). */
  forget(conversationId: string): void {
    this.routing.forget(conversationId);
  }

  /** Fault injection for tests: the next `count` copies throw (a job that failed, to be POSTed again). */
  failNextCopies(count: number): void {
    this.copyFailures = count;
  }

  /**
   * The seam for verification (off by default): the next delta copy of `resourceId` loses one item at
   * the target, the newest live one the source holds (left out, and removed at the target if an earlier
   * copy had put it there). What a participant's buggy delta looks like; `verify` must catch it.
   */
  dropItemFromNextDelta(resourceId: string): void {
    this.deltaDrops.add(resourceId);
  }

  /** Run one copy job's current run after the copy delay; a superseded or rerun job never applies it. */
  private runCopy(job: CopyJob): void {
    const run = job.run;
    const { request } = job;
    const { copyDelayMs = 100 } = this.options;
    const delay = typeof copyDelayMs === 'number' ? copyDelayMs : copyDelayMs(request);
    const startedAt = this.clock();
    const timer = setTimeout(() => {
      this.timers.delete(job.id);
      try {
        this.applyCopy(job, run);
      } finally {
        this.workDone(request, startedAt);
        this.release(job.id);
      }
    }, delay);
    this.timers.set(job.id, timer);
  }

  /** A copy run's work, once it ended. */
  private workDone(request: CopyJobRequest, startedAt: number): void {
    const { resourceId, migrationId, migrationAttempt, step, stepAttempt } = request;
    this.work.push({
      resourceId,
      migrationId,
      migrationAttempt,
      step,
      stepAttempt,
      startedAt,
      endedAt: this.clock(),
    });
  }

  /** The copy itself, unless the run was superseded or rerun meanwhile. */
  private applyCopy(job: CopyJob, run: number): void {
    const { request } = job;
    if (!this.jobs.mayApply(job, run) && !(this.options.ignoreSupersede && job.state === 'superseded'))
      return;
    try {
      if (this.copyFailures > 0) {
        this.copyFailures -= 1;
        throw new Error('injected copy failure');
      }
      if (this.options.failCopy?.(request)) throw new Error('injected copy failure');
      const target = this.store(request.to.region);
      const source = this.store(request.from.region);
      target.copyFrom(source, request.resourceId);
      if (request.step === 'deltaCopy' && this.deltaDrops.delete(request.resourceId))
        this.dropNewestItem(source, target, request);
      this.copies.push({
        jobId: job.id,
        migrationId: request.migrationId,
        step: request.step,
        stepAttempt: request.stepAttempt,
      });
      this.jobs.finish(job, run, { ok: true });
    } catch (error) {
      this.jobs.finish(job, run, { ok: false, error: (error as Error).message });
    }
  }

  /** Answer the requests held for this job (its run ended, or it stopped). */
  private release(jobId: string): void {
    const waiters = this.waiting.get(jobId);
    this.waiting.delete(jobId);
    for (const wake of waiters ?? []) wake();
  }

  /**
   * Hold an answer while the job runs, at most `waitSeconds` (the request's `Prefer: wait`): resolves
   * when its run ends or stops, or when the wait is over.
   */
  private async whileRunning(job: CopyJob, waitSeconds: number | undefined): Promise<void> {
    if (waitSeconds === undefined || this.options.honoursPreferWait === false || job.state !== 'running')
      return;
    await new Promise<void>((resolve) => {
      let waiters = this.waiting.get(job.id);
      if (!waiters) this.waiting.set(job.id, (waiters = new Set()));
      const wake = () => {
        clearTimeout(timer);
        waiters.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, waitSeconds * 1000);
      waiters.add(wake);
    });
  }

  private dropNewestItem(source: RegionStore, target: RegionStore, request: CopyJobRequest): void {
    const live = source.list(request.resourceId).filter((r) => !r.deleted);
    const newest = live.reduce<(typeof live)[number] | undefined>(
      (a, r) => (!a || r.updatedAt >= a.updatedAt ? r : a),
      undefined,
    );
    if (!newest) return;
    this.counters.deltaItemsDropped += 1;
    target.remove(request.resourceId, newest.messageId);
  }

  /** A superseded job stops: its pending copy is cancelled (unless the negative control keeps it). */
  private stopCopy(job: CopyJob): void {
    if (this.options.ignoreSupersede) return;
    clearTimeout(this.timers.get(job.id));
    this.timers.delete(job.id);
    this.release(job.id);
  }

  /**
   * A dry run's question (an optional step; no job, nothing copied): 200 with whether it
   * reaches both regions and what each holds of the resource, tombstones counted apart.
   */
  private preflight(body: unknown): { status: number; body: unknown } {
    const { resourceId, from, to } = (body ?? {}) as { resourceId?: unknown; from?: unknown; to?: unknown };
    const regionOf = (l: unknown) => (l as { region?: unknown } | null)?.region;
    const [source, target] = [regionOf(from), regionOf(to)];
    if (typeof resourceId !== 'string' || typeof source !== 'string' || typeof target !== 'string')
      return { status: 400, body: { error: 'preflight needs resourceId, from.region and to.region' } };
    const at = (region: string) => {
      const store = this.stores.get(region);
      if (!store) return { region, reachable: false };
      const rows = store.list(resourceId);
      const tombstones = rows.filter((r) => r.deleted).length;
      return { region, reachable: true, items: rows.length - tombstones, tombstones };
    };
    const report = { from: at(source), to: at(target) };
    return { status: 200, body: { ready: report.from.reachable && report.to.reachable, ...report } };
  }

  /**
   * `verify` (docs/design.md §6.5): the resource's items at the source against the target's, as they stand
   * now (under the write lock, nothing changes them). One SQLite read per region: fast, as it must be.
   */
  private verify(body: unknown): { status: number; body: unknown } {
    const parsed = parseJobRequest(body);
    if (!parsed.ok) return { status: 400, body: { error: parsed.error } };
    const { resourceId, from, to } = parsed.request;
    const [source, target] = [this.stores.get(from.region), this.stores.get(to.region)];
    if (!source || !target)
      return { status: 400, body: { error: `no region ${source ? to.region : from.region} here` } };
    const startedAt = this.clock();
    const answer: VerifyAnswer = compareRegions(source.list(resourceId), target.list(resourceId));
    this.workDone(parsed.request, startedAt);
    this.counters.verifications += 1;
    if (!answer.match) this.counters.mismatches += 1;
    return { status: 200, body: answer };
  }

  /** The participant contract's POST: the answer for one copy job (starting it when it should run). */
  migrate(body: unknown): Answer {
    return this.post(body).answer;
  }

  /**
   * The POST as HTTP answers it: with `Prefer: wait=N`, a job that runs is answered once it ends (200,
   * or what a poll would answer then), or after N seconds with 202 as before.
   */
  async migrateWaiting(body: unknown, waitSeconds: number | undefined): Promise<Answer> {
    const { answer, job } = this.post(body);
    if (!job || answer.status !== 202) return answer;
    await this.whileRunning(job, waitSeconds);
    return this.poll(job.id);
  }

  /** A poll as HTTP answers it: held like the POST while the job runs (`Prefer: wait`). */
  async pollWaiting(jobId: string, waitSeconds: number | undefined): Promise<Answer> {
    this.counters.polls += 1;
    const job = this.jobs.get(jobId);
    if (job) await this.whileRunning(job, waitSeconds);
    return this.poll(jobId);
  }

  private post(body: unknown): { answer: Answer; job?: CopyJob } {
    const step = (body as { step?: unknown } | null)?.step;
    if (step === 'preflight') return { answer: this.preflight(body) };
    if (step === 'verify' && this.options.implementsVerify !== false) return { answer: this.verify(body) };
    const parsed = parseJobRequest(body);
    if (!parsed.ok) return { answer: { status: 400, body: { error: parsed.error } } };
    const decision = this.jobs.post(parsed.request);
    switch (decision.kind) {
      case 'notImplemented':
        return { answer: { status: 404, body: { error: `step ${decision.step} is not implemented` } } };
      case 'older':
        return {
          answer: {
            status: 409,
            body: { error: 'an older job than one already seen', newest: describe(decision.newest) },
          },
        };
      case 'done':
        return { answer: { status: 200, body: { done: true } } };
      case 'start':
        for (const old of decision.superseded) this.stopCopy(old);
        this.runCopy(decision.job);
        return { answer: this.running(decision.job), job: decision.job };
      case 'running':
        return { answer: this.running(decision.job), job: decision.job };
    }
  }

  /** The participant contract's poll (GET of the Location). */
  poll(jobId: string): Answer {
    const job = this.jobs.get(jobId);
    if (!job) return { status: 404, body: { error: 'no such job' } };
    switch (job.state) {
      case 'done':
        return { status: 200, body: { done: true } };
      case 'running':
        return this.running(job);
      case 'failed':
        // POSTing the job again starts it again
        return { status: 500, body: { error: job.error } };
      case 'superseded':
        return {
          status: 409,
          body: { error: 'superseded', supersededBy: job.supersededBy && describe(job.supersededBy) },
        };
    }
  }

  /**
   * An end notice (docs/design.md §6.11). `completed`: the source's copy is deleted once `cleanUpSourceAfter`
   * has passed (scheduled; a repeated notice answers for the same clean-up). `failed` / `cancelled`: the
   * migration's running copies stop, and the target's partial copy is dropped now. Both only if the route,
   * resolved afresh, is neither at that region nor being brought there by a lock. A routing service that
   * cannot be reached answers 503 (routelock retries the notice).
   */
  async endNotice(body: unknown): Promise<{ status: number; body: unknown }> {
    const parsed = parseEndNotice(body);
    if (!parsed.ok) return { status: 400, body: { error: parsed.error } };
    const notice = parsed.notice;
    // one clean-up per attempt that ended: a retry (same migrationId, a later attempt) gets its own
    const key = JSON.stringify([notice.migrationId, notice.migrationAttempt, notice.resourceId]);
    const known = this.cleanUps.get(key);
    if (known) return { status: 200, body: { cleanUp: known } };
    if (!this.jobs.knows(notice.migrationId, notice.resourceId))
      return { status: 200, body: { ignored: 'no copy of this migration here' } };
    if (notice.step === 'completed') {
      const cleanUp = this.newCleanUp(notice, notice.from.region, notice.cleanUpSourceAfter as number);
      this.cleanUps.set(key, cleanUp);
      this.scheduleCleanUp(key, cleanUp);
      return { status: 200, body: { cleanUp } };
    }
    for (const job of this.jobs.abandon(notice.migrationId, notice.resourceId, notice.migrationAttempt))
      this.stopCopy(job);
    const cleanUp = this.newCleanUp(notice, notice.to.region, this.clock());
    const done = await this.cleanUpNow(cleanUp);
    if (done === 'unreachable') return { status: 503, body: { error: 'the routing service is unreachable' } };
    this.cleanUps.set(key, cleanUp);
    return { status: 200, body: { cleanUp } };
  }

  private newCleanUp(notice: EndNoticeRequest, region: string, notBefore: number): CleanUp {
    const { migrationId, resourceId, step } = notice;
    return { migrationId, resourceId, step, region, notBefore, state: 'scheduled' };
  }

  /** Never before `notBefore` (on this store's clock); a routing service that cannot be reached: try again. */
  private scheduleCleanUp(key: string, cleanUp: CleanUp, delayMs = cleanUp.notBefore - this.clock()): void {
    if (this.closed) return; // a clean-up in flight at close() must not re-arm itself forever
    const timer = setTimeout(
      () => {
        this.cleanUpTimers.delete(key);
        if (this.clock() < cleanUp.notBefore) return this.scheduleCleanUp(key, cleanUp);
        this.cleanUpNow(cleanUp).then(
          (done) => {
            if (done === 'unreachable') this.scheduleCleanUp(key, cleanUp, 1000);
          },
          () => this.scheduleCleanUp(key, cleanUp, 1000),
        );
      },
      // setTimeout fires at once past 2^31 − 1 ms (24.8 days): wait in steps, the check above re-arms
      Math.min(MAX_TIMER_MS, Math.max(0, delayMs)),
    );
    this.cleanUpTimers.set(key, timer);
  }

  /** Delete the region's copy if the route, resolved afresh, allows it; else keep it and say why. */
  private async cleanUpNow(cleanUp: CleanUp): Promise<'done' | 'unreachable'> {
    this.routing.forget(cleanUp.resourceId);
    let view;
    try {
      view = await this.resolve(cleanUp.resourceId);
    } catch (error) {
      if (!(error instanceof RoutingServiceError && error.status === 404)) return 'unreachable';
      view = null;
    }
    const verdict = mayDeleteCopy(view, cleanUp.region);
    cleanUp.at = this.clock();
    if (verdict.ok) {
      this.stores.get(cleanUp.region)?.purge(cleanUp.resourceId);
      cleanUp.state = 'deleted';
    } else {
      cleanUp.state = 'kept';
      cleanUp.why = verdict.why;
    }
    return 'done';
  }

  private running(job: CopyJob) {
    const origin = this.options.publicUrl ?? this.url;
    return {
      status: 202,
      body: { done: false },
      headers: {
        // absolute: the Durable extension builds the poll URL with `new Uri(location)`
        Location: new URL(`/jobs/${encodeURIComponent(job.id)}`, origin).href,
        'Retry-After': String(this.options.retryAfterSeconds ?? 1),
      },
    };
  }

  /**
   * Remove local copies the route no longer points at (a retired source after its swap). A region that is
   * the target of a live lock keeps its copy: it is receiving the migration.
   */
  async janitor(): Promise<number> {
    let purged = 0;
    for (const [region, store] of this.stores) {
      for (const conversationId of store.conversations()) {
        this.routing.forget(conversationId);
        let view;
        try {
          view = await this.resolve(conversationId);
        } catch (error) {
          if (error instanceof RoutingServiceError && error.status === 404) continue;
          throw error;
        }
        if (view.location.region === region) continue;
        if (view.lock && view.lock.target.region === region) continue;
        store.purge(conversationId);
        purged += 1;
      }
    }
    return purged;
  }

  async listen(): Promise<string> {
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((error: unknown) => {
        res
          .writeHead(500, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: (error as Error).message }));
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
    const body = await new Promise<string>((resolve) => {
      let data = '';
      req.on('data', (c: Buffer) => (data += c.toString()));
      req.on('end', () => resolve(data));
    });
    const url = new URL(req.url ?? '/', 'http://localhost');
    const send = (status: number, value: unknown, headers: Record<string, string> = {}) =>
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(value));
    if (req.method === 'POST' && url.pathname === '/migrate') {
      let value: unknown;
      try {
        value = JSON.parse(body);
      } catch {
        return send(400, { error: 'expected a JSON body' });
      }
      if (isEndStep((value as { step?: unknown } | null)?.step)) {
        const answer = await this.endNotice(value);
        return send(answer.status, answer.body);
      }
      const answer = await this.migrateWaiting(value, parsePreferWait(req.headers.prefer));
      return send(answer.status, answer.body, answer.headers);
    }
    const jobMatch = /^\/jobs\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && jobMatch?.[1]) {
      const answer = await this.pollWaiting(
        decodeURIComponent(jobMatch[1]),
        parsePreferWait(req.headers.prefer),
      );
      return send(answer.status, answer.body, answer.headers);
    }
    const messages = /^\/regions\/([a-z0-9-]+)\/conversations\/([^/]+)\/messages(?:\/([^/]+))?$/.exec(
      url.pathname,
    );
    if (messages?.[1] && messages[2]) {
      const [region, conversationId, messageId] = [
        messages[1],
        decodeURIComponent(messages[2]),
        messages[3] && decodeURIComponent(messages[3]),
      ];
      let outcome: Outcome & { messages?: string[] };
      if (req.method === 'GET') outcome = await this.read(region, conversationId);
      else if (req.method === 'POST') {
        const parsed = JSON.parse(body) as { messageId: string; text: string };
        outcome = await this.write(region, conversationId, parsed.messageId, parsed.text);
      } else if (req.method === 'DELETE' && messageId)
        outcome = await this.remove(region, conversationId, messageId);
      else return send(405, { error: 'method not allowed' });
      if (outcome.status === 'locked')
        return send(423, outcome, { 'Retry-After': String(outcome.retryAfterSeconds) });
      if (outcome.status === 'notHere') return send(421, outcome);
      if (outcome.status === 'unavailable')
        return send(503, outcome, { 'Retry-After': String(outcome.retryAfterSeconds) });
      return send(200, outcome);
    }
    if (req.method === 'POST' && url.pathname === '/janitor')
      return send(200, { purged: await this.janitor() });
    return send(404, { error: 'not found' });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const timer of [...this.timers.values(), ...this.cleanUpTimers.values()]) clearTimeout(timer);
    for (const jobId of [...this.waiting.keys()]) this.release(jobId);
    this.timers.clear();
    this.cleanUpTimers.clear();
    await new Promise<void>((resolve) => {
      if (!this.server) return resolve();
      this.server.closeAllConnections();
      this.server.close(() => resolve());
    });
    for (const store of this.stores.values()) store.close();
  }
}

/** One HTTP answer of the participant contract. */
type Answer = { status: number; body: unknown; headers?: Record<string, string> };

/** A job as a 409 names it. */
function describe(job: CopyJob) {
  const { migrationId, migrationAttempt, step, stepAttempt, sequence } = job.request;
  return { migrationId, migrationAttempt, step, stepAttempt, sequence };
}
