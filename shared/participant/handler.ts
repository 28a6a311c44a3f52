import {
  isEndStep,
  parseEndNotice,
  parseJobRequest,
  parsePreferWait,
  parsePreflight,
} from '../core/participantWire';
import type { CallerRequest } from './auth';
import { isParticipantError } from './errors';
import { JobBook } from './jobBook';
import { type Job, describeJob } from './jobTable';
import { type CleanUp, cleanUpKey, newCleanUp, runCleanUp } from './notices';
import {
  DEFAULT_FORGET_ENDED_AFTER_SECONDS,
  DEFAULT_RETAIN_OLDER_JOBS_SECONDS,
  type ParticipantOptions,
  checkOptions,
} from './options';

/**
 * `createParticipantHandler`: the participant contract (routelock design §6.5) answered for a team that
 * supplies only its copy functions. The rules live in pure functions (the job rules, per resource: `postJob`, `finishRun`;
 * the wire: `parseJobRequest`, `parsePreferWait`; the notices' delete guard, `mayDeleteCopy`); this is the shell that runs the copies,
 * aborts superseded ones, holds answers for `Prefer: wait`, schedules clean-ups and answers HTTP. The
 * adapters (`nodeListener`, `expressParticipant`, `fastifyParticipant`) put it on node:http, Express and Fastify.
 */

/** A request as the adapters hand it over. */
export interface ParticipantHttpRequest extends CallerRequest {
  /** The parsed JSON body, when the framework parsed it. */
  body?: unknown;
  /** Read the raw body (node:http): called only once the caller is authenticated. */
  readBody?: () => Promise<string>;
  /** The request's own origin (`http://127.0.0.1:8080`), for the poll Location without `publicUrl`. */
  origin?: string;
}

export interface ParticipantHttpAnswer {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

export interface ParticipantHandler {
  /** Answer one request (framework-neutral; the adapters call it). */
  answer(request: ParticipantHttpRequest): Promise<ParticipantHttpAnswer>;
  /** Whether a request of this method and path is the participant's (the adapters pass others on). */
  handles(method: string, path: string): boolean;
  /** A job by its id (for tests and dashboards). */
  job(id: string): Job | undefined;
  /** Every clean-up a notice asked for, by (migrationId, migrationAttempt, resourceId). */
  readonly cleanUps: ReadonlyMap<string, CleanUp>;
  /** GETs of a job's Location (a call that `Prefer: wait` answered needs none). */
  readonly polls: number;
  /** Stop: running copies are aborted, held answers released, clean-up timers cleared. */
  close(): void;
}

/** setTimeout's longest delay (a longer one fires at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** The longest `Prefer: wait` honoured: routelock asks for at most 5 s; a held answer keeps a connection. */
const MAX_WAIT_SECONDS = 60;
/** How soon a clean-up that could not run (routelock unreachable, the delete failed) is tried again. */
const CLEAN_UP_RETRY_MS = 1000;

const json = (
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): ParticipantHttpAnswer => ({
  status,
  headers,
  body,
});

export function createParticipantHandler(options: ParticipantOptions): ParticipantHandler {
  checkOptions(options);
  return new Participant(options);
}

class Participant implements ParticipantHandler {
  /** The jobs, one small record per resource (`JobBook`): a request touches only its resource's. */
  private readonly jobs: JobBook;
  private readonly controllers = new Map<string, AbortController>();
  /** Answers held by `Prefer: wait`, by job id: released when the job's run ends or stops. */
  private readonly waiting = new Map<string, Set<() => void>>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly cleanUpMap = new Map<string, CleanUp>();
  /**
   * Ended clean-ups in the order they ended, dropped from `cleanUpMap` once `forgetEndedAfterSeconds` has
   * passed, as the job book forgets their resources (a repeated notice then finds no copy: a 200 no-op).
   * An array read from `endedHead`, not shifted, so pruning never walks what it has already dropped.
   */
  private endedCleanUps: { key: string; at: number }[] = [];
  private endedHead = 0;
  private readonly forgetEndedAfterMs: number;
  private readonly lifetime = new AbortController();
  private readonly path: string;
  private readonly jobsPath: string;
  private readonly clock: () => number;
  polls = 0;

  constructor(private readonly options: ParticipantOptions) {
    this.path = options.path ?? '/migrate';
    this.jobsPath = options.jobsPath ?? '/jobs';
    this.clock = options.clock ?? Date.now;
    this.forgetEndedAfterMs = 1000 * (options.forgetEndedAfterSeconds ?? DEFAULT_FORGET_ENDED_AFTER_SECONDS);
    this.jobs = new JobBook({
      retainOlderMs: 1000 * (options.retainOlderJobsSeconds ?? DEFAULT_RETAIN_OLDER_JOBS_SECONDS),
      forgetEndedAfterMs: this.forgetEndedAfterMs,
      clock: this.clock,
    });
  }

  get cleanUps(): ReadonlyMap<string, CleanUp> {
    return this.cleanUpMap;
  }

  job(id: string): Job | undefined {
    return this.jobs.job(id);
  }

  handles(method: string, path: string): boolean {
    return (
      (method === 'POST' && path === this.path) || (method === 'GET' && this.jobIdOf(path) !== undefined)
    );
  }

  private jobIdOf(path: string): string | undefined {
    const prefix = `${this.jobsPath}/`;
    if (!path.startsWith(prefix)) return undefined;
    const id = path.slice(prefix.length);
    return id === '' || id.includes('/') ? undefined : decodeURIComponent(id);
  }

  async answer(request: ParticipantHttpRequest): Promise<ParticipantHttpAnswer> {
    const path = new URL(request.url, 'http://localhost').pathname;
    if (!this.handles(request.method, path)) return json(404, { error: 'not found' });
    try {
      await this.options.authenticate(request);
    } catch (error) {
      if (!isParticipantError(error)) throw error;
      const retry: Record<string, string> =
        error.code === 'CallerCheckUnavailable' ? { 'Retry-After': '5' } : {};
      const challenge: Record<string, string> = error.status === 401 ? { 'WWW-Authenticate': 'Bearer' } : {};
      return json(error.status, { error: error.message, code: error.code }, { ...retry, ...challenge });
    }
    const wait =
      this.options.honoursPreferWait === false ? undefined : parsePreferWait(request.headers.prefer);
    const origin = this.originOf(request);
    if (request.method === 'GET') {
      this.polls += 1;
      return this.poll(this.jobIdOf(path) as string, wait, origin);
    }
    let body = request.body;
    if (request.readBody !== undefined) {
      try {
        body = JSON.parse(await request.readBody());
      } catch {
        return json(400, { error: 'expected a JSON body' });
      }
    }
    return this.post(body, wait, origin);
  }

  private originOf(request: ParticipantHttpRequest): string {
    const configured = this.options.publicUrl;
    if (configured !== undefined) return typeof configured === 'string' ? configured : configured();
    return request.origin ?? `http://${String(request.headers.host ?? 'localhost')}`;
  }

  private async post(
    body: unknown,
    wait: number | undefined,
    origin: string,
  ): Promise<ParticipantHttpAnswer> {
    const step = (body as { step?: unknown } | null)?.step;
    if (isEndStep(step)) return this.notice(body);
    if (step === 'preflight') return this.preflight(body);
    if (step === 'verify' && this.options.verify !== undefined) return this.verify(body);
    const parsed = parseJobRequest(body);
    if (!parsed.ok) return json(400, { error: parsed.error });
    const decision = this.jobs.post(parsed.value);
    switch (decision.kind) {
      case 'notImplemented':
        return json(404, { error: `step ${decision.step} is not implemented` });
      case 'older':
        return json(409, {
          error: 'an older job than one already seen',
          newest: describeJob(decision.newest),
        });
      case 'done':
        return json(200, { done: true });
      case 'start':
        for (const old of decision.superseded) this.stop(old.id, `superseded by ${decision.job.id}`);
        this.start(decision.job);
        return this.poll(decision.job.id, wait, origin);
      case 'running':
        return this.poll(decision.job.id, wait, origin);
    }
  }

  /** The poll's answer (and the POST's, for a job that runs): held while the job runs, up to `wait`. */
  private async poll(id: string, wait: number | undefined, origin: string): Promise<ParticipantHttpAnswer> {
    if (wait !== undefined && wait > 0) await this.whileRunning(id, Math.min(wait, MAX_WAIT_SECONDS));
    const job = this.jobs.job(id);
    if (!job) return json(404, { error: 'no such job' });
    switch (job.state) {
      case 'done':
        return json(200, { done: true });
      case 'running':
        return json(
          202,
          { done: false },
          {
            // absolute: the Durable extension builds the poll URL with `new Uri(location)`
            Location: new URL(`${this.jobsPath}/${encodeURIComponent(job.id)}`, origin).href,
            'Retry-After': String(this.options.retryAfterSeconds ?? 1),
          },
        );
      case 'failed':
        // POSTing the job again starts it again
        return json(500, { error: job.error });
      case 'superseded': {
        const by = job.supersededBy === undefined ? undefined : this.jobs.job(job.supersededBy);
        return json(409, { error: 'superseded', supersededBy: by && describeJob(by) });
      }
    }
  }

  /** Run one job's current run; its outcome counts only while the run is current (finishRun). */
  private start(job: Job): void {
    const controller = new AbortController();
    this.controllers.set(job.id, controller);
    const copy = job.request.step === 'bulkCopy' ? this.options.bulkCopy : this.options.deltaCopy;
    const { id, run } = job;
    const ended = (outcome: { ok: true } | { ok: false; error: string }) => {
      this.jobs.finish(id, run, outcome);
      if (this.controllers.get(id) === controller) this.controllers.delete(id);
      this.release(id);
    };
    Promise.resolve()
      .then(() => copy({ ...job.request, id, run }, controller.signal))
      .then(
        () => ended({ ok: true }),
        (error: unknown) => ended({ ok: false, error: (error as Error)?.message ?? String(error) }),
      );
  }

  /** A job that may not land (superseded, its migration ended): its copy is aborted, held answers released. */
  private stop(id: string, why: string): void {
    this.controllers.get(id)?.abort(new Error(why));
    this.controllers.delete(id);
    this.release(id);
  }

  private release(id: string): void {
    const waiters = this.waiting.get(id);
    this.waiting.delete(id);
    for (const wake of waiters ?? []) wake();
  }

  /** Resolves when the job's run ends or stops, or after `seconds`. */
  private async whileRunning(id: string, seconds: number): Promise<void> {
    if (this.jobs.job(id)?.state !== 'running') return;
    await new Promise<void>((resolve) => {
      let waiters = this.waiting.get(id);
      if (!waiters) this.waiting.set(id, (waiters = new Set()));
      const wake = () => {
        clearTimeout(timer);
        waiters.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, seconds * 1000);
      waiters.add(wake);
    });
  }

  /** A dry run's question: no job, nothing copied; 404 when the team has no preflight. */
  private async preflight(body: unknown): Promise<ParticipantHttpAnswer> {
    if (this.options.preflight === undefined)
      return json(404, { error: 'step preflight is not implemented' });
    const parsed = parsePreflight(body);
    if (!parsed.ok) return json(400, { error: parsed.error });
    return this.guarded(async () =>
      json(200, await this.options.preflight?.(parsed.value, this.lifetime.signal)),
    );
  }

  /** `verify`: answered at once (no job, nothing copied), under the write lock. */
  private async verify(body: unknown): Promise<ParticipantHttpAnswer> {
    const parsed = parseJobRequest(body);
    if (!parsed.ok) return json(400, { error: parsed.error });
    return this.guarded(async () =>
      json(200, await this.options.verify?.(parsed.value, this.lifetime.signal)),
    );
  }

  /** A team function's JobRefused is its 400; anything else it throws a 500 (routelock retries). */
  private async guarded(run: () => Promise<ParticipantHttpAnswer>): Promise<ParticipantHttpAnswer> {
    try {
      return await run();
    } catch (error) {
      if (isParticipantError(error)) return json(error.status, { error: error.message, code: error.code });
      return json(500, { error: (error as Error)?.message ?? String(error) });
    }
  }

  /**
   * An end notice. `completed`: a clean-up of the source, scheduled for `cleanUpSourceAfter` (a repeated
   * notice answers for the same one). `failed` / `cancelled`: the migration's running copies stop, and
   * the target's partial copy is cleaned up now; a routing service that cannot be reached answers 503
   * (routelock retries the notice). A notice of a migration it never copied for is a 200 no-op.
   */
  private async notice(body: unknown): Promise<ParticipantHttpAnswer> {
    const parsed = parseEndNotice(body);
    if (!parsed.ok) return json(400, { error: parsed.error });
    const notice = parsed.value;
    this.pruneCleanUps();
    const key = cleanUpKey(notice);
    const known = this.cleanUpMap.get(key);
    if (known) return json(200, { cleanUp: known });
    if (!this.jobs.knowsMigration(notice.migrationId, notice.resourceId))
      return json(200, { ignored: 'no copy of this migration here' });
    if (notice.step !== 'completed') {
      const stopped = this.jobs.abandon(notice.migrationId, notice.resourceId, notice.migrationAttempt);
      for (const job of stopped) this.stop(job.id, 'the migration ended');
    }
    if (this.options.onNotice === undefined) return json(200, { ignored: 'no clean-up here' });
    const cleanUp = newCleanUp(notice, this.clock());
    if (notice.step === 'completed') {
      this.cleanUpMap.set(key, cleanUp);
      this.schedule(key, cleanUp);
      return json(200, { cleanUp });
    }
    const done = await this.cleanUpNow(cleanUp);
    if (done === 'retry') return json(503, { error: 'the routing service is unreachable' });
    this.cleanUpEnded(key, done);
    return json(200, { cleanUp: done });
  }

  private cleanUpEnded(key: string, done: CleanUp): void {
    this.cleanUpMap.set(key, done);
    if (Number.isFinite(this.forgetEndedAfterMs)) this.endedCleanUps.push({ key, at: this.clock() });
  }

  /** Forget at most a few ended clean-ups per notice: the cost of a notice stays flat. */
  private pruneCleanUps(max = 8): void {
    const cutoff = this.clock() - this.forgetEndedAfterMs;
    for (let n = 0; n < max && this.endedHead < this.endedCleanUps.length; n += 1) {
      const oldest = this.endedCleanUps[this.endedHead] as { key: string; at: number };
      if (oldest.at > cutoff) break;
      this.cleanUpMap.delete(oldest.key);
      this.endedHead += 1;
    }
    if (this.endedHead > 1024 && this.endedHead * 2 > this.endedCleanUps.length) {
      this.endedCleanUps = this.endedCleanUps.slice(this.endedHead);
      this.endedHead = 0;
    }
  }

  private cleanUpNow(cleanUp: CleanUp): Promise<CleanUp | 'retry'> {
    const { routing, onNotice } = this.options;
    if (routing === undefined || onNotice === undefined) return Promise.resolve('retry');
    return runCleanUp(cleanUp, routing, onNotice, this.lifetime.signal, this.clock);
  }

  /** Never before `notBefore` (on the handler's clock); one that could not run is tried again. */
  private schedule(key: string, cleanUp: CleanUp, delayMs = cleanUp.notBefore - this.clock()): void {
    if (this.lifetime.signal.aborted) return; // a clean-up in flight at close() must not re-arm itself
    const fire = () => {
      this.timers.delete(key);
      if (this.clock() < cleanUp.notBefore) return this.schedule(key, cleanUp);
      this.cleanUpNow(cleanUp).then(
        (done) => {
          if (done === 'retry') this.schedule(key, cleanUp, CLEAN_UP_RETRY_MS);
          else this.cleanUpEnded(key, done);
        },
        () => this.schedule(key, cleanUp, CLEAN_UP_RETRY_MS),
      );
    };
    // setTimeout fires at once past 2^31 − 1 ms (24.8 days): wait in steps, the check above re-arms
    this.timers.set(key, setTimeout(fire, Math.min(MAX_TIMER_MS, Math.max(0, delayMs))));
  }

  close(): void {
    this.lifetime.abort(new Error('the participant handler closed'));
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    for (const id of [...this.controllers.keys()]) this.stop(id, 'the participant handler closed');
    for (const id of [...this.waiting.keys()]) this.release(id);
  }
}
