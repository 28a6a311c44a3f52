import { type Location, sameLocation } from '../../shared/core/lock/document';
import { campaignEnded, createCampaign, rivalStart } from './campaign';
import { announcedShare } from './controls';
import { traffic } from './users';
import { type Fleet, harnessError, note, truth } from './state';
import { CRASH_STEPS, DRIVER_EVERY_MS, LOCATIONS, TRAFFIC_EVERY_MS, locationKey, pick } from './world';

/**
 * The driver: keeps `concurrency` migrations going until `migrations` have started. A resource mostly
 * rests three hours after its last migration; sometimes it goes again at once (409s).
 */

const busyResources = (f: Fleet): Set<string> =>
  new Set([...f.state.unfinished(), ...f.rivalState.unfinished()].map((m) => m.input.resourceId));

async function startOne(f: Fleet, busy: Set<string>): Promise<boolean> {
  const { random } = f;
  const idle = f.resources.filter((id) => !busy.has(id) && !f.deleting.has(id));
  const cooled = idle.filter((id) => f.clock.now() - (f.lastBusyAt.get(id) ?? 0) > 3 * 3600_000);
  const rivalRace = random() < 0.03 && busy.size > 0;
  const pool = rivalRace
    ? [...busy].filter((id) => !f.deleting.has(id))
    : random() < 0.9 && cooled.length > 0
      ? cooled
      : idle;
  const by = rivalRace ? f.rival : f.runner;
  if (pool.length === 0 || !by) return false;
  const resourceId = pick(random, pool);
  const here = (await truth(f, resourceId)).location;
  const elsewhere = LOCATIONS.filter((l) => !sameLocation(l, here));
  // From a region with several accounts, half the moves go to another account of the same region.
  const sameRegion = elsewhere.filter((l) => l.region === here.region);
  const target: Location =
    random() < 0.05
      ? here
      : sameRegion.length > 0 && random() < 0.5
        ? pick(random, sameRegion)
        : pick(random, elsewhere);
  // Half the migrations (all, in the announced rule's controls) ask for announced locks: the runner's
  // settings read this at the start.
  f.announceNext = f.announceRandom() < announcedShare(f.control);
  const { record, created } = by.start({ resourceId, target });
  if (!created) return false;
  if (f.announceNext) f.stats.announced.migrations += 1;
  else f.stats.announced.legacy += 1;
  if (target.region === here.region && !sameLocation(target, here)) f.stats.accountMoves.started += 1;
  f.started += 1;
  busy.add(resourceId);
  f.running.set(resourceId, record.migrationId);
  // Journal position 0 is the first status, never journaled: crash positions run 1..CRASH_STEPS.
  if (by === f.runner) f.crashPlan.set(record.migrationId, 1 + (f.started % CRASH_STEPS));
  note(
    f,
    resourceId,
    `${record.migrationId} started ${locationKey(here)} → ${locationKey(target)}${rivalRace ? ' (rival)' : ''}${f.announceNext ? ' (announced)' : ''}`,
  );
  return true;
}

async function drive(f: Fleet): Promise<void> {
  const busy = busyResources(f);
  for (const [id, migrationId] of f.running)
    if (!busy.has(id)) {
      f.running.delete(id);
      const record = (await f.state.get(migrationId)) ?? (await f.rivalState.get(migrationId));
      note(f, id, `${migrationId} ended ${record?.status.status}: ${record?.status.error ?? ''}`);
    }
  for (const id of busy) f.lastBusyAt.set(id, f.clock.now());
  if (f.campaign) {
    // A campaign starts the migrations; beside it, only a rival now and then.
    rivalStart(f, busy);
    if (busy.size === 0 && (await campaignEnded(f))) f.done = true;
    return;
  }
  const launchable = Math.min(f.options.concurrency - busy.size, f.options.migrations - f.started);
  for (let i = 0; i < launchable; i += 1) if (!(await startOne(f, busy))) break;
  if (f.started >= f.options.migrations && busy.size === 0) f.done = true;
}

/** `work` every `ms` of virtual time until the run is done. */
function every(f: Fleet, ms: number, work: () => Promise<void>): void {
  void (async () => {
    while (!f.done) {
      await f.scheduler.timer(f.clock.now() + ms).promise;
      if (!f.done) await work().catch(harnessError(f, 'fleet'));
    }
  })();
}

/** Starts user traffic and the driver on virtual time: they run until the run is done. */
export function startDriving(f: Fleet): void {
  if (f.campaign) void createCampaign(f).catch(harnessError(f, 'campaign'));
  every(f, TRAFFIC_EVERY_MS, () => traffic(f));
  every(f, DRIVER_EVERY_MS, () => drive(f));
}
