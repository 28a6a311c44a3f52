import { decide } from '../../shared/core/client';
import type { TimingConfig } from '../../shared/config';
import type { Location, LocationDocument } from '../../shared/core/lock/document';
import { cacheHeaders } from '../../shared/core/lock/view';
import type { Router } from '../../shared/core/router';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { HeldReadStore } from '../../testkit/heldReadStore';
import { seamedRouter } from '../../testkit/router';
import { ClientTier } from '../clientTier';
import { NoReadThroughTier, type Tier, controlJoinBoundMs, regionOnlyDecide } from './controls';
import { type FleetEnv, drawOffset } from './state';
import { LOCATIONS, declaredLocation, edgeTtlSeconds, locationKey } from './world';

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
}

/** Which router a slow read is planted on (FleetEnv.heldReads): a service's tier, and the id. */
export const heldReadKey = (serving: string, tierIndex: number, id: string): string =>
  `${serving} ${tierIndex} ${id}`;

/**
 * The services, one per location, each drawing its clock offset in `LOCATIONS` order. Every router
 * coalesces its reads (the configured join bound; the control's, twice the grace), and reads through a
 * store whose write-region reads take virtual time when a hot resource's burst planted a slow one.
 */
export function createServices(env: FleetEnv, store: LocationStore) {
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
    const routers = timing.cacheTiers.map((tier, index) => {
      const tierTiming = {
        ...ruleTiming,
        localCacheTtlSeconds: tier.ttlSeconds,
        coalesceJoinMs: controlJoinBoundMs(control, env.config),
      };
      const serving = locationKey(location);
      const heldStore = new HeldReadStore(store, (read) => {
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
    });
  }
  const decideAs = control === 'regionOnlyDecide' ? regionOnlyDecide : decide;
  return { services, serviceOffsets, tierNames, decideAs };
}
