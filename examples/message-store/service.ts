import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type Decision,
  type RouteResolver,
  RoutingClient,
  RoutingServiceError,
  decide,
  recordDecision,
} from '../../shared/core/client';
import { ANSWERED, type GuardTarget, type RouteGuard, routeGuard } from '../../shared/core/clientMiddleware';
import type { Location } from '../../shared/core/lock/document';
import type { Operation } from '../../shared/core/lock/view';
import type { JobRequest, PreflightQuestion, VerifyAnswer } from '../../shared/core/participantWire';
import {
  type Authenticate,
  type CleanUp,
  type ParticipantHandler,
  type ParticipantJob,
  createParticipantHandler,
  handleNodeRequest,
  jobRefused,
  loopbackCallerOnly,
} from '../../shared/participant';
import type { TelemetrySink } from '../../shared/migration/telemetry/sink';
import { RegionStore } from './regionStore';
import { compareRegions } from './verification';

/** A copy job's request, as the store's options (copyDelayMs, failCopy) see it. */
export type CopyJobRequest = JobRequest;
export type { CleanUp };

/**
 * A sample participant: a message store that owns conversation messages in two regions (one SQLite file
 * each), resolves routes through RoutingClient and obeys the decisions:
 *  - writes refused with 423 + Retry-After during the write lock;
 *  - deletes turned into tombstones during the hard-delete lock;
 *  - anything sent through a region that is not the route's location (a pending target before the swap,
 *    a retired source after it) refused with 421 and the location to use.
 * Its participant endpoint (POST /migrate, GET /jobs/<id>) is `@routelock/participant`
 * (shared/participant): the SDK keeps every rule of the contract (docs/design.md §6.5: job identity,
 * re-POSTs, 202 + Location polling, `Prefer: wait`, supersession, the notice rules), and this store gives
 * it only its store logic:
 *  - `bulkCopy` / `deltaCopy`: copy the conversation from one region's SQLite file to the other's,
 *    tombstones included, unless the job's signal aborted (superseded, its migration ended);
 *  - `verify`: both regions' counts and digests (verification.ts);
 *  - `preflight`: each region's reachability and counts;
 *  - `onNotice`: delete a region's copy (the SDK calls it only once the route, resolved afresh, allows it).
 * `honoursPreferWait: false` is a build that ignores `Prefer: wait`, polled as before.
 *
 * Negative controls: `ignoreWriteLock`, a build that accepts writes during the write lock; and
 * `ignoreSupersede`, one whose copy ignores its job's signal, so a superseded job's copy lands late.
 * Seams for the drill and the tests: `dropItemFromNextDelta`, a delta copy that loses an item (what
 * `verify` must catch); `failNextCopies` and `failCopy`, copies that fail.
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
  /** Who may call the participant endpoint (default: this machine only, as the embedded host calls). */
  authenticate?: Authenticate;
  /** Where the request-path counters go (refusals, tombstones, misdirected; shared/core/decisions.ts). */
  telemetry?: Pick<TelemetrySink, 'metric'>;
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

/** A wait that ends early when `signal` aborts (then it rejects with the signal's reason). */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export class MessageStore {
  readonly stores: Map<string, RegionStore>;
  readonly accepted: AcceptedWrite[] = [];
  private readonly own = {
    writesRefused: 0,
    deletesTombstoned: 0,
    misdirected: 0,
    verifications: 0,
    mismatches: 0,
    deltaItemsDropped: 0,
  };
  /** The seam's armed resources (dropItemFromNextDelta). */
  private readonly deltaDrops = new Set<string>();
  private routing: RouteResolver;
  private guarded: { routing: RouteResolver; guard: RouteGuard<IncomingMessage> } | undefined;
  /** The participant endpoint: @routelock/participant with this store's copy, verify and clean-up. */
  readonly participant: ParticipantHandler;
  /** Every copy applied at a target, in order (what a test checks the supersede rule against). */
  readonly copies: { jobId: string; migrationId: string; step: string; stepAttempt: number }[] = [];
  /** The work of every copy run that ended and every verify, in the order they ended. */
  readonly work: ParticipantWork[] = [];
  private copyFailures = 0;
  private readonly clock: () => number;
  private server: Server | undefined;
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
    this.participant = createParticipantHandler({
      bulkCopy: (job, signal) => this.copy(job, signal),
      deltaCopy: (job, signal) => this.copy(job, signal),
      ...(options.implementsVerify === false ? {} : { verify: (job: JobRequest) => this.verify(job) }),
      preflight: (question) => this.preflight(question),
      onNotice: (order) => this.stores.get(order.region)?.purge(order.resourceId),
      // through this.routing at each call: useRouting may replace it after the handler is built
      routing: { resolve: (id) => this.routing.resolve(id), forget: (id) => this.routing.forget(id) },
      authenticate: options.authenticate ?? loopbackCallerOnly(),
      publicUrl: () => this.options.publicUrl ?? this.url,
      retryAfterSeconds: options.retryAfterSeconds ?? 1,
      honoursPreferWait: options.honoursPreferWait !== false,
      clock: this.clock,
    });
  }

  /** The request-path and participant counters (polls: GETs of a job's Location). */
  get counters() {
    return { ...this.own, polls: this.participant.polls };
  }

  /** Every clean-up an end notice asked for, by (migrationId, migrationAttempt, resourceId). */
  get cleanUps(): ReadonlyMap<string, CleanUp> {
    return this.participant.cleanUps;
  }

  /** The participant's jobs by id. */
  get jobs() {
    return { get: (id: string) => this.participant.job(id) };
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
    if (decision.kind === 'deny' && this.options.ignoreWriteLock) return;
    const context = { service: 'message-store', operation, region };
    this.routing.recordDecision(decision, context); // the client's metrics hooks, if it was given any
    if (this.options.telemetry) recordDecision(this.options.telemetry, decision, context);
  }

  /** Resolve and decide a mutation; a refusal comes back as the outcome to answer with. */
  private async gate(region: string, conversationId: string, operation: 'write' | 'delete') {
    const decision = decide(await this.resolve(conversationId), operation, region);
    this.count(decision, operation, region);
    if (decision.kind === 'notHere') {
      this.own.misdirected += 1;
      return { refused: { status: 'notHere', location: decision.location } as Outcome, decision };
    }
    if (decision.kind === 'unavailable')
      return {
        refused: { status: 'unavailable', retryAfterSeconds: decision.retryAfterSeconds } as Outcome,
        decision,
      };
    if (decision.kind === 'deny' && !this.options.ignoreWriteLock) {
      this.own.writesRefused += 1;
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
    this.commitWrite(region, conversationId, messageId, text);
    return { status: 'ok' };
  }

  private commitWrite(region: string, conversationId: string, messageId: string, text: string): void {
    this.store(region).put(conversationId, messageId, text, this.clock());
    this.accepted.push({ conversationId, messageId, region, at: this.clock(), kind: 'write' });
  }

  private commitTombstone(region: string, conversationId: string, messageId: string): void {
    this.store(region).tombstone(conversationId, messageId, this.clock());
    this.own.deletesTombstoned += 1;
    this.accepted.push({ conversationId, messageId, region, at: this.clock(), kind: 'tombstone' });
  }

  private commitDelete(region: string, conversationId: string, messageId: string): void {
    this.store(region).remove(conversationId, messageId);
    this.accepted.push({ conversationId, messageId, region, at: this.clock(), kind: 'delete' });
  }

  async remove(region: string, conversationId: string, messageId: string): Promise<Outcome> {
    const { refused, decision } = await this.gate(region, conversationId, 'delete');
    if (refused) return refused;
    if (decision.kind === 'tombstone') {
      this.commitTombstone(region, conversationId, messageId);
      return { status: 'tombstoned' };
    }
    this.commitDelete(region, conversationId, messageId);
    return { status: 'ok' };
  }

  async read(region: string, conversationId: string): Promise<Outcome & { messages?: string[] }> {
    const decision = decide(await this.resolve(conversationId), 'read', region);
    this.count(decision, 'read', region);
    if (decision.kind === 'notHere') return { status: 'notHere', location: decision.location };
    return { status: 'ok', messages: this.messagesOf(region, conversationId) };
  }

  private messagesOf(region: string, conversationId: string): string[] {
    return this.store(region)
      .list(conversationId)
      .filter((m) => !m.deleted)
      .map((m) => m.messageId);
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

  /**
   * One copy run (bulk or delta: this store copies the whole conversation either way), after the copy
   * delay that lets the phases be watched. A run whose signal aborted (superseded, its migration ended)
   * never applies its copy; the negative control `ignoreSupersede` ignores the signal.
   */
  private async copy(job: ParticipantJob, signal: AbortSignal): Promise<void> {
    const { copyDelayMs = 100, ignoreSupersede } = this.options;
    const delay = typeof copyDelayMs === 'number' ? copyDelayMs : copyDelayMs(job);
    const startedAt = this.clock();
    await sleep(delay, ignoreSupersede ? undefined : signal);
    try {
      if (signal.aborted && !ignoreSupersede) throw signal.reason as Error;
      this.applyCopy(job);
    } finally {
      this.workDone(job, startedAt);
    }
  }

  /** A copy run's work, once it ended. */
  private workDone(request: JobRequest, startedAt: number): void {
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

  /** The copy itself: the conversation from the source's file to the target's, in one transaction. */
  private applyCopy(job: ParticipantJob): void {
    if (this.copyFailures > 0) {
      this.copyFailures -= 1;
      throw new Error('injected copy failure');
    }
    if (this.options.failCopy?.(job)) throw new Error('injected copy failure');
    const target = this.store(job.to.region);
    const source = this.store(job.from.region);
    target.copyFrom(source, job.resourceId);
    if (job.step === 'deltaCopy' && this.deltaDrops.delete(job.resourceId))
      this.dropNewestItem(source, target, job);
    this.copies.push({
      jobId: job.id,
      migrationId: job.migrationId,
      step: job.step,
      stepAttempt: job.stepAttempt,
    });
  }

  private dropNewestItem(source: RegionStore, target: RegionStore, request: JobRequest): void {
    const live = source.list(request.resourceId).filter((r) => !r.deleted);
    const newest = live.reduce<(typeof live)[number] | undefined>(
      (a, r) => (!a || r.updatedAt >= a.updatedAt ? r : a),
      undefined,
    );
    if (!newest) return;
    this.own.deltaItemsDropped += 1;
    target.remove(request.resourceId, newest.messageId);
  }

  /** A dry run's question: whether it reaches both regions and what each holds of the resource. */
  private preflight({ resourceId, from, to }: PreflightQuestion) {
    const at = (region: string) => {
      const store = this.stores.get(region);
      if (!store) return { region, reachable: false };
      const rows = store.list(resourceId);
      const tombstones = rows.filter((r) => r.deleted).length;
      return { region, reachable: true, items: rows.length - tombstones, tombstones };
    };
    const report = { from: at(from.region), to: at(to.region) };
    return { ready: report.from.reachable && report.to.reachable, ...report };
  }

  /**
   * `verify` (docs/design.md §6.5): the resource's items at the source against the target's, as they stand
   * now (under the write lock, nothing changes them). One SQLite read per region: fast, as it must be.
   */
  private verify(job: JobRequest): VerifyAnswer {
    const { resourceId, from, to } = job;
    const [source, target] = [this.stores.get(from.region), this.stores.get(to.region)];
    if (!source || !target) throw jobRefused(`no region ${source ? to.region : from.region} here`);
    const startedAt = this.clock();
    const answer = compareRegions(source.list(resourceId), target.list(resourceId));
    this.workDone(job, startedAt);
    this.own.verifications += 1;
    if (!answer.match) this.own.mismatches += 1;
    return answer;
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
    // the participant endpoint first: POST /migrate and GET /jobs/<id> are the SDK's
    if (await handleNodeRequest(this.participant, req, res)) return;
    const body = await new Promise<string>((resolve) => {
      let data = '';
      req.on('data', (c: Buffer) => (data += c.toString()));
      req.on('end', () => resolve(data));
    });
    const url = new URL(req.url ?? '/', 'http://localhost');
    const send = (status: number, value: unknown, headers: Record<string, string> = {}) =>
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(value));
    if (messageRoute(url.pathname)) return this.handleMessages(req, res, body);
    if (req.method === 'POST' && url.pathname === '/janitor')
      return send(200, { purged: await this.janitor() });
    return send(404, { error: 'not found' });
  }

  /**
   * The message routes, behind the request guard (`@routelock/client/middleware`): it resolves the
   * conversation's route and answers a refusal itself (423 with Retry-After, 421 with the location, 404,
   * 503; RFC 9457 bodies), or records a tombstone for a delete under the hard-delete lock (204). What
   * passes is served here, and a write or delete commits only if the route is still within the in-flight
   * grace (`commitOk`, docs/design.md §5.6); past it, nothing is written and the guard answers 503.
   * `ignoreWriteLock` is for the direct calls (`write`, `remove`) the drill makes, not these routes.
   */
  private async handleMessages(req: IncomingMessage, res: ServerResponse, body: string): Promise<unknown> {
    const guard = this.messageGuard();
    const admitted = await guard.admit(req, res);
    if (admitted === ANSWERED) return;
    const send = (status: number, value: unknown) =>
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
    const route = messageRoute(req.url ?? '/');
    if (admitted === undefined || !route) return send(405, { error: 'method not allowed' });
    const { region, conversationId, messageId } = route;
    if (admitted.operation === 'read')
      return send(200, { status: 'ok', messages: this.messagesOf(region, conversationId) });
    let text: { messageId?: unknown; text?: unknown } = {};
    try {
      if (admitted.operation === 'write') text = JSON.parse(body) as typeof text;
    } catch {
      return send(400, { error: 'expected a JSON body' });
    }
    if (!guard.commitOk(req)) return guard.late(res, req); // just before committing: the grace
    if (admitted.operation === 'delete') this.commitDelete(region, conversationId, messageId as string);
    else this.commitWrite(region, conversationId, String(text.messageId), String(text.text));
    return send(200, { status: 'ok' });
  }

  /** The guard of the message routes, for the routing client the store has now (`useRouting` replaces it). */
  private messageGuard(): RouteGuard<IncomingMessage> {
    if (this.guarded?.routing === this.routing) return this.guarded.guard;
    const guard = routeGuard<IncomingMessage>({
      routing: this.routing,
      clock: this.clock,
      serving: (req) => (messageRoute(req.url ?? '/') as MessageRoute).region,
      target: (req) => messageTarget(req),
      tombstone: (req) => {
        const { region, conversationId, messageId } = messageRoute(req.url ?? '/') as MessageRoute;
        this.commitTombstone(region, conversationId, messageId as string);
      },
      onDecision: (decision, target, req) => {
        const { region } = messageRoute(req.url ?? '/') as MessageRoute;
        this.count(decision, target.operation, region);
        if (decision.kind === 'notHere' && target.operation !== 'read') this.own.misdirected += 1;
        if (decision.kind === 'deny') this.own.writesRefused += 1;
      },
    });
    this.guarded = { routing: this.routing, guard };
    return guard;
  }

  async close(): Promise<void> {
    this.participant.close();
    await new Promise<void>((resolve) => {
      if (!this.server) return resolve();
      this.server.closeAllConnections();
      this.server.close(() => resolve());
    });
    for (const store of this.stores.values()) store.close();
  }
}

/** A message route: `/regions/{region}/conversations/{id}/messages[/{messageId}]`. */
interface MessageRoute {
  region: string;
  conversationId: string;
  messageId: string | undefined;
}

function messageRoute(path: string): MessageRoute | undefined {
  const pathname = path.split('?')[0] as string;
  const match = /^\/regions\/([a-z0-9-]+)\/conversations\/([^/]+)\/messages(?:\/([^/]+))?$/.exec(pathname);
  if (!match?.[1] || !match[2]) return undefined;
  return {
    region: match[1],
    conversationId: decodeURIComponent(match[2]),
    messageId: match[3] && decodeURIComponent(match[3]),
  };
}

/** The guard's mapping: a read, a write (POST) or a delete of one message; anything else unguarded (405). */
function messageTarget(req: IncomingMessage): GuardTarget | undefined {
  const route = messageRoute(req.url ?? '/');
  if (!route) return undefined;
  const { conversationId: resourceId, messageId } = route;
  if (req.method === 'GET') return { resourceId, operation: 'read' };
  if (req.method === 'POST') return { resourceId, operation: 'write' };
  if (req.method === 'DELETE' && messageId) return { resourceId, operation: 'delete' };
  return undefined;
}
