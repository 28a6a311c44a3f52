import { type Decision } from '../../shared/core/client';
import type { Config, TimingConfig } from '../../shared/config';
import type { Location, StoredDocument } from '../../shared/core/lock/document';
import { type Operation, type RouteView, routeView } from '../../shared/core/lock/view';
import type { MigrationSettings } from '../../shared/migration/types';
import { migrationSettings } from '../../shared/migration/workflow';
import type { Router } from '../../shared/core/router';
import type { Activities } from '../../shared/migration/activities';
import * as realRules from '../../shared/core/lock/rules';
import type { LockRules } from '../../shared/core/router';
import { plantUnconfirmedSwap } from '../../testkit/plantedBugs';
import { type ReadPolicyBug, plantedReadAction } from '../../testkit/readPolicyBugs';
import type { FleetControl, FleetStats, ViolationKind } from './types';
import { edgeTtlSeconds } from './world';

/**
 * The negative controls: each plants one bug through a seam (timing, settings, the `decide()` the
 * services call, the tier they read, the router's Cache-Control builder, the actor's delete, the
 * participants' delta) and must be caught by the kinds of violation that bug must cause; or, for a bug
 * a check of the workflow exists to stop before it does harm, by that check at work and no violation.
 */

/** A bug the workflow's verification must stop: mismatches found, swaps refused, and nothing lost. */
export const CAUGHT_BY_VERIFICATION = 'verification';
export type CaughtBy = ViolationKind[] | typeof CAUGHT_BY_VERIFICATION;

export const controlCaughtBy: Record<Exclude<FleetControl, 'none'>, CaughtBy> = {
  convergenceShorterThanCacheTtl: ['decision', 'data'],
  noReadThrough: ['decision', 'data'],
  noInFlightGrace: ['data'],
  // A delta that drops an item: verified, no swap with the item missing (and so no data violation at all).
  deltaDropsItem: CAUGHT_BY_VERIFICATION,
  // Not verified (404): the swap goes ahead without the item, and the data at the target misses it.
  deltaDropsItemUnverified: ['data'],
  // An overrun delta's copy landing after its successor swapped: the live target overwritten with older data.
  participantIgnoresSupersede: ['data'],
  regionOnlyDecide: ['decision', 'data'],
  // A phase boundary crossed on one clock and not another: a decision, lost data, or a late swap.
  noSkewMargins: ['decision', 'data', 'version'],
  deleteDuringRetiredWindow: ['window'],
  // A client holding a copy the edge had held: a decision on a view older than the convergence delay.
  serverCacheNoAge: ['decision', 'data'],
  // A campaign over its limits: more of its migrations running, or more starts a minute.
  campaignIgnoresMaxConcurrent: ['campaign'],
  campaignIgnoresStartsPerMinute: ['campaign'],
  // The source cleaned up while the route is back on it: acknowledged writes gone from where it is.
  cleanUpAtOnce: ['data'],
  // Joined answers older than the grace: writes decided before the write lock land after the copies,
  // or a decision made on a copy older than the request (the late answer cached and served again).
  joinLongerThanGrace: ['data', 'decision'],
  // The announced rule's own controls: a tightening some copy does not show yet when it takes effect, or a
  // copy kept (or left) when the rule says read the write region. A physical delete during a copy, a write
  // under the write lock, or the data that loses either.
  shortAnnouncement: ['decision', 'data'],
  lateRenewal: ['decision', 'data'],
  leaveOnOwnTimestamps: ['decision', 'data'],
  replicaInWindow: ['decision', 'data'],
  servedPastTtl: ['decision', 'data'],
};

/** The controls of the announced rule: every one of their migrations asks for announced locks. */
const ANNOUNCED_CONTROLS: ReadonlySet<FleetControl> = new Set([
  'shortAnnouncement',
  'lateRenewal',
  'leaveOnOwnTimestamps',
  'replicaInWindow',
  'servedPastTtl',
]);

/** The share of migrations started with announced locks: half (the rest legacy), all in their controls. */
export const announcedShare = (control: FleetControl): number => (ANNOUNCED_CONTROLS.has(control) ? 1 : 0.5);

/**
 * The read policy a service's routers run: a control's broken one in every service; otherwise the real
 * one, but the old-version service reads every lock by the legacy rule (a reader built before announced
 * locks, design §2.8: as strict, and it reads the write region from every lock's start).
 */
export function controlReadAction(
  control: FleetControl,
  oldReader: boolean,
): ReturnType<typeof plantedReadAction> | undefined {
  const bugs: readonly string[] = ['leaveOnOwnTimestamps', 'replicaInWindow', 'servedPastTtl'];
  if (bugs.includes(control)) return plantedReadAction(control as ReadPolicyBug);
  return oldReader ? plantedReadAction('legacyForAll') : undefined;
}

/**
 * The orchestrators' lock rules: the real ones, or (lateRenewal) a renewal without the announcement lead's
 * check: the lock judged as if it were legacy, its announcement kept on the document the rule returns.
 */
export function controlRules(control: FleetControl): Partial<LockRules> | undefined {
  if (control !== 'lateRenewal') return undefined;
  return {
    renew: (doc, req, now, cfg) => {
      const lock = doc.lock;
      if (!lock || lock.announceLeadSeconds === undefined) return realRules.renew(doc, req, now, cfg);
      const { announceLeadSeconds: lead, ...legacy } = lock;
      const result = realRules.renew({ ...doc, lock: legacy }, req, now, cfg);
      const after = result.doc.lock;
      return after?.migrationId === lock.migrationId
        ? { ...result, doc: { ...result.doc, lock: { ...after, announceLeadSeconds: lead } } }
        : result;
    },
  };
}

/**
 * Controls whose participants answer 404 to `verify`: the unverified delta, and the in-flight grace,
 * whose late writes verification would otherwise find missing and refuse to swap (a second defence:
 * the control shows the grace itself is needed).
 */
export const controlsWithoutVerify: ReadonlySet<FleetControl> = new Set([
  'deltaDropsItemUnverified',
  'noInFlightGrace',
  'joinLongerThanGrace',
]);

/**
 * The runs with hot resources (users.ts hotBursts): the main run and coalescing's own control. Every
 * other control plants its bug in the run it was written against, without them (with them in every run,
 * cleanUpAtOnce, whose catch needs a failover to drop a swap, went uncaught at the quick seed).
 */
export const controlsWithHotBursts: ReadonlySet<FleetControl> = new Set(['none', 'joinLongerThanGrace']);

/**
 * The services' routers' join bound (docs/design.md §5.8): the configured one (production: 50 ms, a
 * tenth of the grace at most), or (control) twice the in-flight grace, which config refuses.
 */
export function controlJoinBoundMs(control: FleetControl, config: Config): number {
  return control === 'joinLongerThanGrace'
    ? 2 * config.migration.inFlightGraceSeconds * 1000
    : config.timing.coalesceJoinMs;
}

/** Whether a run caught its control (fleetResult's verdict). */
export function controlCaught(
  control: Exclude<FleetControl, 'none'>,
  violations: readonly { kind: ViolationKind }[],
  stats: FleetStats,
): boolean {
  const by = controlCaughtBy[control];
  if (by !== CAUGHT_BY_VERIFICATION) return violations.some((v) => by.includes(v.kind));
  const v = stats.verification;
  return violations.length === 0 && v.itemsDropped > 0 && v.mismatches > 0 && v.swapsRefused > 0;
}

/**
 * Negative control: `decide()` as it was, comparing regions only (a serving location without an
 * account matches any account; the string form compares the region) and not checking the secondary.
 */
export function regionOnlyDecide(
  view: RouteView,
  operation: Operation,
  serving: string | Location,
): Decision {
  const sameRegion =
    typeof serving === 'string'
      ? view.location.region === serving
      : view.location.region === serving.region &&
        (serving.account === undefined || view.location.account === serving.account);
  if (!sameRegion) return { kind: 'notHere', location: view.location };
  const e = view.enforcement;
  const verdict = operation === 'read' ? e.read : operation === 'write' ? e.write : e.delete;
  if (verdict === 'allow') return { kind: 'allow' };
  if (verdict === 'tombstone') return { kind: 'tombstone' };
  return { kind: 'deny', retryAfterSeconds: e.retryAfterSeconds ?? 1 };
}

/** What a tier answers: the real Router, or (negative control) a cache that never reads through. */
export interface Tier {
  view(id: string): Promise<{ view: RouteView }>;
}

/** Negative control: holds whatever it fetched for its TTL, started lock or not. */
export class NoReadThroughTier implements Tier {
  private readonly held = new Map<string, { stored: StoredDocument; until: number }>();
  constructor(
    private readonly router: Router,
    private readonly timing: TimingConfig,
    private readonly now: () => number,
  ) {}
  async view(id: string) {
    const now = this.now();
    let hit = this.held.get(id);
    if (!hit || now >= hit.until) {
      this.router.forget(id);
      hit = { stored: await this.router.resolve(id), until: now + this.timing.localCacheTtlSeconds * 1000 };
      this.held.set(id, hit);
    }
    return { view: routeView(hit.stored, now, this.timing) };
  }
}

/** The timings a control changes: the rules' (no clock-skew margins), the orchestrators' (no edge tier). */
export function controlTimings(
  control: FleetControl,
  timing: TimingConfig,
): { timing: TimingConfig; ruleTiming: TimingConfig; orchestratorTiming: TimingConfig } {
  // Control: every router and rule without clock-skew margins, on the same skewed clocks.
  const ruleTiming: TimingConfig = control === 'noSkewMargins' ? { ...timing, clockSkewSeconds: 0 } : timing;
  const edge = edgeTtlSeconds(timing);
  // Control: the declaration forgot the largest tier (edge), as a service that added a CDN might.
  if (control === 'convergenceShorterThanCacheTtl') {
    const convergenceDelaySeconds =
      Math.max(0, ...timing.cacheTiers.map((t) => t.ttlSeconds).filter((s) => s < edge)) +
      timing.replicationBoundSeconds;
    // The lead follows the declaration (L = D + S + B), as the settings derive it.
    const announceLeadSeconds =
      convergenceDelaySeconds + ruleTiming.clockSkewSeconds + ruleTiming.safetyBufferSeconds;
    return {
      timing,
      ruleTiming,
      orchestratorTiming: { ...ruleTiming, convergenceDelaySeconds, announceLeadSeconds },
    };
  }
  // Control: an announcement lead of the convergence delay less the edge tier's TTL (an edge copy taken
  // just before the announcement is served past the instant it announced).
  if (control === 'shortAnnouncement')
    return {
      timing,
      ruleTiming,
      orchestratorTiming: { ...ruleTiming, announceLeadSeconds: timing.convergenceDelaySeconds - edge },
    };
  // Control: an hour's hard-delete lease (under the lead: the real rule refuses every renewal of it), so
  // renewals land late within the copies; with the lead check planted away they are accepted.
  if (control === 'lateRenewal')
    return {
      timing,
      ruleTiming,
      orchestratorTiming: { ...ruleTiming, hardDeleteLeaseSeconds: LATE_RENEWAL_LEASE_SECONDS },
    };
  return { timing, ruleTiming, orchestratorTiming: ruleTiming };
}

/** The lateRenewal control's hard-delete lease, and when in it its renewals land (0.95 of it). */
const LATE_RENEWAL_LEASE_SECONDS = 3600;
const LATE_RENEWAL_AT = 0.95;

/**
 * The workflow's settings, legacy or announced: copies that start the moment their lock commits, no
 * clock-skew margins, the lead the orchestrators' rules grant (a control's), or (lateRenewal) renewals
 * planned against a lease three times 0.95 of the real one, so each lands at 0.95 of it.
 */
export function controlSettings(
  control: FleetControl,
  config: Config,
  orchestratorTiming: TimingConfig,
  announced: boolean,
): MigrationSettings {
  const base = announced
    ? {
        ...migrationSettings({ ...config, timing: { ...config.timing, announcedLocks: true } }),
        announceLeadSeconds: orchestratorTiming.announceLeadSeconds,
      }
    : migrationSettings(config);
  return {
    ...base,
    ...(control === 'noInFlightGrace' ? { inFlightGraceSeconds: 0 } : {}),
    ...(control === 'noSkewMargins' ? { clockSkewSeconds: 0 } : {}),
    ...(control === 'lateRenewal'
      ? { hardDeleteLeaseSeconds: 3 * LATE_RENEWAL_AT * LATE_RENEWAL_LEASE_SECONDS }
      : {}),
  };
}

/** Negative control `cleanUpAtOnce`: the activities of an orchestrator with confirmation switched off. */
export function controlActivities(control: FleetControl, activities: Activities): Activities {
  if (control === 'cleanUpAtOnce') plantUnconfirmedSwap(activities);
  return activities;
}
