import { randomBytes } from 'node:crypto';
import { ManualClock } from '../testkit/clock';
import { type TimingConfig, parseConfig } from '../shared/config';
import { RouteLockError } from '../shared/core/errors';
import {
  type LocationDocument,
  type StoredDocument,
  newLocationDocument,
  sameLocation,
} from '../shared/core/lock/document';
import { hasStarted, isLive, writeLockInForce } from '../shared/core/lock/state';
import { sha256Hex, tokenMatches } from '../shared/core/lock/token';
import { enforcement, routeView } from '../shared/core/lock/view';
import type { Router } from '../shared/core/router';
import type { ReadFrom } from '../shared/core/store/ports/locations';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import { ForwardingStore } from '../testkit/forwardingStore';
import { type Bug, plantedRules } from '../testkit/plantedBugs';
import { seamedRouter } from '../testkit/router';

/**
 * The lock protocol under test: several orchestrators (each with its own router, as separate service
 * instances) racing on one resource through the real library and a real store, a clock that jumps to
 * every boundary, stale If-Match, idempotent retries and crashes. After every step, and on every
 * committed document version, the invariants are checked. Bugs are planted only through injection
 * seams (the router's rules, the store wrapper), never by editing the library.
 */

export const ACTORS = ['A', 'B', 'C'] as const;
export type ActorName = (typeof ACTORS)[number];
export type Boundary = 'startsAt' | 'hardDelete' | 'write' | 'parent' | 'max' | 'next';

export type Command =
  | { kind: 'prelock'; actor: ActorName; replay: boolean }
  | { kind: 'escalate'; actor: ActorName; phase: 'hardDelete' | 'write' }
  | { kind: 'renew'; actor: ActorName; phase?: 'prelock' | 'hardDelete' | 'write' }
  | { kind: 'swap'; actor: ActorName; staleIfMatch: boolean }
  | { kind: 'release'; actor: ActorName; write: boolean }
  | { kind: 'tick'; boundary: Boundary; offsetMs: -1 | 0 | 1 }
  | { kind: 'crash'; actor: ActorName }
  /**
   * Someone with no token and no key, only what every view shows (ids, owners, targets and their
   * concatenations), tries to take over the live lock by replaying its pre-lock.
   */
  | { kind: 'stranger' }
  /** Several actors' commands at once: their store calls interleave (under fast-check's scheduler). */
  | { kind: 'race'; commands: Command[] };

interface Actor {
  token?: string;
  /** The current migration's Idempotency-Key: random, as the workflow's is. */
  key?: string;
  etag?: string;
  staleEtag?: string;
  crashed: boolean;
  migrations: number;
}

const SOURCE = { region: 'westeurope' };
const TARGET_OF: Record<ActorName, { region: string }> = {
  A: { region: 'eastus' },
  B: { region: 'northeurope' },
  C: { region: 'uksouth' },
};
const phaseOrder = { prelock: 0, hardDelete: 1, write: 2 } as const;

/** A store that records every committed version (for the version-level invariants) and can drop If-Match. */
/** The part of fast-check's scheduler the model uses: store calls go through it to interleave. */
export interface Interleaver {
  schedule<T>(task: Promise<T>, label?: string): Promise<T>;
  waitFor<T>(task: Promise<T>): Promise<T>;
}

class ObservedStore extends ForwardingStore<SqliteStore> {
  versions: LocationDocument[] = [];
  constructor(
    inner: SqliteStore,
    private readonly unconditional: boolean,
    private readonly interleaver?: Interleaver,
  ) {
    super(inner);
  }
  override get kind() {
    return 'observed';
  }
  private turn<T>(task: Promise<T>, label: string): Promise<T> {
    return this.interleaver ? this.interleaver.schedule(task, label) : task;
  }
  override read(id: string, options: { from: ReadFrom }) {
    return this.turn(this.inner.read(id, options), 'read');
  }
  override async create(doc: LocationDocument) {
    const stored = await this.inner.create(doc);
    this.versions.push(stored.doc);
    return stored;
  }
  override async replace(doc: LocationDocument, ifMatch: string): Promise<StoredDocument> {
    // The planted bug: last writer wins.
    await this.turn(Promise.resolve(), 'replace');
    const etag = this.unconditional ? (await this.inner.read(doc.id, { from: 'writeRegion' })).etag : ifMatch;
    const stored = await this.inner.replace(doc, etag);
    this.versions.push(stored.doc);
    return stored;
  }
}

export interface RunResult {
  violations: string[];
  trace: string[];
}

export async function runCommands(
  commands: Command[],
  options: { bug?: Bug; timing?: TimingConfig; interleaver?: Interleaver } = {},
): Promise<RunResult> {
  const bug = options.bug ?? 'none';
  const timing = options.timing ?? parseConfig({}).timing;
  const clock = new ManualClock();
  const inner = new SqliteStore(':memory:');
  const store = new ObservedStore(inner, bug === 'unconditionalWrite', options.interleaver);
  const routers = Object.fromEntries(
    ACTORS.map((name) => {
      const planted = plantedRules(bug);
      return [
        name,
        seamedRouter({
          store,
          timing,
          clock: clock.now,
          cacheMax: 16,
          ...(planted ? { rules: planted } : {}),
        }),
      ];
    }),
  ) as Record<ActorName, Router>;
  const actors = Object.fromEntries(
    ACTORS.map((n) => [n, { crashed: false, migrations: 0 } as Actor]),
  ) as Record<ActorName, Actor>;
  const issued = new Set<string>();
  const violations: string[] = [];
  const trace: string[] = [];
  const id = 'res-1';
  await inner.create(newLocationDocument(id, SOURCE, clock.now()));
  store.versions.push((await inner.read(id, { from: 'writeRegion' })).doc);
  let versionsChecked = store.versions.length;

  const truth = async () => (await inner.read(id, { from: 'writeRegion' })).doc;
  const secrets = () => [...issued, ...[...issued].map(sha256Hex)];
  const leaks = (value: unknown) => {
    const text = value instanceof Error ? `${value.message}` : JSON.stringify(value ?? null);
    return secrets().some((s) => text.includes(s)) || /tokenHash|idempotencyKeyHash|principalHash/.test(text);
  };

  const strangerRouter = seamedRouter({
    store,
    timing,
    clock: clock.now,
    cacheMax: 16,
    ...(plantedRules(bug) ? { rules: plantedRules(bug) } : {}),
  });
  /** Every public value, alone and joined, as key and as owner: no attempt may yield a token. */
  const strangerAttack = async (before: LocationDocument, now: number): Promise<string> => {
    const lock = isLive(before.lock, now) ? before.lock : null;
    if (!lock) return 'no live lock to attack';
    const view = routeView({ doc: before, etag: '' }, now, timing);
    const seen = [view.resourceId, lock.migrationId, ...ACTORS, view.lock?.target.region ?? ''];
    const keys = [...seen, ...seen.flatMap((a) => seen.filter((b) => b !== a).map((b) => `${a}-${b}`))];
    let tried = 0;
    for (const key of keys) {
      for (const owner of [...ACTORS, 'S']) {
        tried += 1;
        try {
          const grant = await strangerRouter.prelock(id, {
            migrationId: lock.migrationId,
            owner,
            target: lock.target,
            idempotencyKey: key,
          });
          if (grant.token) {
            violations.push(`a stranger obtained a working token (key "${key}", owner ${owner})`);
            return `hijacked with key "${key}"`;
          }
        } catch (error) {
          if (!(error instanceof RouteLockError)) throw error;
        }
      }
    }
    return `${tried} attempts refused`;
  };

  interface Step {
    command: Command;
    outcome: string;
    result?: unknown;
    /** A pre-lock that granted a token. */
    granted?: ActorName;
    /** A swap that answered success, with the location it reported. */
    swappedTo?: { region: string };
    /** The token the command presented (an actor's token may change during a race). */
    presented?: string;
  }

  const execute = async (command: Command, before: LocationDocument, now: number): Promise<Step[]> => {
    if (command.kind === 'race') {
      const steps = await Promise.all(command.commands.map((c) => execute(c, before, now)));
      return steps.flat();
    }
    const step: Step = { command, outcome: 'ok' };
    try {
      if (command.kind === 'tick') {
        const lock = before.lock;
        const targets: Partial<Record<Boundary, number | undefined>> = lock
          ? {
              startsAt: Date.parse(lock.startsAt),
              hardDelete: lock.hardDeleteExpiresAt ? Date.parse(lock.hardDeleteExpiresAt) : undefined,
              write: lock.writeExpiresAt ? Date.parse(lock.writeExpiresAt) : undefined,
              parent: Date.parse(lock.expiresAt),
              max: Date.parse(lock.maxExpiresAt),
            }
          : {};
        const at =
          command.boundary === 'next'
            ? Object.values(targets)
                .filter((v): v is number => v !== undefined && v > now)
                .sort((a, b) => a - b)[0]
            : targets[command.boundary];
        const next = at !== undefined && at + command.offsetMs > now ? at + command.offsetMs : now + 1000;
        clock.set(next);
        step.outcome = `clock → ${command.boundary}${command.offsetMs >= 0 ? '+' : ''}${command.offsetMs}`;
        return [step];
      }
      if (command.kind === 'stranger') {
        step.outcome = await strangerAttack(before, now);
        return [step];
      }
      const actor = actors[command.actor];
      const router = routers[command.actor];
      if (actor.crashed) {
        step.outcome = 'crashed (no-op)';
      } else if (command.kind === 'crash') {
        actor.crashed = true;
        step.outcome = 'crashed';
      } else if (command.kind === 'prelock') {
        if (!command.replay || actor.key === undefined) {
          actor.migrations += 1;
          actor.key = randomBytes(16).toString('base64url');
        }
        const migrationId = `m-${command.actor}-${actor.migrations}`;
        const grant = await router.prelock(id, {
          migrationId,
          owner: command.actor,
          target: TARGET_OF[command.actor],
          // the control keys the pre-lock by its migration id
          idempotencyKey: bug === 'replayTrustsKeyAlone' ? migrationId : actor.key,
        });
        step.result = { ...grant, token: undefined };
        if (grant.token) {
          if (issued.has(grant.token)) violations.push('token issued twice');
          issued.add(grant.token);
          actor.token = grant.token;
          step.granted = command.actor;
        }
        actor.staleEtag = actor.etag;
        actor.etag = grant.etag;
      } else if (!actor.token) {
        step.outcome = 'no token';
      } else if ((step.presented = actor.token) === undefined) {
        step.outcome = 'no token';
      } else if (command.kind === 'escalate' || command.kind === 'renew') {
        const grant =
          command.kind === 'escalate'
            ? await router.escalate(id, { token: actor.token, phase: command.phase })
            : await router.renew(id, {
                token: actor.token,
                ...(command.phase ? { phase: command.phase } : {}),
              });
        step.result = grant;
        actor.staleEtag = actor.etag;
        actor.etag = grant.etag;
      } else if (command.kind === 'swap') {
        const ifMatch = command.staleIfMatch ? actor.staleEtag : undefined;
        // The planted bug (its swap rule, see plantedRules): the location in one write, the lock in a second.
        if (bug === 'swapInTwoWrites') await router.swap(id, { token: actor.token });
        const view = await router.swap(id, { token: actor.token }, { ifMatch });
        step.result = view;
        step.swappedTo = view.location;
      } else if (command.kind === 'release') {
        step.result = await router.release(id, {
          token: actor.token,
          ...(command.write ? { phase: 'write' as const } : {}),
        });
      }
    } catch (error) {
      if (!(error instanceof RouteLockError)) throw error;
      step.outcome = error.code;
      if (leaks(error)) violations.push(`an error carried a token or hash (${error.code})`);
    }
    if (step.result !== undefined && leaks(step.result))
      violations.push(`a response carried a token or hash (${command.kind})`);
    return [step];
  };

  for (const command of commands) {
    const before = await truth();
    const now = clock.now();
    const running = execute(command, before, now);
    const steps = options.interleaver ? await options.interleaver.waitFor(running) : await running;
    for (const step of steps) trace.push(`${JSON.stringify(step.command)} → ${step.outcome}`);

    // Invariants on the state after the step (or the race).
    const after = await truth();
    const t = clock.now();
    const live = isLive(after.lock, t) ? after.lock : null;
    const holders = ACTORS.filter(
      (n) => actors[n].token && live && tokenMatches(actors[n].token as string, live.tokenHash),
    );
    if (holders.length > 1) violations.push(`two live tokens: ${holders.join(', ')}`);
    // (one actor's own idempotent replay in the same race is one lock, re-tokened, not two)
    const granted = [...new Set(steps.filter((x) => x.granted).map((x) => x.granted))];
    if (granted.length > 1) violations.push(`two pre-locks granted at once: ${granted.join(', ')}`);
    if (live) {
      if (live.hardDeleteExpiresAt && Date.parse(live.hardDeleteExpiresAt) > Date.parse(live.expiresAt))
        violations.push('hard-delete lease outlives the parent');
      if (live.writeExpiresAt && Date.parse(live.writeExpiresAt) > Date.parse(live.expiresAt))
        violations.push('write lease outlives the parent');
      if (Date.parse(live.expiresAt) > Date.parse(live.maxExpiresAt))
        violations.push('parent lease past maxExpiresAt');
      if (!hasStarted(live, t)) {
        const e = enforcement(after, t, timing);
        if (e.write !== 'allow' || e.delete !== 'allow') violations.push('restricted before startsAt');
      }
    }
    const prevLive = isLive(before.lock, now) ? before.lock : null;
    if (
      prevLive &&
      live &&
      prevLive.migrationId === live.migrationId &&
      phaseOrder[live.phase] < phaseOrder[prevLive.phase]
    ) {
      const downgrade = steps.some(
        (x) => x.command.kind === 'release' && x.command.write && x.outcome === 'ok',
      );
      if (!downgrade || prevLive.phase !== 'write' || live.phase !== 'hardDelete')
        violations.push(`phase went back ${prevLive.phase} → ${live.phase}`);
    }
    if (!sameLocation(before.location, after.location)) {
      const swappers = steps.filter((x) => x.swappedTo && x.command.kind === 'swap');
      const legitimate = swappers.some((x) =>
        Boolean(
          prevLive &&
          x.presented &&
          tokenMatches(x.presented, prevLive.tokenHash) &&
          writeLockInForce(prevLive, now),
        ),
      );
      if (!legitimate)
        violations.push('location changed without a swap by the live token holder during a write lock');
    }
    // Only the holder of the live token moves a lock forward (replays of a finished swap/release aside).
    for (const x of steps) {
      const c = x.command;
      if (
        x.outcome !== 'ok' ||
        (c.kind !== 'escalate' && c.kind !== 'renew' && c.kind !== 'swap' && c.kind !== 'release')
      )
        continue;
      const token = x.presented;
      const held = Boolean(prevLive && token && tokenMatches(token, prevLive.tokenHash));
      // docs/design.md §3.2 step 0: a swap or release replayed with the token that completed it answers 200, unchanged.
      const replay =
        (c.kind === 'swap' || c.kind === 'release') &&
        Boolean(token && before.lastMigration && tokenMatches(token, before.lastMigration.tokenHash));
      if (!held && !replay) violations.push(`${c.actor} ${c.kind} succeeded without the live token`);
    }
    // A swap that answered success is the route's truth until another swap.
    for (const x of steps) {
      if (x.swappedTo && !sameLocation(x.swappedTo, after.location))
        violations.push('a swap answered success but the route did not move (lost update)');
    }
    // Every committed version: a location change and the unlock happen together (no partial cutover).
    for (; versionsChecked < store.versions.length; versionsChecked += 1) {
      const prev = store.versions[versionsChecked - 1];
      const version = store.versions[versionsChecked] as LocationDocument;
      if (prev && !sameLocation(prev.location, version.location) && version.lock !== null) {
        violations.push('partial cutover: a version with the new location still holds the lock');
      }
    }
    if (violations.length > 0) break;
  }
  await store.close();
  return { violations: [...new Set(violations)], trace };
}
