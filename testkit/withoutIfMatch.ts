import type { Activities } from '../shared/migration/activities';

/** The same activities with If-Match stripped: every mutation reads the write region first. */
export function withoutIfMatch(activities: Activities): Activities {
  const strip = <T extends { ifMatch?: string }>(input: T): T => {
    const { ifMatch: _ifMatch, ...rest } = input;
    return rest as T;
  };
  return {
    ...activities,
    escalate: (input) => activities.escalate(strip(input)),
    announce: (input) => activities.announce(strip(input)),
    renew: (input) => activities.renew(strip(input)),
    swap: (input) => activities.swap(strip(input)),
    release: (input) => activities.release(strip(input)),
  };
}
