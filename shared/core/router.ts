import { LRUCache } from 'lru-cache';
import { type Clock, systemClock } from './clock';
import type { TimingConfig } from './settings';
import { RouteLockError, isRouteLockError } from './errors';
import { deepFreeze } from './freeze';
import { SharedReads } from './inflight';
import {
  type Location,
  type LocationDocument,
  type StoredDocument,
  assertWritableSchema,
  newLocationDocument,
  sameEtag,
  sameLocation,
} from './lock/document';
import {
  type AnnounceRequest,
  type EscalateRequest,
  type PrelockRequest,
  type ReleaseRequest,
  type RenewRequest,
  type RuleResult,
  type SwapRequest,
  announce,
  assertDeletable,
  escalate,
  forceRelease,
  prelock,
  reclaim,
  release,
  renew,
  swap,
} from './lock/rules';
import {
  type HeldCopy,
  type Provenance,
  type ReadAction,
  announcedForReads,
  readAction,
  windowFrom,
  withinTtl,
} from './lock/readPolicy';
import { windowDeadInWriteRegion } from './lock/state';
import { newFencingToken } from './lock/token';
import { type LockGrant, type RouteView, cacheHeaders, lockGrant, routeView } from './lock/view';
import { type AllowedRegions, assertAllowedRegion } from './regions';
import type { ListOptions, ListPage, LocationStore, RequestPriority } from './store/ports/locations';

/**
 * The router (design §5): resolves location documents through a local cache and performs every lock
 * mutation as one ETag-conditional write.
 *
 * Read path (the decision is lock/readPolicy's `readAction`, design §5.1):
 *  - a held copy within its TTL and before its window → returned, zero store reads;
 *  - a held copy in its window (a legacy lock that has started; an announced lock's write window or write
 *    lock, until the write region shows it dead) → read from the write region, every time;
 *  - no copy, or one past its TTL outside the window → nearest replica; if that copy is in its window →
 *    read again from the write region at once.
 * Concurrent resolves of one id share each of those store reads while it is in flight, joining only a
 * read begun no more than `timing.coalesceJoinMs` ago (core/inflight; design §5.8).
 */

/**
 * The store priority of each kind of router operation (design §5.7), decided here and nowhere
 * else: Cosmos DB throttles `low` requests first when the container is busy, so migration traffic
 * yields to route resolution instead of making hot spots for unrelated resources.
 */
export const operationPriority = {
  /** resolve(), view(): every service's lookup (GET /routes/{id}). */
  resolvePath: 'high',
  /** createRoute(), deleteRoute(): PUT and DELETE /routes/{id} by the route's owner. */
  routeChange: 'high',
  /**
   * The orchestrator's and operators' work: every lock mutation, reclaim(), forceRelease(),
   * readAuthoritative(), backgroundView(), listRoutes(), and the probe's createRoute().
   */
  background: 'low',
} as const satisfies Record<string, RequestPriority>;

export interface RouterOptions {
  store: LocationStore;
  timing: TimingConfig;
  clock?: Clock;
  /** Most documents held in the local cache. */
  cacheMax?: number;
  /** Token source; tests pin it, production uses 32 random bytes. */
  newToken?: () => string;
  /**
   * Set when the store cannot give compare-and-swap its meaning (several write regions): every lock
   * mutation is then refused with this reason.
   */
  unsafeForLocks?: string | undefined;
  /**
   * Refuse every write (createRoute, deleteRoute, each lock mutation, reclaim, forceRelease) with
   * `ReadOnlyRouter`, before any store call: the library's default (the `library` entry), so a service
   * that links it resolves and enforces but cannot bypass the API's roles. routelock's own routers
   * leave it unset.
   */
  readOnly?: boolean;
  /** Told when a write's store timestamp and this process's clock disagree by more than the skew bound. */
  onClockSkew?: (resourceId: string, skewSeconds: number) => void;
  /** ROUTELOCK_REGIONS: where a route may be placed, locked towards or swapped to; null/absent = anywhere. */
  allowedRegions?: AllowedRegions | undefined;
  /**
   * Told after each write this router attempts (create, lock mutation, delete), whether or not its
   * answer came back. A second router in the process (the probe's) makes the serving router drop its
   * cached copy with it, so the read path never serves a copy older than that write.
   */
  onWrite?: (id: string) => void;
}

/**
 * What only the test kit replaces (its `seamedRouter`), kept out of RouterOptions so that
 * no composition root can pass them; production always uses the real ones.
 */
export interface RouterSeams {
  /**
   * The lock rules: the verification harness plants the bugs its negative controls must catch (a
   * skipped token check, say).
   */
  rules?: Partial<LockRules>;
  /**
   * The Cache-Control/Age builder for `view()`: the harness plants the old behaviour its negative
   * controls must catch (a full max-age and no Age for a copy held a while:
   * `(doc, now, cfg) => cacheHeaders(doc, now, cfg, 0)`).
   */
  cacheHeaders?: typeof cacheHeaders;
  /**
   * Whether concurrent resolves share store reads (design §5.8): the read-path benchmark turns
   * it off, to measure the read path as it was side by side.
   */
  coalesceReads?: boolean;
  /**
   * The read decision (lock/readPolicy `readAction`): verify plants the broken read policies its negative
   * controls must catch, and an old-version reader (the legacy rule for every lock).
   */
  readAction?: typeof readAction;
}

export interface MutationOptions {
  /**
   * The caller's If-Match. When it equals the cached copy's ETag the router skips its read (the
   * orchestrator's read saving); when it differs from the stored ETag the result is 412.
   */
  ifMatch?: string | undefined;
  /**
   * A version of the route the caller holds (a campaign's listed copy, passed on by the migration's
   * pre-lock): decided on without a read when its ETag is `ifMatch`, as a version this router holds is;
   * ignored otherwise. The write stays conditional on that ETag, so a stale copy costs a 412, never a
   * wrong write, and a refusal or no-op decided on it is confirmed on the write region. Only trusted code
   * passes one: a copy's ETag vouches for its document only when the store gave the two together.
   */
  known?: StoredDocument | undefined;
}

/** Every lock mutation the router performs, one rule each (the `rules` seam replaces any of them). */
export interface LockRules {
  prelock: typeof prelock;
  escalate: typeof escalate;
  announce: typeof announce;
  renew: typeof renew;
  swap: typeof swap;
  release: typeof release;
  forceRelease: typeof forceRelease;
  reclaim: typeof reclaim;
}

const defaultRules: LockRules = { prelock, escalate, announce, renew, swap, release, forceRelease, reclaim };

/** A route view with its caching headers (`Cache-Control`, `Age`), as GET /routes/{id} sends it. */
export interface RoutedView {
  view: RouteView;
  cacheControl: string;
  ageSeconds: number;
  /**
   * What the view's knowledge dates from, for the in-flight grace (design §5.6): when the store
   * read it came from began — a read this request joined may have begun up to ROUTELOCK_COALESCE_JOIN_MS
   * before it (§5.8) — or, for a copy served from the cache, the request's own time (a cached copy is true
   * until its lock can start). A library-mode service checks `withinGrace(resolvedAt, …)` before it commits.
   */
  resolvedAt: number;
}

/** The swap's answer for the workflow: the view, and when the swap landed (a replay: the first swap's time). */
export interface SwapOutcome {
  view: RouteView;
  swappedAt: string | null;
}

interface VersionedCopy {
  stored: StoredDocument;
  /** True when the copy came from the If-Match cache rather than a read made for this request. */
  fromCache: boolean;
}

/** A store read's answer with when the read began (what the answer's age counts from). */
interface TimedRead {
  stored: StoredDocument;
  startedAt: number;
}

interface CacheEntry {
  stored: StoredDocument;
  /** The copy as the read policy judges it: its document, where it was read, when that read began. */
  copy: HeldCopy;
  /** From this instant the copy is read through (lock/readPolicy `windowFrom`), whatever its age. */
  windowFrom: number;
  /** When the read that fetched the copy began (its TTL counts from here): a served copy's Age. */
  cachedAt: number;
}

/** Which store read of the read path a coalesced read is (the two never answer for each other). */
type ReadPathKey = `${'nearest' | 'writeRegion'} ${RequestPriority} ${string}`;

export class Router {
  readonly store: LocationStore;
  readonly timing: TimingConfig;
  readonly allowedRegions: AllowedRegions;

  /** The guards a second router over the same store must keep (the probe's): regions, unsafe store. */
  get policy(): { allowedRegions: AllowedRegions; unsafeForLocks?: string } {
    return {
      allowedRegions: this.allowedRegions,
      ...(this.options.unsafeForLocks ? { unsafeForLocks: this.options.unsafeForLocks } : {}),
    };
  }
  private readonly clock: Clock;
  /**
   * The read cache. It has no TTL of its own: the read policy is the one judge of a copy's age, so a copy
   * in its window is never dropped at its TTL into a nearest read (design §5.1).
   */
  private readonly cache: LRUCache<string, CacheEntry>;
  /**
   * Versions (id and ETag) of announced locks the write region showed dead: a replica's copy of the same
   * version inherits the judgement (same ETag, same content; a dead write lock or window cannot be renewed
   * or activated), so a dead workflow's lapsed write lock costs one write-region read per version, not
   * one per TTL.
   */
  private readonly deadVersions: LRUCache<string, true>;
  /**
   * The last version this router wrote or read from the write region, by id, kept past the read cache's
   * TTL. A mutation whose If-Match names it decides on it without a read: the write is conditional on
   * that same ETag, so a stale copy can only produce a 412, never a wrong write (a no-op or refusal
   * decided on it is confirmed with one read).
   */
  private readonly versions: LRUCache<string, StoredDocument>;
  private readonly newToken: () => string;
  private readonly options: RouterOptions;
  private readonly seams: RouterSeams;
  private readonly rules: LockRules;
  /**
   * The read path's store reads in flight (never a mutation's: those must begin after their decision),
   * by source, priority and id. Public for tests and benchmarks: `started` counts the reads made.
   */
  readonly sharedReads: {
    nearest: SharedReads<ReadPathKey, TimedRead>;
    writeRegion: SharedReads<ReadPathKey, CacheEntry>;
  };

  /** `seams`: the test kit's alone; production passes none. */
  constructor(options: RouterOptions, seams: RouterSeams = {}) {
    this.options = options;
    this.seams = seams;
    this.rules = { ...defaultRules, ...seams.rules };
    this.store = options.store;
    this.timing = options.timing;
    this.allowedRegions = options.allowedRegions ?? null;
    this.clock = options.clock ?? systemClock;
    this.newToken = options.newToken ?? newFencingToken;
    const clock = this.clock;
    this.cache = new LRUCache<string, CacheEntry>({ max: options.cacheMax ?? 100_000 });
    this.deadVersions = new LRUCache<string, true>({ max: options.cacheMax ?? 100_000 });
    this.versions = new LRUCache<string, StoredDocument>({ max: options.cacheMax ?? 100_000 });
    const joining = { joinBoundMs: options.timing.coalesceJoinMs, clock };
    this.sharedReads = { nearest: new SharedReads(joining), writeRegion: new SharedReads(joining) };
  }

  now(): number {
    return this.clock();
  }

  // ---------------------------------------------------------------------------------------------
  // Read path
  // ---------------------------------------------------------------------------------------------

  /**
   * The document if the cache may serve it without any store read (no lock that may be in force),
   * else undefined. Synchronous: the fast path of the read path, for callers that want it.
   */
  peek(id: string): StoredDocument | undefined {
    const hit = this.cache.get(id);
    return this.servable(hit, this.clock()) ? hit.stored : undefined;
  }

  async resolve(id: string): Promise<StoredDocument> {
    const now = this.clock();
    const hit = this.cache.get(id);
    // The hit stays one await deep: this is the hot path.
    if (this.servable(hit, now)) return hit.stored;
    return (await this.readPath(id, hit, now, operationPriority.resolvePath)).stored;
  }

  /**
   * The route view with its caching headers. `ageSeconds` is how long this router's cache had held the
   * copy when the request came (0 for a copy read for it), and max-age is what is left of the TTL: the
   * cache downstream (RoutingClient, any HTTP cache) is in series with this one, and the two together
   * must not hold a copy longer than the one local TTL the convergence delay counts. `revalidate` (a
   * request's `Cache-Control: no-cache`, a client's refresh ahead): the cached copy is not served as
   * it is but confirmed (or replaced) by a write-region read, so the copy sent is a new one with a whole
   * TTL; otherwise a refresh before this cache's copy expires would get that copy, no longer-lived.
   */
  view(id: string, options: { revalidate?: boolean } = {}): Promise<RoutedView> {
    return this.viewWith(id, operationPriority.resolvePath, options.revalidate === true);
  }

  /**
   * The same view the read path serves (same cache), for work that is not a service resolving a route:
   * the orchestrator's read-path check, the probe's, a migration's start. Its store reads go `low`.
   */
  backgroundView(id: string): Promise<RoutedView> {
    return this.viewWith(id, operationPriority.background);
  }

  private async viewWith(id: string, priority: RequestPriority, revalidate = false): Promise<RoutedView> {
    const requestedAt = this.clock();
    const hit = this.cache.get(id);
    const served = !revalidate && this.servable(hit, requestedAt);
    const entry = served ? hit : await this.readPath(id, hit, requestedAt, priority, revalidate);
    const now = this.clock();
    // A copy's age counts from when the read that fetched it began (a slow or joined read's answer is
    // that old already), so a cache downstream never holds it past the one local TTL.
    const heldMs = Math.max(0, now - entry.cachedAt);
    const build = this.seams.cacheHeaders ?? cacheHeaders;
    const headers = build(entry.stored.doc, now, this.timing, heldMs, entry.copy.provenance);
    const resolvedAt = served ? requestedAt : Math.min(requestedAt, entry.cachedAt);
    return { view: routeView(entry.stored, now, this.timing), ...headers, resolvedAt };
  }

  /**
   * Drop a cached copy, and let no later resolve join a read of it already in flight (tests, and callers
   * that know the document changed elsewhere: the probe's writes, §5.2).
   */
  forget(id: string): void {
    this.cache.delete(id);
    this.forgetReadsInFlight(id);
  }

  /** What a resolve at `now` does with `copy` (lock/readPolicy; the `readAction` seam may replace it). */
  private actionFor(copy: HeldCopy, now: number): ReadAction['kind'] {
    return (this.seams.readAction ?? readAction)(copy, now, this.timing).kind;
  }

  /** A cache hit the read path may serve without a store read at `now`. */
  private servable(hit: CacheEntry | undefined, now: number): hit is CacheEntry {
    if (hit === undefined) return false;
    // The hot path: the entry carries the instant the real policy stops serving it.
    if (this.seams.readAction === undefined)
      return now < hit.windowFrom && withinTtl(hit.copy, now, this.timing);
    return this.actionFor(hit.copy, now) === 'serve';
  }

  /**
   * The store read a resolve at `now` makes past the cache: a read-through of the held copy, or a refresh
   * from the nearest replica. `revalidate` (a view's `no-cache`, a client's refresh ahead) asks past a copy
   * the policy would serve: an announced lock's copy is renewed from the nearest replica, as its TTL's end
   * would renew it (no write-region read outside the window); any other is confirmed on the write region.
   */
  private nextRead(
    cached: CacheEntry | undefined,
    now: number,
    revalidate: boolean,
  ): 'readThrough' | 'refresh' {
    if (cached === undefined) return 'refresh';
    const kind = this.actionFor(cached.copy, now);
    if (kind !== 'serve') return kind;
    // Without `revalidate` a servable copy never gets here (`servable` asked the same policy, same `now`).
    if (!revalidate) return 'refresh';
    const lock = cached.copy.doc.lock;
    return lock !== null && announcedForReads(lock) ? 'refresh' : 'readThrough';
  }

  /**
   * The read path past the cache: the entry made by the read it takes (`cached`: the copy held, which the
   * policy will not serve as it is). Both store reads are shared with concurrent resolves of the id (§5.8);
   * each caller decides the escalation to the write region on its own clock reading `now`, so a caller that
   * came after the window opened never takes a nearest copy that an earlier caller could still use. A
   * nearest copy in its window is read through at once: it never enters the cache.
   */
  private async readPath(
    id: string,
    cached: CacheEntry | undefined,
    now: number,
    priority: RequestPriority,
    revalidate = false,
  ): Promise<CacheEntry> {
    if (this.nextRead(cached, now, revalidate) === 'readThrough')
      return this.sharedWriteRegionRead(id, priority, cached?.stored);

    const readNearest = async (): Promise<TimedRead> => {
      const startedAt = this.clock();
      return { stored: await this.store.read(id, { from: 'nearest', priority }), startedAt };
    };
    const nearest = await (this.seams.coalesceReads === false
      ? readNearest()
      : this.sharedReads.nearest.run(`nearest ${priority} ${id}`, readNearest));
    const copy = this.heldCopy(nearest.stored, 'replica', nearest.startedAt);
    if (this.actionFor(copy, now) === 'readThrough') return this.sharedWriteRegionRead(id, priority);
    // Callers that shared the read share its entry: one cache write, one `cachedAt`.
    // (The same read, not only the same object: a replica may hand back the very copy held, to be re-dated.)
    const entry = this.cache.peek(id);
    if (entry !== undefined && entry.stored === nearest.stored && entry.cachedAt === nearest.startedAt)
      return entry;
    return this.remember(nearest.stored, 'replica', nearest.startedAt);
  }

  /**
   * A write-region read for the read path, shared; the reader caches it (and records its version).
   * `held`: the copy the cache holds, whose version the read may confirm instead of fetching (a read-through).
   */
  private sharedWriteRegionRead(
    id: string,
    priority: RequestPriority,
    held?: StoredDocument,
  ): Promise<CacheEntry> {
    const read = () =>
      held === undefined ? this.readEntry(id, 'writeRegion', priority) : this.readThrough(id, priority, held);
    if (this.seams.coalesceReads === false) return read();
    return this.sharedReads.writeRegion.run(`writeRegion ${priority} ${id}`, read);
  }

  /** No read begun before a write of `id` answers a request made after it. */
  private forgetReadsInFlight(id: string): void {
    for (const priority of new Set(Object.values(operationPriority))) {
      this.sharedReads.nearest.forget(`nearest ${priority} ${id}`);
      this.sharedReads.writeRegion.forget(`writeRegion ${priority} ${id}`);
    }
  }

  /**
   * The write region's copy when the held copy's version has changed; else the held copy itself, confirmed
   * (ETag-conditional, so nothing is sent or parsed). Either way it is cached dated from this read's start,
   * and its lock judged as the write region's at that instant: the same entry a full read would make.
   */
  private async readThrough(
    id: string,
    priority: RequestPriority,
    held: StoredDocument,
  ): Promise<CacheEntry> {
    if (this.store.readIfChanged === undefined) return this.readEntry(id, 'writeRegion', priority);
    const startedAt = this.clock();
    const answer = await this.store.readIfChanged(id, held.etag, { from: 'writeRegion', priority });
    return this.remember(answer === 'notModified' ? held : answer, 'writeRegion', startedAt);
  }

  private async readAndCache(
    id: string,
    from: 'nearest' | 'writeRegion',
    priority: RequestPriority,
  ): Promise<StoredDocument> {
    return (await this.readEntry(id, from, priority)).stored;
  }

  private async readEntry(
    id: string,
    from: 'nearest' | 'writeRegion',
    priority: RequestPriority,
  ): Promise<CacheEntry> {
    const startedAt = this.clock();
    const stored = await this.store.read(id, { from, priority });
    return this.remember(stored, from === 'writeRegion' ? 'writeRegion' : 'replica', startedAt);
  }

  /**
   * Cache a copy. `readStartedAt`: when the read that fetched it began (for a write's answer, now). The
   * copy is dated from then, not from when its answer came: a slow read (throttling, a joined read) hands
   * back a document as old as its start, and the local TTL the convergence delay counts must run from
   * there, or a copy would outlive it by the read's duration.
   */
  private remember(
    stored: StoredDocument,
    provenance: Provenance,
    readStartedAt: number = this.clock(),
  ): CacheEntry {
    // Callers are handed this very object (resolve, peek, view): frozen, so none can change what the
    // cache serves others, nor what a conditional read-through keeps while the version is unchanged.
    deepFreeze(stored);
    const copy = this.heldCopy(stored, provenance, readStartedAt);
    const entry: CacheEntry = {
      stored,
      copy,
      windowFrom: windowFrom(copy, this.timing.clockSkewSeconds),
      cachedAt: readStartedAt,
    };
    this.cache.set(stored.doc.id, entry);
    if (provenance === 'writeRegion') {
      this.versions.set(stored.doc.id, stored);
      const lock = stored.doc.lock;
      if (
        lock &&
        announcedForReads(lock) &&
        windowDeadInWriteRegion(lock, readStartedAt, this.timing.clockSkewSeconds)
      )
        this.deadVersions.set(versionKey(stored), true);
    }
    return entry;
  }

  /**
   * A copy as the read policy judges it. A replica's copy of a version the write region showed dead (an
   * announced lock's, `deadVersions`) is judged as the write region's: the same version, and dead for good.
   */
  private heldCopy(stored: StoredDocument, provenance: Provenance, readStartedAt: number): HeldCopy {
    const judged =
      provenance === 'replica' && this.deadVersions.has(versionKey(stored)) ? 'writeRegion' : provenance;
    return { doc: stored.doc, provenance: judged, readStartedAt };
  }

  /** The cached copy within its TTL (a copy a mutation may decide on, or name as If-Match), if any. */
  private freshCopy(id: string): StoredDocument | undefined {
    const hit = this.cache.get(id);
    return hit !== undefined && withinTtl(hit.copy, this.clock(), this.timing) ? hit.stored : undefined;
  }

  /**
   * One store write, and `onWrite` told of it however it ended (a lost answer may have committed). Reads
   * of the id in flight stop being joinable as it starts: a resolve made after this write began must
   * not take an answer read before it.
   */
  private async write<T>(id: string, attempt: () => Promise<T>): Promise<T> {
    this.forgetReadsInFlight(id);
    try {
      return await attempt();
    } finally {
      this.forgetReadsInFlight(id);
      this.options.onWrite?.(id);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Routes
  // ---------------------------------------------------------------------------------------------

  /** PUT /routes/{id}: 201 when created, 200 when an identical route exists, 409 otherwise. */
  async createRoute(
    id: string,
    location: Location,
    options: { createdBy?: 'probe' } = {},
  ): Promise<{ stored: StoredDocument; created: boolean }> {
    this.refuseIfReadOnly(id, 'creating a route');
    assertAllowedRegion(this.allowedRegions, location, 'creating the route', id);
    const priority =
      options.createdBy === 'probe' ? operationPriority.background : operationPriority.routeChange;
    try {
      const stored = await this.write(id, () =>
        this.store.create(newLocationDocument(id, location, this.clock(), options.createdBy), { priority }),
      );
      this.remember(stored, 'writeRegion');
      return { stored, created: true };
    } catch (error) {
      if (!isRouteLockError(error, 'AlreadyExists')) throw error;
      const existing = await this.readAndCache(id, 'writeRegion', priority);
      // Even an identical route's 200 is a mutation's answer: never given for a schema this library cannot judge.
      assertWritableSchema(existing.doc);
      if (sameLocation(existing.doc.location, location)) return { stored: existing, created: false };
      throw new RouteLockError('AlreadyExists', `Route ${id} already exists with another location.`, {
        resourceId: id,
      });
    }
  }

  /** DELETE /routes/{id}: refused (423) while a live lock holds the route. */
  async deleteRoute(id: string, options: MutationOptions = {}): Promise<void> {
    this.refuseIfReadOnly(id, 'deleting a route');
    const priority = operationPriority.routeChange;
    const copy = await this.readForMutation(id, options, priority);
    let current = copy.stored;
    for (let attempt = 0; ; attempt += 1) {
      try {
        assertWritableSchema(current.doc);
        assertDeletable(current.doc, this.clock());
      } catch (error) {
        throw await this.confirmedRefusal(
          id,
          error,
          copy.fromCache && attempt === 0,
          options.ifMatch,
          priority,
        );
      }
      try {
        await this.write(id, () => this.store.delete(id, current.etag, { priority }));
        this.cache.delete(id);
        this.versions.delete(id);
        return;
      } catch (error) {
        current = await this.afterConflict(id, error, attempt, options.ifMatch, priority);
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Lock mutations: token checked by the rule before any write, one conditional write, on 412 one
  // re-read and re-decide (a losing racer then sees the winner's lock and gets 423).
  // ---------------------------------------------------------------------------------------------

  /**
   * `options.token`: a caller that derives its token from a secret of its own (the migration's
   * activities) names it, so that its replay presents the same one; everyone else gets a fresh one.
   */
  async prelock(
    id: string,
    req: Omit<PrelockRequest, 'newToken'>,
    options: MutationOptions & { token?: string } = {},
  ): Promise<LockGrant> {
    return (await this.prelockRoute(id, req, options)).grant;
  }

  /**
   * The pre-lock, and where the route was as it committed: the copy the rule decided on, under the ETag
   * the write was conditional on, so the orchestrator need not read the route again.
   */
  async prelockRoute(
    id: string,
    req: Omit<PrelockRequest, 'newToken'>,
    options: MutationOptions & { token?: string } = {},
  ): Promise<{ grant: LockGrant; location: Location }> {
    assertAllowedRegion(this.allowedRegions, req.target, 'the pre-lock', id);
    const token = options.token ?? this.newToken();
    const stored = await this.mutate(
      id,
      (doc, now) => this.rules.prelock(doc, { ...req, newToken: token }, now, this.timing),
      options,
    );
    return { grant: lockGrant(stored, token), location: stored.doc.location };
  }

  /**
   * The ETag of the version of the route this router holds (the last it wrote or read from the write
   * region, else its read cache's copy): a mutation naming it as If-Match is decided without a read.
   */
  heldEtag(id: string): string | undefined {
    return (this.versions.get(id) ?? this.freshCopy(id))?.etag;
  }

  /** Whether this router holds version `etag` of the route (a caller's ETag: `heldEtag`). */
  holdsVersion(id: string, etag: string): boolean {
    const held = this.heldEtag(id);
    return held !== undefined && sameEtag(held, etag);
  }

  async escalate(id: string, req: EscalateRequest, options: MutationOptions = {}): Promise<LockGrant> {
    return lockGrant(
      await this.mutate(id, (doc, now) => this.rules.escalate(doc, req, now, this.timing), options),
    );
  }

  /** Announce an announced lock's write window (the grant carries `writeWindowAt` and `writeWindowUntil`). */
  async announce(id: string, req: AnnounceRequest, options: MutationOptions = {}): Promise<LockGrant> {
    return lockGrant(
      await this.mutate(id, (doc, now) => this.rules.announce(doc, req, now, this.timing), options),
    );
  }

  async renew(id: string, req: RenewRequest, options: MutationOptions = {}): Promise<LockGrant> {
    return lockGrant(
      await this.mutate(id, (doc, now) => this.rules.renew(doc, req, now, this.timing), options),
    );
  }

  /** The swap (pinned to its write-lock attempt when `req.writeAt` names one: the rule refuses another's). */
  async swap(id: string, req: SwapRequest, options: MutationOptions = {}): Promise<RouteView> {
    return (await this.swapWithTime(id, req, options)).view;
  }

  /** The swap, and when it landed: the migration's timeline records it. */
  async swapWithTime(id: string, req: SwapRequest, options: MutationOptions = {}): Promise<SwapOutcome> {
    const stored = await this.mutate(id, (doc, now) => this.rules.swap(doc, req, now, this.timing), options);
    return {
      view: routeView(stored, this.clock(), this.timing),
      swappedAt: stored.doc.lastMigration?.swappedAt ?? null,
    };
  }

  /** Release everything, or (`phase: "write"`) downgrade the write lock of the attempt `writeAt` names. */
  async release(id: string, req: ReleaseRequest, options: MutationOptions = {}): Promise<RouteView> {
    const stored = await this.mutate(id, (doc, now) => this.rules.release(doc, req, now), options);
    return routeView(stored, this.clock(), this.timing);
  }

  /** An operator's force-release (after its approvals): the stored result, for the audit trail. */
  forceRelease(id: string, req: Parameters<typeof forceRelease>[1]): Promise<StoredDocument> {
    return this.mutate(id, (doc, now) => this.rules.forceRelease(doc, req, now), {});
  }

  /** Clear an orphan (a lock past its lease); refused (423) while the lock is live. The stored result. */
  reclaim(id: string): Promise<StoredDocument> {
    return this.mutate(id, (doc, now) => this.rules.reclaim(doc, now), {});
  }

  /** The authoritative copy, from the write region (refreshes the cache). */
  readAuthoritative(id: string): Promise<StoredDocument> {
    return this.readAndCache(id, 'writeRegion', operationPriority.background);
  }

  /**
   * The nearest replica's copy, uncached (a read region's: has a write replicated there?). Never the
   * read path's answer: it neither fills the cache nor counts as the write region's version.
   */
  readReplica(id: string): Promise<StoredDocument> {
    return this.store.read(id, { from: 'nearest', priority: operationPriority.background });
  }

  /** A page of routes (GET /routes, the sweeper): never the read path. */
  listRoutes(options: Omit<ListOptions, 'priority'>): Promise<ListPage> {
    return this.store.list({ ...options, priority: operationPriority.background });
  }

  private async mutate(
    id: string,
    rule: (doc: LocationDocument, now: number) => RuleResult,
    options: MutationOptions,
  ): Promise<StoredDocument> {
    this.refuseIfReadOnly(id, 'a lock mutation');
    if (this.options.unsafeForLocks) {
      throw new RouteLockError(
        'UnsafeConfiguration',
        `Lock mutations are refused: ${this.options.unsafeForLocks}`,
        {
          resourceId: id,
        },
      );
    }
    const priority = operationPriority.background;
    const copy = await this.readForMutation(id, options, priority);
    let current = copy.stored;
    for (let attempt = 0; ; attempt += 1) {
      let decided: RuleResult;
      try {
        // Before the rule, so no rule (a planted one included) decides on, or writes, a newer schema.
        assertWritableSchema(current.doc);
        decided = rule(current.doc, this.clock());
      } catch (error) {
        throw await this.confirmedRefusal(
          id,
          error,
          copy.fromCache && attempt === 0,
          options.ifMatch,
          priority,
        );
      }
      const { doc, changed } = decided;
      // Any write that moves the route (a swap, or any rule the `rules` seam plants) lands in a declared region.
      if (changed && !sameLocation(doc.location, current.doc.location))
        assertAllowedRegion(this.allowedRegions, doc.location, 'moving the route', id);
      if (!changed && copy.fromCache && attempt === 0) {
        // A no-op answers without a write, so no ETag condition would catch a stale copy: confirm it.
        current = await this.readAndCache(id, 'writeRegion', priority);
        if (options.ifMatch === undefined || !sameEtag(current.etag, options.ifMatch))
          throw preconditionFailed(id, 'since the ETag you sent (If-Match)');
        continue;
      }
      if (!changed) return current;
      try {
        const written = await this.write(id, () => this.store.replace(doc, current.etag, { priority }));
        const now = this.clock();
        this.remember(written, 'writeRegion', now);
        this.checkSkew(id, written, now);
        return written;
      } catch (error) {
        current = await this.afterConflict(id, error, attempt, options.ifMatch, priority);
      }
    }
  }

  /**
   * The error to answer for a refusal decided on `copy`. A refusal is answered without a write, so no ETag
   * condition would catch a stale copy: one decided on a held copy (`onHeldCopy`) is confirmed on the
   * write region's first (a changed document is the caller's 412: it decides again there).
   */
  private async confirmedRefusal(
    id: string,
    error: unknown,
    onHeldCopy: boolean,
    ifMatch: string | undefined,
    priority: RequestPriority,
  ): Promise<unknown> {
    if (!onHeldCopy || !isRouteLockError(error)) return error;
    const current = await this.readAndCache(id, 'writeRegion', priority);
    if (ifMatch === undefined || !sameEtag(current.etag, ifMatch))
      return preconditionFailed(id, 'since the ETag you sent (If-Match)');
    return error;
  }

  private refuseIfReadOnly(id: string, what: string): void {
    if (this.options.readOnly === true)
      throw new RouteLockError(
        'ReadOnlyRouter',
        `This router is read-only (${what} refused); create it with allowMutations: true to write.`,
        { resourceId: id },
      );
  }

  /** The store stamps whole seconds, so a second of difference is resolution, not skew. */
  private checkSkew(id: string, written: StoredDocument, now: number): void {
    if (written.storedAt === undefined || !this.options.onClockSkew) return;
    const skewSeconds = Math.max(0, Math.abs(now - written.storedAt) / 1000 - 1);
    if (skewSeconds > this.timing.clockSkewSeconds) this.options.onClockSkew(id, Math.round(skewSeconds));
  }

  /**
   * The copy a mutation decides on: the caller's `known` or the one this router holds when the caller's
   * If-Match names it, else the write region's.
   */
  private async readForMutation(
    id: string,
    { ifMatch, known }: MutationOptions,
    priority: RequestPriority,
  ): Promise<VersionedCopy> {
    if (ifMatch !== undefined) {
      const given = known !== undefined && known.doc.id === id ? known : undefined;
      const held = this.versions.get(id) ?? this.freshCopy(id);
      const copy = [given, held].find((c) => c !== undefined && sameEtag(c.etag, ifMatch));
      if (copy) return { stored: copy, fromCache: true };
    }
    const current = await this.readAndCache(id, 'writeRegion', priority);
    if (ifMatch !== undefined && !sameEtag(current.etag, ifMatch))
      throw preconditionFailed(id, 'since the ETag you sent (If-Match)');
    return { stored: current, fromCache: false };
  }

  /** After a failed conditional write: re-read once and let the caller re-decide; otherwise give up. */
  private async afterConflict(
    id: string,
    error: unknown,
    attempt: number,
    ifMatch: string | undefined,
    priority: RequestPriority,
  ): Promise<StoredDocument> {
    if (!isRouteLockError(error, 'PreconditionFailed')) throw error;
    this.cache.delete(id);
    this.versions.delete(id);
    // A caller's own If-Match is a precondition, not a hint: a changed document is its 412.
    if (ifMatch !== undefined) throw preconditionFailed(id, 'since the ETag you sent (If-Match)');
    if (attempt > 0) throw preconditionFailed(id, 'again while this request was deciding; retry it');
    return this.readAndCache(id, 'writeRegion', priority);
  }
}

/** A version's key in `deadVersions`: its id and ETag. */
function versionKey(stored: StoredDocument): string {
  return `${stored.doc.id} ${stored.etag}`;
}

function preconditionFailed(id: string, why: string): RouteLockError {
  return new RouteLockError('PreconditionFailed', `Route ${id} changed ${why}.`, { resourceId: id });
}
