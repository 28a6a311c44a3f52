import type { TimingConfig } from '../../shared/config';
import type { Location } from '../../shared/core/lock/document';

/**
 * Where routes live: three regions, one of them (westeurope) with two accounts beside its account-less
 * location, so some migrations move between two accounts of one region. A service per location.
 */
export const LOCATIONS: readonly Location[] = [
  { region: 'westeurope' },
  { region: 'westeurope', account: 'a1' },
  { region: 'westeurope', account: 'a2' },
  { region: 'eastus' },
  { region: 'northeurope' },
];
export const locationKey = (l: Location): string =>
  l.account === undefined ? l.region : `${l.region}/${l.account}`;
/**
 * What a service declares to `decide()`: its full location. An account-less location in both forms
 * the API takes: the string (westeurope, northeurope) and an object without an account (eastus).
 */
export const declaredLocation = (l: Location): string | Location =>
  l.account !== undefined
    ? { region: l.region, account: l.account }
    : l.region === 'eastus'
      ? { region: l.region }
      : l.region;
/** The largest declared cache tier's TTL (the edge's): the one a client tier sits behind. */
export const edgeTtlSeconds = (timing: TimingConfig): number =>
  Math.max(...timing.cacheTiers.map((t) => t.ttlSeconds));

/** The share of orchestrator crashes after which the process returns around the end of a phase lease. */
export const BOUNDARY_RESTART_SHARE = 0.2;
/** The share of an orchestrator's timer firings that start a stall (until around a write lease's end). */
export const STALL_SHARE = 0.02;
/** The share of swaps after which the route-deleting actor deletes and re-creates the route. */
export const DELETE_AFTER_SWAP_SHARE = 0.3;
export const CRASH_STEPS = 30;
export const TRAFFIC_EVERY_MS = 10_000;
export const DRIVER_EVERY_MS = 30_000;
/**
 * Writes and deletes land a while after they were decided: 0.5 s steps up to 90 % of the declared
 * in-flight grace (steps keep the number of distinct virtual instants, and so the run time, down).
 */
export const LANDING_STEP_MS = 500;

export type Random = () => number;
export const pick = <T>(random: Random, items: readonly T[]): T =>
  items[Math.floor(random() * items.length)] as T;
export const between = (random: Random, lo: number, hi: number) => lo + random() * (hi - lo);
/** Log-uniform: durations spread over orders of magnitude. */
export const logBetween = (random: Random, lo: number, hi: number) =>
  Math.exp(between(random, Math.log(lo), Math.log(hi)));

export interface Item {
  seq: number;
  tombstone: boolean;
}

/** One resource's data in one region, with its live items indexed for a random pick. */
export class Shelf {
  readonly items = new Map<string, Item>();
  private readonly liveIds: string[] = [];
  private readonly position = new Map<string, number>();

  set(id: string, item: Item): void {
    const wasLive = this.position.has(id);
    this.items.set(id, item);
    if (!item.tombstone && !wasLive) {
      this.position.set(id, this.liveIds.length);
      this.liveIds.push(id);
    } else if (item.tombstone && wasLive) {
      this.unlist(id);
    }
  }
  remove(id: string): void {
    if (this.position.has(id)) this.unlist(id);
    this.items.delete(id);
  }
  clear(): void {
    this.items.clear();
    this.liveIds.length = 0;
    this.position.clear();
  }
  get live(): readonly string[] {
    return this.liveIds;
  }
  private unlist(id: string): void {
    const at = this.position.get(id) as number;
    const last = this.liveIds.pop() as string;
    if (last !== id) {
      this.liveIds[at] = last;
      this.position.set(last, at);
    }
    this.position.delete(id);
  }
}

/** Each region's copy of each resource's data. */
export class RegionData {
  private readonly shelves = new Map<string, Shelf>();
  private seq = 0;
  shelf(resourceId: string): Shelf {
    let shelf = this.shelves.get(resourceId);
    if (!shelf) this.shelves.set(resourceId, (shelf = new Shelf()));
    return shelf;
  }
  write(resourceId: string, itemId: string): void {
    this.shelf(resourceId).set(itemId, { seq: ++this.seq, tombstone: false });
  }
  tombstone(resourceId: string, itemId: string): void {
    this.shelf(resourceId).set(itemId, { seq: ++this.seq, tombstone: true });
  }
  get current(): number {
    return this.seq;
  }
  /** The items changed after `since` (every item when 0), as a copy takes them. */
  snapshot(resourceId: string, since = 0): Map<string, Item> {
    const items = this.shelf(resourceId).items;
    if (since === 0) return new Map(items);
    return new Map([...items].filter(([, item]) => item.seq > since));
  }
  upsert(resourceId: string, copied: Map<string, Item>): void {
    const shelf = this.shelf(resourceId);
    for (const [id, item] of copied) shelf.set(id, { seq: ++this.seq, tombstone: item.tombstone });
  }
}
