import { decide } from '../../shared/core/client';
import type { TimingConfig } from '../../shared/config';
import type { Location, LocationDocument } from '../../shared/core/lock/document';
import { cacheHeaders } from '../../shared/core/lock/view';
import type { Router } from '../../shared/core/router';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { HeldReadStore } from '../../testkit/heldReadStore';
import { seamedRouter } from '../../testkit/router';
import { prng } from '../../testkit/prng';
import { ClientTier } from '../clientTier';
import {
  NoReadThroughTier,
  type Tier,
  controlJoinBoundMs,
  controlReadAction,
  regionOnlyDecide,
} from './controls';
import { type Fleet, type FleetEnv, drawOffset, harnessError, note } from './state';
import { LOCATIONS, between, declaredLocation, edgeTtlSeconds, locationKey, pick } from './world';

/**
 * A service per location: three cache tiers, all on the service's own clock, and a fourth way in, the
 * service's own RoutingClient in series behind its largest tier (edge), over HTTP answered by that
 * tier's router (Cache-Control and Age as the API sends them).
 */
export interface Service {
  location: Location;
  serves: string | Location;
  offsetMs: number;
  /** The declared tiers (by `timing.cacheTiers` index), then the client tier. */
  tiers: Tier[];
  client: ClientTier;
  /** The declared tiers' routers (what a restart empties). */
  routers: Router[];
  /** The old-version service: its routers read every lock by the legacy rule. */
  oldReader: boolean;
}

/**
 * The service built before announced locks (design §2.8): one location's routers run the legacy read rule
 * for every lock. Its RoutingClient is the current one (the client's legacy branch is not modelled).
 */
export const OLD_READER_LOCATION = 'northeurope';

/** Which router a slow read is planted on (FleetEnv.heldReads): a service's tier, and the id. */
export const heldReadKey = (serving: string, tierIndex: number, id: string): string =>
  `${serving} ${tierIndex} ${id}`;

/**
 * The services, one per location, each drawing its clock offset in `LOCATIONS` order. Every router
 * coalesces its reads (the configured join bound; the control's, twice the grace), and reads through a
 * store whose write-region reads take virtual time when a hot resource's burst planted a slow one.
 */
export function createServices(
  env: FleetEnv,
  store: LocationStore,
  onWriteRegionRead: (id: string, oldReader: boolean) => void,
) {
  const { timing, ruleTiming, control, clock } = env;
  const edge = edgeTtlSeconds(timing);
  const behindTier = timing.cacheTiers.findIndex((t) => t.ttlSeconds === edge);
  const tierNames = [
    ...timing.cacheTiers.map((t) => t.name),
    `client behind ${timing.cacheTiers[behindTier]?.name}`,
  ];
  const services = new Map<string, Service>();
  const serviceOffsets: number[] = [];
  for (const location of LOCATIONS) {
    const offsetMs = drawOffset(env);
    serviceOffsets.push(offsetMs);
    const serviceClock = () => clock.now() + offsetMs;
    const oldReader = locationKey(location) === OLD_READER_LOCATION;
    const readAction = controlReadAction(control, oldReader);
    const routers = timing.cacheTiers.map((tier, index) => {
      const tierTiming = {
        ...ruleTiming,
        localCacheTtlSeconds: tier.ttlSeconds,
        coalesceJoinMs: controlJoinBoundMs(control, env.config),
      };
      const serving = locationKey(location);
      const heldStore = new HeldReadStore(store, (read) => {
        if (read.from === 'writeRegion') onWriteRegionRead(read.id, oldReader);
        const key = heldReadKey(serving, index, read.id);
        const heldMs = read.from === 'writeRegion' ? env.heldReads.get(key) : undefined;
        if (heldMs === undefined) return undefined;
        env.heldReads.delete(key);
        return env.scheduler.timer(clock.now() + heldMs).promise.then(() => undefined);
      });
      // Control: the tier feeding the client sends headers without Age (a full max-age, Age 0, however
      // long its cache has held the copy).
      const oldHeaders = control === 'serverCacheNoAge' && index === behindTier;
      return seamedRouter({
        store: heldStore,
        timing: tierTiming,
        clock: serviceClock,
        ...(readAction ? { readAction } : {}),
        ...(oldHeaders
          ? {
              cacheHeaders: (doc: LocationDocument, now: number, cfg: TimingConfig) =>
                cacheHeaders(doc, now, cfg, 0),
            }
          : {}),
      });
    });
    const client = new ClientTier(
      routers[behindTier] as Router,
      serviceClock,
      ruleTiming.clockSkewSeconds,
      edge,
    );
    services.set(locationKey(location), {
      location,
      serves: declaredLocation(location),
      offsetMs,
      tiers: [
        ...routers.map((router, index) =>
          control === 'noReadThrough'
            ? new NoReadThroughTier(
                router,
                { ...ruleTiming, localCacheTtlSeconds: timing.cacheTiers[index]?.ttlSeconds ?? 0 },
                serviceClock,
              )
            : router,
        ),
        client,
      ],
      client,
      routers,
      oldReader,
    });
  }
  const decideAs = control === 'regionOnlyDecide' ? regionOnlyDecide : decide;
  return { services, serviceOffsets, tierNames, decideAs };
}

/** How often, on average, some service restarts (its tiers and client forget every copy at once). */
const SERVICE_RESTART_MEAN_MS = 20 * 60_000;

/**
 * Services restart at random instants: every tier's copies (and the client's) forgotten, so the next
 * resolves of a resource mid-migration are a first sight of it, from the nearest replica (design note
 * §2.3). A generator of its own keeps the run's other draws where they were.
 */
export function startServiceRestarts(f: Fleet): void {
  const random = prng(f.options.seed ^ 0x7e57a7);
  const services = [...f.services.values()];
  void (async () => {
    while (!f.done) {
      await f.scheduler.timer(f.clock.now() + Math.round(between(random, 0, 2 * SERVICE_RESTART_MEAN_MS)))
        .promise;
      if (f.done) return;
      const service = pick(random, services);
      for (const id of f.resources) {
        for (const router of service.routers) router.forget(id);
        service.client.client.forget(id);
      }
      f.stats.announced.serviceRestarts += 1;
      for (const id of f.running.keys()) note(f, id, `service ${locationKey(service.location)} restarted`);
    }
  })().catch(harnessError(f, 'fleet'));
}
