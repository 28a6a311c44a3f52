import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RoutingClient, RoutingServiceError, decide } from '../../shared/client';
import type { Location } from '../../shared/lock/document';
import { RegionStore } from './regionStore';

/**
 * A sample participant: a message store that owns conversation messages in two regions (one SQLite file
 * each), resolves routes through RoutingClient and obeys the decisions:
 *  - writes refused with 423 + Retry-After during the write lock;
 *  - deletes turned into tombstones during the hard-delete lock;
 *  - anything sent through a region that is not the route's location (a pending target before the swap,
 *    a retired source after it) refused with 421 and the location to use.
 * It implements the participant contract (docs/design.md §6): POST /migrate {migrationId, resourceId, from, to,
 * step, attempt} → 202 + Location while the copy runs (one job per migration, step and attempt), 200
 * when done. Tombstones are carried over and applied at the target.
 *
 * `ignoreWriteLock` is the negative control: a build that accepts writes during the write lock.
 */

export type Outcome =
  | { status: 'ok' }
  | { status: 'tombstoned' }
  | { status: 'locked'; retryAfterSeconds: number }
  | { status: 'notHere'; location: Location }
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
  ignoreWriteLock?: boolean;
  /** How long a copy job takes, so the phases can be watched. */
  copyDelayMs?: number;
  clock?: () => number;
}

export class MessageStore {
  readonly stores: Map<string, RegionStore>;
  readonly accepted: AcceptedWrite[] = [];
  readonly counters = { writesRefused: 0, deletesTombstoned: 0, misdirected: 0 };
  private routing: RoutingClient;
  private readonly jobs = new Map<string, { done: boolean; error?: string }>();
  private readonly clock: () => number;
  private server: Server | undefined;
  url = '';

  constructor(private readonly options: MessageStoreOptions) {
    this.stores = new Map(
      Object.entries(options.regions).map(([region, path]) => [region, new RegionStore(region, path)]),
    );
    this.clock = options.clock ?? Date.now;
    // A short client-side skew margin: the drill runs everything on one clock.
    this.routing = new RoutingClient({
      baseUrl: options.routingUrl ?? 'http://127.0.0.1:1/api',
      clockSkewSeconds: 0,
    });
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

  /** Resolve and decide a mutation; a refusal comes back as the outcome to answer with. */
  private async gate(region: string, conversationId: string, operation: 'write' | 'delete') {
    const decision = decide(await this.resolve(conversationId), operation, region);
    if (decision.kind === 'notHere') {
      this.counters.misdirected += 1;
      return { refused: { status: 'notHere', location: decision.location } as Outcome, decision };
    }
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

  /** The participant contract: start (or report on) one copy job. */
  migrate(body: {
    migrationId: string;
    resourceId: string;
    from: Location;
    to: Location;
    step: string;
    attempt?: number;
  }): string {
    const key = `${body.migrationId}|${body.step}|${body.attempt ?? 1}`;
    if (!this.jobs.has(key)) {
      const job: { done: boolean; error?: string } = { done: false };
      this.jobs.set(key, job);
      setTimeout(() => {
        try {
          this.store(body.to.region).copyFrom(this.store(body.from.region), body.resourceId);
          job.done = true;
        } catch (error) {
          job.error = (error as Error).message;
        }
      }, this.options.copyDelayMs ?? 100);
    }
    return key;
  }

  jobState(key: string): { done: boolean; error?: string } | undefined {
    return this.jobs.get(key);
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
      const key = this.migrate(JSON.parse(body) as Parameters<MessageStore['migrate']>[0]);
      const job = this.jobState(key);
      if (job?.done) return send(200, { done: true });
      return send(202, { done: false }, { Location: `/jobs/${encodeURIComponent(key)}`, 'Retry-After': '1' });
    }
    const jobMatch = /^\/jobs\/(.+)$/.exec(url.pathname);
    if (req.method === 'GET' && jobMatch?.[1]) {
      const job = this.jobState(decodeURIComponent(jobMatch[1]));
      if (!job) return send(404, { error: 'no such job' });
      if (job.error) return send(500, { error: job.error });
      if (job.done) return send(200, { done: true });
      return send(202, { done: false }, { Location: url.pathname, 'Retry-After': '1' });
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
      return send(200, outcome);
    }
    if (req.method === 'POST' && url.pathname === '/janitor')
      return send(200, { purged: await this.janitor() });
    return send(404, { error: 'not found' });
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      if (!this.server) return resolve();
      this.server.closeAllConnections();
      this.server.close(() => resolve());
    });
    for (const store of this.stores.values()) store.close();
  }
}
