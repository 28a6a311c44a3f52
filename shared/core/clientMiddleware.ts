import type { ServerResponse } from 'node:http';
import {
  type Decision,
  type DecisionStatus,
  type ResolvedView,
  type RouteResolver,
  RoutingServiceError,
  decisionStatus,
  withinGrace,
} from './client';
import { type AnyErrorCode, type ErrorKind, errorKind } from './errors';
import { type Location, describeLocation, resourceIdPattern } from './lock/document';
import type { Operation } from './lock/view';

/**
 * `@routelock/client/middleware`: a request guard for a service's own HTTP API, on `node:http`, Express
 * and Fastify (the service guide, "Guarding requests").
 *
 * The team gives the mapping from a request to (resource id, operation) and its tombstone function; the
 * guard resolves the route through a `RouteResolver` (a `RoutingClient`, or the test double), and lets
 * the request through, answers it as `decisionStatus` says (423, 421 or 307, 404, 503, with RFC 9457
 * problem bodies), or runs the tombstone instead of the handler. The rules stay in the client
 * (`decide`, `decisionStatus`): the guard only carries their answer to the wire.
 *
 * What a guard running before the handler cannot do is the in-flight grace check just before a write
 * commits (design §5.4, §5.6): the handler may take longer than the grace between the guard and
 * its commit, and a lock taken meanwhile would then miss the write. So each admitted request carries an
 * `Admission` whose `commitOk()` the handler asks at the last moment (`guard.commitOk(req)`), answering
 * `guard.late(res)` (503 `GraceExpired`, nothing written) when it says no.
 *
 * Frameworks are typed structurally: the package depends on none of them.
 */

/** What a request is about, as the service's mapping says. */
export interface GuardTarget {
  resourceId: string;
  operation: Operation;
}

/** Where this service serves from: a full location, or a region with no account (as `decide` reads it). */
export type Serving = string | Location;

export interface RouteGuardOptions<Req> {
  /** A `RoutingClient`, or `TestRoutingClient` (`@routelock/client/testing`) in a unit test. */
  routing: RouteResolver;
  /** This instance's location, or, for one process serving several, the location a request is served at. */
  serving: Serving | ((req: Req) => Serving);
  /**
   * The request's resource and operation; `undefined` for a request the guard lets through unguarded (a
   * health check, say). A mapping that throws, or gives an id routelock would refuse, or no operation,
   * is answered 400 `UnroutableRequest`: the request is the caller's to fix, never a 500.
   */
  target(req: Req): GuardTarget | undefined | Promise<GuardTarget | undefined>;
  /**
   * Runs instead of the handler for a delete under the hard-delete lock: record a tombstone (the item is
   * hidden from readers, and the delta copy carries it as a delete). The guard then answers 204.
   */
  tombstone(req: Req, admission: Admission): unknown;
  /** The URL of the same request at `location`: the guard answers 307 there; without one, 421. */
  urlFor?(location: Location, req: Req): string | undefined;
  /** Every decision taken, before it is answered: where a service counts them (`recordDecision`). */
  onDecision?(decision: Decision, target: GuardTarget, req: Req): void;
  /** The routing client's clock, if it was given one: `resolvedAt` is on it. Default `Date.now`. */
  clock?: () => number;
}

/** A request the guard let through: its decision, and the in-flight grace check for its commit. */
export interface Admission {
  readonly resourceId: string;
  readonly operation: Operation;
  /** `allow`, or `tombstone` (the tombstone function gets it). */
  readonly decision: Extract<Decision, { kind: 'allow' | 'tombstone' }>;
  readonly view: ResolvedView;
  /** When the route was last known true (`ResolvedRoute.resolvedAt`, the clock's ms). */
  readonly resolvedAt: number;
  /**
   * The last instant (the clock's ms) a write may commit: `resolvedAt` plus the in-flight grace, or the
   * route's `validUntil` (the cache would still serve its view then) if later.
   */
  readonly commitBy: number;
  /** Whether a write may commit now: ask it just before committing, after any slow preparation. */
  commitOk(): boolean;
}

/** RFC 9457 problem details, with routelock's stable `code` and what the decision said. */
export interface GuardProblem {
  type: string;
  title: string;
  status: number;
  code: AnyErrorCode;
  detail: string;
  instance?: string;
  resourceId?: string;
  operation?: Operation;
  /** Where the data lives (421). */
  location?: Location;
  retryAfterSeconds?: number;
}

/** An answer the guard gives in place of the handler. */
export interface GuardAnswer {
  status: number;
  headers: Record<string, string>;
  body?: GuardProblem;
}

/** What the guard decided for one request, before anything is written to the wire. */
export type GuardVerdict =
  | { kind: 'unguarded' }
  | { kind: 'proceed'; admission: Admission }
  | { kind: 'tombstone'; admission: Admission }
  | { kind: 'answer'; answer: GuardAnswer };

/** A `node:http` `ServerResponse`, which an Express response is too. */
export interface NodeResponseLike {
  readonly headersSent?: boolean;
  writeHead(status: number, headers: Record<string, string>): unknown;
  end(body?: string): unknown;
}

/** A Fastify reply. */
export interface FastifyReplyLike {
  code(status: number): unknown;
  headers(values: Record<string, string>): unknown;
  send(payload?: unknown): unknown;
}

export type ResponseLike = NodeResponseLike | FastifyReplyLike;

/** The guard's answer to a request it did not let through: a refusal, a redirect, a tombstone's 204. */
export const ANSWERED = 'answered' as const;

export class RouteGuard<Req extends object> {
  private readonly admissions = new WeakMap<object, Admission>();
  private readonly clock: () => number;

  constructor(private readonly options: RouteGuardOptions<Req>) {
    this.clock = options.clock ?? Date.now;
  }

  /** The decision for `req`, written nowhere: the framework-free core the adapters share. */
  async check(req: Req): Promise<GuardVerdict> {
    const mapped = await this.mapped(req);
    if (mapped === undefined) return { kind: 'unguarded' };
    if ('answer' in mapped) return mapped;
    const { target, serving } = mapped;
    let outcome: Awaited<ReturnType<RouteResolver['decideFor']>>;
    try {
      outcome = await this.options.routing.decideFor(target.resourceId, target.operation, serving);
    } catch (error) {
      return { kind: 'answer', answer: failureAnswer(error, target, instanceOf(req)) };
    }
    const { decision, view, resolvedAt, validUntil } = outcome;
    this.options.onDecision?.(decision, target, req);
    const status = decisionStatus(decision, { urlFor: (l) => this.options.urlFor?.(l, req) });
    if (!status.proceed || view === null || resolvedAt === null)
      return { kind: 'answer', answer: refusalAnswer(decision, status, target, instanceOf(req)) };
    const grace = this.options.routing.inFlightGraceSeconds;
    const admission: Admission = {
      resourceId: target.resourceId,
      operation: target.operation,
      decision: decision as Admission['decision'],
      view,
      resolvedAt,
      commitBy: Math.max(resolvedAt + grace * 1000, validUntil ?? -Infinity),
      commitOk: () => withinGrace(resolvedAt, grace, this.clock(), validUntil),
    };
    return { kind: decision.kind === 'tombstone' ? 'tombstone' : 'proceed', admission };
  }

  /**
   * Decide `req` and act on it: an admitted request's `Admission` (also kept for `admission(req)`),
   * `undefined` for an unguarded one, or ANSWERED when the guard has answered it (a refusal, a redirect,
   * or a tombstone recorded and 204 sent).
   */
  async admit(req: Req, res: ResponseLike): Promise<Admission | undefined | typeof ANSWERED> {
    const verdict = await this.check(req);
    if (verdict.kind === 'unguarded') return undefined;
    if (verdict.kind === 'answer') {
      writeAnswer(res, verdict.answer);
      return ANSWERED;
    }
    const { admission } = verdict;
    this.admissions.set(req, admission);
    const raw = (req as { raw?: unknown }).raw; // Fastify's request wraps node's
    if (typeof raw === 'object' && raw !== null) this.admissions.set(raw, admission);
    if (verdict.kind === 'proceed') return admission;
    // A tombstone is a write too: it must land within the grace of its route.
    if (!admission.commitOk()) {
      this.late(res, req);
      return ANSWERED;
    }
    await this.options.tombstone(req, admission);
    writeAnswer(res, { status: 204, headers: {} });
    return ANSWERED;
  }

  /** The admission of a request this guard let through (a Fastify request, or its `raw`), else undefined. */
  admission(req: object): Admission | undefined {
    return this.admissions.get(req);
  }

  /** Whether `req`'s write may commit now; false for a request this guard did not admit. */
  commitOk(req: object): boolean {
    return this.admission(req)?.commitOk() ?? false;
  }

  /** Answer a write whose grace ran out before it committed: 503 `GraceExpired`, nothing was written. */
  late(res: ResponseLike, req?: Req): void {
    const admission = req === undefined ? undefined : this.admission(req);
    const detail = admission
      ? `The route of ${admission.resourceId} was resolved ${this.clock() - admission.resolvedAt} ms ago, longer than the in-flight grace: the ${admission.operation} was not committed; send it again`
      : 'The route was resolved longer ago than the in-flight grace: nothing was committed; send the request again';
    writeAnswer(res, problemAnswer('GraceExpired', detail, { retryAfterSeconds: 1 }, req && instanceOf(req)));
  }

  /**
   * `node:http`: `createServer(guard.node(handler))`. The handler gets the admission (undefined for an
   * unguarded request); an error it throws is answered 500 `InternalError` if nothing was sent yet.
   */
  node<Res extends NodeResponseLike = ServerResponse>(
    handler: (req: Req, res: Res, admission: Admission | undefined) => unknown,
  ): (req: Req, res: Res) => void {
    return (req, res) => {
      void (async () => {
        try {
          const admitted = await this.admit(req, res);
          if (admitted !== ANSWERED) await handler(req, res, admitted);
        } catch (error) {
          if (!res.headersSent) writeAnswer(res, internalAnswer(error, instanceOf(req)));
        }
      })();
    };
  }

  /** Express: `app.post('/items/:id', guard.express(), handler)`; a failure goes to `next(error)`. */
  express(): (req: Req, res: NodeResponseLike, next: (error?: unknown) => void) => void {
    return (req, res, next) => {
      this.admit(req, res).then(
        (admitted) => (admitted === ANSWERED ? undefined : next()),
        (error: unknown) => next(error),
      );
    };
  }

  /** Fastify: a `preHandler` hook (`{ preHandler: guard.fastify() }`, or `addHook('preHandler', …)`). */
  fastify(): (request: Req, reply: FastifyReplyLike) => Promise<unknown> {
    return async (request, reply) => {
      const admitted = await this.admit(request, reply);
      return admitted === ANSWERED ? reply : undefined; // a sent reply is returned, so Fastify stops there
    };
  }

  /** The target and the serving location, or the 400 a mapping that fails (or gives nonsense) earns. */
  private async mapped(
    req: Req,
  ): Promise<
    { target: GuardTarget; serving: Serving } | { kind: 'answer'; answer: GuardAnswer } | undefined
  > {
    const refuse = (detail: string) => ({
      kind: 'answer' as const,
      answer: problemAnswer('UnroutableRequest', detail, {}, instanceOf(req)),
    });
    let target: GuardTarget | undefined;
    let serving: Serving;
    try {
      target = await this.options.target(req);
      if (target === undefined) return undefined;
      const { serving: given } = this.options;
      serving = typeof given === 'function' ? given(req) : given;
    } catch (error) {
      return refuse(
        `The request could not be mapped to a resource: ${(error as Error)?.message ?? String(error)}`,
      );
    }
    const problem = targetProblem(target);
    return problem === undefined ? { target, serving } : refuse(problem);
  }
}

/** A route guard for `Req` (the framework's request type: `IncomingMessage`, Express's, Fastify's). */
export function routeGuard<Req extends object>(options: RouteGuardOptions<Req>): RouteGuard<Req> {
  return new RouteGuard(options);
}

const operations: readonly string[] = ['read', 'write', 'delete'];

/** What is wrong with a mapping's answer, if anything (an id routelock's API would refuse with 400). */
function targetProblem(target: unknown): string | undefined {
  const { resourceId, operation } = (target ?? {}) as Partial<Record<keyof GuardTarget, unknown>>;
  if (typeof resourceId !== 'string' || !resourceIdPattern.test(resourceId))
    return `The request names no valid resource id (${JSON.stringify(resourceId) ?? 'none'}): ids match ${resourceIdPattern.source}`;
  if (typeof operation !== 'string' || !operations.includes(operation))
    return `The request maps to no operation routelock knows (${JSON.stringify(operation) ?? 'none'}): read, write or delete`;
  return undefined;
}

/** The request's path, for a problem's `instance` (Express's `originalUrl`, else `url`), if it has one. */
function instanceOf(req: object): string | undefined {
  const { originalUrl, url } = req as { originalUrl?: unknown; url?: unknown };
  const path = typeof originalUrl === 'string' ? originalUrl : url;
  return typeof path === 'string' ? path : undefined;
}

function problemAnswer(
  code: AnyErrorCode,
  detail: string,
  extra: Pick<GuardProblem, 'resourceId' | 'operation' | 'location' | 'retryAfterSeconds'> & {
    headers?: Record<string, string>;
  },
  instance: string | undefined,
): GuardAnswer {
  const { headers = {}, ...fields } = extra;
  const kind = errorKind(code);
  const retry = fields.retryAfterSeconds;
  const body: GuardProblem = {
    type: `urn:routelock:problem:${code}`,
    title: kind.title,
    status: kind.status,
    code,
    detail,
    ...(instance === undefined ? {} : { instance }),
    ...fields,
  };
  const all: Record<string, string> = { ...headers };
  if (retry !== undefined && all['Retry-After'] === undefined) all['Retry-After'] = String(retry);
  return { status: kind.status, headers: all, body };
}

/** The answer for a decision that does not proceed, as `decisionStatus` gave it. */
function refusalAnswer(
  decision: Decision,
  status: DecisionStatus,
  target: GuardTarget,
  instance: string | undefined,
): GuardAnswer {
  const { resourceId, operation } = target;
  if (status.code === undefined) return { status: status.status, headers: { ...status.headers } }; // 307
  const retryAfterSeconds = 'retryAfterSeconds' in decision ? decision.retryAfterSeconds : undefined;
  const details: Record<Decision['kind'], string> = {
    allow: '',
    tombstone: '',
    deny: `A migration's write lock is in force on ${resourceId}: the ${operation} is refused; retry after ${retryAfterSeconds} s`,
    notHere: `${resourceId} is served at ${status.location ? describeLocation(status.location) : 'another location'}, not here: send the request there`,
    notFound: `No route for ${resourceId}: nothing is read or written`,
    unavailable: `The routing service is unreachable: the ${operation} of ${resourceId} cannot be decided; retry after ${retryAfterSeconds} s`,
  };
  return problemAnswer(
    status.code,
    details[decision.kind],
    {
      headers: { ...status.headers },
      resourceId,
      operation,
      ...(status.location === undefined ? {} : { location: status.location }),
      ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
    },
    instance,
  );
}

/**
 * What a resolve that threw (not an outage, not a missing route: `decideFor` answers those) is answered:
 * routelock refusing the id (400) is the caller's `UnroutableRequest`; a client-side code (`NotRoutelock`,
 * `InvalidResponse`, ...) its own status; anything else a 500 that says no more than that.
 */
function failureAnswer(error: unknown, target: GuardTarget, instance: string | undefined): GuardAnswer {
  const { resourceId, operation } = target;
  if (error instanceof RoutingServiceError && error.status === 400)
    return problemAnswer('UnroutableRequest', `routelock refused the id: ${error.message}`, target, instance);
  if (error instanceof RoutingServiceError && isClientCode(error.code))
    return problemAnswer(
      error.code,
      `The route of ${resourceId} could not be resolved: ${error.message}`,
      { resourceId, operation },
      instance,
    );
  return internalAnswer(error, instance);
}

function internalAnswer(_error: unknown, instance: string | undefined): GuardAnswer {
  return problemAnswer('InternalError', 'The request failed inside the service', {}, instance);
}

function isClientCode(code: string): code is AnyErrorCode {
  return (errorKind(code as AnyErrorCode) as ErrorKind | undefined)?.raisedBy === 'client';
}

function isFastifyReply(res: ResponseLike): res is FastifyReplyLike {
  return (
    typeof (res as FastifyReplyLike).code === 'function' &&
    typeof (res as FastifyReplyLike).send === 'function'
  );
}

/** Write an answer to a node (or Express) response, or a Fastify reply. */
export function writeAnswer(res: ResponseLike, answer: GuardAnswer): void {
  const body = answer.body === undefined ? '' : JSON.stringify(answer.body);
  const headers: Record<string, string> = { ...answer.headers };
  if (answer.body !== undefined) {
    headers['content-type'] = 'application/problem+json';
    headers['cache-control'] = 'no-store';
  }
  if (isFastifyReply(res)) {
    res.code(answer.status);
    res.headers(headers);
    res.send(body);
    return;
  }
  res.writeHead(answer.status, { ...headers, 'content-length': String(Buffer.byteLength(body)) });
  res.end(body);
}
